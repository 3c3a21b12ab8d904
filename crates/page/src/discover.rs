//! Finding a page's embedded objects: from HTML (`<img src>`, `<link rel=stylesheet href>`,
//! `<script src>`, inline `<style>` and `style=""`) and from CSS (`url(...)`, `@import "..."`), the
//! way a browser's preload scanner and style engine do, reduced to what a page load needs: URL paths
//! on the page's own origin.
//!
//! Paths are absolute URL paths (`/css/site.css`), resolved against the referencing document's path
//! like a browser resolves URLs: dot segments removed (never above `/`), fragments dropped, queries
//! kept (a browser requests them), characters outside the URL path set percent-encoded.
//! References that are not fetched from the page's origin are skipped: `data:`, `blob:`,
//! `javascript:`, `about:`, `mailto:`… and absolute or scheme-relative URLs to other origins.
//! Not modelled: `srcset`, `<picture>`/`<source>`, `image-set()`, preload/prefetch hints, scripts
//! that fetch at run time.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use scraper::{ElementRef, Html};

use crate::corpus::{INDEX_PATH, ObjectSpec, PageError};
use crate::kind::{ObjectKind, content_type_for_path};

/// Errors of discovery's inputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoverError {
    /// An origin that is not `http[s]://host[:port]`.
    #[error(
        "invalid origin `{origin}`: {reason} (expected scheme://host[:port] with scheme http or https)"
    )]
    InvalidOrigin {
        /// The text given.
        origin: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A web origin: scheme, host and port. Absolute URLs in a page are fetched only if they match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// Parses `https://host`, `https://host:8443`, `http://[fd00::2]:80/` (a trailing `/` is allowed).
    pub fn parse(text: &str) -> Result<Origin, DiscoverError> {
        let err = |reason| DiscoverError::InvalidOrigin {
            origin: text.to_string(),
            reason,
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| err("no `://`"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(err("the scheme is not http or https"));
        }
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '@']) {
            return Err(err("an origin has no path, query, fragment or user name"));
        }
        let (host, port) =
            split_authority(&scheme, authority).ok_or_else(|| err("bad host or port"))?;
        Ok(Origin { scheme, host, port })
    }

    /// The URL of a path on this origin; the scheme's default port is omitted.
    pub fn url(&self, path: &str) -> String {
        let default = default_port(&self.scheme);
        if Some(self.port) == default {
            format!("{}://{}{}", self.scheme, self.host, path)
        } else {
            format!("{}://{}:{}{}", self.scheme, self.host, self.port, path)
        }
    }

    fn matches(&self, scheme: &str, authority: &str) -> bool {
        if !scheme.eq_ignore_ascii_case(&self.scheme) {
            return false;
        }
        // User information (`user@`) does not change the origin.
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        split_authority(&self.scheme, authority) == Some((self.host.clone(), self.port))
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url(""))
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// `host[:port]` or `[v6]:port` → lower-cased host and port (the scheme's default if absent).
fn split_authority(scheme: &str, authority: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{}]", host.to_ascii_lowercase()), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
            None => (authority.to_ascii_lowercase(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port {
        None | Some("") => default_port(scheme)?,
        Some(p) => p.parse().ok()?,
    };
    Some((host, port))
}

/// How a document refers to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// `<img src>`.
    ImgSrc,
    /// `<link rel=stylesheet href>`.
    LinkStylesheet,
    /// `<script src>`.
    ScriptSrc,
    /// CSS `url(...)` (in a style sheet, a `<style>` element or a `style` attribute).
    CssUrl,
    /// CSS `@import "..."` or `@import url(...)`.
    CssImport,
}

/// One embedded object found in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Absolute URL path on the page's origin.
    pub path: String,
    /// What the object is, from how it is referenced (a `<link rel=stylesheet>` is a style sheet
    /// whatever its extension) or else from its extension.
    pub kind: ObjectKind,
    /// How it was referenced.
    pub via: Via,
}

