//! Where quiclab may write. Results are what researchers publish, and quiclab runs as root: a
//! flag that names a path must never cost the user a file. Every file quiclab writes or deletes
//! goes through this crate. The rules, in one place (docs/results.md repeats them):
//!
//! - **Directories** (`--keep`, `--out`, `--to`, `figures/`, `traces/`): quiclab writes into a
//!   directory that is new, empty, or one it claimed before ([`claim_dir`]). A claimed directory
//!   holds quiclab's marker file ([`MARKER`], recognised by its content, not its name alone); a
//!   non-empty directory without it holds someone else's files and is refused — whatever other
//!   file names it holds (a user's `results.sqlite` or `verdicts.json` does not make a directory
//!   quiclab's). A directory that is a symbolic link is refused.
//! - **The manifest**: the marker lists every file quiclab wrote into its directory. quiclab
//!   deletes only files the manifest lists ([`remove_listed`]); a file a user put beside them is
//!   never touched.
//! - **Files inside a claimed directory**: written to a temporary file in the same directory
//!   (created exclusively, never through a symbolic link) and renamed over the old one
//!   ([`write_in_claimed`]); streams are opened without following links ([`create_in_claimed`]).
//!   A name is a plain name ([`plain_name`]) before it becomes a path.
//! - **Files the user names** (`--har`, `--waterfall`, `--pcap`, `--log`, `--fidelity-json`):
//!   reserved before anything runs ([`UserFile::reserve`]): created new, or, with `--force`, an
//!   existing *regular* file replaced (never a symbolic link, a directory or a device); two flags
//!   naming one file are refused; the content is written to a temporary file beside it and
//!   renamed, so a link that appears meanwhile is replaced, not followed.
//!
//! Errors name the flag and the path, and say what is allowed.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The file that marks a directory as quiclab's output and lists the files quiclab wrote there.
pub const MARKER: &str = ".quiclab-output";

/// The marker's first line: what makes it quiclab's (a file merely named like it is not).
const MARKER_TEXT: &str = "This directory was made by quiclab for its output. quiclab writes into \
a directory only when it is new, empty, or holds this file; it replaces only its own files here.\n";

/// Lines of the manifest after the text: `wrote NAME`.
const WROTE: &str = "wrote ";

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

impl From<OutputError> for std::io::Error {
    fn from(e: OutputError) -> std::io::Error {
        std::io::Error::new(ErrorKind::InvalidInput, e.to_string())
    }
}

fn error(flag: &str, path: &Path, why: impl Into<String>) -> OutputError {
    OutputError {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        why: why.into(),
    }
}

const SYMLINK: &str = "is a symbolic link; quiclab never writes through one (give the real path)";

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Checks that `name` (a study's or scenario's name, a file name quiclab derives) is a plain
/// name before it becomes part of a path: letters, digits, `.`, `_`, `+`, `-`, not starting
/// with `.` or `-`, at most 128 characters. `what` says what the name is, for the error.
pub fn plain_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?} is not a plain name: it becomes a directory or file name, so it may \
             hold only letters, digits, '.', '_', '+' and '-' (not first: '.' or '-'), at most 128"
        ))
    }
}

fn marker_of(dir: &Path) -> Option<String> {
    let path = dir.join(MARKER);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    text.starts_with(MARKER_TEXT).then_some(text)
}

/// Whether `dir` is quiclab's: a real directory (not a link) holding quiclab's [`MARKER`].
pub fn is_claimed(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) && marker_of(dir).is_some()
}

