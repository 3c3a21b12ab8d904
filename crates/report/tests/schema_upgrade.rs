//! A results database written by quiclab before schema 4 (commit 7e5907e, schema 3: untyped
//! documents, `switches` with two meanings) is upgraded when opened, every document then reads
//! back with the workloads' types, and the report shows the same tables as that quiclab's own
//! report of the same database. The fixtures were made with that commit's binary:
//! `quiclab run` of the two scenarios stored in them (`SELECT text FROM scenario`), and
//! `quiclab report` (its tables kept in `v3-*.report-tables.html`).

use std::path::{Path, PathBuf};

use quiclab_model::WorkloadOutput;
use quiclab_results::{Status, Store};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../results/tests/data")
        .join(name)
}

/// A copy of fixture `kind` as DIR/results.sqlite in a directory quiclab claimed (as `quiclab
/// run` made it), so that a report may be written beside it.
fn copy(kind: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    quiclab_outputs::claim_dir(dir.path(), "--out").unwrap();
    std::fs::copy(
        fixture(&format!("v3-{kind}.sqlite")),
        dir.path().join("results.sqlite"),
    )
    .unwrap();
    dir
}

fn tables(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(a) = rest.find("<table") {
        let b = rest[a..].find("</table>").expect("a closed table") + a + "</table>".len();
        out.push(rest[a..b].to_string());
        rest = &rest[b..];
    }
    out
}

#[test]
fn a_schema_3_database_is_upgraded_and_reads_with_types() {
    let dir = copy("bulk");
    let store = Store::open(&dir.path().join("results.sqlite")).unwrap();
    let runs = store.runs_as::<WorkloadOutput>().unwrap();
    assert_eq!(runs.len(), 4);
    for r in &runs {
        match r.status() {
            Status::Ok => {
                let Some(WorkloadOutput::Bulk(b)) = r.document.result() else {
                    panic!("{}: {:?}", r.key, r.document);
                };
                assert_eq!(b.total_ms, r.metrics["total_ms"]);
                assert_eq!(b.bytes, 100_000);
            }
            Status::Timeout => {
                // Censored at the scenario's limit, nothing measured beside it.
                assert_eq!(r.document.time_limit_s(), Some(3.0), "{}", r.key);
                assert!(r.document.result().is_none());
            }
            Status::Failed => panic!("{}: no run of the fixture failed", r.key),
        }
    }
    // Reading never changes the file: it is read through an upgraded copy, every time.
    drop(store);
    assert_eq!(
        std::fs::read(dir.path().join("results.sqlite")).unwrap(),
        std::fs::read(fixture("v3-bulk.sqlite")).unwrap()
    );
    let again = Store::open(&dir.path().join("results.sqlite")).unwrap();
    assert_eq!(again.runs_as::<WorkloadOutput>().unwrap().len(), 4);
    drop(again);
    // Writing upgrades it in place (quiclab's marker is there), after a backup copy.
    let w = Store::open_to_write(&dir.path().join("results.sqlite")).unwrap();
    assert_eq!(w.runs_as::<WorkloadOutput>().unwrap().len(), 4);
    assert_eq!(
        std::fs::read(dir.path().join("results.sqlite.schema-3.bak")).unwrap(),
        std::fs::read(fixture("v3-bulk.sqlite")).unwrap()
    );

    let dir = copy("video");
    let store = Store::open(&dir.path().join("results.sqlite")).unwrap();
    let runs = store.runs_as::<WorkloadOutput>().unwrap();
    let Some(WorkloadOutput::Video(v)) = runs[0].document.result() else {
        panic!("{:?}", runs[0].document);
    };
    // Schema 3's `switches` list is the network switches now; the count has one name.
    assert_eq!(v.network_switches.as_ref().map(Vec::len), Some(1));
    assert_eq!(
        runs[0].metrics.get("bitrate_switches"),
        Some(&(v.bitrate_switches as f64))
    );
    assert!(!runs[0].metrics.contains_key("switches"));
    assert_eq!(
        v.players[0].metrics.bitrate_switches, v.bitrate_switches,
        "player 1's count"
    );
}

#[test]
fn an_upgraded_database_reports_the_same_tables() {
    for kind in ["bulk", "video"] {
        let dir = copy(kind);
        let out = quiclab_report::from_store::write_report(
            dir.path(),
            &Default::default(),
            &quiclab_runner::metric_registry(),
        )
        .unwrap();
        let new = tables(&std::fs::read_to_string(out.html).unwrap());
        // A deliberate change of the report's tables is written into the fixture with
        // QUICLAB_BLESS=1 (and its diff read before it is committed).
        if std::env::var("QUICLAB_BLESS").is_ok_and(|v| v == "1") {
            let path = fixture(&format!("v3-{kind}.report-tables.html"));
            std::fs::write(path, new.join("\n") + "\n").unwrap();
        }
        let old = tables(
            &std::fs::read_to_string(fixture(&format!("v3-{kind}.report-tables.html"))).unwrap(),
        );
        assert!(!old.is_empty());
        assert_eq!(new.len(), old.len(), "{kind}");
        for (n, o) in new.iter().zip(&old) {
            assert_eq!(n, o, "{kind}");
        }
    }
}
