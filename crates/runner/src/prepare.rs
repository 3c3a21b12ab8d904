//! From a run's parameters (strings from the scenario file) to a typed run: the link's options
//! and spec, and the workload.
//!
//! Every link value goes through quiclab-link's own parser ([`LinkOptions::set`], the one behind
//! the LINK OPTIONS flags), so a scenario accepts exactly what the flags accept; the workload keys
//! become a [`WorkloadSpec`] by an exhaustive match on the scenario's kind. Errors name the
//! scenario file, the line the value came from and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow};
use quiclab_experiment::{RunSpec, Scenario, WorkloadKind};
use quiclab_flows::FlowMix;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_link::options::PATH_KEYS;
use quiclab_proto::options::{Protocol, StackOptions, TlsVersion};
use quiclab_workload::WorkloadSpec;
use quiclab_workload::bulk::{BulkRun, SwitchBehaviour};
use quiclab_workload::child::Browser;
use quiclab_workload::flows::{FlowAmount, FlowsRun};
use quiclab_workload::page::{PageRun, PageSource};
use quiclab_workload::video::{VideoOptions, VideoRun};

/// One run, ready to execute.
#[derive(Debug, Clone)]
pub struct PreparedRun {
    pub link: LinkOptions,
    pub spec: LinkSpec,
    pub work: WorkloadSpec,
}

impl PreparedRun {
    pub fn contender(&self) -> String {
        self.work.contender()
    }

    /// A rough duration of the run (an estimate; see the workloads' `estimate_seconds`).
    pub fn estimate_seconds(&self) -> f64 {
        self.work.estimate_seconds(&self.spec)
    }

    /// The run's time limit: it ends as timed out (censored) when it takes longer.
    pub fn time_limit(&self) -> Duration {
        self.work.time_limit(&self.spec)
    }
}

/// Turns plan entries into runnable ones, reporting errors against the scenario file.
pub struct Preparer<'a> {
    scenario: &'a Scenario,
    file: String,
    dir: PathBuf,
}