/// The files quiclab's manifest in `dir` lists (empty when `dir` is not claimed).
pub fn manifest(dir: &Path) -> BTreeSet<String> {
    marker_of(dir)
        .map(|t| {
            t.lines()
                .filter_map(|l| l.strip_prefix(WROTE))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn open_marker_append(dir: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(MARKER))
}

/// Adds `name` to the manifest of `dir` (a no-op when `dir` is not claimed or lists it already).
fn record(dir: &Path, name: &str) -> std::io::Result<()> {
    if name == MARKER || !is_claimed(dir) || manifest(dir).contains(name) {
        return Ok(());
    }
    // One short O_APPEND write: atomic against another process recording into the same marker.
    open_marker_append(dir)?.write_all(format!("{WROTE}{name}\n").as_bytes())
}

fn unrecord(dir: &Path, gone: &BTreeSet<String>) -> std::io::Result<()> {
    let Some(text) = marker_of(dir) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|l| l.strip_prefix(WROTE).is_none_or(|n| !gone.contains(n)))
        .map(|l| format!("{l}\n"))
        .collect();
    write_atomically(dir, MARKER, kept.as_bytes())
}

/// Lists `path` (a file another library created in a claimed directory: SQLite's database) in
/// its directory's manifest, so that quiclab may later replace or remove it.
pub fn list_in_manifest(path: &Path) -> std::io::Result<()> {
    let (dir, name) = split(path)?;
    record(&dir, &name)
}

/// Claims `dir` for quiclab's output: creates it (and its parents) when it does not exist, and
/// accepts it when it is empty or already quiclab's ([`is_claimed`]); anything else — a
/// directory of someone else's files, a symbolic link, a file, a path that cannot be read — is
/// an error naming `flag`. Marks the directory ([`MARKER`]) so that a later run may write into
/// it again.
pub fn claim_dir(dir: &Path, flag: &str) -> Result<PathBuf, OutputError> {
    claim(dir, flag).map(|(p, _)| p)
}

/// Whether [`claim_dir`] would accept `dir`, without creating or marking anything: a command
/// that writes there only after hours of runs asks first, so a refusal comes before the runs.
pub fn check_claimable(dir: &Path, flag: &str) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(error(flag, dir, SYMLINK)),
        Ok(m) if !m.is_dir() => Err(error(
            flag,
            dir,
            "not a directory; give a new or empty directory",
        )),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(|e| {
                error(
                    flag,
                    dir,
                    format!("{e} (expected a new or empty directory)"),
                )
            })?;
            if entries.next().is_some() && !is_claimed(dir) && !marker_being_written(dir) {
                return Err(error(flag, dir, FOREIGN));
            }
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(error(
            flag,
            dir,
            format!("{e} (expected a new or empty directory)"),
        )),
    }
}

/// Whether another quiclab process is claiming `dir` at this moment: its marker file is there
/// and gets quiclab's text within a moment (it is written in one short write after the file is
/// created). Two packs that start side by side with one new `--keep-evidence` meet here.
fn marker_being_written(dir: &Path) -> bool {
    if !std::fs::symlink_metadata(dir.join(MARKER)).is_ok_and(|m| m.file_type().is_file()) {
        return false;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        if is_claimed(dir) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Why a directory with files and no marker is refused.
const FOREIGN: &str = "the directory holds files quiclab did not create (it has no quiclab marker \
                       .quiclab-output); give a new or empty directory (quiclab never overwrites or \
                       deletes files it did not create)";

/// [`claim_dir`], also saying whether the directory was created now (a command that fails
/// before it wrote anything removes such a directory: it leaves nothing behind).
pub fn claim(dir: &Path, flag: &str) -> Result<(PathBuf, bool), OutputError> {
    check_claimable(dir, flag)?;
    // Accepted: absent (made now), empty, or quiclab's.
    let created = !dir.exists();
    if created {
        std::fs::create_dir_all(dir).map_err(|e| error(flag, dir, format!("creating: {e}")))?;
    }
    if !is_claimed(dir) {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(MARKER))
        {
            Ok(mut f) => f
                .write_all(MARKER_TEXT.as_bytes())
                .map_err(|e| error(flag, dir, format!("marking it as quiclab's: {e}")))?,
            // Another quiclab process claimed it at the same moment: its marker is being
            // written (one short write); it is quiclab's once the text is there.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while !is_claimed(dir) {
                    if std::time::Instant::now() > deadline {
                        return Err(error(flag, dir, FOREIGN));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            Err(e) => return Err(error(flag, dir, format!("marking it as quiclab's: {e}"))),
        }
    }
    Ok((dir.to_path_buf(), created))
}

/// Claims `parent/name` (a directory quiclab makes inside one it claimed: `figures`, `traces`,
/// `captures`, a study's or scenario's directory): `name` must be a plain name.
pub fn claim_subdir(parent: &Path, name: &str, flag: &str) -> Result<PathBuf, OutputError> {
    plain_name(name, "the directory name").map_err(|e| error(flag, parent, e))?;
    claim_dir(&parent.join(name), flag)
}

/// Removes the files of `dir`'s manifest for which `which(name)` holds, and drops them from the
/// manifest. Files not in the manifest (a user's) are never touched; nor is a listed name that
/// is now a link or a directory. Returns the removed paths.
pub fn remove_listed(dir: &Path, which: impl Fn(&str) -> bool) -> std::io::Result<Vec<PathBuf>> {
    let mut gone = BTreeSet::new();
    let mut removed = Vec::new();
    for name in manifest(dir).into_iter().filter(|n| which(n)) {
        let path = dir.join(&name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => {
                std::fs::remove_file(&path)?;
                removed.push(path);
                gone.insert(name);
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                gone.insert(name);
            }
            Err(e) => return Err(e),
        }
    }
    if !gone.is_empty() {
        unrecord(dir, &gone)?;
    }
    Ok(removed)
}

/// Removes `dir` and everything in it, only when it is a directory quiclab claimed (its marker)
/// — never a link, never a directory of someone else's files. A missing `dir` is fine.
pub fn remove_claimed_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_symlink() => Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!("{}: {SYMLINK}", dir.display()),
        )),
        Ok(_) if !is_claimed(dir) => Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: not removed: it has no quiclab marker (quiclab deletes only what it made)",
                dir.display()
            ),
        )),
        // remove_dir_all does not follow links inside the tree.
        Ok(_) => std::fs::remove_dir_all(dir),
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary file beside `dir/name`, created exclusively (never an existing file or link).
fn temp_beside(dir: &Path, name: &str) -> std::io::Result<(PathBuf, File)> {
    loop {
        let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        // The target's extension stays last: writers that pick a format by it (the image
        // encoder behind PNG figures) must see `.png`, not the counter.
        let ext = Path::new(name)
            .extension()
            .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
        let tmp = dir.join(format!(
            ".{name}.quiclab-tmp-{}-{n}{ext}",
            std::process::id()
        ));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("creating {}: {e}", tmp.display()),
                ));
            }
        }
    }
}

