//! The built-in pages, generated on demand with exact object sizes.
//!
//! # Units
//! The papers write sizes differently and we follow each paper's notation literally:
//! - Carlucci et al. 2015 (seed 000, §4.3) write lower-case "kB", the SI kilobyte, so 2.6 kB = 2 600 B and
//!   86.5 kB = 86 500 B.
//! - Megyesi et al. 2016 (seed 001, §III and Table I) write upper-case "KB" ("400B-8KB", "128KB", and
//!   footnote 3: "Google Sites automatically resize large photos to 128KB"), the customary binary
//!   kilobyte, so 8 KB = 8 192 B and 128 KB = 131 072 B.
//!
//! # What the totals include
//! The "≈ 305 kB / ≈ 690 kB / ≈ 2.1 MB" are approximate sums of the *images only*; the papers
//! give the image counts and sizes, not totals, and say nothing about the weight of index.html. The exact
//! image totals are 306 300 B, 709 500 B and 1 990 500 B (the medium and large approximations are loose:
//! 709.5 kB and 1.99 MB). The index.html comes on top: it is the minimal document that links the
//! images (the Carlucci pages had "only jpeg images without any JavaScript code and css file"), no
//! padding, and its exact size is part of the [`PageSpec`]:
//!
//! | page               | objects                  | images (B) | index.html (B) | total (B)  |
//! |--------------------|--------------------------|-----------:|---------------:|-----------:|
//! | `carlucci-small`   | 18 × 2 600 + 3 × 86 500  |    306 300 |            987 |    307 287 |
//! | `carlucci-medium`  | 40 × 2 600 + 7 × 86 500  |    709 500 |          1 795 |    711 295 |
//! | `carlucci-large`   | 200 × 2 600 + 17 × 86 500|  1 990 500 |          7 280 |  1 997 780 |
//! | `megyesi-5-small`  | 5 in 400–8 192           |     15 104 |            486 |     15 590 |
//! | `megyesi-5-large`  | 5 × 131 072              |    655 360 |            491 |    655 851 |
//! | `megyesi-50-small` | 50 in 400–8 192          |    130 785 |          2 018 |    132 803 |
//! | `megyesi-50-large` | 50 × 131 072             |  6 553 600 |          2 068 |  6 555 668 |
//!
//! (`tests/corpus.rs` pins these numbers.)

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::kind::{ObjectKind, content_type_for_path};

/// The path of every page's root document.
pub const INDEX_PATH: &str = "/index.html";

/// SI kilobyte, used by Carlucci et al. ("kB").
const KB_SI: u64 = 1000;
/// Binary kilobyte, used by Megyesi et al. ("KB").
const KB_BIN: u64 = 1024;

/// Carlucci et al.'s small image: 2.6 kB.
pub const CARLUCCI_SMALL_BYTES: u64 = 26 * KB_SI / 10;
/// Carlucci et al.'s large image: 86.5 kB.
pub const CARLUCCI_LARGE_BYTES: u64 = 865 * KB_SI / 10;
/// Megyesi et al.'s smallest small object: 400 B.
pub const MEGYESI_SMALL_MIN_BYTES: u64 = 400;
/// Megyesi et al.'s largest small object: 8 KB.
pub const MEGYESI_SMALL_MAX_BYTES: u64 = 8 * KB_BIN;
/// Megyesi et al.'s large object: 128 KB.
pub const MEGYESI_LARGE_BYTES: u64 = 128 * KB_BIN;

// The names [`builtin`] knows, in a stable order (kept in quiclab-model, whose key parser checks
// a name without the corpus).
use quiclab_model::page::BUILTIN_PAGES as BUILTIN_NAMES;