impl Reference {
    fn new(path: String, via: Via) -> Reference {
        let kind = match via {
            Via::ImgSrc => ObjectKind::Image,
            Via::LinkStylesheet | Via::CssImport => ObjectKind::Stylesheet,
            Via::ScriptSrc => ObjectKind::Script,
            Via::CssUrl => ObjectKind::from_path(&path),
        };
        Reference { path, kind, via }
    }
}

/// The objects an HTML document at `doc_path` embeds, in document order, without duplicates.
/// `origin` is the page's origin; without one every absolute URL counts as another origin's.
pub fn discover_html(html: &str, doc_path: &str, origin: Option<&Origin>) -> Vec<Reference> {
    let doc = Html::parse_document(html);
    let elements: Vec<ElementRef<'_>> = doc
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
        .collect();

    // The first `<base href>` sets the base URL of the whole document. A base on another origin
    // makes every relative reference foreign.
    let mut base: Option<String> = Some(doc_path.to_string());
    if let Some(href) = elements
        .iter()
        .find(|e| e.value().name() == "base" && e.value().attr("href").is_some())
        .and_then(|e| e.value().attr("href"))
    {
        base = resolve(doc_path, href, origin);
    }

    let mut out = Dedup::default();
    let Some(base) = base else {
        return out.refs;
    };
    for el in elements {
        let v = el.value();
        match v.name() {
            "img" => {
                if let Some(src) = v.attr("src") {
                    out.push(resolve(&base, src, origin), Via::ImgSrc);
                }
            }
            "link" => {
                let is_stylesheet = v.attr("rel").is_some_and(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|t| t.eq_ignore_ascii_case("stylesheet"))
                });
                if let (true, Some(href)) = (is_stylesheet, v.attr("href")) {
                    out.push(resolve(&base, href, origin), Via::LinkStylesheet);
                }
            }
            "script" => {
                // Browsers do not fetch scripts of a type they do not run (templates, JSON data).
                let runs = v.attr("type").is_none_or(|t| {
                    let t = t.trim().to_ascii_lowercase();
                    matches!(
                        t.as_str(),
                        "" | "module" | "text/javascript" | "application/javascript"
                    )
                });
                if let (true, Some(src)) = (runs, v.attr("src")) {
                    out.push(resolve(&base, src, origin), Via::ScriptSrc);
                }
            }
            "style" => {
                let css: String = el.text().collect();
                for (url, import) in css_references(&css) {
                    out.push(
                        resolve(&base, &url, origin),
                        if import { Via::CssImport } else { Via::CssUrl },
                    );
                }
            }
            _ => {}
        }
        if let Some(style) = v.attr("style") {
            for (url, _) in css_references(style) {
                out.push(resolve(&base, &url, origin), Via::CssUrl);
            }
        }
    }
    out.refs
}

/// The objects a style sheet at `css_path` references (`url(...)`, `@import`), in order, without
/// duplicates.
pub fn discover_css(css: &str, css_path: &str, origin: Option<&Origin>) -> Vec<Reference> {
    let mut out = Dedup::default();
    for (url, import) in css_references(css) {
        out.push(
            resolve(css_path, &url, origin),
            if import { Via::CssImport } else { Via::CssUrl },
        );
    }
    out.refs
}

/// Discovery on a response body of the given kind: HTML and CSS are parsed, anything else embeds
/// nothing. Bodies that are not valid UTF-8 are read lossily (references are ASCII in practice).
pub fn discover_body(
    path: &str,
    kind: ObjectKind,
    body: &[u8],
    origin: Option<&Origin>,
) -> Vec<Reference> {
    let text = String::from_utf8_lossy(body);
    match kind {
        ObjectKind::Html => discover_html(&text, path, origin),
        ObjectKind::Stylesheet => discover_css(&text, path, origin),
        _ => Vec::new(),
    }
}

/// Keeps the first occurrence of each path.
#[derive(Default)]
struct Dedup {
    seen: HashSet<String>,
    refs: Vec<Reference>,
}

