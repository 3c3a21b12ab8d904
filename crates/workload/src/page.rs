//! `page`: one page load (the seed studies' pages, or a directory) by quiclab's browser-like
//! loader or headless Chromium, with per-object timings for a HAR and a waterfall.
//!
//! The outer process owns the lab: it writes the page, starts `quiclab serve` with the page's
//! directory in the server namespace and the page client in the client namespace, then reads the
//! client's typed report. The client runs the loader (`quiclab_stacks::page_load`) or Chromium
//! (`quiclab_browser`) from inside the client namespace, so neither needs to know about namespaces.

pub use quiclab_model::page::*;
pub use quiclab_model::run::page::{PageRun, PageSource};
use quiclab_outputs::UserFile;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use quiclab_lab::{LinkSpec, RunningLab, Side};
use quiclab_page::har::HarPage;
use quiclab_proto::options::Protocol;

use quiclab_model::implementation::{ImplementationRecord, Implementations, Server};

use crate::child::{Browser, ChildConfig, PageClientConfig, PageClientReport};
use crate::fec::FecResult;
use crate::harness::{self, RunError, WorkDir};
use crate::{Outcome, Workload};

/// What the shell knows of a page (the corpus, a directory's files).
pub trait PageSourceFiles {
    fn validate(&self) -> Result<(), String>;
    fn total_bytes(&self) -> f64;
    fn default_timeout(&self, spec: &LinkSpec) -> Duration;
}

impl PageSourceFiles for PageSource {
    /// Checks the page before any lab is built: a known name, or a directory whose index.html and
    /// every object it references exist.
    fn validate(&self) -> Result<(), String> {
        match self {
            PageSource::Builtin(n) => quiclab_page::corpus::lookup(n)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            PageSource::Dir(d) => quiclab_page::discover::load_dir(d)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }

    /// The page's bytes, for estimates and default time limits (a directory: the size of its
    /// files; 1 MB when unknown).
    fn total_bytes(&self) -> f64 {
        fn dir_bytes(d: &Path, depth: u32) -> u64 {
            let Ok(entries) = std::fs::read_dir(d) else {
                return 0;
            };
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() && depth < 16 => dir_bytes(&e.path(), depth + 1),
                    Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                    _ => 0,
                })
                .sum()
        }
        match self {
            PageSource::Builtin(n) => {
                quiclab_page::corpus::lookup(n).map_or(1e6, |s| s.total_bytes() as f64)
            }
            PageSource::Dir(d) => match dir_bytes(d, 0) {
                0 => 1e6,
                n => n as f64,
            },
        }
    }

    /// The time limit of a load when none is given: as a bulk download of the page's bytes
    /// ([`crate::bulk::default_timeout`]), but at least 60 s (Chromium's start-up, many objects).
    fn default_timeout(&self, spec: &LinkSpec) -> Duration {
        crate::bulk::default_timeout(self.total_bytes() as u64, spec).max(Duration::from_secs(60))
    }
}

/// How many times the run loads the page (the timeout is per load).
fn loads(run: &PageRun) -> usize {
    if run.discover {
        crate::child::DISCOVERY_NAVIGATIONS
    } else if run.warm {
        2
    } else {
        1
    }
}

/// The loader as the result records it: quiclab's (its congestion control set per socket or
/// connection) or Chromium (its own QUIC with its default congestion control; its TCP the
/// client namespace's).
fn loader_record(
    run: &PageRun,
    summary: &PageSummary,
    cc: &str,
    namespace_cc: &str,
) -> ImplementationRecord {
    match run.browser {
        Browser::Builtin => crate::peer::quiclab_record(cc),
        Browser::Chromium => crate::peer::chromium_record(
            summary.browser_version.as_deref(),
            run.proto,
            namespace_cc,
        ),
    }
}

/// The server's address in the lab, of the run's family.
fn server_ip(run: &PageRun, lab: &quiclab_lab::Lab) -> IpAddr {
    if run.ipv6 {
        lab.address_v6(Side::Server).into()
    } else {
        lab.address_v4(Side::Server).into()
    }
}

/// The origin the page is loaded from (the HAR's), IPv6 literals in brackets.
fn origin(run: &PageRun) -> (String, String) {
    let ip: IpAddr = if run.ipv6 {
        quiclab_lab::topology::SERVER_V6.into()
    } else {
        quiclab_lab::topology::SERVER_V4.into()
    };
    let host = match ip {
        IpAddr::V6(a) => format!("[{a}]"),
        IpAddr::V4(a) => a.to_string(),
    };
    (format!("https://{host}"), ip.to_string())
}

