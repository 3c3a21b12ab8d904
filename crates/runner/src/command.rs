//! A workload command's one run (`quiclab bulk|page|flows|video`), judged as `quiclab run` judges
//! a run: the lab's pauses watched and the emulator's fidelity checked by the same rules
//! ([`crate::fidelity::flags`]), so a single run says whether its link was the one asked for.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use quiclab_lab::LinkSpec;
use quiclab_link::LinkOptions;
use quiclab_outputs::UserFile;
use quiclab_workload::{Outcome, Workload, WorkloadResult};

/// The run, its fidelity flags (None: the run has no emulator report to judge) and, when a
/// figure was asked for, why it could not be written (the result is printed whatever became of
/// its files).
pub struct CommandRun<R> {
    pub outcome: Outcome<R>,
    pub flags: Option<Vec<String>>,
    pub figure_error: Option<String>,
}

/// Runs `work` once in a fresh lab (`keep`, `pcap` as the command's flags say) and draws
/// `figure` from it. The pauses are watched over the whole run, the lab's set-up and teardown
/// included (the grid watches the workload alone): a command errs toward flagging.
pub fn run<W: Workload>(
    work: &W,
    (options, spec): (&LinkOptions, &LinkSpec),
    keep: Option<&Path>,
    pcap: (Option<&Path>, bool),
    figure: Option<&mut FigureFiles>,
) -> Result<CommandRun<W::Output>> {
    // A figure reads the run's files (packet log, congestion samples): a temporary directory
    // holds them when the command keeps none (removed at the end).
    let temp = match (figure.is_some(), keep) {
        (true, None) => Some(
            tempfile::Builder::new()
                .prefix("quiclab-figure-")
                .tempdir()?,
        ),
        _ => None,
    };
    let dir = keep.or(temp.as_ref().map(|t| t.path()));
    // A kept run without --pcap captures into DIR/capture.pcapng, so that its qlogs get frames.
    let own = match (keep, pcap.0) {
        (Some(k), None) => own_capture(k)?,
        _ => None,
    };
    let pcap = match &own {
        Some((path, replace)) => (Some(path.as_path()), *replace),
        None => pcap,
    };
    let watch = quiclab_lab::host::PauseWatch::global();
    let start = Instant::now();
    let outcome = quiclab_workload::harness::run_for_command(work, (options, spec), dir, pcap)?;
    if let Some((path, _)) = &own
        && path.is_file()
    {
        quiclab_outputs::list_in_manifest(path)?;
    }
    let pauses = watch.map(|w| w.between(start, Instant::now()));
    let flags = outcome
        .fidelity
        .as_ref()
        .map(|f| crate::fidelity::flags(spec, f, pauses.as_ref()));
    // Kept qlogs get their packets' frames from the capture (quinn 0.11 logs none).
    if let (Some(keep), Some(capture)) = (keep, pcap.0) {
        for note in complete_qlogs(keep, capture) {
            eprintln!("{note}");
        }
    }
    let figure_error = match (figure, dir) {
        (Some(fig), Some(dir)) => {
            let title = format!(
                "{} {} — {}",
                work.name(),
                work.contender(),
                spec.describe().downlink
            );
            fig.write(&title, run_series(work, &outcome, dir, spec))
                .err()
                .map(|e| format!("{e:#}"))
        }
        _ => None,
    };
    Ok(CommandRun {
        outcome,
        flags,
        figure_error,
    })
}

/// The capture a kept run makes of its own (`keep/capture.pcapng`) and whether it replaces an
/// earlier one (only when quiclab wrote that one: the directory's manifest lists it); None when a
/// file of that name is someone else's (never replaced: the run goes without, and says so).
fn own_capture(keep: &Path) -> Result<Option<(std::path::PathBuf, bool)>> {
    quiclab_outputs::claim_dir(keep, "--keep")?;
    let path = keep.join("capture.pcapng");
    let exists = std::fs::symlink_metadata(&path).is_ok();
    let ours = quiclab_outputs::manifest(keep).contains("capture.pcapng");
    Ok(match (exists, ours) {
        (false, _) => Some((path, false)),
        (true, true) => Some((path, true)),
        (true, false) => {
            eprintln!(
                "quiclab: note: {} is not quiclab's: this kept run makes no capture of its own \
                 (its qlogs get no frames; give --pcap FILE)",
                path.display()
            );
            None
        }
    })
}