/// Writes `bytes` to `dir/name` by a temporary file in `dir` renamed over it: a reader sees the
/// old or the new file, never half of one, and a link at `dir/name` is replaced, not followed.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let (tmp, mut f) = temp_beside(dir, name)?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("writing {}: {e}", dir.join(name).display()),
        )
    })
}

fn split(path: &Path) -> std::io::Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{}: not a file name", path.display()),
            )
        })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// Refuses an existing link or non-file at `path` (a file of quiclab's own name), and a regular
/// file there that the manifest of its claimed directory does not list: a user put it there
/// (the marker promises that quiclab replaces only its own files).
fn own_name_is_free(path: &Path) -> std::io::Result<()> {
    if let Ok((dir, name)) = split(path)
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
        && is_claimed(&dir)
        && name != MARKER
        && !manifest(&dir).contains(&name)
    {
        return Err(std::io::Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "{}: a file quiclab did not write (its directory's manifest {MARKER} does not list \
                 it); quiclab replaces only its own files: move it away, or write elsewhere",
                path.display()
            ),
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: is a symbolic link; quiclab never writes through one",
                path.display()
            ),
        )),
        Ok(m) if !m.file_type().is_file() => Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: is not a regular file; quiclab replaces only its own files",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Creates (or truncates) `path`, a stream of quiclab's own in a directory it claimed (a log, a
/// trace), never through a symbolic link, and lists it in the directory's manifest.
pub fn create_in_claimed(path: &Path) -> std::io::Result<File> {
    let (dir, name) = split(path)?;
    own_name_is_free(path)?;
    // Listed first: a process killed between the two leaves a listed name (harmless), never an
    // unlisted file of its own that a later run would have to refuse as a user's.
    record(&dir, &name)?;
    let f = OpenOptions::new()
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
        })?;
    Ok(f)
}

/// Writes `bytes` to `path`, a file of quiclab's own in a directory it claimed: through a
/// temporary file renamed over it (never through a link; a link or directory there is an
/// error), and lists it in the manifest.
pub fn write_in_claimed(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (dir, name) = split(path)?;
    own_name_is_free(path)?;
    record(&dir, &name)?;
    write_atomically(&dir, &name, bytes)
}

/// Writes several files of quiclab's own into the claimed directory `dir` as one set: every
/// file goes to a temporary file first, and only when all are written (a full disk fails here,
/// leaving the old set whole) are they renamed over the old ones, one rename each.
pub fn write_set_in_claimed(dir: &Path, files: &[(&str, &[u8])]) -> std::io::Result<()> {
    let paths: Vec<PathBuf> = files.iter().map(|(n, _)| dir.join(n)).collect();
    check_in_claimed(&paths.iter().map(PathBuf::as_path).collect::<Vec<_>>())?;
    let mut temps: Vec<PathBuf> = Vec::new();
    let written = (|| -> std::io::Result<()> {
        for (name, bytes) in files {
            let (tmp, mut f) = temp_beside(dir, name)?;
            temps.push(tmp);
            f.write_all(bytes)
                .and_then(|()| f.sync_all())
                .map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("writing {}: {e}", dir.join(name).display()),
                    )
                })?;
        }
        for (name, _) in files {
            record(dir, name)?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        for t in &temps {
            let _ = std::fs::remove_file(t);
        }
        return Err(e);
    }
    for ((tmp, path), (name, _)) in temps.iter().zip(&paths).zip(files) {
        std::fs::rename(tmp, path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("writing {}: {e}", dir.join(name).display()),
            )
        })?;
    }
    Ok(())
}

