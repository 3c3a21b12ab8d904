//! The verdicts in docs/reproductions.md, the summary in README.md and the forest plots in
//! docs/figures are the committed evidence (`evidence/`) judged by today's code, byte for byte:
//! this test judges the evidence again and fails when a file differs. After new evidence or a
//! change of the judging code, `QUICLAB_BLESS=1 cargo test -p quiclab-runner --test
//! evidence_docs` writes the files anew (then read the diff before committing it).

use std::path::Path;

#[test]
fn the_docs_verdicts_are_the_committed_evidence_judged_by_todays_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lib = quiclab_runner::reproduce::Library::find(Some(&root)).unwrap();
    let files = quiclab_runner::reproduce::generated_docs(&lib).unwrap_or_else(|e| panic!("{e:#}"));
    let bless = std::env::var_os("QUICLAB_BLESS").is_some();
    let mut stale = Vec::new();
    for (rel, text) in &files {
        let path = root.join(rel);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        if bless {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).unwrap();
            }
            std::fs::write(&path, text).unwrap();
        } else {
            stale.push(rel.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "{} differ from the committed evidence judged by today's code; regenerate them with \
         `QUICLAB_BLESS=1 cargo test -p quiclab-runner --test evidence_docs` and read the diff",
        stale.join(", ")
    );
    // Every study has its figure, and the docs link it.
    let docs = std::fs::read_to_string(root.join("docs/reproductions.md")).unwrap();
    for study in lib.studies().unwrap() {
        let figure = format!("figures/reproduction-{}.svg", study.name);
        assert!(
            docs.contains(&figure),
            "docs/reproductions.md does not show {figure}"
        );
    }
}
