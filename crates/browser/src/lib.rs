//! Headless Chromium as quiclab's real-browser reference.
//!
//! [`load`] starts Debian's Chromium (`/usr/lib/chromium/chromium`) with a fresh profile, forces the
//! asked protocol (h1, h2 or h3) onto the lab's origin, loads one URL and returns the page load time
//! from Navigation Timing and every resource's Resource Timing, including `nextHopProtocol`.
//!
//! The browser is driven over the Chrome DevTools Protocol on `--remote-debugging-pipe`: JSON
//! messages separated by NUL bytes, read by Chromium on fd 3 and written on fd 4. No debugging port
//! is opened (nothing to clash with, nothing reachable from the lab), and no WebSocket client is
//! needed. Chromium leads a process group of its own; the group is killed (by its PID) and the
//! profile removed when the load ends, on success, error or timeout.
//!
//! This crate creates no namespaces: [`load_with`] takes a function that turns the command line
//! into a [`Command`], so the lab can wrap it (`ip netns exec NS …`, see [`prefixed`]) or add its
//! own `pre_exec` `setns`.

mod cdp;
pub mod fetch;
pub mod netlog;
pub mod page;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub use quiclab_proto::options::Protocol;

/// Where Debian's `chromium` package puts the browser binary (`/usr/bin/chromium` is a wrapper
/// script that adds flags from `/etc/chromium.d`; quiclab bypasses it).
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// How to run one page load.
#[derive(Debug, Clone)]
pub struct BrowserOptions {
    /// The browser binary.
    pub chromium: PathBuf,
    /// The protocol forced onto `origin`.
    pub protocol: Protocol,
    /// Base64 SHA-256 of the lab certificate's SubjectPublicKeyInfo
    /// (`LabCertificate::spki_sha256_base64`), for `--ignore-certificate-errors-spki-list`.
    pub spki_sha256_base64: String,
    /// The server's origin, e.g. `https://100.64.0.2` or `https://127.0.0.1:4433`.
    pub origin: String,
    /// For the whole load: start, navigation, timings.
    pub timeout: Duration,
    /// Appended to the command line as they are.
    pub extra_args: Vec<String>,
    /// h3 by discovery: QUIC is enabled but not forced, so Chromium starts over TCP and may move
    /// to HTTP/3 once the server's `alt-svc` header has told it (seed 002's discovery).
    pub discover: bool,
    /// A warm load ([`load_warm_with`]): Chromium runs with `--enable-net-benchmarking`, whose
    /// `chrome.benchmarking.closeConnections()` lets the measured navigation open new
    /// connections that resume the warm-up's sessions.
    pub warm: bool,
    /// Further origins forced onto QUIC with `origin` for h3 (a sharded page's host names).
    pub also_quic_on: Vec<String>,
}

impl BrowserOptions {
    /// Defaults for everything but what identifies the server.
    pub fn new(protocol: Protocol, origin: &str, spki_sha256_base64: &str) -> BrowserOptions {
        BrowserOptions {
            chromium: PathBuf::from(DEFAULT_CHROMIUM),
            protocol,
            spki_sha256_base64: spki_sha256_base64.to_string(),
            origin: origin.to_string(),
            timeout: Duration::from_secs(60),
            extra_args: Vec::new(),
            discover: false,
            warm: false,
            also_quic_on: Vec::new(),
        }
    }

    /// Whether the run records Chromium's NetLog (what discovery and warm loads report).
    fn wants_netlog(&self) -> bool {
        self.discover || self.warm
    }
}

/// What `nextHopProtocol` reports for each protocol.
pub const fn next_hop_protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::H1 => "http/1.1",
        Protocol::H2 => "h2",
        Protocol::H3 => "h3",
    }
}

/// `host:port` of an `https://` origin (port 443 when absent), as `--origin-to-force-quic-on`
/// takes it. IPv6 literals keep their brackets.
pub fn origin_host_port(origin: &str) -> Result<String> {
    let rest = origin
        .strip_prefix("https://")
        .with_context(|| format!("origin {origin:?}: not https://"))?;
    let authority = rest.split('/').next().unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        bail!("origin {origin:?}: no host");
    }
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:443")
    })
}

