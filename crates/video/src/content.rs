//! Content models: what a DASH server offers. A content is a segment duration, a bitrate ladder
//! (representations, lowest first) and the size in bytes of every segment of every
//! representation. No media is decoded: the server sends synthetic bytes of exactly these sizes
//! and the player's playback is a clock.
//!
//! Built in: the ladder of seed 004 (ITEC DASH dataset 2014, Big Buck Bunny, 20 representations,
//! 596.46 s), CBR (size = bitrate × duration, as the seed describes its content), as `bbb` (4 s
//! segments, on demand) and `bbb-2s` (2 s segments, the seed's live form). A content file in
//! Sabre's movie JSON format loads anything else, e.g. real per-segment sizes.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Big Buck Bunny as the ITEC DASH dataset 2014 encodes it (AStream's `BigBuckBunny_4s.mpd`),
/// bit/s, lowest first.
pub const BBB_BITRATES: [u64; 20] = [
    45_226, 88_783, 128_503, 177_437, 217_761, 255_865, 323_047, 378_355, 509_091, 577_751,
    782_553, 1_008_699, 1_207_152, 1_473_801, 2_087_347, 2_409_742, 2_944_291, 3_340_509,
    3_613_836, 3_936_261,
];

/// Its length in milliseconds (596.46 s).
pub const BBB_DURATION_MS: u64 = 596_460;

/// The built-in contents, for error messages and `--help`.
pub const BUILTIN_CONTENTS: &[&str] = &["bbb", "bbb-2s"];

/// Every built-in content (what `quiclab serve` offers at /video/<name>/<rep>/<n>).
pub fn builtin_contents() -> Vec<Content> {
    BUILTIN_CONTENTS
        .iter()
        .filter_map(|n| Content::builtin(n))
        .collect()
}

/// Why a content is not accepted. Messages name the file and key, or the built-in names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentError(pub String);

impl std::fmt::Display for ContentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ContentError {}

/// A video as the server holds it and the player sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Content {
    /// Name in URLs (`/video/<name>/<rep>/<n>`): letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Nominal segment duration in milliseconds (every segment but the last has it).
    pub segment_ms: u64,
    /// Total media duration in milliseconds (the last segment may be shorter).
    pub duration_ms: u64,
    /// Bitrate of each representation, bit/s, strictly increasing.
    pub bitrates_bps: Vec<u64>,
    /// `sizes[rep][segment]`, bytes.
    pub sizes: Vec<Vec<u64>>,
}

/// The longest segment a content file may declare (10 min).
pub const MAX_SEGMENT_MS: u64 = 600_000;
/// The longest content (24 h): segment duration × count is checked against it.
pub const MAX_CONTENT_MS: u64 = 86_400_000;
/// The largest segment (1 GiB): with the durations above, every product of size and duration
/// fits a u64.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 30;

/// Sabre's movie format (`segment_duration_ms`, `bitrates_kbps`, `segment_sizes_bits`: one list
/// per segment with a size per bitrate).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SabreMovie {
    segment_duration_ms: f64,
    bitrates_kbps: Vec<f64>,
    segment_sizes_bits: Vec<Vec<f64>>,
}

impl Content {
    /// A CBR content: every segment of representation r holds bitrate_r × its duration.
    pub fn cbr(name: &str, segment_ms: u64, duration_ms: u64, bitrates_bps: &[u64]) -> Content {
        let n = duration_ms.div_ceil(segment_ms) as usize;
        let sizes = bitrates_bps
            .iter()
            .map(|&b| {
                (0..n)
                    .map(|i| {
                        let start = i as u64 * segment_ms;
                        let len = segment_ms.min(duration_ms - start);
                        // bits/s × ms / 8000 = bytes, rounded.
                        (b * len + 4000) / 8000
                    })
                    .collect()
            })
            .collect();
        Content {
            name: name.to_string(),
            segment_ms,
            duration_ms,
            bitrates_bps: bitrates_bps.to_vec(),
            sizes,
        }
    }