impl Dedup {
    fn push(&mut self, path: Option<String>, via: Via) {
        if let Some(path) = path
            && self.seen.insert(path.clone())
        {
            self.refs.push(Reference::new(path, via));
        }
    }
}

/// Resolves a reference found in the document at `base_path` to an absolute URL path on `origin`;
/// `None` if it is empty, a fragment of the same document, another scheme, or another origin.
pub fn resolve(base_path: &str, reference: &str, origin: Option<&Origin>) -> Option<String> {
    // As the URL parser does: strip surrounding whitespace and remove tabs and newlines; treat `\`
    // as `/` (http(s) URLs are "special").
    let cleaned: String = reference
        .trim_matches(|c: char| c.is_ascii_whitespace() || c.is_ascii_control())
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c })
        .collect();
    // An empty reference or a bare fragment names the document itself: nothing to fetch.
    if cleaned.is_empty() || cleaned.starts_with('#') {
        return None;
    }
    let r = cleaned.split('#').next().unwrap_or("");

    let joined = if let Some(scheme) = scheme_of(r) {
        let rest = &r[scheme.len() + 1..];
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let (authority, path) = split_at_path(rest);
        if !origin?.matches(scheme, authority) {
            return None;
        }
        path.to_string()
    } else if let Some(rest) = r.strip_prefix("//") {
        let origin = origin?;
        let (authority, path) = split_at_path(rest);
        if !origin.matches(&origin.scheme, authority) {
            return None;
        }
        path.to_string()
    } else if r.starts_with('/') {
        r.to_string()
    } else {
        let base = base_path.split(['?', '#']).next().unwrap_or("/");
        if r.starts_with('?') {
            format!("{base}{r}")
        } else {
            let dir = base.rfind('/').map_or("/", |i| &base[..=i]);
            let dir = if dir.starts_with('/') {
                dir.to_string()
            } else {
                format!("/{dir}")
            };
            format!("{dir}{r}")
        }
    };
    Some(normalize(&joined))
}

/// The scheme of an absolute URL (`https` in `https://…`), if the reference has one.
fn scheme_of(r: &str) -> Option<&str> {
    let colon = r.find(':')?;
    let scheme = &r[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// `host:port/path?q` → (`host:port`, `/path?q`); an empty path becomes `/`.
fn split_at_path(rest: &str) -> (&str, String) {
    match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    }
}

/// Removes dot segments (never above the root) and percent-encodes what a URL path or query may
/// not contain literally.
fn normalize(joined: &str) -> String {
    let (path, query) = match joined.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (joined, None),
    };
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let last = segments.len().saturating_sub(1);
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." | ".." => {
                if *seg == ".." {
                    out.pop();
                }
                // `a/.` and `a/..` name a directory: keep the trailing slash.
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let mut result = String::from("/");
    result.push_str(&percent_encode(&out.join("/"), b"\"#<>?`{} "));
    if let Some(q) = query {
        result.push('?');
        result.push_str(&percent_encode(q, b"\"#<> "));
    }
    result
}