/// Errors of the page corpus and of page directories.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// A page name that is not built in.
    #[error("unknown page `{name}`; built-in pages: {}", known.join(", "))]
    UnknownPage {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: Vec<&'static str>,
    },
    /// A page directory without its root document.
    #[error("page directory {}: no index.html (expected {})", dir.display(), expected.display())]
    MissingIndex {
        /// The directory given.
        dir: PathBuf,
        /// The file looked for.
        expected: PathBuf,
    },
    /// A page directory whose documents reference a file that is not there.
    #[error(
        "page directory {}: {referenced_by} references {path}, but {} does not exist",
        dir.display(),
        file.display()
    )]
    MissingObject {
        /// The directory given.
        dir: PathBuf,
        /// The URL path of the missing object.
        path: String,
        /// The URL path of the document referencing it.
        referenced_by: String,
        /// The file looked for.
        file: PathBuf,
    },
    /// A URL path that does not name a file inside the page directory (an encoded `..` or `/`).
    #[error("page directory {}: {path} does not name a file inside it", dir.display())]
    OutsideDir {
        /// The directory given.
        dir: PathBuf,
        /// The URL path.
        path: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// One object of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpec {
    /// Absolute URL path, e.g. `/img/s01.jpg`.
    pub path: String,
    /// Exact size of the response body in bytes.
    pub size: u64,
    /// The Content-Type to serve it with.
    pub content_type: String,
    /// Its role.
    pub kind: ObjectKind,
    /// The URL path of the document that references it; `None` for the root document.
    pub referenced_by: Option<String>,
}

/// A page: its root document (always first) and the objects it embeds, each with an exact size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSpec {
    name: String,
    reference: String,
    objects: Vec<ObjectSpec>,
    /// The root document's text, so that [`PageSpec::generate`] reproduces exactly the size declared
    /// in `objects[0]`.
    index_html: String,
}

/// The names of the built-in pages.
pub fn builtin_names() -> &'static [&'static str] {
    BUILTIN_NAMES
}

/// The built-in page called `name`, if there is one.
pub fn builtin(name: &str) -> Option<PageSpec> {
    let (images, reference) = match name {
        "carlucci-small" => (carlucci_images(18, 3), CARLUCCI_REF),
        "carlucci-medium" => (carlucci_images(40, 7), CARLUCCI_REF),
        "carlucci-large" => (carlucci_images(200, 17), CARLUCCI_REF),
        "megyesi-5-small" => (megyesi_small(5), MEGYESI_REF),
        "megyesi-50-small" => (megyesi_small(50), MEGYESI_REF),
        "megyesi-5-large" => (megyesi_large(5), MEGYESI_REF),
        "megyesi-50-large" => (megyesi_large(50), MEGYESI_REF),
        _ => return None,
    };
    Some(PageSpec::from_images(name, reference, images))
}

/// Like [`builtin`], but an unknown name is an error that lists the built-in names.
pub fn lookup(name: &str) -> Result<PageSpec, PageError> {
    builtin(name).ok_or_else(|| PageError::UnknownPage {
        name: name.to_string(),
        known: BUILTIN_NAMES.to_vec(),
    })
}

const CARLUCCI_REF: &str = "Carlucci, De Cicco, Mascolo, \"HTTP over UDP: an experimental investigation of QUIC\", \
     ACM SAC 2015, section 4.3 (JPEG images only, no JavaScript or CSS; index.html links the images)";
const MEGYESI_REF: &str = "Megyesi, Kramer, Molnar, \"How quick is QUIC?\", IEEE ICC 2016, section III and Table I \
     (small objects 400 B-8 KB: national flags; large objects 128 KB: photos)";

/// An image to be placed on a page: file name under `/img/`, size, MIME type.
struct Image {
    file: String,
    size: u64,
    mime: &'static str,
}

