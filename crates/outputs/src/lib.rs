//! Where quiclab may write. Results are what researchers publish, and quiclab runs as root: a
//! flag that names a path must never cost the user a file. The rules, in one place:
//!
//! - **Directories** (`--keep`, `--out`, `--to`): quiclab writes into a directory that is new,
//!   empty, or one it made before ([`claim_dir`]). A claimed directory holds a marker file
//!   ([`MARKER`]); a non-empty directory without it holds someone else's files and is refused.
//! - **Files the user names** (`--har`, `--waterfall`, `--log`, `--fidelity-json`): created new;
//!   an existing file is replaced only when asked (`--force`), and never through a symbolic link
//!   ([`create_user_file`]).
//! - **Files inside a claimed directory**: quiclab's own names, replaced freely, but never
//!   through a symbolic link ([`create_in_claimed`]).
//!
//! Errors name the flag and the path, and say what is allowed.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The file that marks a directory as quiclab's output (written when quiclab claims a new or
/// empty directory).
pub const MARKER: &str = ".quiclab-output";

const MARKER_TEXT: &str = "This directory was made by quiclab for its output. quiclab writes into \
a directory only when it is new, empty, or holds this file; it replaces only its own files here.\n";

/// Why quiclab will not write where it was asked to.
#[derive(Debug)]
pub struct OutputError {
    /// The flag that named the path (`--keep`), or what the path is for.
    pub flag: String,
    pub path: PathBuf,
    pub why: String,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.flag, self.path.display(), self.why)
    }
}

impl std::error::Error for OutputError {}

fn error(flag: &str, path: &Path, why: impl Into<String>) -> OutputError {
    OutputError {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// Whether `dir` is quiclab's: it holds [`MARKER`], or one of `also_ours` (files by which output
/// of earlier quiclab versions, written before the marker existed, is recognised — e.g.
/// `results.sqlite`).
pub fn is_ours(dir: &Path, also_ours: &[&str]) -> bool {
    std::iter::once(MARKER)
        .chain(also_ours.iter().copied())
        .any(|name| {
            std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_file())
        })
}

/// Claims `dir` for quiclab's output: creates it (and its parents) when it does not exist, and
/// accepts it when it is empty or already quiclab's ([`is_ours`]); anything else — a directory
/// of someone else's files, a file, a path that cannot be read — is an error naming `flag`.
/// Marks the directory ([`MARKER`]) so that a later run may write into it again.
pub fn claim_dir(dir: &Path, flag: &str, also_ours: &[&str]) -> Result<PathBuf, OutputError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            let empty = entries.next().is_none();
            if !empty && !is_ours(dir, also_ours) {
                return Err(error(
                    flag,
                    dir,
                    "the directory holds files quiclab did not create; give a new or empty \
                     directory (quiclab never overwrites or deletes files it did not create)",
                ));
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| error(flag, dir, format!("creating: {e}")))?;
        }
        Err(e) if e.kind() == ErrorKind::NotADirectory => {
            return Err(error(
                flag,
                dir,
                "not a directory; give a new or empty directory",
            ));
        }
        Err(e) => {
            return Err(error(
                flag,
                dir,
                format!("{e} (expected a new or empty directory)"),
            ));
        }
    }
    let marker = dir.join(MARKER);
    if !is_ours(dir, &[]) {
        let mut f = create_in_claimed(&marker).map_err(|e| error(flag, dir, e.to_string()))?;
        std::io::Write::write_all(&mut f, MARKER_TEXT.as_bytes())
            .map_err(|e| error(flag, &marker, format!("writing: {e}")))?;
    }
    Ok(dir.to_path_buf())
}

/// Creates `path`, a file the user named with `flag`. A new file is created; an existing one is
/// replaced only with `force`; a symbolic link is never followed (with or without `force`).
pub fn create_user_file(path: &Path, flag: &str, force: bool) -> Result<File, OutputError> {
    let mut o = OpenOptions::new();
    o.write(true).custom_flags(libc::O_NOFOLLOW);
    if force {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    o.open(path).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists => error(
            flag,
            path,
            "the file exists; quiclab never replaces a file unless asked (add --force to replace it)",
        ),
        _ if is_symlink(path) => error(
            flag,
            path,
            "is a symbolic link; quiclab never writes through one (give the real path)",
        ),
        ErrorKind::NotFound => error(flag, path, "its directory does not exist"),
        _ => error(flag, path, e.to_string()),
    })
}