/// The flags every load uses, whatever the protocol.
const COMMON_FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--password-store=basic",
    "--no-proxy-server",
    "--disk-cache-size=1",
    "--remote-debugging-pipe",
];

/// The full command line (program first) of one load. Pure: the profile directory must be fresh
/// for each run (an empty HTTP cache, no stored Alt-Svc, no TLS session tickets).
pub fn command_line(opts: &BrowserOptions, profile_dir: &Path) -> Result<Vec<String>> {
    let mut argv = vec![opts.chromium.to_string_lossy().into_owned()];
    argv.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
    argv.push(format!("--user-data-dir={}", profile_dir.display()));
    if opts.spki_sha256_base64.is_empty() {
        bail!("no SPKI hash of the lab certificate: Chromium would reject it");
    }
    argv.push(format!(
        "--ignore-certificate-errors-spki-list={}",
        opts.spki_sha256_base64
    ));
    let host_port = origin_host_port(&opts.origin)?;
    match opts.protocol {
        Protocol::H1 => {
            argv.push("--disable-quic".into());
            argv.push("--disable-http2".into());
        }
        Protocol::H2 => argv.push("--disable-quic".into()),
        Protocol::H3 if opts.discover => argv.push("--enable-quic".into()),
        Protocol::H3 => {
            argv.push("--enable-quic".into());
            let mut origins = vec![host_port];
            for o in &opts.also_quic_on {
                origins.push(origin_host_port(o)?);
            }
            argv.push(format!("--origin-to-force-quic-on={}", origins.join(",")));
        }
    }
    if opts.warm {
        argv.push("--enable-net-benchmarking".into());
    }
    argv.extend(opts.extra_args.iter().cloned());
    // The first tab stays blank; the page is loaded in a target created over CDP.
    argv.push("about:blank".into());
    Ok(argv)
}

/// A [`load_with`] launcher that runs the command line behind `prefix`, e.g.
/// `["ip", "netns", "exec", "ql-1-0-client"]`. An empty prefix runs Chromium directly.
pub fn prefixed(prefix: Vec<String>) -> impl FnOnce(&[String]) -> Command {
    move |argv: &[String]| {
        let all: Vec<&String> = prefix.iter().chain(argv.iter()).collect();
        let mut cmd = Command::new(all[0]);
        cmd.args(&all[1..]);
        cmd
    }
}

/// One resource's (or the navigation's) Resource Timing entry; times in milliseconds relative to
/// the navigation's `startTime` (the page's time origin).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all(deserialize = "camelCase"))]
pub struct ResourceTiming {
    pub name: String,
    #[serde(default)]
    pub initiator_type: String,
    pub next_hop_protocol: String,
    pub start_time: f64,
    pub domain_lookup_start: f64,
    pub domain_lookup_end: f64,
    pub connect_start: f64,
    pub connect_end: f64,
    pub secure_connection_start: f64,
    pub request_start: f64,
    pub response_start: f64,
    pub response_end: f64,
    pub transfer_size: f64,
    pub encoded_body_size: f64,
    pub decoded_body_size: f64,
    #[serde(default)]
    pub response_status: f64,
}

/// The navigation entry's own milestones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all(deserialize = "camelCase"))]
pub struct NavigationTiming {
    #[serde(flatten)]
    pub timing: ResourceTiming,
    pub dom_interactive: f64,
    pub dom_content_loaded_event_start: f64,
    pub dom_content_loaded_event_end: f64,
    pub dom_complete: f64,
    pub load_event_start: f64,
    pub load_event_end: f64,
}

/// The result of one page load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BrowserLoad {
    pub url: String,
    /// `location.href` once loaded (after redirects).
    pub final_url: String,
    /// The protocol that was asked for (`h1`, `h2`, `h3`).
    pub protocol: String,
    /// Page load time: `loadEventEnd - startTime` of the navigation entry, in milliseconds.
    pub plt_ms: f64,
    /// `domContentLoadedEventEnd - startTime`, in milliseconds.
    pub dom_content_loaded_ms: f64,
    pub navigation: NavigationTiming,
    /// The resources fetched before the load event ended (`startTime < loadEventEnd`), in the
    /// order Chromium started them.
    pub resources: Vec<ResourceTiming>,
    /// Resources started after the load event (e.g. Chromium's own `/favicon.ico` request), as far
    /// as they were recorded when the timings were read; not part of the PLT.
    pub late_resources: Vec<ResourceTiming>,
    /// The distinct `nextHopProtocol` values of the navigation and every resource, sorted.
    pub protocols: Vec<String>,
    /// `Browser.getVersion`'s product, e.g. `Chrome/138.0.7204.183`.
    pub browser_version: String,
    /// From spawning Chromium to the load's end, in milliseconds (not part of the PLT).
    pub wall_ms: f64,
}