fn title(run: &PageRun, spec: &LinkSpec) -> String {
    format!(
        "{} over {} ({}), {}",
        run.page.name(),
        run.proto,
        match run.browser {
            Browser::Chromium => "Chromium",
            Browser::Builtin => "quiclab",
        },
        spec.describe().downlink
    )
}

/// Writes the HAR and/or the waterfall (FILE.svg, or FILE.png with an SVG beside it) of a
/// load into the files reserved for them before the run ([`quiclab_outputs::UserFile`]).
/// Returns notes (a PNG without a font); a file that cannot be written is an error (the
/// caller keeps and prints the run's result all the same).
pub fn write_har_and_waterfall(
    run: &PageRun,
    result: &PageResult,
    spec: &LinkSpec,
    har: Option<&mut UserFile>,
    waterfall: Option<WaterfallFiles<'_>>,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    if let Some(file) = har {
        file.write(har_json(run, result, spec)?.as_bytes())?;
    }
    if let Some(WaterfallFiles { svg, png }) = waterfall {
        svg.write(waterfall_svg(run, result, spec)?.as_bytes())?;
        if let Some(png) = png {
            let (tmp, f) = png.temp()?;
            drop(f);
            match quiclab_page::waterfall::draw_png(
                &result.objects,
                &waterfall_options(run, result, spec),
                &tmp,
            ) {
                Ok(None) => png.commit(&tmp)?,
                Ok(Some(note)) => {
                    let _ = std::fs::remove_file(&tmp);
                    notes.push(format!("note: {note}"));
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e.into());
                }
            }
        }
    }
    Ok(notes)
}

fn waterfall_options(
    run: &PageRun,
    result: &PageResult,
    spec: &LinkSpec,
) -> quiclab_page::waterfall::WaterfallOptions {
    quiclab_page::waterfall::WaterfallOptions {
        title: title(run, spec),
        page_load_ms: Some(result.summary.plt_ms),
        ..Default::default()
    }
}

fn waterfall_svg(run: &PageRun, result: &PageResult, spec: &LinkSpec) -> anyhow::Result<String> {
    let options = waterfall_options(run, result, spec);
    Ok(quiclab_page::waterfall::svg_string(
        &result.objects,
        &options,
    )?)
}

/// The load's HAR as JSON.
fn har_json(run: &PageRun, result: &PageResult, spec: &LinkSpec) -> anyhow::Result<String> {
    let title = title(run, spec);
    let (origin, server_ip) = origin(run);
    {
        let har = quiclab_page::har::build_har(
            &HarPage {
                title: title.clone(),
                origin,
                navigation_start: std::time::UNIX_EPOCH
                    + Duration::from_millis(result.summary.navigation_start_unix_ms),
                page_load_ms: Some(result.summary.plt_ms),
                content_load_ms: result.summary.dom_content_loaded_ms,
                server_ip: Some(server_ip),
                comment: Some(format!("quiclab page; link: {}", spec.describe().downlink)),
            },
            &result.objects,
        );
        Ok(har.to_json()?)
    }
}

/// Writes a built-in page's files under `dir` (a directory of the run's work directory, which
/// may be a kept one): every directory claimed as quiclab's (never a link), every file written
/// through quiclab's write path.
fn write_page(page: &quiclab_page::corpus::PageSpec, dir: &Path) -> anyhow::Result<PathBuf> {
    let root = quiclab_outputs::claim_dir(dir, "--keep")?;
    for (path, body) in page.generate() {
        let mut parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let name = parts.pop().unwrap_or_default();
        let mut at = root.clone();
        for part in parts {
            at = quiclab_outputs::claim_subdir(&at, part, "--keep")?;
        }
        quiclab_outputs::plain_name(name, "a page's file name").map_err(anyhow::Error::msg)?;
        quiclab_outputs::write_in_claimed(&at.join(name), &body)?;
    }
    Ok(root)
}

/// The files a waterfall goes to: an SVG, and a PNG beside it when asked for.
pub struct WaterfallFiles<'a> {
    pub svg: &'a mut UserFile,
    pub png: Option<&'a mut UserFile>,
}

impl Workload for PageRun {
    type Output = PageResult;

