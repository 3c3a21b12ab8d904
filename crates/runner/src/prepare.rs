//! From a run's parameters (strings from the scenario file) to a typed run: the link's options
//! and spec, and the workload.
//!
//! Every value goes through its row of the key table ([`Params::set`], the parser behind the
//! flags too), so a scenario accepts exactly what the flags accept; the run is then built once
//! ([`build`]). Errors name the scenario file, the line the value came from and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, anyhow};
use quiclab_experiment::{RunSpec, Scenario};
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::WorkloadSpec;
use quiclab_workload::params::{Params, build};

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

    /// Validates and converts one run of the plan: every workload key through the workload's own
    /// parser ([`Params::set`], the one behind the flags), then the run as a whole
    /// ([`Params::build`]); an error names the line and key it blames.
    pub fn prepare(&self, run: &RunSpec) -> Result<PreparedRun> {
        let p = &run.params;
        let mut params = Params::new(self.scenario.kind).relative_to(&self.dir);
        // The run's seed, unless the scenario pins one for every run.
        params.link.seed = run.seed;
        if let Some(t) = &self.scenario.timeout {
            params
                .set("timeout", &t.value.to_string())
                .map_err(|e| anyhow!("{}:{}: key \"timeout\": {e}", self.file, t.line))?;
        }
        for (key, value) in p {
            if key == "kind" {
                continue;
            }
            params.set(key, value).map_err(|e| self.at(key, value, e))?;
        }
        let spec = params
            .link
            .to_spec(&quiclab_outputs::input::read_input)
            .map_err(|e| {
                anyhow!(
                    "{}: the link of setting {} is impossible: {e}",
                    self.file,
                    describe(p)
                )
            })?;
        let work = build(&params, &spec).map_err(|e| {
            let value = p.get(e.key).map(String::as_str).unwrap_or_default();
            self.at(e.key, value, e.message)
        })?;
        Ok(PreparedRun {
            link: params.link,
            spec,
            work,
        })
    }
}