impl BrowserLoad {
    /// Fails unless the navigation and every resource used `protocol`.
    pub fn check_protocol(&self, protocol: Protocol) -> Result<()> {
        let want = next_hop_protocol(protocol);
        if self.protocols.iter().any(|p| p != want) {
            let offenders: Vec<String> = std::iter::once(&self.navigation.timing)
                .chain(&self.resources)
                .filter(|r| r.next_hop_protocol != want)
                .map(|r| format!("{} ({:?})", r.name, r.next_hop_protocol))
                .collect();
            bail!(
                "asked for {want}, Chromium used {:?}: {}",
                self.protocols,
                offenders.join(", ")
            );
        }
        Ok(())
    }
}

/// Loads `url` in Chromium started directly (no namespace).
pub fn load(opts: &BrowserOptions, url: &str) -> Result<BrowserLoad> {
    load_with(opts, url, prefixed(Vec::new()))
}

/// Loads `url` `navigations` times, one after the other in one browser (one profile, one tab):
/// what a returning visitor's browser knows after each load — Alt-Svc, sessions — carries over.
/// For discovery runs ([`BrowserOptions::discover`]).
pub fn load_repeatedly_with(
    opts: &BrowserOptions,
    url: &str,
    navigations: usize,
    launcher: impl FnOnce(&[String]) -> Command,
) -> Result<RepeatedLoads> {
    run_browser(opts, url, launcher, |session, deadline| {
        let tab = open_tab(session, deadline)?;
        disable_cache(session, &tab, deadline)?;
        let mut loads = Vec::with_capacity(navigations);
        for i in 0..navigations.max(1) {
            let load = navigate(session, &tab, opts, url, deadline)
                .with_context(|| format!("navigation {} of {navigations}", i + 1))?;
            loads.push(load);
        }
        Ok(loads)
    })
    .map(|(mut loads, wall_ms, netlog)| {
        if let Some(last) = loads.last_mut() {
            last.wall_ms = wall_ms;
        }
        RepeatedLoads {
            loads,
            quic: netlog.as_deref().and_then(netlog::quic_attempts),
        }
    })
}

/// The loads of [`load_repeatedly_with`] and, for discovery runs, what Chromium's NetLog says
/// about its QUIC attempts (None: the log could not be read).
#[derive(Debug, Clone)]
pub struct RepeatedLoads {
    pub loads: Vec<BrowserLoad>,
    pub quic: Option<netlog::QuicAttempts>,
}

/// How long the browser rests on a blank page after the warm-up, before its connections are closed:
/// time for anything the warm-up's page still had in flight to end.
const WARM_SETTLE: Duration = Duration::from_millis(300);

/// How long the browser rests between closing the warm-up's connections and the measured
/// navigation: the NetLog's events are split there, and a connection opened in this gap (which the
/// measured load could reuse) fails the run.
const WARM_GAP: Duration = Duration::from_millis(100);

/// How far the NetLog's split before the measured navigation is moved back, for the difference
/// between Chromium's clock (as its NetLog maps it to the wall clock) and ours.
const WARM_CLOCK_SLACK_MS: f64 = 25.0;