    /// A built-in content by name.
    pub fn builtin(name: &str) -> Option<Content> {
        match name {
            "bbb" => Some(Content::cbr("bbb", 4000, BBB_DURATION_MS, &BBB_BITRATES)),
            "bbb-2s" => Some(Content::cbr("bbb-2s", 2000, BBB_DURATION_MS, &BBB_BITRATES)),
            _ => None,
        }
    }

    /// A built-in name, or a Sabre movie JSON file. The file's content is named after its stem.
    /// The file is read through `read` (the shell's reader; this crate does no I/O).
    pub fn builtin_or_load(
        name_or_path: &str,
        read: quiclab_link::input::ReadText,
    ) -> Result<Content, ContentError> {
        if let Some(c) = Content::builtin(name_or_path) {
            return Ok(c);
        }
        let path = Path::new(name_or_path);
        let text = read(path).map_err(|e| {
            ContentError(if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{name_or_path:?}: no such built-in content ({}) and no such file",
                    BUILTIN_CONTENTS.join(", ")
                )
            } else {
                format!("{}: {e}", path.display())
            })
        })?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("content");
        Content::from_sabre_json(&path.display().to_string(), stem, &text)
    }

    /// Parses Sabre's movie JSON; errors are `FILE:LINE:COLUMN: …` for syntax and missing keys,
    /// `FILE: key[i]: …` for values that do not fit.
    pub fn from_sabre_json(file: &str, name: &str, text: &str) -> Result<Content, ContentError> {
        let movie: SabreMovie = serde_json::from_str(text).map_err(|e| {
            ContentError(format!(
                "{file}:{}:{}: {e} (expected Sabre's movie format: segment_duration_ms, \
                 bitrates_kbps, segment_sizes_bits)",
                e.line(),
                e.column()
            ))
        })?;
        let err = |key: String, msg: String| ContentError(format!("{file}: {key}: {msg}"));
        let ms = movie.segment_duration_ms;
        if ms.is_nan() || !(1.0..=MAX_SEGMENT_MS as f64).contains(&ms) || ms.fract() != 0.0 {
            return Err(err(
                "segment_duration_ms".into(),
                format!(
                    "{}: expected a whole number of milliseconds from 1 to {MAX_SEGMENT_MS}",
                    movie.segment_duration_ms
                ),
            ));
        }
        let segment_ms = movie.segment_duration_ms as u64;
        if movie.bitrates_kbps.is_empty() {
            return Err(err(
                "bitrates_kbps".into(),
                "empty: give at least one representation".into(),
            ));
        }
        let mut bitrates_bps = Vec::new();
        for (i, &k) in movie.bitrates_kbps.iter().enumerate() {
            let bps = (k * 1000.0).round();
            if bps.is_nan() || bps < 1.0 || bps.is_infinite() {
                return Err(err(
                    format!("bitrates_kbps[{i}]"),
                    format!("{k}: expected a positive number"),
                ));
            }
            if let Some(&prev) = bitrates_bps.last()
                && bps as u64 <= prev
            {
                return Err(err(
                    format!("bitrates_kbps[{i}]"),
                    format!("{k}: bitrates must increase (lowest first)"),
                ));
            }
            bitrates_bps.push(bps as u64);
        }
        if movie.segment_sizes_bits.is_empty() {
            return Err(err(
                "segment_sizes_bits".into(),
                "empty: give one list of sizes per segment".into(),
            ));
        }
        let reps = bitrates_bps.len();
        let mut sizes = vec![Vec::with_capacity(movie.segment_sizes_bits.len()); reps];
        for (s, row) in movie.segment_sizes_bits.iter().enumerate() {
            if row.len() != reps {
                return Err(err(
                    format!("segment_sizes_bits[{s}]"),
                    format!(
                        "{} sizes for {reps} bitrates: give one size (bits) per bitrate",
                        row.len()
                    ),
                ));
            }
            for (r, &bits) in row.iter().enumerate() {
                if bits.is_nan() || !(8.0..=MAX_SEGMENT_BYTES as f64 * 8.0).contains(&bits) {
                    return Err(err(
                        format!("segment_sizes_bits[{s}][{r}]"),
                        format!(
                            "{bits}: expected a size in bits from 8 to {} ({MAX_SEGMENT_BYTES} bytes)",
                            MAX_SEGMENT_BYTES * 8
                        ),
                    ));
                }
                sizes[r].push((bits / 8.0).round() as u64);
            }
        }
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let duration_ms = segment_ms
            .checked_mul(movie.segment_sizes_bits.len() as u64)
            .filter(|d| *d <= MAX_CONTENT_MS)
            .ok_or_else(|| {
                err(
                    "segment_sizes_bits".into(),
                    format!(
                        "{} segments of {segment_ms} ms: longer than the most a content may last \
                         ({MAX_CONTENT_MS} ms, 24 h)",
                        movie.segment_sizes_bits.len()
                    ),
                )
            })?;
        Ok(Content {
            name,
            segment_ms,
            duration_ms,
            bitrates_bps,
            sizes,
        })
    }

    /// The first `ms` milliseconds of this content (all of it when it is shorter).
    pub fn truncated(&self, ms: u64) -> Content {
        if ms >= self.duration_ms {
            return self.clone();
        }
        let n = ms.div_ceil(self.segment_ms) as usize;
        let mut c = self.clone();
        c.duration_ms = ms;
        for (r, row) in c.sizes.iter_mut().enumerate() {
            row.truncate(n);
            // A cut last segment keeps the share of its bytes that it still plays.
            let start = (n as u64 - 1) * self.segment_ms;
            let full = self.segment_len_ms(n - 1);
            let len = ms - start;
            if len < full {
                row[n - 1] = (self.sizes[r][n - 1] * len).div_ceil(full);
            }
        }
        c
    }

    pub fn segments(&self) -> usize {
        self.sizes.first().map_or(0, Vec::len)
    }

    pub fn levels(&self) -> usize {
        self.bitrates_bps.len()
    }

    /// Media duration of segment n, ms.
    pub fn segment_len_ms(&self, n: usize) -> u64 {
        let start = n as u64 * self.segment_ms;
        self.segment_ms.min(self.duration_ms.saturating_sub(start))
    }

    pub fn segment_s(&self) -> f64 {
        self.segment_ms as f64 / 1e3
    }

    pub fn duration_s(&self) -> f64 {
        self.duration_ms as f64 / 1e3
    }

    /// Bytes of segment n at representation r (None outside the content).
    pub fn size(&self, rep: usize, n: usize) -> Option<u64> {
        self.sizes.get(rep)?.get(n).copied()
    }

    /// Mean segment size of each representation, bytes.
    pub fn mean_sizes(&self) -> Vec<f64> {
        self.sizes
            .iter()
            .map(|row| row.iter().sum::<u64>() as f64 / row.len().max(1) as f64)
            .collect()
    }

    /// The path of a segment on the server.
    pub fn path(&self, rep: usize, n: usize) -> String {
        format!("/video/{}/{rep}/{n}", self.name)
    }
}

