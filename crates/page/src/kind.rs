//! What an object is, judged from its path or declared role. The scheduler needs it for two things:
//! which responses to parse for further references (HTML and CSS), and request priority.

use serde::{Deserialize, Serialize};

/// The role of one object of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// An HTML document (the page itself, or a document it embeds).
    Html,
    /// A CSS style sheet (`<link rel=stylesheet>`, `@import`).
    Stylesheet,
    /// A script (`<script src>`).
    Script,
    /// An image (`<img src>`, CSS `url()` of an image).
    Image,
    /// A web font (CSS `url()` in `@font-face`).
    Font,
    /// Anything else.
    Other,
}

impl ObjectKind {
    /// The kind a path's extension suggests. A path ending in `/` is a directory index, i.e. HTML.
    pub fn from_path(path: &str) -> ObjectKind {
        match extension(path).as_deref() {
            None if strip_query(path).ends_with('/') => ObjectKind::Html,
            Some("html" | "htm" | "xhtml") => ObjectKind::Html,
            Some("css") => ObjectKind::Stylesheet,
            Some("js" | "mjs") => ObjectKind::Script,
            Some("jpg" | "jpeg" | "png" | "gif" | "webp" | "avif" | "svg" | "ico" | "bmp") => {
                ObjectKind::Image
            }
            Some("woff" | "woff2" | "ttf" | "otf" | "eot") => ObjectKind::Font,
            _ => ObjectKind::Other,
        }
    }

    /// Whether a response of this kind is parsed for references to further objects.
    pub fn is_parsed(self) -> bool {
        matches!(self, ObjectKind::Html | ObjectKind::Stylesheet)
    }

    /// The value of Chrome's `_resourceType` HAR field, which DevTools uses for its "Type" column.
    pub fn devtools_type(self) -> &'static str {
        match self {
            ObjectKind::Html => "document",
            ObjectKind::Stylesheet => "stylesheet",
            ObjectKind::Script => "script",
            ObjectKind::Image => "image",
            ObjectKind::Font => "font",
            ObjectKind::Other => "other",
        }
    }

    /// The kind a MIME type names (parameters such as `; charset=utf-8` are ignored).
    pub fn from_mime(mime: &str) -> ObjectKind {
        let essence = mime
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "text/html" | "application/xhtml+xml" => ObjectKind::Html,
            "text/css" => ObjectKind::Stylesheet,
            "text/javascript" | "application/javascript" => ObjectKind::Script,
            e if e.starts_with("image/") => ObjectKind::Image,
            e if e.starts_with("font/") => ObjectKind::Font,
            _ => ObjectKind::Other,
        }
    }
}

/// The Content-Type a server should send for a path, from its extension.
pub fn content_type_for_path(path: &str) -> &'static str {
    match extension(path).as_deref() {
        None if strip_query(path).ends_with('/') => "text/html; charset=utf-8",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("xhtml") => "application/xhtml+xml",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("avif") => "image/avif",
        Some("svg") => "image/svg+xml",
        Some("ico") => "image/x-icon",
        Some("bmp") => "image/bmp",
        Some("woff") => "font/woff",
        Some("woff2") => "font/woff2",
        Some("ttf") => "font/ttf",
        Some("otf") => "font/otf",
        _ => "application/octet-stream",
    }
}

fn strip_query(path: &str) -> &str {
    let end = path.find(['?', '#']).unwrap_or(path.len());
    &path[..end]
}

/// The lower-cased extension of a URL path's last segment, ignoring query and fragment.
fn extension(path: &str) -> Option<String> {
    let path = strip_query(path);
    let last = path.rsplit('/').next().unwrap_or(path);
    let (stem, ext) = last.rsplit_once('.')?;
    if stem.is_empty() || ext.is_empty() {
        return None;
    }
    Some(ext.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_paths() {
        assert_eq!(ObjectKind::from_path("/index.html"), ObjectKind::Html);
        assert_eq!(ObjectKind::from_path("/"), ObjectKind::Html);
        assert_eq!(ObjectKind::from_path("/a/"), ObjectKind::Html);
        assert_eq!(
            ObjectKind::from_path("/css/site.CSS?v=2"),
            ObjectKind::Stylesheet
        );
        assert_eq!(ObjectKind::from_path("/app.js"), ObjectKind::Script);
        assert_eq!(ObjectKind::from_path("/img/a.JPG"), ObjectKind::Image);
        assert_eq!(ObjectKind::from_path("/f/x.woff2"), ObjectKind::Font);
        assert_eq!(ObjectKind::from_path("/data"), ObjectKind::Other);
        assert_eq!(ObjectKind::from_path("/.hidden"), ObjectKind::Other);
        assert_eq!(content_type_for_path("/img/a.jpeg"), "image/jpeg");
        assert_eq!(content_type_for_path("/x.bin"), "application/octet-stream");
        assert_eq!(
            ObjectKind::from_mime("text/css; charset=utf-8"),
            ObjectKind::Stylesheet
        );
        assert_eq!(ObjectKind::from_mime("image/png"), ObjectKind::Image);
    }
}
