//! What another server needs on disk to serve what quiclab's own server makes up: quiclab's
//! server answers `/bytes/N` with N bytes, byte i holding i mod 256 (so a client can verify
//! them), and a page's files from its directory. Caddy and ngtcp2's example server serve files
//! only, so the objects a run fetches are written into a directory of the run's own; the quic-go
//! peer makes `/bytes/N` itself, as quiclab does.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The byte at `offset` of a `/bytes/N` object (the same as quiclab's server).
pub fn pattern_byte(offset: u64) -> u8 {
    (offset % 256) as u8
}

/// Whether `data`, starting at `offset`, holds the pattern.
pub fn holds_pattern(data: &[u8], offset: u64) -> bool {
    data.iter()
        .enumerate()
        .all(|(i, &b)| b == pattern_byte(offset + i as u64))
}

/// Whether the file at `path` holds exactly `size` pattern bytes. Read in chunks (a download
/// may be hundreds of MB).
pub fn file_holds_pattern(path: &Path, size: u64) -> Result<bool> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut offset = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(offset == size);
        }
        if !holds_pattern(&buf[..n], offset) {
            return Ok(false);
        }
        offset += n as u64;
    }
}

/// A directory of files to serve, inside a run's work directory (quiclab's own, claimed).
#[derive(Debug, Clone)]
pub struct Site {
    pub root: PathBuf,
}

impl Site {
    /// Creates `work/NAME` as quiclab's own directory to serve from.
    pub fn create(work: &Path, name: &str) -> Result<Site> {
        let root = quiclab_outputs::claim_subdir(work, name, "the served content")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Site { root })
    }

    /// Writes `/bytes/N` for a download of `size` bytes.
    pub fn add_pattern_object(&self, size: u64) -> Result<String> {
        let dir = quiclab_outputs::claim_subdir(&self.root, "bytes", "the served content")
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let path = dir.join(size.to_string());
        let mut f = std::io::BufWriter::new(quiclab_outputs::create_in_claimed(&path)?);
        // 64 KiB is a multiple of 256: every chunk starts at offset 0 mod 256.
        let chunk: Vec<u8> = (0..1u64 << 16).map(pattern_byte).collect();
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(format!("/bytes/{size}"))
    }

    /// Writes `path` (`/a/b/c`, plain names) as a file of `size` bytes that reads as zeros and
    /// takes no disk (sparse): for clients that count bytes and do not check them (video
    /// segments).
    pub fn add_sized_file(&self, path: &str, size: u64) -> Result<()> {
        let mut parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let name = parts.pop().unwrap_or_default();
        let mut at = self.root.clone();
        for part in parts {
            quiclab_outputs::plain_name(part, "a served path").map_err(anyhow::Error::msg)?;
            at = quiclab_outputs::claim_subdir(&at, part, "the served content")
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        quiclab_outputs::plain_name(name, "a served path").map_err(anyhow::Error::msg)?;
        let file = at.join(name);
        quiclab_outputs::create_in_claimed(&file)?
            .set_len(size)
            .with_context(|| format!("sizing {}", file.display()))?;
        Ok(())
    }

    /// Copies the files of a page's directory (its tree, plain files only: a link is refused,
    /// never followed).
    pub fn add_tree(&self, from: &Path) -> Result<()> {
        copy_tree(from, &self.root)
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        let name = name.to_str().with_context(|| {
            format!("{}: a file name that is not UTF-8", entry.path().display())
        })?;
        if kind.is_symlink() {
            anyhow::bail!(
                "{}: a symbolic link in the page's directory; quiclab serves plain files only",
                entry.path().display()
            );
        } else if kind.is_dir() {
            let sub = quiclab_outputs::claim_subdir(to, name, "the served content")
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            copy_tree(&entry.path(), &sub)?;
        } else if kind.is_file() {
            let data = std::fs::read(entry.path())?;
            quiclab_outputs::write_in_claimed(&to.join(name), &data)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_objects_are_written_and_verified_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let work = quiclab_outputs::claim_dir(&dir.path().join("w"), "test").unwrap();
        let site = Site::create(&work, "www").unwrap();
        let size = (1 << 16) * 3 + 17;
        assert_eq!(
            site.add_pattern_object(size).unwrap(),
            format!("/bytes/{size}")
        );
        let path = site.root.join("bytes").join(size.to_string());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        assert!(file_holds_pattern(&path, size).unwrap());
        assert!(
            !file_holds_pattern(&path, size + 1).unwrap(),
            "a short body"
        );
        site.add_sized_file("/video/bbb/3/17", 123_456).unwrap();
        let seg = site.root.join("video/bbb/3/17");
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), 123_456);
        assert!(site.add_sized_file("/video/../x", 1).is_err());
        assert!(holds_pattern(&[254, 255, 0, 1], 254));
        assert!(!holds_pattern(&[0, 0], 0));
    }
}