/// Carlucci's pages: `small` images of 2.6 kB and `large` ones of 86.5 kB.
///
/// The paper does not say in which order the images appear in index.html. We spread the large ones
/// evenly through the page (large image `j`, 0-based, follows the `⌈(j + ½)·small / large⌉`-th small
/// image; for the small page: after small images 3, 9 and 15) so that
/// neither the start nor the end of the load is dominated by them; with HTTP/1.1's 6 connections
/// taking requests in document order, an order with all large images first or last would favour or
/// penalise it.
fn carlucci_images(small: usize, large: usize) -> Vec<Image> {
    let total = small + large;
    let width = digits(total);
    let mut out = Vec::with_capacity(total);
    let mut next_large = 0;
    for i in 0..small {
        out.push(Image {
            file: format!("s{:0width$}.jpg", i + 1),
            size: CARLUCCI_SMALL_BYTES,
            mime: "image/jpeg",
        });
        // Insert every large image whose slot falls after small image `i`.
        while next_large < large && (2 * next_large + 1) * small <= 2 * large * (i + 1) {
            next_large += 1;
            out.push(Image {
                file: format!("l{:0width$}.jpg", next_large),
                size: CARLUCCI_LARGE_BYTES,
                mime: "image/jpeg",
            });
        }
    }
    while next_large < large {
        next_large += 1;
        out.push(Image {
            file: format!("l{:0width$}.jpg", next_large),
            size: CARLUCCI_LARGE_BYTES,
            mime: "image/jpeg",
        });
    }
    out
}

/// The size of small object number `i` (0-based) of `n` on a Megyesi small-object page.
///
/// The paper only gives the range, 400 B–8 KB (national flags). We use a fixed formula, no random
/// numbers: the sizes are spaced geometrically (log-uniformly) from 400 B to 8 192 B, both ends
/// included, which matches how image file sizes of flags scatter (many near the low end, a few
/// large), and are laid out on the page in a stride-23 permutation of that sorted list so that the
/// sizes are mixed rather than ascending. Object `i` gets rank `r = 23·i mod n` and size
/// `round(400 · (8192 / 400)^(r / (n − 1)))`; for `n = 1` the single object is 400 B.
/// (23 is coprime to 5 and to 50, so each rank occurs exactly once; for an `n` sharing a factor
/// with 23 the ranks are simply `i`.)
pub fn megyesi_small_size(i: usize, n: usize) -> u64 {
    if n <= 1 {
        return MEGYESI_SMALL_MIN_BYTES;
    }
    let rank = if gcd(23, n) == 1 { (23 * i) % n } else { i % n };
    let ratio = MEGYESI_SMALL_MAX_BYTES as f64 / MEGYESI_SMALL_MIN_BYTES as f64;
    let size = MEGYESI_SMALL_MIN_BYTES as f64 * ratio.powf(rank as f64 / (n - 1) as f64);
    size.round() as u64
}

fn megyesi_small(n: usize) -> Vec<Image> {
    let width = digits(n);
    (0..n)
        .map(|i| Image {
            // The small objects were PNG-like flags; the paper does not give the format, only that
            // they were pictures, so we serve them as image/png.
            file: format!("flag{:0width$}.png", i + 1),
            size: megyesi_small_size(i, n),
            mime: "image/png",
        })
        .collect()
}

fn megyesi_large(n: usize) -> Vec<Image> {
    let width = digits(n);
    (0..n)
        .map(|i| Image {
            // High-resolution photos, resized by Google Sites: JPEG.
            file: format!("photo{:0width$}.jpg", i + 1),
            size: MEGYESI_LARGE_BYTES,
            mime: "image/jpeg",
        })
        .collect()
}

