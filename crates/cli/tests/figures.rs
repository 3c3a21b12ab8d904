//! `--figure FILE` of the workload commands: one run, one picture (bulk: delivered rate,
//! congestion window and queue over time; flows: each flow; video: buffer and bitrate; page: its
//! waterfall), refused before any lab when the name cannot be written.

mod common;
use common::*;

#[test]
fn a_figure_name_that_cannot_be_written_is_refused_before_any_lab() {
    let dir = temp_dir("figure-refused");
    let txt = dir.join("f.txt");
    refused(
        "bulk",
        &["--proto", "h3", "--figure", txt.to_str().unwrap()],
        &["--figure", ".svg", ".png"],
    );
    // An existing file is someone's: replaced only with --force.
    let there = write(&dir, "there.svg", "<svg/>");
    refused(
        "bulk",
        &["--proto", "h3", "--figure", there.to_str().unwrap()],
        &["--figure", "--force"],
    );
    assert_eq!(std::fs::read_to_string(&there).unwrap(), "<svg/>");
    let page = dir.join("w.svg");
    let page = page.to_str().unwrap();
    refused(
        "page",
        &[
            "--proto",
            "h3",
            "--page",
            "carlucci-small",
            "--figure",
            page,
            "--waterfall",
            page,
        ],
        &["--figure and --waterfall"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_workload_command_draws_its_run() {
    if !root_or_skip("each_workload_command_draws_its_run") {
        return;
    }
    let dir = temp_dir("figures");
    let link = ["--rate", "10mbit", "--rtt", "40ms"];
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "bulk.png",
            &["bulk", "--proto", "h3", "--size", "2MB"],
            &["throughput", "congestion window", "queue delay"],
        ),
        (
            "flows.svg",
            &["flows", "--flow", "h1", "--flow", "h3", "--duration", "6s"],
            &["throughput"],
        ),
        (
            "video.svg",
            &["video", "--proto", "h3", "--duration", "20s"],
            &["buffer", "bitrate"],
        ),
    ];
    // The three labs side by side (the figures, not the timing, are under test).
    let outs = outputs_at_once(
        cases
            .iter()
            .map(|(file, args, _)| {
                let mut c = quiclab();
                c.args(*args).args(link).arg("--figure").arg(dir.join(file));
                c
            })
            .collect(),
    );
    for ((file, _, panels), out) in cases.into_iter().zip(outs) {
        let path = dir.join(file);
        assert_success(&out);
        let svg = std::fs::read_to_string(path.with_extension("svg")).unwrap();
        for p in panels {
            assert!(svg.contains(p), "{file}: no {p:?} panel");
        }
        if file.ends_with(".png") {
            let png = std::fs::read(&path).unwrap();
            assert!(png.starts_with(b"\x89PNG"), "{file} is no PNG");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