/// A warm load: an untimed navigation fills Chromium's session caches (TLS session tickets, QUIC
/// tokens and transport parameters), `chrome.benchmarking.closeConnections()` closes every
/// connection it opened (TCP pools, HTTP/2 and QUIC sessions), and a second navigation in the same
/// tab — the measured one — has to open new connections, which resume. The HTTP cache is
/// disabled, so the second load fetches every object again: what carries over is what a
/// returning visitor's browser knows about the server, not the bodies.
pub fn load_warm_with(
    opts: &BrowserOptions,
    url: &str,
    launcher: impl FnOnce(&[String]) -> Command,
) -> Result<WarmLoad> {
    if !opts.warm {
        bail!("load_warm_with needs BrowserOptions::warm (Chromium's net benchmarking)");
    }
    run_browser(opts, url, launcher, |session, deadline| {
        let tab = open_tab(session, deadline)?;
        disable_cache(session, &tab, deadline)?;
        let warm_up = navigate(session, &tab, opts, url, deadline).context("the warm-up load")?;
        // Leave the page, so that nothing of it (its favicon request, a late resource) is still
        // fetching, or starts a connection, once its connections are closed.
        navigate_blank(session, &tab, deadline)?;
        std::thread::sleep(WARM_SETTLE);
        let close_unix_ms = unix_ms();
        close_connections(session, &tab, deadline)?;
        std::thread::sleep(WARM_GAP);
        let measured_unix_ms = unix_ms();
        let measured =
            navigate(session, &tab, opts, url, deadline).context("the measured (warm) load")?;
        Ok((warm_up, measured, close_unix_ms, measured_unix_ms))
    })
    .and_then(
        |((warm_up, mut measured, close_unix_ms, measured_unix_ms), wall_ms, netlog)| {
            measured.wall_ms = wall_ms;
            // The NetLog's clock, mapped to the wall clock, is a few ms off ours (seen: the
            // measured navigation's own preconnect logged 2 ms before we asked for it).
            let split = measured_unix_ms - WARM_CLOCK_SLACK_MS;
            let handshakes = netlog
                .as_deref()
                .and_then(|t| netlog::warm_handshakes(t, close_unix_ms, split));
            if let Some(h) = &handshakes
                && h.opened_between_loads > 0
            {
                bail!(
                    "Chromium opened {} connection(s) between closing the warm-up's and the \
                     measured load: the measured load could reuse one instead of resuming, so \
                     it is not a warm load",
                    h.opened_between_loads
                );
            }
            Ok(WarmLoad {
                warm_up,
                measured,
                handshakes,
            })
        },
    )
}

/// The two loads of [`load_warm_with`] and, from Chromium's NetLog, the measured load's handshakes
/// (None: the log could not be read).
#[derive(Debug, Clone)]
pub struct WarmLoad {
    pub warm_up: BrowserLoad,
    pub measured: BrowserLoad,
    pub handshakes: Option<netlog::Handshakes>,
}

fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Every navigation fetches every object again.
fn disable_cache(session: &mut cdp::Session, tab: &Tab, deadline: Instant) -> Result<()> {
    let sid = Some(tab.sid.as_str());
    session.call(sid, "Network.enable", serde_json::json!({}), deadline)?;
    session.call(
        sid,
        "Network.setCacheDisabled",
        serde_json::json!({ "cacheDisabled": true }),
        deadline,
    )?;
    Ok(())
}

/// Navigates `tab` to `about:blank` (no network) and waits for its load event.
fn navigate_blank(session: &mut cdp::Session, tab: &Tab, deadline: Instant) -> Result<()> {
    let sid = Some(tab.sid.as_str());
    let nav = session.call(
        sid,
        "Page.navigate",
        serde_json::json!({ "url": "about:blank" }),
        deadline,
    )?;
    let loader = nav["loaderId"].as_str().unwrap_or("").to_string();
    session
        .wait_event(deadline, |ev| {
            ev.session_id.as_deref() == sid
                && ev.method == "Page.lifecycleEvent"
                && ev.params["name"] == "load"
                && (loader.is_empty() || ev.params["loaderId"] == loader.as_str())
        })
        .context("waiting for about:blank between the warm-up and the measured load")?;
    Ok(())
}

/// Closes every connection Chromium holds (`--enable-net-benchmarking`), from the loaded page.
fn close_connections(session: &mut cdp::Session, tab: &Tab, deadline: Instant) -> Result<()> {
    let value = session.call(
        Some(tab.sid.as_str()),
        "Runtime.evaluate",
        serde_json::json!({
            "expression": "(typeof chrome === 'object' && chrome.benchmarking && \
                typeof chrome.benchmarking.closeConnections === 'function') \
                ? (chrome.benchmarking.closeConnections(), 'closed') : 'missing'",
            "returnByValue": true,
        }),
        deadline,
    )?;
    match value["result"]["value"].as_str() {
        Some("closed") => Ok(()),
        _ => bail!(
            "chrome.benchmarking.closeConnections() is not available in this Chromium \
             (started with --enable-net-benchmarking): cannot close the warm-up's connections \
             ({value})"
        ),
    }
}