impl<'a> Preparer<'a> {
    pub fn new(scenario: &'a Scenario, file: &Path) -> Preparer<'a> {
        Preparer {
            scenario,
            file: file.display().to_string(),
            dir: file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
        }
    }

    /// The line a key's value came from: the grid axis if the key varies, else its table.
    fn line_of(&self, key: &str, value: &str) -> usize {
        if let Some((_, values)) = self.scenario.grid.iter().find(|(k, _)| k == key)
            && let Some(v) = values.iter().find(|v| v.value.to_string() == value)
        {
            return v.line;
        }
        for table in [
            &self.scenario.link,
            &self.scenario.workload,
            &self.scenario.protocol,
        ] {
            if let Some(v) = table.get(key) {
                return v.line;
            }
        }
        0
    }

    fn at(&self, key: &str, value: &str, message: impl std::fmt::Display) -> anyhow::Error {
        match self.line_of(key, value) {
            0 => anyhow!("{}: key \"{key}\": {message}", self.file),
            line => anyhow!("{}:{line}: key \"{key}\": {message}", self.file),
        }
    }

    fn resolve_path(&self, key: &str, value: &str) -> String {
        let is_builtin_profile =
            key.ends_with("profile") && quiclab_link::profile::builtin(value).is_some();
        let p = Path::new(value);
        if is_builtin_profile || p.is_absolute() {
            value.to_string()
        } else {
            self.dir.join(p).display().to_string()
        }
    }

    /// The link of a run: each key parsed on its own (so the error names it), then all together.
    fn link(
        &self,
        params: &BTreeMap<String, String>,
        seed: u64,
    ) -> Result<(LinkOptions, LinkSpec)> {
        let mut options = LinkOptions {
            // The run's seed, unless the scenario pins one for every run.
            seed,
            ..LinkOptions::default()
        };
        for key in quiclab_link::options::LINK_KEYS {
            let Some(value) = params.get(*key) else {
                continue;
            };
            let value = if PATH_KEYS.contains(key) {
                self.resolve_path(key, value)
            } else {
                value.clone()
            };
            options
                .set(key, &value)
                .map_err(|e| self.at(key, &params[*key], e))?;
        }
        let spec = options.to_spec().map_err(|e| {
            anyhow!(
                "{}: the link of setting {} is impossible: {e}",
                self.file,
                describe(params)
            )
        })?;
        Ok((options, spec))
    }

    /// Validates and converts one run of the plan.
    pub fn prepare(&self, run: &RunSpec) -> Result<PreparedRun> {
        let p = &run.params;
        let (link, spec) = self.link(p, run.seed)?;
        let get = |k: &str| p.get(k).map(String::as_str);

        let proto_s = get("protocol").unwrap_or("h2");
        let proto: Protocol = proto_s
            .parse()
            .map_err(|e| self.at("protocol", proto_s, e))?;
        let mut stack = StackOptions {
            tls: get("tls")
                .map(|t| t.parse::<TlsVersion>().map_err(|e| self.at("tls", t, e)))
                .transpose()?,
            ..StackOptions::default()
        };
        if let Some(cc) = get("cc") {
            stack = stack.with_cc(proto, cc).map_err(|e| self.at("cc", cc, e))?;
        }
        let flag = |k: &str| -> Result<bool> {
            match get(k) {
                None | Some("false") => Ok(false),
                Some("true") => Ok(true),
                Some(v) => Err(self.at(k, v, "expected true or false")),
            }
        };
        let resume = flag("resume")?;
        let zero_rtt = flag("zero_rtt")?;
        // XOR FEC under QUIC: `fec = N` (0 or "off": none), flushed after max(RTT/2, 5 ms).
        if let Some(v) = get("fec")
            && v != "0"
            && v != "off"
        {
            let n = v
                .parse::<usize>()
                .ok()
                .ok_or_else(|| self.at("fec", v, "expected a group size from 2 to 64, or 0 / off"))
                .and_then(|n| quiclab_fec::check_group(n).map_err(|e| self.at("fec", v, e)))?;
            // A bulk download or page load is one protocol's; flows and video apply FEC to
            // their h3 flows and players (their own validation refuses a mix without one).
            if matches!(self.scenario.kind, WorkloadKind::Bulk | WorkloadKind::Page)
                && proto != Protocol::H3
            {
                return Err(self.at(
                    "fec",
                    v,
                    format!(
                        "FEC is quiclab's XOR FEC under QUIC: it needs h3, but this run is {proto}; leave the other protocols out with exclude = [{{ protocol = \"{proto}\", fec = {v} }}]"
                    ),
                ));
            }
            if spec.switch.is_some() {
                return Err(self.at(
                    "fec",
                    v,
                    "FEC across network switches is not built yet (the switching client makes its own QUIC endpoints)",
                ));
            }
            stack.fec = Some(quiclab_proto::options::FecSettings::for_rtt(
                n as u8,
                spec.base_rtt(),
            ));
        }
        if zero_rtt && proto != Protocol::H3 {
            return Err(self.at(
                "zero_rtt",
                "true",
                format!(
                    "0-RTT is QUIC's (quiclab's TCP stacks send no TLS early data), but this run is {proto}: \
                     put zero_rtt in a grid with protocol = [\"h3\"], or use resume = true to compare \
                     resumed handshakes"
                ),
            ));
        }
        let timeout = match &self.scenario.timeout {
            Some(t) => {
                let s = t.value.to_string();
                let ns = quiclab_link::units::parse_duration(&s)
                    .map_err(|e| anyhow!("{}:{}: key \"timeout\": {e}", self.file, t.line))?;
                if ns == 0 {
                    return Err(anyhow!(
                        "{}:{}: key \"timeout\": must be more than 0",
                        self.file,
                        t.line
                    ));
                }
                Some(Duration::from_nanos(ns))
            }
            None => None,
        };
        let switching = self.switching(p, &spec)?;
        let work = match self.scenario.kind {
            WorkloadKind::Page => {
                if resume || zero_rtt {
                    let key = if resume { "resume" } else { "zero_rtt" };
                    return Err(self.at(
                        key,
                        "true",
                        "page loads start cold (a fresh browser, no session tickets); resumption is \
                         measured with kind = \"bulk\"",
                    ));
                }
                let page_s = get("page").ok_or_else(|| {
                    anyhow!(
                        "{}: [workload] needs a page, e.g. page = \"carlucci-small\"",
                        self.file
                    )
                })?;
                // A name without a slash is a built-in page; anything else a directory, relative
                // to the scenario file.
                let page = if page_s.contains('/') {
                    PageSource::Dir(PathBuf::from(self.resolve_path("page", page_s)))
                } else {
                    PageSource::Builtin(page_s.to_string())
                };
                page.validate().map_err(|e| self.at("page", page_s, e))?;
                let browser = match get("browser") {
                    None | Some("builtin") => Browser::Builtin,
                    Some("chromium") => {
                        quiclab_browser::check_chromium(Path::new(
                            quiclab_browser::DEFAULT_CHROMIUM,
                        ))
                        .map_err(|e| self.at("browser", "chromium", e))?;
                        Browser::Chromium
                    }
                    Some(other) => {
                        return Err(self.at("browser", other, "expected builtin or chromium"));
                    }
                };
                let max_streams = get("max_streams")
                    .map(|m| {
                        m.parse::<u64>()
                            .ok()
                            .filter(|&n| n >= 1)
                            .ok_or_else(|| self.at("max_streams", m, "expected an integer ≥ 1"))
                    })
                    .transpose()?;
                let run = PageRun {
                    proto,
                    browser,
                    max_streams,
                    stack,
                    timeout: timeout.unwrap_or_else(|| page.default_timeout(&spec)),
                    page,
                };
                run.validate()
                    .map_err(|(key, e)| self.at(key, get(key).unwrap_or_default(), e))?;
                WorkloadSpec::Page(run)
            }
            WorkloadKind::Flows => WorkloadSpec::Flows(self.flows(p, stack, timeout)?),
            WorkloadKind::Video => {
                let mut run = self.video(p, stack, timeout)?;
                run.switching = switching;
                run.validate()
                    .map_err(|(key, e)| self.at(key, get(key).unwrap_or("reconnect"), e))?;
                WorkloadSpec::Video(run)
            }
            WorkloadKind::Bulk => {
                let size_s = get("size").ok_or_else(|| {
                    anyhow!(
                        "{}: [workload] needs a size (bulk), e.g. size = \"5MB\"",
                        self.file
                    )
                })?;
                let size = match size_s.parse::<u64>() {
                    Ok(n) if n > 0 => n,
                    _ => parse_size(size_s).map_err(|e| self.at("size", size_s, e))?,
                };
                if spec.switch.is_some() && (resume || zero_rtt) {
                    let key = if resume { "resume" } else { "zero_rtt" };
                    return Err(self.at(
                        key,
                        "true",
                        "across network switches, resumption is chosen by on_switch = \"reconnect-0rtt\"",
                    ));
                }
                let run =
                    BulkRun {
                        resume,
                        zero_rtt,
                        stack,
                        timeout: Some(timeout.unwrap_or_else(|| {
                            quiclab_workload::bulk::default_timeout(size, &spec)
                        })),
                        switching,
                        ..BulkRun::new(proto, size)
                    };
                run.validate().map_err(|e| {
                    self.at("on_switch", get("on_switch").unwrap_or("reconnect"), e)
                })?;
                WorkloadSpec::Bulk(run)
            }
        };
        Ok(PreparedRun { link, spec, work })
    }
}

impl Preparer<'_> {
    /// How the client answers network switches (`on_switch`, `switch_timeout`,
    /// `migrate_delay`): only with a `switch` schedule, only for the workloads whose clients
    /// answer one (bulk, video).
    fn switching(&self, p: &BTreeMap<String, String>, spec: &LinkSpec) -> Result<SwitchBehaviour> {
        let get = |k: &str| p.get(k).map(String::as_str);
        let keys = ["on_switch", "switch_timeout", "migrate_delay"];
        if spec.switch.is_none() {
            if let Some(k) = keys.into_iter().find(|k| get(k).is_some()) {
                return Err(self.at(
                    k,
                    get(k).unwrap_or_default(),
                    "it answers network switches: set a schedule with switch = \"wifi@0s,lte@60s\" (or \"arisu2019-lte\") in [link] or [grid]",
                ));
            }
            return Ok(SwitchBehaviour::default());
        }
        if matches!(self.scenario.kind, WorkloadKind::Page | WorkloadKind::Flows) {
            let v = get("switch").unwrap_or_default();
            return Err(self.at(
                "switch",
                v,
                format!(
                    "network switches are answered by the bulk and video clients only; this scenario is kind = \"{}\"",
                    self.scenario.kind.name()
                ),
            ));
        }
        let mut b = SwitchBehaviour::default();
        if let Some(v) = get("on_switch") {
            b.on_switch = v.parse().map_err(|e| self.at("on_switch", v, e))?;
        }
        let dur = |k: &str| -> Result<Option<Duration>> {
            get(k)
                .map(|v| {
                    quiclab_link::units::parse_duration(v)
                        .map(Duration::from_nanos)
                        .map_err(|e| self.at(k, v, e))
                })
                .transpose()
        };
        if let Some(t) = dur("switch_timeout")? {
            if t.is_zero() {
                return Err(self.at("switch_timeout", "0s", "must be more than 0"));
            }
            b.stall_timeout = t;
        }
        if let Some(d) = dur("migrate_delay")? {
            b.migrate_delay = d;
        }
        Ok(b)
    }