/// Parses `/video/<content>/<rep>/<n>` into its parts.
pub fn parse_segment_path(path: &str) -> Option<(&str, usize, usize)> {
    let rest = path.strip_prefix("/video/")?;
    let mut parts = rest.split('/');
    let (name, rep, n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || name.is_empty() {
        return None;
    }
    Some((name, rep.parse().ok()?, n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bbb_is_the_seeds_ladder_in_cbr_segments() {
        let c = Content::builtin("bbb").unwrap();
        assert_eq!(c.levels(), 20);
        assert_eq!(c.segments(), 150);
        // 4 s at 3 936 261 bit/s = 1 968 130.5 bytes.
        assert_eq!(c.size(19, 0), Some(1_968_131));
        // The last segment holds 0.46 s.
        assert_eq!(c.segment_len_ms(149), 460);
        assert_eq!(c.size(0, 149), Some((45_226 * 460 + 4000) / 8000));
        let live = Content::builtin("bbb-2s").unwrap();
        assert_eq!(live.segments(), 299);
        let q = c.truncated(60_000);
        assert_eq!(q.segments(), 15);
        assert_eq!(q.duration_ms, 60_000);
        let q = c.truncated(61_000);
        assert_eq!(q.segments(), 16);
        assert_eq!(q.size(19, 15), Some(1_968_131_u64.div_ceil(4)));
    }

    #[test]
    fn sabre_files_load_and_bad_ones_name_the_key() {
        let ok = r#"{"segment_duration_ms": 3000, "bitrates_kbps": [100, 200],
                     "segment_sizes_bits": [[300000, 600000], [290000, 610000]]}"#;
        let c = Content::from_sabre_json("m.json", "m", ok).unwrap();
        assert_eq!(c.bitrates_bps, vec![100_000, 200_000]);
        assert_eq!(c.sizes, vec![vec![37_500, 36_250], vec![75_000, 76_250]]);
        assert_eq!(c.duration_ms, 6000);

        let short = r#"{"segment_duration_ms": 3000, "bitrates_kbps": [100, 200],
                     "segment_sizes_bits": [[300000, 600000], [290000]]}"#;
        let e = Content::from_sabre_json("m.json", "m", short).unwrap_err();
        assert!(
            e.0.starts_with("m.json: segment_sizes_bits[1]: 1 sizes for 2"),
            "{e}"
        );

        let missing = "{\"segment_duration_ms\": 3000,\n \"bitrates_kbps\": [100]}";
        let e = Content::from_sabre_json("m.json", "m", missing).unwrap_err();
        assert!(e.0.starts_with("m.json:2:"), "{e}");
        assert!(e.0.contains("segment_sizes_bits"), "{e}");

        let unordered = r#"{"segment_duration_ms": 3000, "bitrates_kbps": [200, 100],
                     "segment_sizes_bits": [[300000, 600000]]}"#;
        let e = Content::from_sabre_json("m.json", "m", unordered).unwrap_err();
        assert!(e.0.contains("bitrates_kbps[1]"), "{e}");

        let e = Content::builtin_or_load("no-such-content", &|p| std::fs::read_to_string(p))
            .unwrap_err();
        assert!(e.0.contains("bbb, bbb-2s"), "{e}");
    }

    #[test]
    fn content_bounds_are_checked_not_overflowed() {
        let movie = |ms: &str, n: usize, bits: &str| {
            let rows = vec![format!("[{bits}]"); n].join(",");
            format!(
                r#"{{"segment_duration_ms": {ms}, "bitrates_kbps": [100], "segment_sizes_bits": [{rows}]}}"#
            )
        };
        // A duration × count that overflowed u64 (a wrap in release builds) is refused.
        let e = Content::from_sabre_json("m.json", "m", &movie("1e19", 2, "800")).unwrap_err();
        assert!(
            e.0.contains("segment_duration_ms") && e.0.contains("600000"),
            "{e}"
        );
        let e = Content::from_sabre_json("m.json", "m", &movie("600000", 145, "800")).unwrap_err();
        assert!(e.0.contains("24 h"), "{e}");
        assert!(Content::from_sabre_json("m.json", "m", &movie("600000", 144, "800")).is_ok());
        let e = Content::from_sabre_json("m.json", "m", &movie("4000", 2, "1e300")).unwrap_err();
        assert!(e.0.contains("segment_sizes_bits[0][0]"), "{e}");
        // The largest allowed segment, cut: no overflow in the share it keeps.
        let c = Content::from_sabre_json("m.json", "m", &movie("600000", 3, "8589934592")).unwrap();
        assert_eq!(c.truncated(900_000).size(0, 1), Some((1u64 << 30) / 2));
    }

    #[test]
    fn segment_paths_round_trip() {
        let c = Content::builtin("bbb").unwrap();
        assert_eq!(c.path(3, 17), "/video/bbb/3/17");
        assert_eq!(parse_segment_path("/video/bbb/3/17"), Some(("bbb", 3, 17)));
        assert_eq!(parse_segment_path("/video/bbb/3"), None);
        assert_eq!(parse_segment_path("/video/bbb/x/1"), None);
        assert_eq!(parse_segment_path("/bytes/10"), None);
    }
}