/// Percent-encodes control characters, non-ASCII bytes and `set`; existing `%XX` are kept.
fn percent_encode(s: &str, set: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b <= 0x20 || b >= 0x7F || set.contains(&b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// The `url(...)` and `@import "..."` references of CSS text: `(url, is_import)`, in order.
///
/// A small scanner rather than a CSS parser: it skips comments and strings (so `"url(x)"` inside a
/// string is not a reference), recognises `url(` only as a whole function name (not `myurl(`), reads
/// quoted and unquoted URLs with CSS escapes, and drops malformed unquoted URLs (containing quotes,
/// `(` or inner whitespace) as browsers do ("bad-url" tokens).
pub(crate) fn css_references(css: &str) -> Vec<(String, bool)> {
    let bytes = css.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Set after `@import`; the next string or url() is the imported sheet.
    let mut import_pending = false;
    while i < bytes.len() {
        let b = bytes[i];
        if bytes[i..].starts_with(b"/*") {
            i = css[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |j| i + 2 + j + 2);
            continue;
        }
        match b {
            b'"' | b'\'' => {
                let (s, end) = read_string(css, i);
                if import_pending && let Some(s) = s {
                    out.push((s, true));
                }
                import_pending = false;
                i = end;
            }
            b'@' if starts_with_ignore_case(&bytes[i + 1..], b"import")
                && !is_ident(bytes.get(i + 7).copied()) =>
            {
                import_pending = true;
                i += 7;
            }
            b';' | b'{' | b'}' => {
                import_pending = false;
                i += 1;
            }
            b'\\' => {
                // An escaped character is part of an identifier, never the start of a token.
                i += 2;
            }
            b'u' | b'U'
                if starts_with_ignore_case(&bytes[i..], b"url(")
                    && !is_ident(i.checked_sub(1).map(|p| bytes[p])) =>
            {
                let (url, end) = read_url(css, i + 4);
                if let Some(url) = url {
                    out.push((url, import_pending));
                }
                import_pending = false;
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

fn starts_with_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay[..needle.len()].eq_ignore_ascii_case(needle)
}

fn is_ident(b: Option<u8>) -> bool {
    b.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b >= 0x80)
}

/// Reads a CSS string starting at the quote at `start`: its value (`None` if a newline ends it
/// unterminated, a "bad-string") and the index after it.
fn read_string(css: &str, start: usize) -> (Option<String>, usize) {
    let quote = css.as_bytes()[start];
    let mut value = String::new();
    let mut chars = css[start + 1..].char_indices().peekable();
    while let Some((off, c)) = chars.next() {
        let at = start + 1 + off;
        match c {
            c if c as u32 == u32::from(quote) => return (Some(value), at + 1),
            '\n' => return (None, at),
            '\\' => match chars.peek().copied() {
                // An escaped newline continues the string.
                Some((_, '\n')) => {
                    chars.next();
                }
                Some(_) => value.push(read_escape(&mut chars)),
                None => {}
            },
            c => value.push(c),
        }
    }
    (Some(value), css.len())
}

/// Reads the text after `url(` at `start`: the URL (`None` for a bad URL) and the index after `)`.
fn read_url(css: &str, start: usize) -> (Option<String>, usize) {
    let bytes = css.as_bytes();
    let mut i = start;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
        let (value, end) = read_string(css, i);
        // `url("a.png" )`: the function may carry whitespace (and, in newer CSS, modifiers) before `)`.
        let close = css[end..].find(')').map_or(bytes.len(), |j| end + j + 1);
        return (value, close);
    }
    let mut value = String::new();
    let mut chars = css[i..].char_indices().peekable();
    let mut trailing_space = false;
    while let Some((off, c)) = chars.next() {
        let at = i + off;
        match c {
            ')' => return (Some(value), at + 1),
            c if c.is_ascii_whitespace() => trailing_space = true,
            // Characters that make an unquoted url() a bad-url: skip to its `)`.
            _ if trailing_space || matches!(c, '"' | '\'' | '(') => {
                let close = css[at..].find(')').map_or(bytes.len(), |j| at + j + 1);
                return (None, close);
            }
            '\\' => value.push(read_escape(&mut chars)),
            c => value.push(c),
        }
    }
    (Some(value), bytes.len())
}

/// Decodes the escape after a `\`: up to six hex digits (and one following whitespace), or the
/// character itself.
fn read_escape(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) -> char {
    let mut hex = String::new();
    while hex.len() < 6 {
        match chars.peek() {
            Some(&(_, c)) if c.is_ascii_hexdigit() => {
                hex.push(c);
                chars.next();
            }
            _ => break,
        }
    }
    if hex.is_empty() {
        return chars.next().map_or('\u{FFFD}', |(_, c)| c);
    }
    if let Some(&(_, c)) = chars.peek()
        && c.is_ascii_whitespace()
    {
        chars.next();
    }
    u32::from_str_radix(&hex, 16)
        .ok()
        .and_then(char::from_u32)
        .filter(|&c| c != '\0')
        .unwrap_or('\u{FFFD}')
}

/// A page read from a directory: `index.html` and every object reachable from it through HTML and
/// CSS references, each with its size on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageDir {
    root: PathBuf,
    objects: Vec<ObjectSpec>,
}

/// Reads a page directory: `dir/index.html` and, transitively, every same-origin object its HTML and
/// CSS reference (breadth-first, each path once). Absolute URLs count as another origin's (a
/// directory has no origin). Errors name the missing file and which document referenced it.
pub fn load_dir(dir: &Path) -> Result<PageDir, PageError> {
    let index = dir.join("index.html");
    if !index.is_file() {
        return Err(PageError::MissingIndex {
            dir: dir.to_path_buf(),
            expected: index,
        });
    }
    let mut objects = Vec::new();
    let mut seen: HashSet<String> = HashSet::from([INDEX_PATH.to_string()]);
    let mut queue: VecDeque<(String, ObjectKind, Option<String>)> =
        VecDeque::from([(INDEX_PATH.to_string(), ObjectKind::Html, None)]);
    while let Some((path, kind, referenced_by)) = queue.pop_front() {
        let Some(file) = file_for_path(dir, &path) else {
            return Err(PageError::OutsideDir {
                dir: dir.to_path_buf(),
                path,
            });
        };
        let meta = match std::fs::metadata(&file) {
            Ok(m) if m.is_file() => m,
            Ok(_) | Err(_) => {
                return Err(PageError::MissingObject {
                    dir: dir.to_path_buf(),
                    path,
                    referenced_by: referenced_by.unwrap_or_default(),
                    file,
                });
            }
        };
        if kind.is_parsed() {
            let body = std::fs::read(&file).map_err(|source| PageError::Io {
                path: file.clone(),
                source,
            })?;
            for r in discover_body(&path, kind, &body, None) {
                if seen.insert(r.path.clone()) {
                    queue.push_back((r.path, r.kind, Some(path.clone())));
                }
            }
        }
        let mut content_type = content_type_for_path(&path).to_string();
        // A `<link rel=stylesheet>` to `style.php` is still CSS to the browser.
        if content_type == "application/octet-stream" && kind == ObjectKind::Stylesheet {
            content_type = "text/css; charset=utf-8".to_string();
        }
        objects.push(ObjectSpec {
            path,
            size: meta.len(),
            content_type,
            kind,
            referenced_by,
        });
    }
    Ok(PageDir {
        root: dir.to_path_buf(),
        objects,
    })
}

/// The file under `root` a URL path names: query dropped, percent-decoded, `/` → `index.html`.
/// `None` if the decoded path would leave `root` or is not valid UTF-8.
pub fn file_for_path(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut file = root.to_path_buf();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let last = segments.len() - 1;
    for (i, seg) in segments.iter().enumerate() {
        let decoded = percent_decode(seg)?;
        if decoded.is_empty() {
            if i == last {
                file.push("index.html");
            }
            continue;
        }
        // An encoded `..` or `/` could otherwise walk out of the page directory.
        if decoded == "." || decoded == ".." || decoded.contains(['/', '\\', '\0']) {
            return None;
        }
        file.push(decoded);
    }
    Some(file)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(v) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl PageDir {
    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// All objects, `/index.html` first, then in breadth-first discovery order.
    pub fn objects(&self) -> &[ObjectSpec] {
        &self.objects
    }

    /// Bytes of all objects including index.html.
    pub fn total_bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }

    /// Reads the body of the object at a URL path.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, PageError> {
        let file = file_for_path(&self.root, path).ok_or_else(|| PageError::OutsideDir {
            dir: self.root.clone(),
            path: path.to_string(),
        })?;
        std::fs::read(&file).map_err(|source| PageError::Io { path: file, source })
    }
}
