//! A workload command's one run (`quiclab bulk|page|flows|video`), judged as `quiclab run` judges
//! a run: the lab's pauses watched and the emulator's fidelity checked by the same rules
//! ([`crate::fidelity::flags`]), so a single run says whether its link was the one asked for.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_workload::{Outcome, Workload, WorkloadResult};

/// The run and its fidelity flags (None: the run has no emulator report to judge).
pub struct CommandRun<R> {
    pub outcome: Outcome<R>,
    pub flags: Option<Vec<String>>,
}

/// Runs `work` once in a fresh lab (`keep`, `pcap` as the command's flags say). The pauses are
/// watched over the whole run, the lab's set-up and teardown included (the grid watches the
/// workload alone): a command errs toward flagging.
pub fn run<W: Workload>(
    work: &W,
    (options, spec): (&LinkOptions, &LinkSpec),
    keep: Option<&Path>,
    pcap: (Option<&Path>, bool),
) -> Result<CommandRun<W::Output>> {
    let watch = quiclab_lab::host::PauseWatch::global();
    let start = Instant::now();
    let outcome = quiclab_workload::harness::run_for_command(work, (options, spec), keep, pcap)?;
    let pauses = watch.map(|w| w.between(start, Instant::now()));
    let flags = outcome
        .fidelity
        .as_ref()
        .map(|f| crate::fidelity::flags(spec, f, pauses.as_ref()));
    Ok(CommandRun { outcome, flags })
}

/// What the command prints: the result's text and the verdict `run` would store on a line of its
/// own ("fidelity: ok", "fidelity: out of tolerance (why)"), or, with `--json`, the result's
/// document with the same `flags` (null when nothing could be judged).
pub fn text<R: WorkloadResult + std::fmt::Display>(
    result: &R,
    flags: Option<&[String]>,
    json: bool,
) -> Result<String> {
    if json {
        let mut doc = serde_json::to_value(result)?;
        if let Some(o) = doc.as_object_mut() {
            o.insert("flags".into(), serde_json::json!(flags));
        }
        return Ok(serde_json::to_string_pretty(&doc)?);
    }
    let verdict = match flags {
        None => "fidelity: not judged (the run has no emulator report)".to_string(),
        Some([]) => "fidelity: ok".to_string(),
        Some(f) => format!("fidelity: out of tolerance ({})", f.join("; ")),
    };
    Ok(format!("{result}\n{verdict}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiclab_model::WorkloadOutput;

    /// Issue 61: a single run's text ends with the verdict `run` stores, its JSON carries the
    /// same flags.
    #[test]
    fn a_commands_output_carries_the_fidelity_verdict() {
        let WorkloadOutput::Bulk(b) = WorkloadOutput::example() else {
            unreachable!("the example is a bulk result")
        };
        let ok = text(&b, Some(&[]), false).unwrap();
        assert!(ok.ends_with("\nfidelity: ok"), "{ok}");
        let flagged = ["lab paused 120 ms".to_string()];
        let bad = text(&b, Some(&flagged), false).unwrap();
        assert!(
            bad.ends_with("\nfidelity: out of tolerance (lab paused 120 ms)"),
            "{bad}"
        );
        assert!(
            text(&b, None, false)
                .unwrap()
                .ends_with("not judged (the run has no emulator report)")
        );
        let doc: serde_json::Value =
            serde_json::from_str(&text(&b, Some(&flagged), true).unwrap()).unwrap();
        assert_eq!(doc["flags"][0], "lab paused 120 ms");
        assert_eq!(doc["goodput_mbps"], 9.0);
        let doc: serde_json::Value = serde_json::from_str(&text(&b, None, true).unwrap()).unwrap();
        assert!(doc["flags"].is_null());
    }
}