/// Checks, before a run starts, that `path` may be written later as a file the user named with
/// `flag` (the rules of [`create_user_file`]): so that a refusal costs no run. Writers then open
/// it with [`create_in_claimed`] (never through a symbolic link).
pub fn check_user_file(path: &Path, flag: &str, force: bool) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(error(
            flag,
            path,
            "is a symbolic link; quiclab never writes through one (give the real path)",
        )),
        Ok(m) if m.is_dir() => Err(error(flag, path, "is a directory; give a file name")),
        Ok(_) if !force => Err(error(
            flag,
            path,
            "the file exists; quiclab never replaces a file unless asked (add --force to replace it)",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            match parent {
                Some(p) if !p.is_dir() => Err(error(flag, path, "its directory does not exist")),
                _ => Ok(()),
            }
        }
        Err(e) => Err(error(flag, path, e.to_string())),
    }
}

/// [`create_user_file`] and write `bytes` into it.
pub fn write_user_file(
    path: &Path,
    flag: &str,
    force: bool,
    bytes: &[u8],
) -> Result<(), OutputError> {
    let mut f = create_user_file(path, flag, force)?;
    std::io::Write::write_all(&mut f, bytes).map_err(|e| error(flag, path, format!("writing: {e}")))
}

/// Creates (or truncates) `path`, a file of quiclab's own in a directory it claimed, never through
/// a symbolic link.
pub fn create_in_claimed(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            if is_symlink(path) {
                std::io::Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "{}: is a symbolic link; quiclab never writes through one",
                        path.display()
                    ),
                )
            } else {
                std::io::Error::new(e.kind(), format!("creating {}: {e}", path.display()))
            }
        })
}

/// [`create_in_claimed`] and write `bytes` into it.
pub fn write_in_claimed(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = create_in_claimed(path)?;
    std::io::Write::write_all(&mut f, bytes)
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("quiclab-outputs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_directory_of_someone_elses_files_is_refused_and_left_alone() {
        let d = scratch("foreign");
        std::fs::write(d.join("cert.pem"), "the user's own").unwrap();
        let e = claim_dir(&d, "--keep", &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("--keep ") && e.contains("did not create"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("cert.pem")).unwrap(),
            "the user's own"
        );
        assert!(!d.join(MARKER).exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn new_empty_and_own_directories_are_claimed_and_marked() {
        let d = scratch("own");
        let new = d.join("a/b");
        claim_dir(&new, "--keep", &[]).unwrap();
        assert!(new.join(MARKER).is_file());
        std::fs::write(new.join("link.log"), "x").unwrap();
        // A second run into the same directory: it is quiclab's.
        claim_dir(&new, "--keep", &[]).unwrap();
        let empty = d.join("empty");
        std::fs::create_dir(&empty).unwrap();
        claim_dir(&empty, "--out", &[]).unwrap();
        assert!(empty.join(MARKER).is_file());
        // An older quiclab's results directory (no marker, but its database).
        let old = d.join("old");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("results.sqlite"), "").unwrap();
        assert!(claim_dir(&old, "--out", &[]).is_err());
        claim_dir(&old, "--out", &["results.sqlite"]).unwrap();
        // A file is not a directory.
        let e = claim_dir(&old.join("results.sqlite"), "--out", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn user_files_are_new_unless_forced_and_never_through_a_symlink() {
        let d = scratch("files");
        let f = d.join("page.har");
        write_user_file(&f, "--har", false, b"one").unwrap();
        let e = write_user_file(&f, "--har", false, b"two")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--force") && e.starts_with("--har "), "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "one");
        write_user_file(&f, "--har", true, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "two");
        let target = d.join("precious");
        std::fs::write(&target, "keep me").unwrap();
        let link = d.join("link.har");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for force in [false, true] {
            let e = write_user_file(&link, "--har", force, b"x")
                .unwrap_err()
                .to_string();
            assert!(e.contains("symbolic link") || e.contains("exists"), "{e}");
        }
        assert!(create_in_claimed(&link).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(check_user_file(&f, "--har", false).is_err());
        check_user_file(&f, "--har", true).unwrap();
        check_user_file(&d.join("new.har"), "--har", false).unwrap();
        assert!(check_user_file(&link, "--har", true).is_err());
        assert!(check_user_file(&d.join("missing/x.har"), "--har", true).is_err());
        let e = write_user_file(&d.join("missing/x.har"), "--har", false, b"x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}
