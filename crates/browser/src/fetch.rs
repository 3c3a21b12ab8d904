//! One object downloaded by Chromium's `fetch()` (a bulk download with Chromium as the client):
//! a blank tab runs `fetch(url)`, reads the body as it arrives and checks every byte against the
//! `/bytes/N` pattern (byte i = i mod 256); the connection's timings come from the DevTools
//! Network domain, which reports them whatever the page's origin (Resource Timing would hide them
//! from a cross-origin page). The blank tab has no origin of its own, so the browser runs with
//! `--disable-web-security` (no CORS: the servers send no CORS headers); nothing else changes.
//! The tab opens no connection before the fetch, so the fetch's connection is cold.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::{BrowserOptions, cdp};

/// What one fetch measured. Times are milliseconds from the `fetch()` call (the connection is
/// opened by it: nothing came before).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BrowserFetch {
    pub browser_version: String,
    pub status: u16,
    pub bytes: u64,
    /// Every byte matched the pattern and `bytes` is the size asked for.
    pub verified: bool,
    /// The response's headers (the fetch's promise resolved).
    pub headers_ms: f64,
    /// The first body bytes reached the page (None: an empty body).
    pub first_byte_ms: Option<f64>,
    /// The last body bytes reached the page.
    pub total_ms: f64,
    /// From DevTools' timing of the request: TCP's connect (None over QUIC, or when Chromium
    /// reports none), and the connection's set-up including TLS or QUIC's handshake.
    pub connect_ms: Option<f64>,
    pub handshake_ms: Option<f64>,
    /// DevTools' `response.protocol` (`h3`, `h2`, `http/1.1`).
    pub protocol: Option<String>,
    /// DevTools' `securityDetails.protocol` (`TLS 1.3`, `QUIC`).
    pub security: Option<String>,
    /// From Chromium's start to its end.
    pub wall_ms: f64,
}

/// The page side: fetch, read, verify; one JSON object back.
fn fetch_js(url: &str, size: u64) -> String {
    let url = serde_json::Value::from(url);
    format!(
        r#"(async () => {{
  const url = {url};
  const size = {size};
  const t0 = performance.now();
  const r = await fetch(url, {{ cache: 'no-store' }});
  const headers = performance.now() - t0;
  const reader = r.body.getReader();
  let n = 0, ok = true, first = null;
  for (;;) {{
    const {{ done, value }} = await reader.read();
    if (done) break;
    if (first === null) first = performance.now() - t0;
    if (ok) {{
      for (let i = 0; i < value.length; i++) {{
        if (value[i] !== ((n + i) % 256)) {{ ok = false; break; }}
      }}
    }}
    n += value.length;
  }}
  const total = performance.now() - t0;
  return {{ url: r.url, status: r.status, bytes: n, verified: ok && n === size, headers_ms: headers,
    first_byte_ms: first, total_ms: total }};
}})()"#
    )
}

#[derive(Deserialize)]
struct PageSide {
    /// The response's URL as Chromium normalised it (the default port dropped): DevTools names
    /// the request by it.
    url: String,
    status: u16,
    bytes: u64,
    verified: bool,
    headers_ms: f64,
    first_byte_ms: Option<f64>,
    total_ms: f64,
}

/// Downloads `url` (`size` bytes of the pattern) in Chromium started through `launcher` (see
/// [`crate::load_with`]). `opts.extra_args` must map the URL's host to the server
/// (`--host-resolver-rules`); `--disable-web-security` is added here.
pub fn fetch_with(
    opts: &BrowserOptions,
    url: &str,
    size: u64,
    launcher: impl FnOnce(&[String]) -> Command,
) -> Result<BrowserFetch> {
    let mut opts = opts.clone();
    opts.extra_args.push("--disable-web-security".into());
    let (fetch, wall_ms, _) = crate::run_browser(&opts, url, launcher, |session, deadline| {
        let tab = crate::open_tab(session, deadline)?;
        fetch_in(session, &tab, url, size, deadline)
    })?;
    Ok(BrowserFetch { wall_ms, ..fetch })
}