/// Loads `url` in Chromium started through `launcher`, which turns the command line (program
/// first) into a [`Command`]; it may wrap it or add `pre_exec` hooks. This function then makes the
/// process a group leader, sets its stdio and maps the CDP pipe onto fds 3 and 4. Blocking; call it
/// from `spawn_blocking` in async code.
pub fn load_with(
    opts: &BrowserOptions,
    url: &str,
    launcher: impl FnOnce(&[String]) -> Command,
) -> Result<BrowserLoad> {
    run_browser(opts, url, launcher, |session, deadline| {
        let tab = open_tab(session, deadline)?;
        navigate(session, &tab, opts, url, deadline)
    })
    .map(|(mut load, wall_ms, _)| {
        load.wall_ms = wall_ms;
        load
    })
}

/// Starts Chromium through `launcher`, runs `work` on its CDP session, and cleans up; returns
/// what `work` gave, the wall time from the spawn in ms and, for discovery and warm runs, the text
/// of Chromium's NetLog (None: not written or unreadable).
pub(crate) fn run_browser<T>(
    opts: &BrowserOptions,
    url: &str,
    launcher: impl FnOnce(&[String]) -> Command,
    work: impl FnOnce(&mut cdp::Session, Instant) -> Result<T>,
) -> Result<(T, f64, Option<String>)> {
    check_chromium(&opts.chromium)?;
    let started = Instant::now();
    let deadline = started + opts.timeout;
    let run_dir = RunDir::create()?;
    let mut argv = command_line(opts, &run_dir.profile())?;
    let netlog_path = run_dir.dir.path().join("netlog.json");
    if opts.wants_netlog() {
        // Before the URL (the last argument): why Chromium did or did not use QUIC, and which
        // handshakes resumed.
        let url_arg = argv.pop();
        argv.push(format!("--log-net-log={}", netlog_path.display()));
        argv.extend(url_arg);
    }
    let stderr_path = run_dir.dir.path().join("chromium.stderr");
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("creating {}", stderr_path.display()))?;
    let mut cmd = launcher(&argv);
    // Chromium keeps its crash database under $XDG_CONFIG_HOME/chromium whatever the profile; in
    // the run directory it stays out of the user's home, and the command lines of the crash
    // handlers (which leave Chromium's process group) name the run directory, so they can be found.
    cmd.env("XDG_CONFIG_HOME", run_dir.dir.path().join("config"))
        .env("XDG_CACHE_HOME", run_dir.dir.path().join("cache"));
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr);
    let result = cdp::Session::start(cmd, deadline).and_then(|mut session| {
        let r = work(&mut session, deadline);
        session.close();
        r
    });
    kill_strays(run_dir.dir.path());
    let netlog = opts
        .wants_netlog()
        .then(|| std::fs::read_to_string(&netlog_path).ok())
        .flatten();
    let result = result.with_context(|| {
        format!(
            "Chromium loading {url} over {} (timeout {:?})",
            opts.protocol.as_str(),
            opts.timeout
        )
    });
    let result = result.map(|t| (t, started.elapsed().as_secs_f64() * 1e3, netlog));
    result.map_err(|e| {
        let tail = stderr_tail(&stderr_path, 15);
        if tail.is_empty() {
            e
        } else {
            anyhow::anyhow!("{e:#}\n--- the end of Chromium's stderr ---\n{tail}")
        }
    })
}

/// Fails with installation advice when the binary is missing or not executable.
pub fn check_chromium(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => bail!(
            "{} is not an executable file (install Debian's Chromium: apt-get install chromium)",
            path.display()
        ),
        Err(e) => bail!(
            "Chromium not found at {}: {e} (install it: apt-get install chromium)",
            path.display()
        ),
    }
}

