//! HAR 1.2 (HTTP Archive, <http://www.softwareishard.com/blog/har-12-spec/>): the data model, a builder
//! from quiclab's per-object timings, and a validator of the format's required fields and types.
//!
//! Conventions of the builder, chosen so that Chrome DevTools and HAR viewers show the load as a
//! browser would have recorded it:
//! - one page (`page_1`); `pageTimings.onLoad` is the page load time (navigation start to the last
//!   object's arrival), `onContentLoad` is what the caller gives, else -1 ("does not apply");
//! - an entry's `startedDateTime` is when its request became wanted (the start of "blocked"), and
//!   `time` is the sum of its non-negative phases;
//! - `connect` *includes* `ssl` (HAR 1.2: "If this field is defined then the time is also included in
//!   the connect field"), so `connect = connect_ms + tls_ms` and `ssl = tls_ms`; a request on a
//!   reused connection has `connect = ssl = -1`; `dns` is always -1 (the lab uses IP addresses);
//! - `connection` is quiclab's connection id as a string, `httpVersion` is `http/1.1`, `h2` or `h3`
//!   (Chrome's spelling), `_resourceType` (a custom field Chrome writes and DevTools reads) the type.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::kind::ObjectKind;

/// Errors of writing a HAR file.
#[derive(Debug, thiserror::Error)]
pub enum HarError {
    /// Serialising failed (it cannot for the types here, but serde's API is fallible).
    #[error("HAR serialisation: {0}")]
    Json(#[from] serde_json::Error),
    /// Writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A HAR file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Har {
    /// The root object.
    pub log: Log,
}

/// `log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Log {
    /// Format version, "1.2".
    pub version: String,
    /// The program that wrote the file.
    pub creator: Creator,
    /// The browser, if a browser wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<Creator>,
    /// Pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<Vec<Page>>,
    /// Requests.
    pub entries: Vec<Entry>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `creator` and `browser`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Creator {
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `pages[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// Navigation start, ISO 8601.
    pub started_date_time: String,
    /// Unique id that entries' `pageref` refer to.
    pub id: String,
    /// Title.
    pub title: String,
    /// Page-level timings.
    pub page_timings: PageTimings,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `pageTimings`: milliseconds since the page's `startedDateTime`, -1 if not applicable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageTimings {
    /// DOMContentLoaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_content_load: Option<f64>,
    /// The load event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_load: Option<f64>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `entries[]`: one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The page's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pageref: Option<String>,
    /// Request start, ISO 8601.
    pub started_date_time: String,
    /// Total time in ms: the sum of the non-negative timings (ssl excluded, it is inside connect).
    pub time: f64,
    /// The request.
    pub request: Request,
    /// The response.
    pub response: Response,
    /// Cache use (always empty here: the lab loads with a cold cache).
    pub cache: Cache,
    /// Phases in ms.
    pub timings: Timings,
    /// The server's IP address.
    #[serde(
        rename = "serverIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_ip_address: Option<String>,
    /// The connection's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Chrome's custom resource type (`document`, `stylesheet`, `image`…).
    #[serde(
        rename = "_resourceType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_type: Option<String>,
}

/// `request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// `GET`.
    pub method: String,
    /// Absolute URL.
    pub url: String,
    /// `http/1.1`, `h2`, `h3`.
    pub http_version: String,
    /// Cookies.
    pub cookies: Vec<Cookie>,
    /// Headers.
    pub headers: Vec<NameValue>,
    /// The URL's query parameters.
    pub query_string: Vec<NameValue>,
    /// Posted data (never, for page loads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_data: Option<Value>,
    /// Header bytes, -1 if unknown.
    pub headers_size: i64,
    /// Body bytes, -1 if unknown.
    pub body_size: i64,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// Status code.
    pub status: i64,
    /// Reason phrase.
    pub status_text: String,
    /// `http/1.1`, `h2`, `h3`.
    pub http_version: String,
    /// Cookies.
    pub cookies: Vec<Cookie>,
    /// Headers.
    pub headers: Vec<NameValue>,
    /// The body.
    pub content: Content,
    /// `Location`, or "".
    #[serde(rename = "redirectURL")]
    pub redirect_url: String,
    /// Header bytes, -1 if unknown.
    pub headers_size: i64,
    /// Body bytes received, -1 if unknown.
    pub body_size: i64,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// Decoded body bytes.
    pub size: i64,
    /// Bytes saved by compression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<i64>,
    /// MIME type.
    pub mime_type: String,
    /// The body text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `base64` if `text` is encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `cache`: `{}` when nothing was cached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cache {
    /// The cache entry before the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_request: Option<Value>,
    /// The cache entry after the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_request: Option<Value>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

fn not_applicable() -> f64 {
    -1.0
}

/// `timings`, in ms; -1 where a phase does not apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Waiting for a connection (queueing).
    #[serde(default = "not_applicable")]
    pub blocked: f64,
    /// DNS resolution.
    #[serde(default = "not_applicable")]
    pub dns: f64,
    /// TCP (and TLS) or QUIC connection set-up; includes `ssl`.
    #[serde(default = "not_applicable")]
    pub connect: f64,
    /// Sending the request.
    pub send: f64,
    /// Waiting for the first byte of the response.
    pub wait: f64,
    /// Receiving the response.
    pub receive: f64,
    /// TLS handshake (already counted in `connect`).
    #[serde(default = "not_applicable")]
    pub ssl: f64,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A cookie.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
    /// Path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Expiry, ISO 8601.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// HttpOnly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_only: Option<bool>,
    /// Secure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure: Option<bool>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A header or query parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NameValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// What the loader measured for one object (a result record, so it lives in quiclab-model).
pub use quiclab_model::page::ObjectTiming;

/// The page load time of a set of timings: the latest end, ms (0 for none).
pub fn page_load_ms(objects: &[ObjectTiming]) -> f64 {
    objects.iter().map(ObjectTiming::end_ms).fold(0.0, f64::max)
}

/// What the builder needs besides the per-object timings.
#[derive(Debug, Clone, PartialEq)]
pub struct HarPage {
    /// The page's title (e.g. `carlucci-small over h3`).
    pub title: String,
    /// The origin the page was loaded from, e.g. `https://100.64.0.2`; entry URLs are origin + path.
    pub origin: String,
    /// Wall-clock time of navigation start.
    pub navigation_start: SystemTime,
    /// The page load time in ms; `None` computes it from the timings ([`page_load_ms`]).
    pub page_load_ms: Option<f64>,
    /// DOMContentLoaded in ms, if the loader models it (for pages without scripts or style sheets,
    /// the end of index.html); `None` writes -1 ("does not apply").
    pub content_load_ms: Option<f64>,
    /// The server's IP address, for `serverIPAddress`.
    pub server_ip: Option<String>,
    /// A note for `log.comment` (e.g. the link profile).
    pub comment: Option<String>,
}

/// Rounds to the microsecond: HAR times are ms and sub-µs digits are noise.
fn round_ms(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Builds a HAR 1.2 log of one page load. Entries are sorted by start time (then input order).
pub fn build_har(page: &HarPage, objects: &[ObjectTiming]) -> Har {
    let page_id = "page_1".to_string();
    let origin = page.origin.trim_end_matches('/');
    let mut sorted: Vec<&ObjectTiming> = objects.iter().collect();
    sorted.sort_by(|a, b| a.started_ms.total_cmp(&b.started_ms));

    let entries = sorted
        .into_iter()
        .map(|o| {
            let phase = |v: f64| if v > 0.0 { round_ms(v) } else { 0.0 };
            let handshake = o.connect_ms.max(0.0) + o.tls_ms.max(0.0);
            let timings = Timings {
                blocked: if o.blocked_ms >= 0.0 {
                    round_ms(o.blocked_ms)
                } else {
                    -1.0
                },
                dns: -1.0,
                connect: if handshake > 0.0 {
                    round_ms(handshake)
                } else {
                    -1.0
                },
                send: phase(o.send_ms),
                wait: phase(o.wait_ms),
                receive: phase(o.receive_ms),
                ssl: if o.tls_ms > 0.0 {
                    round_ms(o.tls_ms)
                } else {
                    -1.0
                },
                comment: None,
            };
            let time = round_ms(
                [
                    timings.blocked,
                    timings.dns,
                    timings.connect,
                    timings.send,
                    timings.wait,
                    timings.receive,
                ]
                .iter()
                .filter(|v| **v >= 0.0)
                .sum(),
            );
            let kind = match ObjectKind::from_mime(&o.mime) {
                ObjectKind::Other => ObjectKind::from_path(&o.path),
                k => k,
            };
            let bytes = i64::try_from(o.bytes).unwrap_or(i64::MAX);
            Entry {
                pageref: Some(page_id.clone()),
                started_date_time: iso8601(offset(page.navigation_start, o.started_ms)),
                time,
                request: Request {
                    method: "GET".to_string(),
                    url: format!("{origin}{}", o.path),
                    http_version: o.protocol.clone(),
                    cookies: Vec::new(),
                    headers: Vec::new(),
                    query_string: query_string(&o.path),
                    post_data: None,
                    headers_size: -1,
                    body_size: 0,
                    comment: None,
                },
                response: Response {
                    status: i64::from(o.status),
                    status_text: status_text(o.status).to_string(),
                    http_version: o.protocol.clone(),
                    cookies: Vec::new(),
                    headers: Vec::new(),
                    content: Content {
                        size: bytes,
                        compression: None,
                        mime_type: o.mime.clone(),
                        text: None,
                        encoding: None,
                        comment: None,
                    },
                    redirect_url: String::new(),
                    headers_size: -1,
                    body_size: bytes,
                    comment: None,
                },
                cache: Cache::default(),
                timings,
                server_ip_address: page.server_ip.clone(),
                connection: Some(o.connection.to_string()),
                comment: None,
                resource_type: Some(kind.devtools_type().to_string()),
            }
        })
        .collect();

    Har {
        log: Log {
            version: "1.2".to_string(),
            creator: Creator {
                name: "quiclab".to_string(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                comment: None,
            },
            browser: None,
            pages: Some(vec![Page {
                started_date_time: iso8601(page.navigation_start),
                id: page_id,
                title: page.title.clone(),
                page_timings: PageTimings {
                    on_content_load: Some(page.content_load_ms.map_or(-1.0, round_ms)),
                    on_load: Some(round_ms(
                        page.page_load_ms.unwrap_or_else(|| page_load_ms(objects)),
                    )),
                    comment: None,
                },
                comment: None,
            }]),
            entries,
            comment: page.comment.clone(),
        },
    }
}

impl Har {
    /// Pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, HarError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Parses a HAR file's text (fields of other tools that the model lacks are ignored).
    pub fn from_json(text: &str) -> Result<Har, HarError> {
        Ok(serde_json::from_str(text)?)
    }

    /// Writes the pretty-printed JSON to a file.
    pub fn write_to(&self, path: &Path) -> Result<(), HarError> {
        let json = self.to_json()?;
        std::fs::write(path, json).map_err(|source| HarError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// `start` shifted by `ms`; a non-finite or out-of-range offset leaves it unchanged (never panics).
fn offset(start: SystemTime, ms: f64) -> SystemTime {
    let Ok(d) = Duration::try_from_secs_f64(ms.abs() / 1000.0) else {
        return start;
    };
    if ms >= 0.0 {
        start.checked_add(d).unwrap_or(start)
    } else {
        start.checked_sub(d).unwrap_or(start)
    }
}

/// `2024-05-01T12:00:00.123Z`: UTC, millisecond precision (what Chrome writes and JavaScript's
/// `Date` parses).
pub fn iso8601(t: SystemTime) -> String {
    let ms: i128 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    };
    let days = ms.div_euclid(86_400_000);
    let ms_of_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, frac) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{frac:03}Z")
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i128) -> (i128, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn query_string(path: &str) -> Vec<NameValue> {
    let Some((_, query)) = path.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            NameValue {
                name: name.to_string(),
                value: value.to_string(),
                comment: None,
            }
        })
        .collect()
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// Checks a HAR file's text against HAR 1.2: required fields present with the right JSON types,
/// ISO 8601 dates, `pageref`s naming pages, timings that are -1 or non-negative (`send`, `wait`,
/// `receive` never -1), `ssl ≤ connect`, and `time` = the sum of the non-negative phases
/// (blocked + dns + connect + send + wait + receive; ±0.01 ms). Every problem is reported, each as
/// `json.path: what is wrong`.
pub fn validate(json: &str) -> Result<(), Vec<String>> {
    let root: Value = serde_json::from_str(json).map_err(|e| vec![format!("not JSON: {e}")])?;
    let mut v = Validator::default();
    v.root(&root);
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

/// Tolerance of the `time` = sum-of-phases check, ms: writers round each phase.
const TIME_TOLERANCE_MS: f64 = 0.01;

#[derive(Default)]
struct Validator {
    errors: Vec<String>,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Validator {
    fn err(&mut self, at: &str, msg: impl std::fmt::Display) {
        self.errors.push(format!("{at}: {msg}"));
    }

    /// The field's value if present; an error if it is required and missing.
    fn field<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
        ty: &str,
    ) -> Option<&'a Value> {
        match obj.get(key) {
            Some(v) => Some(v),
            None => {
                if required {
                    self.err(&format!("{at}.{key}"), format!("missing (required {ty})"));
                }
                None
            }
        }
    }

    fn object<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
    ) -> Option<&'a Map<String, Value>> {
        let v = self.field(obj, at, key, required, "object")?;
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.err(
                    &format!("{at}.{key}"),
                    format!("expected object, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn array<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
    ) -> Option<&'a Vec<Value>> {
        let v = self.field(obj, at, key, required, "array")?;
        match v {
            Value::Array(a) => Some(a),
            other => {
                self.err(
                    &format!("{at}.{key}"),
                    format!("expected array, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn string<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
    ) -> Option<&'a str> {
        let v = self.field(obj, at, key, required, "string")?;
        match v {
            Value::String(s) => Some(s),
            other => {
                self.err(
                    &format!("{at}.{key}"),
                    format!("expected string, found {}", type_name(other)),
                );
                None
            }
        }
    }

    fn number(
        &mut self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
    ) -> Option<f64> {
        let v = self.field(obj, at, key, required, "number")?;
        match v.as_f64() {
            Some(n) => Some(n),
            None => {
                self.err(
                    &format!("{at}.{key}"),
                    format!("expected number, found {}", type_name(v)),
                );
                None
            }
        }
    }

    fn integer(
        &mut self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
        required: bool,
        min: i64,
    ) -> Option<i64> {
        let n = self.number(obj, at, key, required)?;
        if n.fract() != 0.0 {
            self.err(
                &format!("{at}.{key}"),
                format!("expected an integer, found {n}"),
            );
            return None;
        }
        let n = n as i64;
        if n < min {
            self.err(
                &format!("{at}.{key}"),
                format!("must be ≥ {min}, found {n}"),
            );
        }
        Some(n)
    }

    fn boolean(&mut self, obj: &Map<String, Value>, at: &str, key: &str) {
        if let Some(v) = obj.get(key)
            && !v.is_boolean()
        {
            self.err(
                &format!("{at}.{key}"),
                format!("expected boolean, found {}", type_name(v)),
            );
        }
    }

    fn date(&mut self, obj: &Map<String, Value>, at: &str, key: &str, required: bool) {
        if let Some(s) = self.string(obj, at, key, required)
            && !is_iso8601(s)
        {
            self.err(
                &format!("{at}.{key}"),
                format!("`{s}` is not an ISO 8601 date-time (e.g. 2009-07-24T19:20:30.45+01:00)"),
            );
        }
    }

    fn root(&mut self, root: &Value) {
        let Value::Object(root) = root else {
            self.err("$", format!("expected object, found {}", type_name(root)));
            return;
        };
        let Some(log) = self.object(root, "$", "log", true) else {
            return;
        };
        let at = "log";
        if let Some(version) = self.string(log, at, "version", true)
            && version != "1.2"
        {
            self.err(
                "log.version",
                format!("expected \"1.2\", found \"{version}\""),
            );
        }
        if let Some(creator) = self.object(log, at, "creator", true) {
            self.creator(creator, "log.creator");
        }
        if let Some(browser) = self.object(log, at, "browser", false) {
            self.creator(browser, "log.browser");
        }
        self.string(log, at, "comment", false);
        let mut page_ids: Vec<String> = Vec::new();
        if let Some(pages) = self.array(log, at, "pages", false) {
            for (i, page) in pages.iter().enumerate() {
                let at = format!("log.pages[{i}]");
                if let Some(id) = self.page(page, &at) {
                    if page_ids.contains(&id) {
                        self.err(&format!("{at}.id"), format!("duplicate page id `{id}`"));
                    }
                    page_ids.push(id);
                }
            }
        }
        let pages_present = log.get("pages").is_some();
        if let Some(entries) = self.array(log, at, "entries", true) {
            for (i, entry) in entries.iter().enumerate() {
                self.entry(
                    entry,
                    &format!("log.entries[{i}]"),
                    pages_present.then_some(&page_ids[..]),
                );
            }
        }
    }

    fn creator(&mut self, obj: &Map<String, Value>, at: &str) {
        self.string(obj, at, "name", true);
        self.string(obj, at, "version", true);
        self.string(obj, at, "comment", false);
    }

    fn page(&mut self, page: &Value, at: &str) -> Option<String> {
        let Value::Object(page) = page else {
            self.err(at, format!("expected object, found {}", type_name(page)));
            return None;
        };
        self.date(page, at, "startedDateTime", true);
        let id = self.string(page, at, "id", true).map(str::to_string);
        self.string(page, at, "title", true);
        if let Some(pt) = self.object(page, at, "pageTimings", true) {
            let at = format!("{at}.pageTimings");
            for key in ["onContentLoad", "onLoad"] {
                if let Some(n) = self.number(pt, &at, key, false) {
                    self.optional_phase(&at, key, n);
                }
            }
        }
        id
    }

    fn optional_phase(&mut self, at: &str, key: &str, n: f64) {
        if n < 0.0 && n != -1.0 {
            self.err(
                &format!("{at}.{key}"),
                format!("must be -1 (not applicable) or ≥ 0, found {n}"),
            );
        }
    }

    fn entry(&mut self, entry: &Value, at: &str, page_ids: Option<&[String]>) {
        let Value::Object(entry) = entry else {
            self.err(at, format!("expected object, found {}", type_name(entry)));
            return;
        };
        if let Some(pageref) = self.string(entry, at, "pageref", false)
            && let Some(ids) = page_ids
            && !ids.iter().any(|id| id == pageref)
        {
            self.err(
                &format!("{at}.pageref"),
                format!("`{pageref}` names no page in log.pages"),
            );
        }
        self.date(entry, at, "startedDateTime", true);
        let time = self.number(entry, at, "time", true);
        if let Some(t) = time
            && t < 0.0
        {
            self.err(&format!("{at}.time"), format!("must be ≥ 0, found {t}"));
        }
        if let Some(req) = self.object(entry, at, "request", true) {
            self.request(req, &format!("{at}.request"));
        }
        if let Some(resp) = self.object(entry, at, "response", true) {
            self.response(resp, &format!("{at}.response"));
        }
        if let Some(cache) = self.object(entry, at, "cache", true) {
            let at = format!("{at}.cache");
            for key in ["beforeRequest", "afterRequest"] {
                match cache.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(c)) => {
                        let at = format!("{at}.{key}");
                        self.date(c, &at, "expires", false);
                        self.date(c, &at, "lastAccess", true);
                        self.string(c, &at, "eTag", true);
                        self.integer(c, &at, "hitCount", true, 0);
                    }
                    Some(other) => self.err(
                        &format!("{at}.{key}"),
                        format!("expected object or null, found {}", type_name(other)),
                    ),
                }
            }
        }
        if let Some(timings) = self.object(entry, at, "timings", true) {
            self.timings(timings, &format!("{at}.timings"), time);
        }
        self.string(entry, at, "serverIPAddress", false);
        self.string(entry, at, "connection", false);
        self.string(entry, at, "comment", false);
    }

    fn name_values(&mut self, obj: &Map<String, Value>, at: &str, key: &str, cookies: bool) {
        let Some(items) = self.array(obj, at, key, true) else {
            return;
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("{at}.{key}[{i}]");
            let Value::Object(item) = item else {
                self.err(&at, format!("expected object, found {}", type_name(item)));
                continue;
            };
            self.string(item, &at, "name", true);
            self.string(item, &at, "value", true);
            if cookies {
                self.string(item, &at, "path", false);
                self.string(item, &at, "domain", false);
                self.date(item, &at, "expires", false);
                self.boolean(item, &at, "httpOnly");
                self.boolean(item, &at, "secure");
            }
        }
    }

    fn request(&mut self, req: &Map<String, Value>, at: &str) {
        self.string(req, at, "method", true);
        if let Some(url) = self.string(req, at, "url", true)
            && !url.contains("://")
        {
            self.err(
                &format!("{at}.url"),
                format!("`{url}` is not an absolute URL"),
            );
        }
        self.string(req, at, "httpVersion", true);
        self.name_values(req, at, "cookies", true);
        self.name_values(req, at, "headers", false);
        self.name_values(req, at, "queryString", false);
        if let Some(post) = self.object(req, at, "postData", false) {
            let at = format!("{at}.postData");
            self.string(post, &at, "mimeType", true);
            self.string(post, &at, "text", false);
            self.array(post, &at, "params", false);
        }
        self.integer(req, at, "headersSize", true, -1);
        self.integer(req, at, "bodySize", true, -1);
    }

    fn response(&mut self, resp: &Map<String, Value>, at: &str) {
        self.integer(resp, at, "status", true, 0);
        self.string(resp, at, "statusText", true);
        self.string(resp, at, "httpVersion", true);
        self.name_values(resp, at, "cookies", true);
        self.name_values(resp, at, "headers", false);
        if let Some(content) = self.object(resp, at, "content", true) {
            let at = format!("{at}.content");
            self.integer(content, &at, "size", true, 0);
            self.integer(content, &at, "compression", false, i64::MIN);
            self.string(content, &at, "mimeType", true);
            self.string(content, &at, "text", false);
            self.string(content, &at, "encoding", false);
        }
        self.string(resp, at, "redirectURL", true);
        self.integer(resp, at, "headersSize", true, -1);
        self.integer(resp, at, "bodySize", true, -1);
    }

    fn timings(&mut self, t: &Map<String, Value>, at: &str, time: Option<f64>) {
        let mut sum = 0.0;
        let mut complete = true;
        let mut connect = None;
        for key in ["blocked", "dns", "connect"] {
            if let Some(n) = self.number(t, at, key, false) {
                self.optional_phase(at, key, n);
                if n > 0.0 {
                    sum += n;
                }
                if key == "connect" {
                    connect = Some(n);
                }
            }
        }
        for key in ["send", "wait", "receive"] {
            match self.number(t, at, key, true) {
                Some(n) if n < 0.0 => {
                    self.err(
                        &format!("{at}.{key}"),
                        format!("must be ≥ 0 (-1 is not allowed for {key}), found {n}"),
                    );
                    complete = false;
                }
                Some(n) => sum += n,
                None => complete = false,
            }
        }
        if let Some(ssl) = self.number(t, at, "ssl", false) {
            self.optional_phase(at, "ssl", ssl);
            if ssl > 0.0 && connect.is_none_or(|c| c < ssl) {
                self.err(
                    &format!("{at}.ssl"),
                    format!(
                        "ssl {ssl} must be included in connect ({}), so connect ≥ ssl",
                        connect.map_or("absent".to_string(), |c| c.to_string())
                    ),
                );
            }
        }
        if let (true, Some(time)) = (complete, time)
            && (time - sum).abs() > TIME_TOLERANCE_MS
        {
            self.err(
                at,
                format!("entry time {time} ≠ {sum}, the sum of blocked+dns+connect+send+wait+receive (phases of -1 excluded)"),
            );
        }
    }
}

/// `YYYY-MM-DDThh:mm[:ss[.f+]](Z|±hh[:]mm)`, with field ranges checked.
fn is_iso8601(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<u32> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let (Some(_year), Some(month), Some(day)) = (num(0, 4), num(5, 2), num(8, 2)) else {
        return false;
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !matches!(b.get(10), Some(b'T' | b't'))
    {
        return false;
    }
    let (Some(hour), Some(minute)) = (num(11, 2), num(14, 2)) else {
        return false;
    };
    if b.get(13) != Some(&b':')
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
    {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        match num(i + 1, 2) {
            Some(sec) if sec <= 60 => i += 3,
            _ => return false,
        }
        if matches!(b.get(i), Some(b'.' | b',')) {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return false;
            }
            i += 1 + digits;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            let rest = &s[i + 1..];
            let ok_hm = |h: &str, m: &str| {
                h.len() == 2
                    && m.len() == 2
                    && h.parse::<u32>().is_ok_and(|h| h <= 23)
                    && m.parse::<u32>().is_ok_and(|m| m <= 59)
                    && h.bytes().chain(m.bytes()).all(|c| c.is_ascii_digit())
            };
            match rest.len() {
                5 => rest.as_bytes()[2] == b':' && ok_hm(&rest[..2], &rest[3..]),
                4 => ok_hm(&rest[..2], &rest[2..]),
                2 => ok_hm(rest, "00"),
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_714_564_800_123);
        assert_eq!(iso8601(t), "2024-05-01T12:00:00.123Z");
        // 2000-02-29 (a leap day of a century leap year).
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso8601(t), "2000-02-29T00:00:00.000Z");
        assert!(is_iso8601("2009-07-24T19:20:30.45+01:00"));
        assert!(is_iso8601("2024-05-01T12:00:00.123Z"));
        assert!(is_iso8601("2024-05-01T12:00Z"));
        assert!(!is_iso8601("2024-13-01T12:00:00Z"));
        assert!(!is_iso8601("2024-05-01 12:00:00Z"));
        assert!(!is_iso8601("2024-05-01T12:00:00"));
        assert!(!is_iso8601("yesterday"));
    }
}