    /// A flow-mix run: every key parsed here, errors naming FILE:LINE and the key.
    fn flows(
        &self,
        p: &BTreeMap<String, String>,
        stack: StackOptions,
        timeout: Option<Duration>,
    ) -> Result<FlowsRun> {
        let get = |k: &str| p.get(k).map(String::as_str);
        let mix_s = get("flows").unwrap_or_default();
        let mix = FlowMix::parse_joined(mix_s).map_err(|e| self.at("flows", mix_s, e))?;
        let duration_of = |key: &str| -> Result<Option<Duration>> {
            get(key)
                .map(|v| {
                    quiclab_link::units::parse_duration(v)
                        .map(Duration::from_nanos)
                        .map_err(|e| self.at(key, v, e))
                })
                .transpose()
        };
        let amount = match (get("size"), duration_of("duration")?) {
            (Some(size_s), None) => {
                let size = match size_s.parse::<u64>() {
                    Ok(n) if n > 0 => n,
                    _ => parse_size(size_s).map_err(|e| self.at("size", size_s, e))?,
                };
                FlowAmount::Size(size)
            }
            (None, Some(d)) => FlowAmount::Duration(d),
            _ => {
                return Err(anyhow!(
                    "{}: kind = \"flows\" needs exactly one of duration and size",
                    self.file
                ));
            }
        };
        let mut run = FlowsRun::new(mix, amount);
        run.stack = stack;
        run.timeout = timeout;
        if let Some(offsets) = get("offsets") {
            run.offsets = offsets
                .split(',')
                .map(|o| {
                    quiclab_link::units::parse_duration(o.trim())
                        .map(Duration::from_nanos)
                        .map_err(|e| self.at("offsets", offsets, e))
                })
                .collect::<Result<_>>()?;
        }
        if let Some(bin) = duration_of("bin")? {
            run.bin = bin;
        }
        run.cutoff = duration_of("cutoff")?;
        run.validate().map_err(|(key, e)| {
            let value = get(key).unwrap_or_default();
            self.at(key, value, e)
        })?;
        Ok(run)
    }
}