    fn name(&self) -> &'static str {
        "page"
    }

    fn contender(&self) -> String {
        self.proto.to_string()
    }

    fn estimate_seconds(&self, spec: &LinkSpec) -> f64 {
        let rtt = (spec.base_rtt() as f64 / 1e9).max(1e-4);
        // Chromium's start-up; a few more round trips for discovery.
        let extra = match self.browser {
            Browser::Chromium => 2.5,
            Browser::Builtin => 0.0,
        } + 4.0 * rtt;
        let load =
            crate::bulk::transfer_estimate_seconds(self.page.total_bytes(), spec) + 4.0 * rtt;
        // Warm and discovery runs load the page more than once.
        load * loads(self) as f64 + extra - 4.0 * rtt
    }

    fn time_limit(&self, spec: &LinkSpec) -> Duration {
        load_limit(self, spec) * loads(self) as u32
    }

    fn run(
        &self,
        running: &mut RunningLab,
        keep: Option<&Path>,
    ) -> Result<Outcome<PageResult>, RunError> {
        let spec = running.spec.clone();
        let work = WorkDir::new(keep, "page")?;
        let lab = &running.lab;
        let page_dir = match &self.page {
            PageSource::Builtin(name) => {
                let page = quiclab_page::corpus::lookup(name)
                    .map_err(|e| RunError::Failed(e.to_string()))?
                    .sharded(self.shards, quiclab_proto::SERVER_NAME);
                write_page(&page, &work.join("page"))
                    .map_err(|e| RunError::Failed(e.to_string()))?
            }
            PageSource::Dir(d) => d.clone(),
        };
        harness::write_certificate(lab, &work)?;
        let server_ip: IpAddr = server_ip(self, lab);
        let cc = self.stack.cc_name(self.proto);
        let (server_record, tcp_sampler) =
            start_page_server(self, lab, &work, page_dir, server_ip)?;
        let client = ChildConfig::PageClient(PageClientConfig {
            cert: work.join("cert.pem"),
            run: self.clone(),
            server: SocketAddr::new(server_ip, 443),
            // The builtin loader's limit is per load; Chromium's covers its navigations.
            timeout_ms: match self.browser {
                Browser::Chromium => load_limit(self, &spec) * loads(self) as u32,
                Browser::Builtin => load_limit(self, &spec),
            }
            .as_millis() as u64,
        });
        // Chromium needs a few seconds to start on top of the load itself.
        let grace = Duration::from_secs(match self.browser {
            Browser::Chromium => 20,
            Browser::Builtin => 5,
        });
        let report = harness::run_client::<PageClientReport>(
            lab,
            &work,
            "page",
            &client,
            load_limit(self, &spec) * loads(self) as u32,
            grace,
        );
        let fidelity = if running.emulated() {
            Some(running.stop_emulator()?)
        } else {
            None
        };
        let report = report?;
        if let Some(sampler) = tcp_sampler {
            sampler.finish().check(self.server, cc)?;
        }
        let namespace_cc = running.lab.tcp_default_cc.clone();
        let client_record = loader_record(self, &report.summary, cc, &namespace_cc);
        let result = PageResult {
            summary: report.summary,
            page: self.page.name(),
            link: spec.describe(),
            loss_ratio: fidelity
                .as_ref()
                .map(|f| f.downlink.model.counters.loss_ratio()),
            fec: self.stack.fec.map(|f| {
                let server = harness::server_fec(&work).map(|l| l.total);
                FecResult::of(f.in_cwnd, server, report.fec)
            }),
            fidelity: fidelity.clone(),
            implementations: Some(Implementations {
                server: server_record,
                client: client_record,
            }),
            objects: report.objects,
        };
        Ok(Outcome { result, fidelity })
    }

    fn write_artifacts(
        &self,
        out: &Outcome<PageResult>,
        dir: &Path,
        spec: &LinkSpec,
    ) -> Vec<String> {
        // A traced run's directory is quiclab's: its own files, replaced through a temporary
        // file. What cannot be written is a note; the run's measurement stands.
        let mut notes = Vec::new();
        let har = har_json(self, &out.result, spec);
        let svg = waterfall_svg(self, &out.result, spec);
        for (name, text) in [("page.har", har), ("waterfall.svg", svg)] {
            let path = dir.join(name);
            if let Err(e) = text.and_then(|t| {
                quiclab_outputs::write_in_claimed(&path, t.as_bytes()).map_err(Into::into)
            }) {
                notes.push(format!("error: writing {}: {e:#}", path.display()));
            }
        }
        notes
    }
}