/// A size such as 10MB, 500kB, 1MiB or 1000B (`--size` of `bulk`, `size` of scenarios).
pub use quiclab_workload::params::size as parse_size;

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

    /// The error preparing `text` gives (a test of a refusal).
    fn refused(text: &str) -> String {
        match prepare_all(text) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted: {text}"),
        }
    }

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
        let e = refused(&format!(
            "{BASE}[grid]\nrate = [\"3mbit\", \"10 parsecs\"]\n"
        ));
        assert!(e.starts_with("s.toml:9: key \"rate\""), "{e}");
        let e = refused(&BASE.replace("rtt = \"50ms\"", "rtt = \"50ms\"\nloss = \"120%\""));
        assert!(e.starts_with("s.toml:8: key \"loss\""), "{e}");
        let e = refused(&BASE.replace("\"1MB\"", "\"1 elephant\""));
        assert!(e.starts_with("s.toml:5: key \"size\""), "{e}");
        let e = refused(&format!("{BASE}[protocol]\ncc = \"vegas\"\n"));
        assert!(
            e.starts_with("s.toml:9: key \"cc\"") && e.contains("cubic"),
            "{e}"
        );
        let e = refused(&format!("{BASE}[protocol]\nzero_rtt = true\n"));
        assert!(e.contains("zero_rtt") && e.contains("0-RTT"), "{e}");
        // A bdp queue on a link without delay cannot be sized.
        let e = refused(&BASE.replace("rtt = \"50ms\"", "rate = \"10mbit\""));
        assert!(e.contains("impossible") && e.contains("--rtt"), "{e}");
        let e = refused(&format!("timeout = \"soon\"\n{BASE}"));
        assert!(e.starts_with("s.toml:1: key \"timeout\""), "{e}");
        // Values the scenario parser checks only for type are the workload parser's (the one
        // behind the flags), with the file's line.
        for (line, extra, key, says) in [
            (9, "[protocol]\nfec = 1\n", "fec", "2 to 64"),
            (9, "[protocol]\ntls = \"1.4\"\n", "tls", "1.2"),
            (9, "[protocol]\nprotocol = \"h4\"\n", "protocol", "h1"),
        ] {
            let e = refused(&format!("{BASE}{extra}"));
            assert!(
                e.starts_with(&format!("s.toml:{line}: key \"{key}\"")),
                "{e}"
            );
            assert!(e.contains(says), "{e}");
        }
        let page = "name = \"p\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n";
        for (extra, key, says) in [
            ("browser = \"netscape\"\n", "browser", "builtin or chromium"),
            ("max_streams = 0\n", "max_streams", "at least 1"),
        ] {
            let e = refused(&format!("{page}{extra}"));
            assert!(e.starts_with(&format!("s.toml:5: key \"{key}\"")), "{e}");
            assert!(e.contains(says), "{e}");
        }
        let video = "name = \"v\"\n[workload]\nkind = \"video\"\nplayers = \"h1\"\n";
        let e = refused(&SWITCHING.replace("\"migrate\"]", "\"wait\"]").replace(
            "exclude = [{ players = \"h1/2\", on_switch = \"migrate\" }]\n",
            "",
        ));
        assert!(
            e.starts_with("s.toml:11: key \"on_switch\"") && e.contains("reconnect-0rtt"),
            "{e}"
        );
        let e = refused(&format!("{video}connections = 0\n"));
        assert!(
            e.starts_with("s.toml:5: key \"connections\"") && e.contains("at least 1"),
            "{e}"
        );
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
        // Without the exclusion, h1 + migrate is refused, naming the key.
        let e = refused(&SWITCHING.replace(
            "exclude = [{ players = \"h1/2\", on_switch = \"migrate\" }]\n",
            "",
        ));
        assert!(
            e.starts_with("s.toml:11: key \"on_switch\"") && e.contains("needs h3"),
            "{e}"
        );
        // A behaviour without a schedule, and a schedule for a workload that cannot answer it.
        let e = refused(&BASE.replace("size = \"1MB\"", "size = \"1MB\"\non_switch = \"migrate\""));
        assert!(
            e.contains("key \"on_switch\"") && e.contains("switch ="),
            "{e}"
        );
        let flows = "name = \"f\"\n[workload]\nkind = \"flows\"\nflows = \"h3 + h1\"\nduration = \"10s\"\n[link]\nswitch = \"arisu2019-lte\"\n";
        let e = refused(flows);
        assert!(
            e.starts_with("s.toml:7: key \"switch\"") && e.contains("bulk and video"),
            "{e}"
        );
        let e = refused(&BASE.replace("rtt = \"50ms\"", "switch = \"wifi@0s,4g@3s\""));
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
        let e = refused(&format!("{BASE}{grid}"));
        assert!(e.contains("key \"fec\"") && e.contains("needs h3"), "{e}");
        let e = refused(&format!("{BASE}[protocol]\nprotocol = \"h3\"\nfec = 1\n"));
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
        let e = refused(&flows.replace("exclude = [{ flows = \"h1\", fec = 2 }]\n", ""));
        assert!(e.contains("key \"fec\"") && e.contains("has none"), "{e}");
        let video = "name = \"v\"\n[workload]\nkind = \"video\"\nplayers = \"h2\"\nduration = \"20s\"\n[protocol]\nfec = 2\n";
        let e = refused(video);
        assert!(e.contains("key \"fec\"") && e.contains("h3 players"), "{e}");
        assert!(prepare_all(&video.replace("\"h2\"", "\"h3 + h2\"")).is_ok());
        let page = "name = \"p\"\n[workload]\nkind = \"page\"\npage = \"carlucci-small\"\n[protocol]\nprotocol = \"h2\"\nfec = 2\n";
        let e = refused(page);
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
