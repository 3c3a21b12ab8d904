//! AStream, the Python DASH player seed 004 used, as the video reference client (as Chromium is
//! the page reference): where a checkout of it and a Python 2.7 are, which version and local
//! changes it has and the queue limits its configuration sets (all recorded per run), how it is
//! started and where its logs are.
//!
//! quiclab does not ship AStream (GPL-2, in no package registry) and never fetches it: the user
//! points `QUICLAB_ASTREAM` at a checkout of github pari685/AStream (runs unmodified under
//! Python 2.7) or of the seed's fork (sevketarisu/quic-streaming, `AStreamPlayerQUIC/src`,
//! whose third-party imports must then be importable).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use quiclab_model::implementation::ImplementationRecord;
use quiclab_video::{AbrKind, Content};
use sha2::{Digest, Sha256};

/// A checkout of AStream: its root, or the folder of `dash_client.py`.
pub const ASTREAM_ENV: &str = "QUICLAB_ASTREAM";
/// A Python 2.7 interpreter (else `python2.7` or `python2` on PATH, else pyenv's 2.7).
pub const PYTHON2_ENV: &str = "QUICLAB_PYTHON2";
/// The port quiclab's server answers AStream's plain HTTP on.
pub const HTTP_PORT: u16 = 80;
/// Where AStream writes its logs, under its working directory (`config_dash.LOG_FOLDER`).
pub const LOG_FOLDER: &str = "ASTREAM_LOGS";

/// The configuration names recorded per run: the queue limits and windows AStream's rules read.
const CONFIG_NAMES: &[&str] = &[
    "BASIC_THRESHOLD",
    "BASIC_DELTA_COUNT",
    "SARA_SAMPLE_COUNT",
    "ALPHA_BUFFER_COUNT",
    "BETA_BUFFER_COUNT",
    "MAX_BUFFER_SIZE",
    "NETFLIX_BUFFER_SIZE",
    "NETFLIX_INITIAL_BUFFER",
];

/// An AStream checkout ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Astream {
    /// `dash_client.py`.
    pub client: PathBuf,
    pub python: PathBuf,
    /// The commit and local changes (or a digest of its Python files without git), and the
    /// configuration: what a run records.
    pub version: String,
    /// The queue limits and windows its `config_dash.py` sets (`NETFLIX_BUFFER_SIZE` → `4`).
    pub config: Vec<(String, String)>,
}

impl Astream {
    /// A whole-number setting of its configuration.
    pub fn setting(&self, name: &str) -> Option<u64> {
        self.config
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse().ok())
    }
}

/// The AStream `QUICLAB_ASTREAM` names, with a Python 2.7 to run it; else an error that says
/// what to set.
pub fn find() -> Result<Astream> {
    find_at(std::env::var_os(ASTREAM_ENV).map(PathBuf::from))
}

fn find_at(root: Option<PathBuf>) -> Result<Astream> {
    let Some(root) = root else {
        bail!(
            "client astream: AStream is not installed here — quiclab does not ship it (GPL-2, in \
             no package registry); set {ASTREAM_ENV} to a checkout of github pari685/AStream (or \
             of the seed's fork), the directory holding dist/client/dash_client.py"
        );
    };
    let client = [
        "dist/client/dash_client.py",
        "AStreamPlayerQUIC/src/dist/client/dash_client.py",
        "dash_client.py",
    ]
    .iter()
    .map(|p| root.join(p))
    .find(|p| p.is_file())
    .with_context(|| {
        format!(
            "{ASTREAM_ENV}={}: no dist/client/dash_client.py there (an AStream checkout holds one)",
            root.display()
        )
    })?;
    let python = python2()?;
    let dir = client.parent().unwrap_or(Path::new("."));
    let config = std::fs::read_to_string(dir.join("config_dash.py"))
        .with_context(|| format!("reading {}", dir.join("config_dash.py").display()))?;
    let config = config_values(&config);
    let summary: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let version = format!("{}; {}", revision(&root, dir), summary.join(" "));
    Ok(Astream {
        client,
        python,
        version,
        config,
    })
}