/// What the page reports once `loadEventEnd` is set: the navigation entry and every resource.
const TIMINGS_JS: &str = r#"new Promise((resolve) => {
  const fields = ['name', 'initiatorType', 'nextHopProtocol', 'startTime', 'domainLookupStart',
    'domainLookupEnd', 'connectStart', 'connectEnd', 'secureConnectionStart', 'requestStart',
    'responseStart', 'responseEnd', 'transferSize', 'encodedBodySize', 'decodedBodySize',
    'responseStatus'];
  const nav = ['domInteractive', 'domContentLoadedEventStart', 'domContentLoadedEventEnd',
    'domComplete', 'loadEventStart', 'loadEventEnd'];
  const pick = (e, names) => {
    const o = {};
    for (const k of names) { if (e[k] !== undefined) o[k] = e[k]; }
    return o;
  };
  const poll = () => {
    const n = performance.getEntriesByType('navigation')[0];
    if (!n || !(n.loadEventEnd > 0)) { setTimeout(poll, 5); return; }
    resolve({
      navigation: Object.assign(pick(n, fields), pick(n, nav)),
      resources: performance.getEntriesByType('resource').map((e) => pick(e, fields)),
      href: location.href,
    });
  };
  poll();
})"#;

#[derive(Deserialize)]
struct PageTimings {
    navigation: NavigationTiming,
    resources: Vec<ResourceTiming>,
    href: String,
}

/// A tab to load pages in: its CDP session id and the browser's version.
pub(crate) struct Tab {
    pub(crate) sid: String,
    pub(crate) browser_version: String,
}

pub(crate) fn open_tab(session: &mut cdp::Session, deadline: Instant) -> Result<Tab> {
    let version = session.call(None, "Browser.getVersion", serde_json::json!({}), deadline)?;
    let browser_version = version["product"].as_str().unwrap_or("").to_string();
    let target = session.call(
        None,
        "Target.createTarget",
        serde_json::json!({ "url": "about:blank" }),
        deadline,
    )?;
    let target_id = target["targetId"]
        .as_str()
        .context("Target.createTarget: no targetId")?
        .to_string();
    let attached = session.call(
        None,
        "Target.attachToTarget",
        serde_json::json!({ "targetId": target_id, "flatten": true }),
        deadline,
    )?;
    let sid = attached["sessionId"]
        .as_str()
        .context("Target.attachToTarget: no sessionId")?
        .to_string();
    let tab = Tab {
        sid,
        browser_version,
    };
    let sid = Some(tab.sid.as_str());
    session.call(sid, "Page.enable", serde_json::json!({}), deadline)?;
    session.call(
        sid,
        "Page.setLifecycleEventsEnabled",
        serde_json::json!({ "enabled": true }),
        deadline,
    )?;
    // Room for every resource of a large page (the default buffer holds 250 entries).
    session.call(
        sid,
        "Page.addScriptToEvaluateOnNewDocument",
        serde_json::json!({ "source": "performance.setResourceTimingBufferSize(100000);" }),
        deadline,
    )?;
    Ok(tab)
}

/// Navigates `tab` to `url` and reads the load's timings once its load event has fired.
fn navigate(
    session: &mut cdp::Session,
    tab: &Tab,
    opts: &BrowserOptions,
    url: &str,
    deadline: Instant,
) -> Result<BrowserLoad> {
    let sid = Some(tab.sid.as_str());
    let nav = session.call(
        sid,
        "Page.navigate",
        serde_json::json!({ "url": url }),
        deadline,
    )?;
    if let Some(err) = nav["errorText"].as_str().filter(|e| !e.is_empty()) {
        bail!("navigation failed: {err}");
    }
    let loader = nav["loaderId"]
        .as_str()
        .context("Page.navigate: no loaderId")?
        .to_string();
    session
        .wait_event(deadline, |ev| {
            ev.session_id.as_deref() == sid
                && ev.method == "Page.lifecycleEvent"
                && ev.params["name"] == "load"
                && ev.params["loaderId"] == loader.as_str()
        })
        .with_context(|| format!("waiting for the load event of {url}"))?;
    let value = session.call(
        sid,
        "Runtime.evaluate",
        serde_json::json!({
            "expression": TIMINGS_JS,
            "awaitPromise": true,
            "returnByValue": true,
        }),
        deadline,
    )?;
    if let Some(ex) = value.get("exceptionDetails") {
        bail!("reading the page's timings failed: {ex}");
    }
    let timings: PageTimings = serde_json::from_value(value["result"]["value"].clone())
        .context("decoding the page's Navigation/Resource Timing entries")?;
    Ok(summarise(
        url,
        opts.protocol,
        timings.navigation,
        timings.resources,
        tab.browser_version.clone(),
        &timings.href,
    ))
}