/// The qlogs quinn wrote in `dir` (`client.sqlog`, `client-warmup.sqlog`, `server-N.sqlog`:
/// another implementation's qlogs are its own, left as they are) completed with the frames of the
/// packets in the capture `pcap` (`quiclab_quicwire::add_frames`), each rewritten in place; what
/// was done, or why not, as lines for stderr.
fn complete_qlogs(dir: &Path, pcap: &Path) -> Vec<String> {
    let quinns = |name: &str| {
        name == "client.sqlog"
            || name == "client-warmup.sqlog"
            || name
                .strip_prefix("server-")
                .and_then(|n| n.strip_suffix(".sqlog"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| quinns(&e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    if files.is_empty() {
        return Vec::new();
    }
    files.sort();
    let connections = match std::fs::read(pcap)
        .map_err(|e| e.to_string())
        .and_then(|b| quiclab_quicwire::connections(&b))
    {
        Ok(c) => c,
        Err(e) => {
            return vec![format!(
                "qlogs: not completed with frames: reading {}: {e}",
                pcap.display()
            )];
        }
    };
    let mut out = Vec::new();
    for f in files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let client = name.starts_with("client");
        let done = std::fs::read_to_string(&f)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                let c = quiclab_quicwire::add_frames(&text, client, &connections);
                quiclab_outputs::write_in_claimed(&f, c.text.as_bytes())
                    .map_err(|e| e.to_string())?;
                Ok(c)
            });
        out.push(match done {
            Ok(c) => format!(
                "qlog {}: {} of {} packet events with their frames (from {})",
                f.display(),
                c.with_frames,
                c.packet_events,
                pcap.display()
            ),
            Err(e) => format!("qlog {}: not completed with frames: {e}", f.display()),
        });
    }
    out
}

/// The time series of one command run: the workload's own (a player's buffer and bitrate, each
/// flow's throughput and window) and, from the files in `dir`, the downlink queue, the busiest
/// connection's window when the workload has none of its own, and the delivered rate per 100 ms
/// when it has no throughput of its own.
fn run_series<W: Workload>(
    work: &W,
    outcome: &Outcome<W::Output>,
    dir: &Path,
    spec: &LinkSpec,
) -> Vec<quiclab_report::TimeSeries> {
    const KEY: &str = "run";
    let own = work.time_series(outcome);
    let mut all = crate::read_series(KEY, dir, spec, own.is_empty());
    if !own.iter().any(|s| s.name.starts_with("throughput_mbps")) {
        let log = std::fs::read_to_string(dir.join("link.log")).unwrap_or_default();
        all.extend(crate::series::delivered_rate_series(KEY, &log, 0.1));
    }
    let mut out: Vec<quiclab_report::TimeSeries> = own
        .into_iter()
        .map(|s| quiclab_report::TimeSeries {
            run_key: KEY.into(),
            name: s.name,
            unit: s.unit,
            points: s.points,
        })
        .collect();
    out.extend(all.into_iter().map(|s| quiclab_report::TimeSeries {
        run_key: s.run_key,
        name: s.name,
        unit: s.unit,
        points: s.points,
    }));
    out
}

/// `--figure FILE` of a workload command: FILE.svg, or FILE.png with its SVG beside it; reserved
/// before the lab starts (a refusal costs no run; an existing file is replaced only with
/// `--force`, never through a symbolic link).
pub struct FigureFiles {
    svg: UserFile,
    png: Option<UserFile>,
}

impl FigureFiles {
    /// Reserves the figure's files, distinct from `--pcap`'s.
    pub fn reserve(path: &Path, pcap: Option<&Path>, force: bool) -> Result<FigureFiles> {
        let (svg, png) = match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => (path.to_path_buf(), None),
            Some("png") => (path.with_extension("svg"), Some(path.to_path_buf())),
            _ => bail!(
                "--figure {}: name a .svg file, or a .png file (its SVG is written beside it)",
                path.display()
            ),
        };
        let mut named: Vec<(&Path, &str)> = vec![(&svg, "--figure")];
        named.extend(png.as_deref().map(|p| (p, "--figure")));
        named.extend(pcap.map(|p| (p, "--pcap")));
        quiclab_outputs::distinct(&named)?;
        Ok(FigureFiles {
            svg: UserFile::reserve(&svg, "--figure", force)?,
            png: png
                .map(|p| UserFile::reserve(&p, "--figure", force))
                .transpose()?,
        })
    }

    fn write(&mut self, title: &str, series: Vec<quiclab_report::TimeSeries>) -> Result<()> {
        let Some(spec) = quiclab_report::figures::run_figure(title, series) else {
            bail!("--figure: the run left no time series to draw (no packet log, no samples)");
        };
        let svg = quiclab_report::figures::figure_svg(&spec).map_err(anyhow::Error::msg)?;
        self.svg.write(svg.as_bytes())?;
        if let Some(png) = &mut self.png {
            let (tmp, _file) = png.temp()?;
            quiclab_report::figures::figure_png(&spec, &tmp)
                .map_err(|e| anyhow::anyhow!("--figure: the PNG: {e} (the SVG is written)"))?;
            png.commit(&tmp)?;
        }
        Ok(())
    }
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

    /// A kept run's own capture: made in a new directory, replacing only quiclab's own earlier
    /// one, never a file of that name that someone else put there.
    #[test]
    fn a_kept_runs_capture_replaces_only_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let keep = tmp.path().join("keep");
        let (path, replace) = own_capture(&keep).unwrap().unwrap();
        assert_eq!(path, keep.join("capture.pcapng"));
        assert!(!replace);
        // An earlier run's, listed in the directory's manifest: replaced.
        std::fs::write(&path, b"pcapng").unwrap();
        quiclab_outputs::list_in_manifest(&path).unwrap();
        assert_eq!(own_capture(&keep).unwrap(), Some((path.clone(), true)));
        // Someone else's file of that name: left alone, no capture.
        let other = tmp.path().join("other");
        quiclab_outputs::claim_dir(&other, "--keep").unwrap();
        std::fs::write(other.join("capture.pcapng"), b"theirs").unwrap();
        assert_eq!(own_capture(&other).unwrap(), None);
        assert_eq!(
            std::fs::read(other.join("capture.pcapng")).unwrap(),
            b"theirs"
        );
    }

    /// Only quinn's qlogs are completed: another implementation's are its own.
    #[test]
    fn only_quinns_qlogs_are_completed() {
        let tmp = tempfile::tempdir().unwrap();
        quiclab_outputs::claim_dir(tmp.path(), "--keep").unwrap();
        for name in [
            "client.sqlog",
            "server-0.sqlog",
            "abc_client.sqlog",
            "server-x.sqlog",
        ] {
            let path = tmp.path().join(name);
            std::fs::write(&path, "\u{1e}{}\n").unwrap();
            quiclab_outputs::list_in_manifest(&path).unwrap();
        }
        // A capture of no packets: quinn's two files are read and written back, the others never.
        let pcap = tmp.path().join("empty.pcapng");
        std::fs::write(&pcap, quiclab_lab::capture::section_header("test")).unwrap();
        let lines = complete_qlogs(tmp.path(), &pcap);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("client.sqlog") && lines[0].contains("0 of 0"),
            "{lines:?}"
        );
        assert!(lines[1].contains("server-0.sqlog"), "{lines:?}");
        // Without a readable capture, that is said once.
        let lines = complete_qlogs(tmp.path(), &tmp.path().join("none.pcapng"));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("not completed with frames"), "{lines:?}");
    }

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
