//! HTTP Range requests (RFC 9110 §14) for the `/bytes/<N>` test resources.
//!
//! Only a single byte range is served. RFC 9110 §14.2 lets a server ignore a Range header
//! altogether and send the whole representation with 200, and that is what happens for
//! anything we choose not to serve (multiple ranges, other units) or cannot parse (a
//! syntactically invalid header is ignored, not rejected). The one case that produces an error
//! is a well-formed range that selects nothing, which must be answered with 416.

/// An HTTP Range request that cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The range starts at or after the end of the resource (or is a zero-length suffix).
    /// Answer `416 Range Not Satisfiable` with [`RangeError::content_range`].
    #[error(
        "range not satisfiable: the resource is {length} bytes; \
         accepted: a first byte position below {length} or a non-zero suffix length"
    )]
    Unsatisfiable {
        /// Length of the resource, in bytes.
        length: u64,
    },
}

impl RangeError {
    /// The `Content-Range` value for the 416 answer (`bytes */length`, RFC 9110 §14.4).
    pub fn content_range(&self) -> String {
        match self {
            RangeError::Unsatisfiable { length } => format!("bytes */{length}"),
        }
    }
}

/// Parses a `Range` header value against a resource of `length` bytes.
///
/// Returns the inclusive `(first, last)` byte positions, clamped to the resource:
/// - `bytes=a-b` → `(a, min(b, length - 1))`
/// - `bytes=a-` → `(a, length - 1)`
/// - `bytes=-n` → the last `n` bytes, or the whole resource if `n ≥ length`
///
/// `Ok(None)` means "ignore the header and send the whole resource with 200": a syntactically
/// invalid header, an unknown range unit, `b < a`, several ranges (allowed by §14.2; we do not
/// generate `multipart/byteranges`), or any suffix range of an empty resource (RFC 9110 calls it
/// satisfiable, yet there is no byte to put in a `Content-Range`).
///
/// `Err(RangeError::Unsatisfiable)` when the range starts at or beyond `length`, or is `bytes=-0`.
pub fn parse_range(header: &str, length: u64) -> Result<Option<(u64, u64)>, RangeError> {
    let Some(spec) = single_range_spec(header) else {
        return Ok(None);
    };
    let Some((first, last)) = spec.split_once('-') else {
        return Ok(None);
    };
    let unsatisfiable = Err(RangeError::Unsatisfiable { length });

    if first.is_empty() {
        // suffix-range = "-" suffix-length
        let Some(suffix) = parse_digits(last) else {
            return Ok(None);
        };
        if suffix == 0 {
            // §14.1.1: only a *non-zero* suffix length makes a range set satisfiable.
            return unsatisfiable;
        }
        if length == 0 {
            return Ok(None);
        }
        return Ok(Some((length.saturating_sub(suffix), length - 1)));
    }

    // int-range = first-pos "-" [ last-pos ]
    let Some(first) = parse_digits(first) else {
        return Ok(None);
    };
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(last) => last,
            None => return Ok(None),
        }
    };
    if last < first {
        // §14.1.1: "last-pos < first-pos" makes the range-spec invalid, hence ignored.
        return Ok(None);
    }
    if first >= length {
        return unsatisfiable;
    }
    Ok(Some((first, last.min(length - 1))))
}

/// The `Content-Range` value for a 206 answer: `bytes first-last/length` (RFC 9110 §14.4).
pub fn content_range(first: u64, last: u64, length: u64) -> String {
    format!("bytes {first}-{last}/{length}")
}

/// Largest `/bytes/<N>` resource served: 1 TB. Larger requests are treated as unknown paths
/// rather than as an attempt to make the server stream forever.
pub const MAX_BYTES_RESOURCE: u64 = 1_000_000_000_000;

/// Parses a request path of the form `/bytes/<N>`, N plain decimal digits with N ≤ 10¹²
/// ([`MAX_BYTES_RESOURCE`]). No sign, no suffixes, no trailing slash, no query (pass the path
/// component only). Anything else is `None`, i.e. "not a bytes resource" (404).
pub fn parse_bytes_path(path: &str) -> Option<u64> {
    let n = parse_digits(path.strip_prefix("/bytes/")?)?;
    (n <= MAX_BYTES_RESOURCE).then_some(n)
}

/// Strips the `bytes=` unit and returns the only non-empty range-spec, trimmed; `None` if the
/// unit is not `bytes` or there is not exactly one range-spec.
fn single_range_spec(header: &str) -> Option<&str> {
    let (unit, set) = header.trim_matches(is_ows).split_once('=')?;
    // range-unit is a token compared case-insensitively (§14.1); no whitespace around "=".
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    // range-set = 1#range-spec; list syntax (§5.6.1) allows OWS around commas and requires
    // recipients to skip empty elements, so "bytes=0-9," is one range.
    let mut specs = set
        .split(',')
        .map(|s| s.trim_matches(is_ows))
        .filter(|s| !s.is_empty());
    let spec = specs.next()?;
    match specs.next() {
        None => Some(spec),
        Some(_) => None,
    }
}

