//! Where each implementation's program is and which version it is. A missing program is an
//! error that says how to install it, raised before any lab starts.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use quiclab_model::implementation::{Client, Server};

/// An installed program and its version as it reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub version: String,
}

/// The directory scripts/setup puts the other implementations' programs in (Caddy out of its
/// package, the quic-go peer built): `QUICLAB_PEERS_DIR`, else `target/peers` beside the
/// directory of quiclab's executable (`target/release/quiclab` → `target/peers`).
pub const PEERS_DIR_ENV: &str = "QUICLAB_PEERS_DIR";

fn peers_dir() -> Option<PathBuf> {
    std::env::var_os(PEERS_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            // target/release/quiclab, or target/debug/deps/TEST for a test binary.
            exe.ancestors()
                .skip(1)
                .take(3)
                .map(|d| d.join("peers"))
                .find(|d| d.is_dir())
        })
}

/// The quic-go peer's file name (scripts/setup builds it into target/release).
pub const QUIC_GO_NAME: &str = "quiclab-quic-go";

const INSTALL_CADDY: &str =
    "QUICLAB_WITH_PEERS=1 scripts/setup takes it out of Debian's caddy package into target/peers";
const INSTALL_NGTCP2: &str = "install Debian's ngtcp2-server and ngtcp2-client (apt-get install ngtcp2-server ngtcp2-client; scripts/setup does)";
const BUILD_QUIC_GO: &str =
    "QUICLAB_WITH_PEERS=1 scripts/setup builds it (tools/quic-go) into target/peers";

/// The server's program, or None for quiclab's own.
pub fn server_program(server: Server) -> Result<Option<Program>> {
    Ok(match server {
        Server::Quiclab => None,
        Server::Caddy => Some(with_version(
            find("caddy", INSTALL_CADDY)?,
            &["version"],
            first_word,
        )?),
        Server::QuicGo => Some(quic_go()?),
        Server::Ngtcp2 => Some(debian_package(
            find("gtlsserver", INSTALL_NGTCP2)?,
            "ngtcp2-server",
        )?),
    })
}

/// The client's program, or None for quiclab's own, Chromium (the browser crate finds it) and
/// AStream (its checkout is found by [`crate::astream::find`]).
pub fn client_program(client: Client) -> Result<Option<Program>> {
    Ok(match client {
        Client::Quiclab | Client::Chromium | Client::Astream => None,
        Client::QuicGo => Some(quic_go()?),
        Client::Ngtcp2 => Some(debian_package(
            find("gtlsclient", INSTALL_NGTCP2)?,
            "ngtcp2-client",
        )?),
        Client::Curl => Some(with_version(
            find("curl", "install curl (apt-get install curl)")?,
            &["--version"],
            second_word,
        )?),
    })
}

fn quic_go() -> Result<Program> {
    with_version(find(QUIC_GO_NAME, BUILD_QUIC_GO)?, &["version"], first_word)
}

/// `name` in the peers directory, on PATH or in /usr/bin, else an error saying how to install it.
fn find(name: &str, install: &str) -> Result<PathBuf> {
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    peers_dir()
        .into_iter()
        .chain(std::env::split_paths(&dirs))
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} is not installed: {install}"))
}

/// Runs `path ARGS` and reads its version from its output.
fn with_version(path: PathBuf, args: &[&str], pick: fn(&str) -> Option<String>) -> Result<Program> {
    let out = Command::new(&path)
        .args(args)
        .output()
        .with_context(|| format!("running {} {}", path.display(), args.join(" ")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = pick(&text).with_context(|| {
        format!(
            "{} {}: no version in its output {:?}",
            path.display(),
            args.join(" "),
            text.lines().next().unwrap_or("")
        )
    })?;
    Ok(Program { path, version })
}

/// The version of the Debian package that installed `path` (the ngtcp2 examples print none).
fn debian_package(path: PathBuf, package: &str) -> Result<Program> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .output()
        .context("running dpkg-query")?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || version.is_empty() {
        bail!(
            "{}: the package {package} that should provide it is not installed",
            path.display()
        );
    }
    Ok(Program { path, version })
}

/// `v2.6.2 h1:…` → `v2.6.2`.
pub fn first_word(text: &str) -> Option<String> {
    text.split_whitespace().next().map(str::to_string)
}

/// `curl 7.88.1 (x86_64-pc-linux-gnu) …` → `7.88.1`.
pub fn second_word(text: &str) -> Option<String> {
    text.split_whitespace().nth(1).map(str::to_string)
}

/// Whether `path` is a program (for tests that need one).
pub fn is_installed(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_the_programs_print() {
        assert_eq!(first_word("v2.6.2 h1:abc=\n").as_deref(), Some("v2.6.2"));
        assert_eq!(
            second_word("curl 7.88.1 (x86_64-pc-linux-gnu) libcurl/7.88.1\n").as_deref(),
            Some("7.88.1")
        );
        assert_eq!(first_word(""), None);
    }

    #[test]
    fn a_missing_program_says_how_to_install_it() {
        let e = find("quiclab-no-such-program", INSTALL_CADDY)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not installed") && e.contains("scripts/setup"),
            "{e}"
        );
    }
}