/// Writes `path` (a file of quiclab's own in a claimed directory) with a writer that wants a
/// path of its own (an image encoder): `write` fills a fresh temporary file beside `path`
/// (created exclusively by quiclab, so there is no link to follow), which is then renamed over
/// `path` and listed in the manifest.
pub fn write_in_claimed_with(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), String>,
) -> std::io::Result<()> {
    let (dir, name) = split(path)?;
    own_name_is_free(path)?;
    record(&dir, &name)?;
    let (tmp, f) = temp_beside(&dir, &name)?;
    drop(f);
    let done = write(&tmp)
        .map_err(|e| std::io::Error::other(format!("writing {}: {e}", path.display())))
        .and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Checks, before anything is written, that each of `paths` (files of quiclab's own names in a
/// claimed directory) may be written: none is a link or a non-file. Writers that write several
/// files check them all first, so a refusal leaves nothing half-written.
pub fn check_in_claimed(paths: &[&Path]) -> std::io::Result<()> {
    paths.iter().try_for_each(|p| own_name_is_free(p))
}

/// Creates `path`, a file the user named with `flag`. A new file is created; an existing regular
/// file is replaced only with `force`; a symbolic link is never followed (with or without
/// `force`). Prefer [`UserFile`], which reserves the name before a run and writes atomically.
pub fn create_user_file(path: &Path, flag: &str, force: bool) -> Result<File, OutputError> {
    check_user_file(path, flag, force)?;
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
        _ if is_symlink(path) => error(flag, path, SYMLINK),
        ErrorKind::NotFound => error(flag, path, "its directory does not exist"),
        _ => error(flag, path, e.to_string()),
    })
}