/// A Python 2.7: `QUICLAB_PYTHON2`, else `python2.7` or `python2` on PATH, else pyenv's.
fn python2() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(PYTHON2_ENV) {
        let p = PathBuf::from(p);
        return if is_python2(&p) {
            Ok(p)
        } else {
            bail!("{PYTHON2_ENV}={}: not a Python 2 interpreter", p.display())
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    let mut pyenv_versions: Vec<PathBuf> = pyenv
        .and_then(|r| std::fs::read_dir(r.join("versions")).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("2.7"))
        .map(|e| e.path().join("bin/python2.7"))
        .collect();
    pyenv_versions.sort();
    std::env::split_paths(&path)
        .flat_map(|d| [d.join("python2.7"), d.join("python2")])
        .chain(pyenv_versions.into_iter().rev())
        .find(|p| p.is_file() && is_python2(p))
        .with_context(|| {
            format!(
                "client astream: AStream is Python 2 code and no Python 2.7 was found (PATH, \
                 pyenv); set {PYTHON2_ENV} to one"
            )
        })
}

fn is_python2(p: &Path) -> bool {
    Command::new(p)
        .args(["-c", "import sys; print(sys.version_info[0])"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "2")
}

/// The checkout's commit and local changes, or without git a digest of its Python files.
fn revision(root: &Path, client_dir: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) {
        let changed: Vec<String> = git(&["status", "--porcelain", "--untracked-files=no"])
            .unwrap_or_default()
            .lines()
            .map(|l| l.get(3..).unwrap_or(l).to_string())
            .collect();
        if changed.is_empty() {
            return format!("AStream {}", commit.trim());
        }
        let diff = git(&["diff", "HEAD"]).unwrap_or_default();
        return format!(
            "AStream {} with local changes to {} (diff sha256 {})",
            commit.trim(),
            changed.join(", "),
            short_digest(diff.as_bytes())
        );
    }
    let mut files: Vec<PathBuf> = Vec::new();
    collect_python(client_dir, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        h.update(
            f.strip_prefix(client_dir)
                .unwrap_or(f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.update(std::fs::read(f).unwrap_or_default());
    }
    format!(
        "AStream (no git: {} Python files, sha256 {})",
        files.len(),
        hex(&h.finalize()[..6])
    )
}

fn collect_python(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_python(&p, out);
        } else if p.extension().is_some_and(|x| x == "py") {
            out.push(p);
        }
    }
}

fn short_digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..6])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Each queue limit and window `config_dash.py` sets (its first assignment), as written.
pub fn config_values(config: &str) -> Vec<(String, String)> {
    CONFIG_NAMES
        .iter()
        .filter_map(|name| {
            config.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == *name).then(|| {
                    let v = v.split('#').next().unwrap_or("").trim();
                    (name.to_string(), v.to_string())
                })
            })
        })
        .collect()
}

/// How AStream is started for a run: `python2 dash_client.py -m URL -p RULE`, with no proxy
/// (urllib2 honours the environment's).
pub fn command(
    a: &Astream,
    mpd_url: &str,
    abr: AbrKind,
) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
    let args = vec![
        a.client.display().to_string(),
        "-m".into(),
        mpd_url.into(),
        "-p".into(),
        quiclab_video::astream::playback_name(abr).into(),
    ];
    let env = ["no_proxy", "NO_PROXY"]
        .iter()
        .map(|k| (k.to_string(), "*".to_string()))
        .collect();
    (a.python.clone(), args, env)
}

/// The record a run keeps of the player.
pub fn record(a: &Astream, tcp_cc: &str) -> ImplementationRecord {
    ImplementationRecord {
        name: "astream".into(),
        version: a.version.clone(),
        congestion_control: format!("TCP {tcp_cc} (the client namespace's, set by quiclab)"),
    }
}

/// Reads the logs AStream left in its working directory `cwd` (the newest of each kind).
pub fn read(
    cwd: &Path,
    content: &Content,
    origin_epoch_s: f64,
) -> Result<quiclab_video::astream::Playback, String> {
    let logs = cwd.join(LOG_FOLDER);
    let newest = |prefix: &str| -> Result<PathBuf, String> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&logs)
            .map_err(|e| format!("AStream wrote no logs ({}: {e})", logs.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .collect();
        found.sort();
        found
            .pop()
            .ok_or_else(|| format!("AStream wrote no {prefix}* in {}", logs.display()))
    };
    let text = |p: PathBuf| {
        std::fs::read_to_string(&p).map_err(|e| format!("reading {}: {e}", p.display()))
    };
    let summary = text(newest("ASTREAM_")?)?;
    let buffer_log = text(newest("DASH_BUFFER_LOG")?)?;
    quiclab_video::astream::read_logs(content, &summary, &buffer_log, origin_epoch_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_a_run_records() {
        let config = "LOG_NAME = 'AStream_log'\nBASIC_THRESHOLD = 10   # 4 FOR LIVE video,  10 for VOD\n\
                      NETFLIX_BUFFER_SIZE = 4\nMAX_BUFFER_SIZE = None  # UNUSED\n";
        let values = config_values(config);
        let text: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            text.join(" "),
            "BASIC_THRESHOLD=10 MAX_BUFFER_SIZE=None NETFLIX_BUFFER_SIZE=4"
        );
        let a = Astream {
            client: "x".into(),
            python: "y".into(),
            version: String::new(),
            config: values,
        };
        assert_eq!(a.setting("NETFLIX_BUFFER_SIZE"), Some(4));
        assert_eq!(a.setting("MAX_BUFFER_SIZE"), None);
    }

    #[test]
    fn a_missing_checkout_says_what_to_set() {
        let e = find_at(None).unwrap_err().to_string();
        assert!(
            e.contains(ASTREAM_ENV) && e.contains("does not ship"),
            "{e}"
        );
        let empty = tempfile::tempdir().unwrap();
        let e = find_at(Some(empty.path().to_path_buf()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no dist/client/dash_client.py"), "{e}");
    }

    #[test]
    fn astream_is_started_with_its_rule_and_no_proxy() {
        let a = Astream {
            client: "/a/dist/client/dash_client.py".into(),
            python: "/usr/bin/python2.7".into(),
            version: "AStream x".into(),
            config: Vec::new(),
        };
        let (program, args, env) = command(
            &a,
            "http://10.0.0.2:80/astream/bbb.mpd",
            AbrKind::Bba2Astream,
        );
        assert_eq!(program, PathBuf::from("/usr/bin/python2.7"));
        assert_eq!(
            args[1..],
            ["-m", "http://10.0.0.2:80/astream/bbb.mpd", "-p", "netflix"]
        );
        assert!(env.contains(&("no_proxy".to_string(), "*".to_string())));
    }
}