/// Optional whitespace (RFC 9110 §5.6.3): SP or HTAB.
fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// Parses 1*DIGIT. Saturates at `u64::MAX` instead of failing, because an enormous position is
/// still syntactically valid and means "beyond the end" (clamped, or unsatisfiable).
/// Rejects signs, which `u64::from_str` would accept.
fn parse_digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEN: u64 = 1000;

    #[test]
    fn int_range() {
        assert_eq!(parse_range("bytes=0-99", LEN), Ok(Some((0, 99))));
        assert_eq!(parse_range("bytes=500-999", LEN), Ok(Some((500, 999))));
        assert_eq!(parse_range("bytes=0-0", LEN), Ok(Some((0, 0))));
        assert_eq!(parse_range("bytes=999-999", LEN), Ok(Some((999, 999))));
    }

    #[test]
    fn int_range_last_clamped_to_length() {
        assert_eq!(parse_range("bytes=900-5000", LEN), Ok(Some((900, 999))));
        assert_eq!(parse_range("bytes=0-1000", LEN), Ok(Some((0, 999))));
        // Beyond u64: still valid syntax, still clamped.
        assert_eq!(
            parse_range("bytes=1-99999999999999999999999", LEN),
            Ok(Some((1, 999)))
        );
    }

    #[test]
    fn open_ended_range() {
        assert_eq!(parse_range("bytes=100-", LEN), Ok(Some((100, 999))));
        assert_eq!(parse_range("bytes=0-", LEN), Ok(Some((0, 999))));
        assert_eq!(parse_range("bytes=999-", LEN), Ok(Some((999, 999))));
    }

    #[test]
    fn suffix_range() {
        assert_eq!(parse_range("bytes=-100", LEN), Ok(Some((900, 999))));
        assert_eq!(parse_range("bytes=-1", LEN), Ok(Some((999, 999))));
        // Suffix longer than the resource selects the whole resource.
        assert_eq!(parse_range("bytes=-5000", LEN), Ok(Some((0, 999))));
        assert_eq!(parse_range("bytes=-1000", LEN), Ok(Some((0, 999))));
    }

    #[test]
    fn unsatisfiable() {
        let err = Err(RangeError::Unsatisfiable { length: LEN });
        assert_eq!(parse_range("bytes=1000-", LEN), err);
        assert_eq!(parse_range("bytes=1000-2000", LEN), err);
        assert_eq!(parse_range("bytes=-0", LEN), err);
        assert_eq!(parse_range("bytes=99999999999999999999-", LEN), err);
        assert_eq!(
            parse_range("bytes=0-0", 0),
            Err(RangeError::Unsatisfiable { length: 0 })
        );
        let e = RangeError::Unsatisfiable { length: LEN };
        assert_eq!(e.content_range(), "bytes */1000");
        assert!(e.to_string().contains("below 1000"), "{e}");
    }

    #[test]
    fn suffix_of_empty_resource_is_ignored() {
        assert_eq!(parse_range("bytes=-10", 0), Ok(None));
    }

    #[test]
    fn syntax_variants_accepted() {
        assert_eq!(parse_range("BYTES=0-9", LEN), Ok(Some((0, 9))));
        assert_eq!(parse_range("  bytes=0-9\t", LEN), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes= 0-9 ,", LEN), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=,0-9", LEN), Ok(Some((0, 9))));
    }

    #[test]
    fn malformed_is_ignored() {
        for h in [
            "",
            "bytes",
            "bytes=",
            "bytes=,",
            "bytes=-",
            "bytes=abc",
            "bytes=5",
            "bytes=a-b",
            "bytes=1-a",
            "bytes=+1-2",
            "bytes=1-+2",
            "bytes=-+5",
            "bytes=1--2",
            "bytes=1 - 2",
            "bytes = 0-9",
            "items=0-9",
            "0-9",
            "bytes=9-0", // last < first: invalid range-spec
        ] {
            assert_eq!(parse_range(h, LEN), Ok(None), "{h:?}");
        }
    }

    #[test]
    fn multiple_ranges_serve_whole_resource() {
        assert_eq!(parse_range("bytes=0-9,20-29", LEN), Ok(None));
        assert_eq!(parse_range("bytes=0-9, -5", LEN), Ok(None));
    }

    #[test]
    fn content_range_format() {
        assert_eq!(content_range(0, 99, 1000), "bytes 0-99/1000");
        assert_eq!(content_range(0, 0, 1), "bytes 0-0/1");
    }

    #[test]
    fn bytes_path() {
        assert_eq!(parse_bytes_path("/bytes/0"), Some(0));
        assert_eq!(parse_bytes_path("/bytes/1048576"), Some(1_048_576));
        assert_eq!(parse_bytes_path("/bytes/007"), Some(7));
        assert_eq!(
            parse_bytes_path("/bytes/1000000000000"),
            Some(MAX_BYTES_RESOURCE)
        );
        for p in [
            "/bytes/1000000000001",
            "/bytes/99999999999999999999999",
            "/bytes/",
            "/bytes",
            "/bytes/+5",
            "/bytes/-5",
            "/bytes/10k",
            "/bytes/1M",
            "/bytes/1.5",
            "/bytes/10/",
            "/bytes/10?x=1",
            "/bytes/ 10",
            "bytes/10",
            "/Bytes/10",
            "/bytes//10",
            "/other/10",
        ] {
            assert_eq!(parse_bytes_path(p), None, "{p:?}");
        }
    }
}