/// Checks, before a run starts, that `path` may be written later as a file the user named with
/// `flag`: so that a refusal costs no run.
pub fn check_user_file(path: &Path, flag: &str, force: bool) -> Result<(), OutputError> {
    if path.as_os_str().to_string_lossy().ends_with('/') || path.file_name().is_none() {
        return Err(error(flag, path, "names a directory; give a file name"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(error(flag, path, SYMLINK)),
        Ok(m) if m.is_dir() => Err(error(flag, path, "is a directory; give a file name")),
        Ok(m) if !m.file_type().is_file() => Err(error(
            flag,
            path,
            "is not a regular file (a device, pipe or socket); quiclab writes only regular files",
        )),
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
    f.write_all(bytes)
        .map_err(|e| error(flag, path, format!("writing: {e}")))
}

/// Where a path will be: its directory resolved (links and `..` of the directory followed, as
/// the kernel will) and its own name, so that two spellings of one file compare equal.
fn identity(path: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let name = path.file_name()?.to_owned();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some((std::fs::canonicalize(dir).ok()?, name))
}

/// Refuses two of `files` (path, flag) that name one file, however spelled (`x`, `d/../x`, a
/// directory reached by a link).
pub fn distinct(files: &[(&Path, &str)]) -> Result<(), OutputError> {
    for (i, (p, flag)) in files.iter().enumerate() {
        for (q, other) in &files[..i] {
            let same = p == q || (identity(p).is_some() && identity(p) == identity(q));
            if same {
                return Err(error(
                    flag,
                    p,
                    format!("{other} names the same file; give each output its own file"),
                ));
            }
        }
    }
    Ok(())
}

/// A file the user named with a flag (`--har`, `--pcap`, …), reserved before anything runs and
/// written once at the end.
#[derive(Debug)]
pub struct UserFile {
    pub path: PathBuf,
    pub flag: String,
    /// The placeholder quiclab created (device, inode) when the name was free: removed again if
    /// nothing was written.
    placeholder: Option<(u64, u64)>,
    written: bool,
}

impl UserFile {
    /// Checks `path` ([`check_user_file`]) and, when it is free, creates it empty (exclusively)
    /// so that the name is held for the run.
    pub fn reserve(path: &Path, flag: &str, force: bool) -> Result<UserFile, OutputError> {
        check_user_file(path, flag, force)?;
        let placeholder = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
        {
            Ok(f) => {
                let m = f.metadata().map_err(|e| error(flag, path, e.to_string()))?;
                Some((m.dev(), m.ino()))
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists && force => None,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(error(
                    flag,
                    path,
                    "the file exists; quiclab never replaces a file unless asked (add --force to \
                     replace it)",
                ));
            }
            Err(e) => return Err(error(flag, path, e.to_string())),
        };
        Ok(UserFile {
            path: path.to_path_buf(),
            flag: flag.to_string(),
            placeholder,
            written: false,
        })
    }

    /// Reserves every `(path, flag)` at once: two flags naming one file (however spelled) are
    /// refused before any is created ([`distinct`]).
    pub fn reserve_all(files: &[(&Path, &str)], force: bool) -> Result<Vec<UserFile>, OutputError> {
        distinct(files)?;
        let mut out = Vec::new();
        for (p, flag) in files {
            // On a refusal the files reserved so far are released by their Drop.
            out.push(UserFile::reserve(p, flag, force)?);
        }
        Ok(out)
    }

    /// Writes the content: a temporary file beside the path, renamed over it.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), OutputError> {
        let (dir, name) =
            split(&self.path).map_err(|e| error(&self.flag, &self.path, e.to_string()))?;
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if !m.file_type().is_file() && !m.file_type().is_symlink() => {
                return Err(error(&self.flag, &self.path, "is no longer a regular file"));
            }
            _ => {}
        }
        write_atomically(&dir, &name, bytes)
            .map_err(|e| error(&self.flag, &self.path, e.to_string()))?;
        self.written = true;
        Ok(())
    }

    /// A temporary file beside the path for a writer that streams (a capture); [`Self::commit`]
    /// renames it over the path.
    pub fn temp(&self) -> Result<(PathBuf, File), OutputError> {
        let (dir, name) =
            split(&self.path).map_err(|e| error(&self.flag, &self.path, e.to_string()))?;
        temp_beside(&dir, &name).map_err(|e| error(&self.flag, &self.path, e.to_string()))
    }

    /// Renames `tmp` (from [`Self::temp`]) over the path.
    pub fn commit(&mut self, tmp: &Path) -> Result<(), OutputError> {
        std::fs::rename(tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(tmp);
            error(&self.flag, &self.path, format!("writing: {e}"))
        })?;
        self.written = true;
        Ok(())
    }
}

impl Drop for UserFile {
    fn drop(&mut self) {
        // An unused placeholder goes: only the empty file quiclab itself created.
        if let (false, Some((dev, ino))) = (self.written, self.placeholder)
            && let Ok(m) = std::fs::symlink_metadata(&self.path)
            && m.file_type().is_file()
            && m.dev() == dev
            && m.ino() == ino
            && m.len() == 0
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

mod bounded;
pub mod input;
mod lock;
mod scratch;
mod snapshot;
mod writable;
pub use bounded::{MAX_STORED_FILE, read_bounded, read_to_string_bounded, too_large};
pub use lock::{DirLock, lock_dir};
pub use scratch::{
    PINNED_PREFIX, ScratchDir, remove_registered as remove_scratch_dirs, remove_stale_pins,
    remove_stale_scratch,
};
pub use snapshot::Snapshot;
pub use writable::check_writable;

#[cfg(test)]
mod tests;

/// Removes, in `dir` and the claimed directories below it, the temporary files
/// ([`temp_beside`]'s `.NAME.quiclab-tmp-PID-N`) of quiclab processes that no longer exist: a
/// process killed, or stopped by a full disk, while writing. Returns how many went.
pub fn remove_stale_temps(dir: &Path) -> usize {
    if !is_claimed(dir) {
        return 0;
    }
    let mut n = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_dir() {
            n += remove_stale_temps(&entry.path());
        } else if kind.is_file()
            && let Some(pid) = temp_owner(&name)
            && !process_exists(pid)
            && std::fs::remove_file(entry.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// The process id in a temporary file's name (`.NAME.quiclab-tmp-PID-N…`).
fn temp_owner(name: &str) -> Option<u32> {
    if !name.starts_with('.') {
        return None;
    }
    let rest = &name[name.find(".quiclab-tmp-")? + ".quiclab-tmp-".len()..];
    let (pid, after) = rest.split_once('-')?;
    after.chars().next().filter(char::is_ascii_digit)?;
    pid.parse().ok()
}

/// Whether a process `pid` exists (`/proc/PID`).
pub fn process_exists(pid: u32) -> bool {
    pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
}