impl Preparer<'_> {
    /// A video run: every key checked by the workload's own parser, errors naming FILE:LINE and
    /// the key.
    fn video(
        &self,
        p: &BTreeMap<String, String>,
        stack: StackOptions,
        timeout: Option<Duration>,
    ) -> Result<VideoRun> {
        let get = |k: &str| p.get(k).map(String::as_str);
        let count = |k: &str| -> Result<Option<u32>> {
            get(k)
                .map(|v| {
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| (1..=64).contains(n))
                        .ok_or_else(|| self.at(k, v, "expected an integer from 1 to 64"))
                })
                .transpose()
        };
        let live = match get("live") {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => return Err(self.at("live", v, "expected true or false")),
        };
        // A content that is not built in is a file, relative to the scenario.
        let content = get("content").map(|c| {
            if quiclab_video::Content::builtin(c).is_some() {
                c.to_string()
            } else {
                self.resolve_path("content", c)
            }
        });
        let options = VideoOptions {
            players: get("players").unwrap_or_default().to_string(),
            abr: get("abr").map(str::to_string),
            content,
            live,
            seek: get("seek").map(str::to_string),
            duration: get("duration").map(str::to_string),
            seek_policy: get("seek_policy").map(str::to_string),
            buffer: get("buffer").map(str::to_string),
            connections: count("connections")?,
            parallel: count("parallel")?,
        };
        let mut run = VideoRun::from_options(&options)
            .map_err(|(key, e)| self.at(key, get(key).unwrap_or_default(), e))?;
        run.stack = stack;
        run.timeout = timeout;
        Ok(run)
    }
}