fn digits(n: usize) -> usize {
    n.max(1).to_string().len().max(2)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl PageSpec {
    fn from_images(name: &str, reference: &str, images: Vec<Image>) -> PageSpec {
        let srcs: Vec<String> = images.iter().map(|i| format!("img/{}", i.file)).collect();
        let index_html = render_index(name, reference, &srcs);
        let mut objects = Vec::with_capacity(images.len() + 1);
        objects.push(ObjectSpec {
            path: INDEX_PATH.to_string(),
            size: index_html.len() as u64,
            content_type: content_type_for_path(INDEX_PATH).to_string(),
            kind: ObjectKind::Html,
            referenced_by: None,
        });
        for image in images {
            objects.push(ObjectSpec {
                path: format!("/img/{}", image.file),
                size: image.size,
                content_type: image.mime.to_string(),
                kind: ObjectKind::Image,
                referenced_by: Some(INDEX_PATH.to_string()),
            });
        }
        PageSpec {
            name: name.to_string(),
            reference: reference.to_string(),
            objects,
            index_html,
        }
    }

    /// The page as a 2015 site served it with its objects sharded over `shards` host names:
    /// the root document stays on `host`, embedded object `j` (0-based, document order) is
    /// referenced as `https://s{k}.{host}{path}` with `k = j mod shards + 1` (port 443), so a
    /// browser opens its per-host connections to each shard. The files are the same (a server
    /// that ignores the host name serves every shard); only index.html changes, and its size
    /// with it. One shard is the page itself.
    pub fn sharded(&self, shards: u32, host: &str) -> PageSpec {
        if shards <= 1 {
            return self.clone();
        }
        let srcs: Vec<String> = self
            .embedded()
            .iter()
            .enumerate()
            .map(|(j, o)| {
                let k = j as u32 % shards + 1;
                format!("https://{}{}", shard_host(k, host), o.path)
            })
            .collect();
        let index_html = render_index(&self.name, &self.reference, &srcs);
        let mut objects = self.objects.clone();
        objects[0].size = index_html.len() as u64;
        PageSpec {
            name: self.name.clone(),
            reference: self.reference.clone(),
            objects,
            index_html,
        }
    }

    /// The page's name, e.g. `carlucci-small`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the page's definition comes from.
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// All objects, the root document first, then the embedded objects in document order.
    pub fn objects(&self) -> &[ObjectSpec] {
        &self.objects
    }

    /// The root document, `/index.html`.
    pub fn index(&self) -> &ObjectSpec {
        // `from_images` always pushes the index first, so the slice is never empty.
        &self.objects[0]
    }

    /// The objects the root document embeds (everything but index.html).
    pub fn embedded(&self) -> &[ObjectSpec] {
        &self.objects[1..]
    }

    /// Bytes of the embedded objects only (what the papers' sizes describe).
    pub fn embedded_bytes(&self) -> u64 {
        self.embedded().iter().map(|o| o.size).sum()
    }

    /// Bytes of all objects including index.html.
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }

    /// The object at a URL path, if the page has one.
    pub fn object(&self, path: &str) -> Option<&ObjectSpec> {
        self.objects.iter().find(|o| o.path == path)
    }

    /// Every file of the page: `(URL path, body)`, index.html first, each body exactly
    /// [`ObjectSpec::size`] bytes. Deterministic: the same page always yields the same bytes.
    pub fn generate(&self) -> Vec<(String, Vec<u8>)> {
        self.objects
            .iter()
            .map(|o| {
                let body = if o.kind == ObjectKind::Html {
                    self.index_html.clone().into_bytes()
                } else {
                    filler(&o.path, o.size, &o.content_type)
                };
                (o.path.clone(), body)
            })
            .collect()
    }

    /// The body of one object, generated on demand (a server can serve from this without writing
    /// files). `None` if the page has no such path.
    pub fn body(&self, path: &str) -> Option<Vec<u8>> {
        let o = self.object(path)?;
        Some(if o.kind == ObjectKind::Html {
            self.index_html.clone().into_bytes()
        } else {
            filler(&o.path, o.size, &o.content_type)
        })
    }

    /// Writes every file of the page under `dir` (creating directories), returning the files written.
    pub fn write_to(&self, dir: &Path) -> Result<Vec<PathBuf>, PageError> {
        let mut written = Vec::with_capacity(self.objects.len());
        for (path, body) in self.generate() {
            let file = dir.join(path.trim_start_matches('/'));
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|source| PageError::Io {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            std::fs::write(&file, &body).map_err(|source| PageError::Io {
                path: file.clone(),
                source,
            })?;
            written.push(file);
        }
        Ok(written)
    }
}

pub use quiclab_model::page::shard_host;

/// The root document: a title, one line naming the source, and one `<img>` per image (`srcs`:
/// paths relative to the document so the page also works when served from a sub-directory, or
/// a sharded page's absolute URLs).
fn render_index(name: &str, reference: &str, srcs: &[String]) -> String {
    let mut html = String::new();
    // `write!` to a String cannot fail; the results are ignored for that reason.
    let _ = writeln!(html, "<!DOCTYPE html>");
    let _ = writeln!(html, "<html lang=\"en\">");
    let _ = writeln!(html, "<head>");
    let _ = writeln!(html, "<meta charset=\"utf-8\">");
    let _ = writeln!(html, "<title>{name}</title>");
    let _ = writeln!(html, "</head>");
    let _ = writeln!(html, "<body>");
    let _ = writeln!(html, "<h1>{name}</h1>");
    let _ = writeln!(html, "<p>{}</p>", escape_text(reference));
    for src in srcs {
        let _ = writeln!(html, "<img src=\"{src}\" alt=\"\">");
    }
    let _ = writeln!(html, "</body>");
    let _ = writeln!(html, "</html>");
    html
}

fn escape_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Deterministic filler of exactly `size` bytes for a non-HTML object.
///
/// The bytes are pseudo-random (SplitMix64 seeded with the FNV-1a hash of the path) because real
/// JPEG/PNG data is incompressible: a compressible filler would let any compression on the way make
/// the page artificially small. Images start with their format's magic bytes so that tools that sniff
/// content see the declared type (the images do not decode; browsers still count them as loaded).
pub fn filler(path: &str, size: u64, content_type: &str) -> Vec<u8> {
    const JPEG_HEAD: &[u8] = &[
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00, 0x01, 0x01, 0x00, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00,
    ];
    const JPEG_TAIL: &[u8] = &[0xFF, 0xD9];
    const PNG_HEAD: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let mut state = fnv1a(path.as_bytes());
    let mut out = Vec::with_capacity(size);
    while out.len() < size {
        let word = splitmix64(&mut state).to_le_bytes();
        let take = (size - out.len()).min(word.len());
        out.extend_from_slice(&word[..take]);
    }
    let (head, tail): (&[u8], &[u8]) = match content_type {
        "image/jpeg" => (JPEG_HEAD, JPEG_TAIL),
        "image/png" => (PNG_HEAD, &[]),
        _ => (&[], &[]),
    };
    if head.len() + tail.len() <= size {
        out[..head.len()].copy_from_slice(head);
        out[size - tail.len()..].copy_from_slice(tail);
    }
    out
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_name_builds() {
        for name in super::builtin_names() {
            assert!(super::builtin(name).is_some(), "{name} has no page");
        }
        assert!(super::builtin("no-such-page").is_none());
    }

    #[test]
    fn a_sharded_page_spreads_its_objects_round_robin_and_keeps_their_bytes() {
        let page = super::builtin("megyesi-50-small").unwrap();
        assert_eq!(page.sharded(1, "quiclab.test"), page);
        let sharded = page.sharded(4, "quiclab.test");
        let html = String::from_utf8(sharded.generate().remove(0).1).unwrap();
        assert_eq!(sharded.index().size, html.len() as u64);
        // Every object once, on shard j mod 4 + 1, in document order.
        let srcs: Vec<&str> = html
            .lines()
            .filter_map(|l| l.strip_prefix("<img src=\""))
            .map(|l| l.split('"').next().unwrap())
            .collect();
        assert_eq!(srcs.len(), 50);
        for (j, (src, o)) in srcs.iter().zip(page.embedded()).enumerate() {
            assert_eq!(
                *src,
                format!("https://s{}.quiclab.test{}", j % 4 + 1, o.path)
            );
        }
        // The objects and their bytes are the page's; only index.html differs.
        assert_eq!(sharded.embedded(), page.embedded());
        assert_eq!(
            sharded.generate()[1..],
            page.generate()[1..],
            "the embedded files are the same"
        );
        assert_eq!(super::shard_host(3, "quiclab.test"), "s3.quiclab.test");
    }
}