fn summarise(
    url: &str,
    protocol: Protocol,
    navigation: NavigationTiming,
    resources: Vec<ResourceTiming>,
    browser_version: String,
    final_url: &str,
) -> BrowserLoad {
    let (resources, late_resources): (Vec<_>, Vec<_>) = resources
        .into_iter()
        .partition(|r| r.start_time < navigation.load_event_end);
    let protocols: BTreeSet<String> = std::iter::once(&navigation.timing)
        .chain(&resources)
        .map(|r| r.next_hop_protocol.clone())
        .collect();
    let start = navigation.timing.start_time;
    BrowserLoad {
        url: url.to_string(),
        final_url: final_url.to_string(),
        protocol: protocol.as_str().to_string(),
        plt_ms: navigation.load_event_end - start,
        dom_content_loaded_ms: navigation.dom_content_loaded_event_end - start,
        navigation,
        resources,
        late_resources,
        protocols: protocols.into_iter().collect(),
        browser_version,
        wall_ms: 0.0,
    }
}

/// SIGKILL, by PID, to every process whose command line mentions `run_dir` (unique to this load):
/// the crash handlers Chromium starts in process groups of their own, once Chromium is gone.
fn kill_strays(run_dir: &Path) {
    let needle = run_dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle.as_str())
            && pid != std::process::id() as i32
        {
            // SAFETY: kill(2) with a PID that names a process started for this load.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// The last `lines` lines of a file, or nothing.
fn stderr_tail(path: &Path, lines: usize) -> String {
    let Ok(text) = std::fs::read_to_string(path) else {
        return String::new();
    };
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A temporary directory holding the profile and Chromium's stderr, removed on drop; its name is
/// random (nobody can prepare it in advance).
struct RunDir {
    dir: tempfile::TempDir,
}

impl RunDir {
    fn create() -> Result<RunDir> {
        let dir = tempfile::Builder::new()
            .prefix("quiclab-browser-")
            .tempdir()
            .context("creating a temporary directory for Chromium")?;
        let run = RunDir { dir };
        std::fs::create_dir(run.profile())
            .with_context(|| format!("creating profile dir {}", run.profile().display()))?;
        Ok(run)
    }

    fn profile(&self) -> PathBuf {
        self.dir.path().join("profile")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(p: Protocol) -> BrowserOptions {
        BrowserOptions::new(p, "https://100.64.0.2", "AAAA")
    }

    fn line(p: Protocol) -> Vec<String> {
        command_line(&opts(p), Path::new("/tmp/prof")).unwrap()
    }

    fn has(argv: &[String], flag: &str) -> bool {
        argv.iter().any(|a| a == flag)
    }

    #[test]
    fn common_flags_for_every_protocol() {
        for p in Protocol::ALL {
            let argv = line(p);
            assert_eq!(argv[0], DEFAULT_CHROMIUM);
            for f in COMMON_FLAGS {
                assert!(has(&argv, f), "{p}: {f} missing");
            }
            assert!(has(&argv, "--user-data-dir=/tmp/prof"));
            assert!(has(&argv, "--ignore-certificate-errors-spki-list=AAAA"));
            assert_eq!(argv.last().map(String::as_str), Some("about:blank"));
        }
    }

    #[test]
    fn h1_disables_quic_and_http2() {
        let argv = line(Protocol::H1);
        assert!(has(&argv, "--disable-quic"));
        assert!(has(&argv, "--disable-http2"));
        assert!(
            !argv
                .iter()
                .any(|a| a.starts_with("--origin-to-force-quic-on"))
        );
        assert!(!has(&argv, "--enable-quic"));
    }

    #[test]
    fn h2_disables_quic_only() {
        let argv = line(Protocol::H2);
        assert!(has(&argv, "--disable-quic"));
        assert!(!has(&argv, "--disable-http2"));
        assert!(
            !argv
                .iter()
                .any(|a| a.starts_with("--origin-to-force-quic-on"))
        );
    }

    #[test]
    fn h3_forces_quic_on_the_origin() {
        let argv = line(Protocol::H3);
        assert!(has(&argv, "--enable-quic"));
        assert!(has(&argv, "--origin-to-force-quic-on=100.64.0.2:443"));
        assert!(!has(&argv, "--disable-quic"));
        assert!(!has(&argv, "--disable-http2"));
    }

    #[test]
    fn h3_forces_quic_on_every_shard_too() {
        let mut o = opts(Protocol::H3);
        o.also_quic_on = vec![
            "https://s1.quiclab.test".into(),
            "https://s2.quiclab.test:443".into(),
        ];
        let argv = command_line(&o, Path::new("/p")).unwrap();
        assert!(has(
            &argv,
            "--origin-to-force-quic-on=100.64.0.2:443,s1.quiclab.test:443,s2.quiclab.test:443"
        ));
    }

    #[test]
    fn extra_args_are_appended() {
        let mut o = opts(Protocol::H2);
        o.extra_args = vec!["--foo".into()];
        assert!(has(&command_line(&o, Path::new("/p")).unwrap(), "--foo"));
    }

    #[test]
    fn origins_become_host_port() {
        assert_eq!(
            origin_host_port("https://10.0.0.2").unwrap(),
            "10.0.0.2:443"
        );
        assert_eq!(
            origin_host_port("https://127.0.0.1:4433/").unwrap(),
            "127.0.0.1:4433"
        );
        assert_eq!(
            origin_host_port("https://[fd00:71ab::2]").unwrap(),
            "[fd00:71ab::2]:443"
        );
        assert_eq!(
            origin_host_port("https://[fd00:71ab::2]:8443").unwrap(),
            "[fd00:71ab::2]:8443"
        );
        assert!(origin_host_port("http://10.0.0.2").is_err());
        assert!(origin_host_port("https://").is_err());
    }

    #[test]
    fn missing_spki_is_an_error() {
        let mut o = opts(Protocol::H2);
        o.spki_sha256_base64.clear();
        assert!(command_line(&o, Path::new("/p")).is_err());
    }

    #[test]
    fn missing_chromium_says_how_to_install_it() {
        let mut o = opts(Protocol::H2);
        o.chromium = PathBuf::from("/nonexistent/chromium");
        let err = format!("{:#}", load(&o, "https://100.64.0.2/").unwrap_err());
        assert!(err.contains("apt-get install chromium"), "{err}");
        assert!(err.contains("/nonexistent/chromium"), "{err}");
    }

    #[test]
    fn prefix_wraps_the_command_line() {
        let cmd = prefixed(vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            "NS".into(),
        ])(&["/c".to_string(), "--x".to_string()]);
        assert_eq!(cmd.get_program(), "ip");
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args, ["netns", "exec", "NS", "/c", "--x"]);
    }

    #[test]
    fn protocols_are_checked() {
        let nav = NavigationTiming {
            timing: ResourceTiming {
                name: "https://x/".into(),
                next_hop_protocol: "h2".into(),
                ..Default::default()
            },
            load_event_end: 120.0,
            dom_content_loaded_event_end: 80.0,
            ..Default::default()
        };
        let res = vec![
            ResourceTiming {
                name: "https://x/a.png".into(),
                next_hop_protocol: "http/1.1".into(),
                start_time: 50.0,
                ..Default::default()
            },
            ResourceTiming {
                name: "https://x/favicon.ico".into(),
                next_hop_protocol: "h3".into(),
                start_time: 130.0,
                ..Default::default()
            },
        ];
        let l = summarise("https://x/", Protocol::H2, nav, res, String::new(), "");
        assert_eq!(l.plt_ms, 120.0);
        assert_eq!(l.dom_content_loaded_ms, 80.0);
        assert_eq!(l.protocols, ["h2", "http/1.1"]);
        assert_eq!(l.resources.len(), 1);
        assert_eq!(l.late_resources[0].name, "https://x/favicon.ico");
        let err = l.check_protocol(Protocol::H2).unwrap_err().to_string();
        assert!(err.contains("a.png"), "{err}");
    }
}