/// The HAR and waterfall files `quiclab page` writes, created before the lab starts so that a
/// refusal costs no run: every path checked, no two flags naming one file (the capture's too).
pub struct PageFiles {
    har: Option<UserFile>,
    svg: Option<UserFile>,
    png: Option<UserFile>,
}

impl PageFiles {
    /// `waterfall` FILE.svg, or FILE.png with an SVG beside it.
    pub fn reserve(
        har: Option<&Path>,
        waterfall: Option<&Path>,
        pcap: Option<&Path>,
        force: bool,
    ) -> anyhow::Result<PageFiles> {
        let (svg, png) = match waterfall {
            Some(w) if w.extension().is_some_and(|e| e == "png") => {
                (Some(w.with_extension("svg")), Some(w.to_path_buf()))
            }
            Some(w) => (Some(w.to_path_buf()), None),
            None => (None, None),
        };
        let named: Vec<(&Path, &str)> = [
            (pcap, "--pcap"),
            (har, "--har"),
            (svg.as_deref(), "--waterfall"),
            (png.as_deref(), "--waterfall"),
        ]
        .into_iter()
        .filter_map(|(p, f)| p.map(|p| (p, f)))
        .collect();
        quiclab_outputs::distinct(&named)?;
        let reserve =
            |p: Option<&Path>, flag| p.map(|p| UserFile::reserve(p, flag, force)).transpose();
        Ok(PageFiles {
            har: reserve(har, "--har")?,
            svg: reserve(svg.as_deref(), "--waterfall")?,
            png: reserve(png.as_deref(), "--waterfall")?,
        })
    }

    /// Writes the load's HAR and waterfall; returns notes.
    pub fn write(
        &mut self,
        run: &PageRun,
        result: &PageResult,
        spec: &LinkSpec,
    ) -> anyhow::Result<Vec<String>> {
        let waterfall = self.svg.as_mut().map(|svg| WaterfallFiles {
            svg,
            png: self.png.as_mut(),
        });
        write_har_and_waterfall(run, result, spec, self.har.as_mut(), waterfall)
    }
}

/// One load's time limit: the run's, else from the page's size (a built run has one; a run made
/// by hand may not).
fn load_limit(run: &PageRun, spec: &LinkSpec) -> Duration {
    run.timeout
        .unwrap_or_else(|| run.page.default_timeout(spec))
}

/// The page's server: quiclab's own serving `page_dir`, or another implementation reading it in
/// place (the built-in page is in the run's own work directory, a directory given by the user is
/// only read), with its kernel TCP sampled. Returns its record and the sampler.
fn start_page_server(
    run: &PageRun,
    lab: &quiclab_lab::Lab,
    work: &WorkDir,
    page_dir: PathBuf,
    server_ip: IpAddr,
) -> Result<
    (
        ImplementationRecord,
        Option<crate::peer_tcp::PeerTcpSampler>,
    ),
    RunError,
> {
    let cc = run.stack.cc_name(run.proto);
    Ok(if run.server == Server::Quiclab {
        let mut serve = harness::serve_config(lab, work, run.stack);
        serve.dir = Some(page_dir);
        if work.is_kept() {
            serve.cwnd_log = Some(work.join("cwnd.csv"));
            serve.qlog_dir = Some(work.path().to_path_buf());
        }
        harness::start_server(lab, work, serve)?;
        (crate::peer::quiclab_record(cc), None)
    } else {
        let tcp = run.proto != Protocol::H3;
        // Caddy takes the namespace's TCP congestion control; the others set their own.
        if tcp && run.server == Server::Caddy {
            crate::peer::ensure_namespace_cc(lab, quiclab_lab::Side::Server, cc, "Caddy")?;
        }
        // The page's files, read in place: the built-in page is in the run's own work
        // directory, a directory given by the user is only read.
        let record = crate::peer::start_server(
            lab,
            work,
            &crate::peer::ServerChoice {
                server: run.server,
                address: server_ip,
                root: &page_dir,
                quic_cc: (!tcp).then_some(cc),
                tcp_cc: cc,
                qlog: work.is_kept(),
            },
        )?
        .record;
        let sampler = crate::peer_tcp::sample_other_server(lab, work, run.server, run.proto)?;
        (record, sampler)
    })
}