fn fetch_in(
    session: &mut cdp::Session,
    tab: &crate::Tab,
    url: &str,
    size: u64,
    deadline: Instant,
) -> Result<BrowserFetch> {
    let sid = Some(tab.sid.as_str());
    // Response bodies are not kept for DevTools (a large download would be held twice).
    session.call(
        sid,
        "Network.enable",
        serde_json::json!({ "maxTotalBufferSize": 0, "maxResourceBufferSize": 0 }),
        deadline,
    )?;
    let value = session.call(
        sid,
        "Runtime.evaluate",
        serde_json::json!({
            "expression": fetch_js(url, size),
            "awaitPromise": true,
            "returnByValue": true,
        }),
        deadline,
    )?;
    if let Some(ex) = value.get("exceptionDetails") {
        let text = ex["exception"]["description"]
            .as_str()
            .or(ex["text"].as_str())
            .unwrap_or("an exception");
        bail!("the fetch of {url} failed: {text}");
    }
    let page: PageSide = serde_json::from_value(value["result"]["value"].clone())
        .context("decoding the fetch's result")?;
    let response = session
        .wait_event(deadline, |ev| {
            ev.session_id.as_deref() == sid
                && ev.method == "Network.responseReceived"
                && ev.params["response"]["url"] == page.url.as_str()
        })
        .with_context(|| format!("waiting for DevTools' record of {url}"))?;
    Ok(summarise(
        page,
        &response.params["response"],
        &tab.browser_version,
    ))
}

/// DevTools' timing of a response: milliseconds from its `requestTime`; -1 where a phase did not
/// happen (no new connection, no TLS over TCP).
fn summarise(page: PageSide, response: &serde_json::Value, version: &str) -> BrowserFetch {
    let t = &response["timing"];
    let at = |k: &str| t[k].as_f64().filter(|v| *v >= 0.0);
    let (connect_ms, handshake_ms) = match (at("connectStart"), at("connectEnd")) {
        (Some(start), Some(end)) => {
            // Over TCP TLS starts once connected; over QUIC there is no separate connect.
            let tcp = at("sslStart").filter(|s| *s > start).map(|s| s - start);
            (tcp, Some(end - start))
        }
        _ => (None, None),
    };
    BrowserFetch {
        browser_version: version.to_string(),
        status: page.status,
        bytes: page.bytes,
        verified: page.verified,
        headers_ms: page.headers_ms,
        first_byte_ms: page.first_byte_ms,
        total_ms: page.total_ms,
        connect_ms,
        handshake_ms,
        protocol: response["protocol"].as_str().map(str::to_string),
        security: response["securityDetails"]["protocol"]
            .as_str()
            .map(str::to_string),
        wall_ms: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> PageSide {
        PageSide {
            url: "https://quiclab.test/bytes/1000".into(),
            status: 200,
            bytes: 1000,
            verified: true,
            headers_ms: 90.0,
            first_byte_ms: Some(91.0),
            total_ms: 120.0,
        }
    }

    #[test]
    fn tcp_connect_and_handshake_come_from_devtools_timing() {
        let r = serde_json::json!({
            "protocol": "h2",
            "securityDetails": { "protocol": "TLS 1.3" },
            "timing": { "connectStart": 1.0, "sslStart": 21.5, "sslEnd": 41.0, "connectEnd": 41.0 }
        });
        let f = summarise(page(), &r, "Chrome/156");
        assert_eq!(f.connect_ms, Some(20.5));
        assert_eq!(f.handshake_ms, Some(40.0));
        assert_eq!(f.protocol.as_deref(), Some("h2"));
        assert_eq!(f.security.as_deref(), Some("TLS 1.3"));
    }

    #[test]
    fn quic_has_no_connect_and_a_reused_connection_no_handshake() {
        let quic = serde_json::json!({
            "protocol": "h3",
            "timing": { "connectStart": 0.5, "sslStart": 0.5, "sslEnd": 20.5, "connectEnd": 20.5 }
        });
        let f = summarise(page(), &quic, "v");
        assert_eq!((f.connect_ms, f.handshake_ms), (None, Some(20.0)));
        let reused = serde_json::json!({
            "protocol": "h3",
            "timing": { "connectStart": -1.0, "connectEnd": -1.0 }
        });
        let f = summarise(page(), &reused, "v");
        assert_eq!((f.connect_ms, f.handshake_ms), (None, None));
    }

    #[test]
    fn the_page_side_checks_every_byte_and_the_size() {
        let js = fetch_js("https://quiclab.test/bytes/5", 5);
        assert!(
            js.contains("const url = \"https://quiclab.test/bytes/5\";"),
            "{js}"
        );
        assert!(
            js.contains("(n + i) % 256") && js.contains("n === size"),
            "{js}"
        );
    }
}