/// A size such as 10MB, 500kB, 1MiB or 1000B (`--size` of `bulk`, `size` of scenarios).
pub fn parse_size(s: &str) -> Result<u64, String> {
    match quiclab_link::units::parse_queue(s) {
        Ok(quiclab_link::QueueLimit::Bytes(b)) if b > 0 => Ok(b),
        _ => Err(format!(
            "expected a size such as 10MB, 500kB, 1MiB or 1000B (units B, kB, KiB, MB, MiB); got {s:?}"
        )),
    }
}

fn describe(params: &BTreeMap<String, String>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The grid values of a run without the protocol, e.g. `rate=10mbit, loss=2%` ("all runs" when
/// the grid varies nothing else).
pub fn setting_label(scenario: &Scenario, run: &RunSpec) -> String {
    let parts: Vec<String> = scenario
        .grid
        .iter()
        .filter(|(k, _)| k != scenario.kind.contender_key())
        .filter_map(|(k, _)| run.params.get(k).map(|v| format!("{k}={v}")))
        .collect();
    if parts.is_empty() {
        "all runs".to_string()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepare_all(text: &str) -> Result<Vec<PreparedRun>> {
        let s = quiclab_experiment::parse(text, "s.toml").map_err(|e| anyhow!("{e}"))?;
        let p = Preparer::new(&s, Path::new("s.toml"));
        quiclab_experiment::expand(&s)
            .iter()
            .map(|r| p.prepare(r))
            .collect()
    }

    const BASE: &str = "name = \"t\"\nrepetitions = 2\n[workload]\nkind = \"bulk\"\nsize = \"1MB\"\n[link]\nrtt = \"50ms\"\n";

    #[test]
    fn valid_runs_get_their_link_and_seed() {
        let runs = prepare_all(&format!(
            "{BASE}[grid]\nprotocol = [\"h1\", \"h3\"]\nrate = [\"3mbit\", \"10mbit\"]\nloss = [\"0%\", \"2%\"]\n"
        ))
        .unwrap();
        assert_eq!(runs.len(), 2 * 2 * 2 * 2);
        assert_eq!(runs[0].spec.downlink.constant_rate_bps(), Some(3_000_000));
        let WorkloadSpec::Bulk(bulk) = &runs[0].work else {
            panic!("a bulk run")
        };
        assert_eq!(bulk.size, 1_000_000);
        // The protocols of one repetition share the seed; repetitions differ.
        assert_eq!(runs[0].spec.seed, runs[1].spec.seed);
        assert_ne!(runs[0].spec.seed, runs[2].spec.seed);
        assert!(bulk.timeout.unwrap() > Duration::from_secs(30));
    }

    #[test]
    fn bad_values_name_file_line_and_key() {
        let e = prepare_all(&format!(
            "{BASE}[grid]\nrate = [\"3mbit\", \"10 parsecs\"]\n"
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(e.starts_with("s.toml:9: key \"rate\""), "{e}");
        let e = prepare_all(&BASE.replace("rtt = \"50ms\"", "rtt = \"50ms\"\nloss = \"120%\""))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:8: key \"loss\""), "{e}");
        let e = prepare_all(&BASE.replace("\"1MB\"", "\"1 elephant\""))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:5: key \"size\""), "{e}");
        let e = prepare_all(&format!("{BASE}[protocol]\ncc = \"vegas\"\n"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("s.toml:9: key \"cc\"") && e.contains("cubic"),
            "{e}"
        );
        let e = prepare_all(&format!("{BASE}[protocol]\nzero_rtt = true\n"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("zero_rtt") && e.contains("0-RTT"), "{e}");
        // A bdp queue on a link without delay cannot be sized.
        let e = prepare_all(&BASE.replace("rtt = \"50ms\"", "rate = \"10mbit\""))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("impossible") && e.contains("--rtt"), "{e}");
        let e = prepare_all(&format!("timeout = \"soon\"\n{BASE}"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("s.toml:1: key \"timeout\""), "{e}");
    }

    const SWITCHING: &str = "name = \"sw\"\nexclude = [{ players = \"h1/2\", on_switch = \"migrate\" }]\n[workload]\nkind = \"video\"\nlive = true\nduration = \"20s\"\nswitch_timeout = \"3s\"\n[link]\nswitch = \"wifi@0s,lte@8s\"\n[grid]\nplayers = [\"h1/2\", \"h3\"]\non_switch = [\"reconnect\", \"migrate\"]\n";

    #[test]
    fn switch_scenarios_set_each_players_answer_and_refuse_what_cannot_run() {
        let runs = prepare_all(SWITCHING).unwrap();
        assert_eq!(runs.len(), 3);
        for r in &runs {
            assert!(r.spec.switch.is_some());
            let WorkloadSpec::Video(v) = &r.work else {
                panic!("a video run")
            };
            assert_eq!(v.switching.stall_timeout, Duration::from_secs(3));
        }
        let WorkloadSpec::Video(v) = &runs.last().unwrap().work else {
            panic!("a video run")
        };
        assert_eq!(v.switching.on_switch.as_str(), "migrate");
        // The scenario's list of behaviours is the stacks' own.
        assert_eq!(
            quiclab_experiment::scenario::ON_SWITCH_VALUES,
            quiclab_stacks::switching::OnSwitch::NAMES
        );
        // Without the exclusion, h1 + migrate is refused, naming the key.
        let e = prepare_all(&SWITCHING.replace(
            "exclude = [{ players = \"h1/2\", on_switch = \"migrate\" }]\n",
            "",
        ))
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.starts_with("s.toml:11: key \"on_switch\"") && e.contains("needs h3"),
            "{e}"
        );
        // A behaviour without a schedule, and a schedule for a workload that cannot answer it.
        let e =
            prepare_all(&BASE.replace("size = \"1MB\"", "size = \"1MB\"\non_switch = \"migrate\""))
                .err()
                .unwrap()
                .to_string();
        assert!(
            e.contains("key \"on_switch\"") && e.contains("switch ="),
            "{e}"
        );
        let flows = "name = \"f\"\n[workload]\nkind = \"flows\"\nflows = \"h3 + h1\"\nduration = \"10s\"\n[link]\nswitch = \"arisu2019-lte\"\n";
        let e = prepare_all(flows).err().unwrap().to_string();
        assert!(
            e.starts_with("s.toml:7: key \"switch\"") && e.contains("bulk and video"),
            "{e}"
        );
        let e = prepare_all(&BASE.replace("rtt = \"50ms\"", "switch = \"wifi@0s,4g@3s\""))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("key \"switch\"") && e.contains("4g"), "{e}");
    }

    #[test]
    fn fec_is_a_grid_key_of_h3_bulk_runs() {
        let grid = "[grid]\nprotocol = [\"h2\", \"h3\"]\nfec = [0, 2]\n";
        let text = format!("exclude = [{{ protocol = \"h2\", fec = 2 }}]\n{BASE}{grid}");
        let runs = prepare_all(&text).unwrap();
        assert_eq!(
            runs.len(),
            3 * 2,
            "h2 off, h3 off, h3 with N = 2; two repetitions"
        );
        let fec: Vec<Option<u8>> = runs
            .iter()
            .map(|r| match &r.work {
                WorkloadSpec::Bulk(b) => b.stack.fec.map(|f| f.group),
                _ => panic!("bulk"),
            })
            .collect();
        assert_eq!(fec.iter().filter(|f| f.is_some()).count(), 2);
        // max(RTT/2, 5 ms) for the scenario's 50 ms RTT.
        let flush: Vec<u64> = runs
            .iter()
            .filter_map(|r| match &r.work {
                WorkloadSpec::Bulk(b) => b.stack.fec.map(|f| f.flush_after_us),
                _ => None,
            })
            .collect();
        assert_eq!(flush, [25_000, 25_000]);
        // Without the exclusion h2 with FEC is refused, naming the key; so is N = 1.
        let e = prepare_all(&format!("{BASE}{grid}"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("key \"fec\"") && e.contains("needs h3"), "{e}");
        let e = prepare_all(&format!("{BASE}[protocol]\nprotocol = \"h3\"\nfec = 1\n"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("fec") && e.contains("2 to 64"), "{e}");
    }

    #[test]
    fn fec_applies_to_the_h3_flows_players_and_loads_of_other_kinds() {
        let flows = "name = \"f\"\nexclude = [{ flows = \"h1\", fec = 2 }]\n[workload]\nkind = \"flows\"\nduration = \"10s\"\n[link]\nrtt = \"20ms\"\n[grid]\nflows = [\"h1\", \"h3 + h1\"]\nfec = [0, 2]\n";
        let runs = prepare_all(flows).unwrap();
        let fec: Vec<(String, Option<u8>)> = runs
            .iter()
            .map(|r| match &r.work {
                WorkloadSpec::Flows(f) => (f.mix.label(), f.stack.fec.map(|x| x.group)),
                _ => panic!("flows"),
            })
            .collect();
        assert_eq!(fec.len(), 3, "{fec:?}");
        assert!(fec.contains(&("h3+h1".into(), Some(2))), "{fec:?}");
        // A mix without an h3 flow would run without FEC: refused, naming the key.
        let e = prepare_all(&flows.replace("exclude = [{ flows = \"h1\", fec = 2 }]\n", ""))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("key \"fec\"") && e.contains("has none"), "{e}");
        let video = "name = \"v\"\n[workload]\nkind = \"video\"\nplayers = \"h2\"\nduration = \"20s\"\n[protocol]\nfec = 2\n";
        let e = prepare_all(video).err().unwrap().to_string();
        assert!(e.contains("key \"fec\"") && e.contains("h3 players"), "{e}");
        assert!(prepare_all(&video.replace("\"h2\"", "\"h3 + h2\"")).is_ok());
        let page = "name = \"p\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n[protocol]\nprotocol = \"h2\"\nfec = 2\n";
        let e = prepare_all(page).err().unwrap().to_string();
        assert!(e.contains("key \"fec\"") && e.contains("needs h3"), "{e}");
        assert!(prepare_all(&page.replace("\"h2\"", "\"h3\"")).is_ok());
    }

    #[test]
    fn trace_files_are_relative_to_the_scenario() {
        let s = quiclab_experiment::parse(
            &format!("{BASE}[grid]\ndown-trace = [\"missing.trace\"]\n"),
            "dir/s.toml",
        )
        .unwrap();
        let p = Preparer::new(&s, Path::new("/nonexistent/dir/s.toml"));
        let e = p
            .prepare(&quiclab_experiment::expand(&s)[0])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/nonexistent/dir/missing.trace"), "{e}");
    }

    #[test]
    fn estimates_grow_with_size_and_loss() {
        let runs = prepare_all(&format!(
            "{BASE}[grid]\nprotocol = [\"h2\"]\nrate = [\"10mbit\"]\nloss = [\"0%\", \"5%\"]\n"
        ))
        .unwrap();
        let (clean, lossy) = (runs[0].estimate_seconds(), runs[2].estimate_seconds());
        assert!(clean > 0.8 && clean < 2.5, "{clean}");
        assert!(lossy > clean, "{lossy} vs {clean}");
    }
}
