//! Flat CSV for pandas and R users: `runs.csv` (one row per run, one column per parameter and per
//! metric) and `series.csv` (long form: one row per time-series point).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use crate::store::Store;

/// What an export wrote (`quiclab export --json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportSummary {
    pub runs_csv: PathBuf,
    pub series_csv: PathBuf,
    pub runs: usize,
    pub series_points: usize,
}

/// Fixed leading columns of runs.csv; then `param.<name>` per parameter, then one per metric.
const RUN_COLUMNS: &[&str] = &[
    "key",
    "run_index",
    "setting",
    "setting_label",
    "contender",
    "repetition",
    "seed",
    "status",
    "reason",
    "flagged",
    "flags",
    "started_unix",
    "duration_s",
    "setup_ms",
    "teardown_ms",
    "host_steal",
    "session_id",
    "attempt",
];

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| x.to_string())
}

/// Writes `out_dir/runs.csv` and `out_dir/series.csv` from `store`. Missing values are empty
/// cells (pandas reads them as NaN).
pub fn export_csv(store: &Store, out_dir: &Path) -> Result<ExportSummary> {
    // Only into a directory quiclab claimed; both files checked before either is written.
    quiclab_outputs::claim_dir(out_dir, "--to")?;
    // One writer at a time (re-entrant: the results directory itself is locked already).
    let _lock = quiclab_outputs::lock_dir(out_dir, "--to", false)?;
    quiclab_outputs::check_in_claimed(&[&out_dir.join("runs.csv"), &out_dir.join("series.csv")])?;
    let runs = store.runs()?;
    let params: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.params.keys().map(String::as_str))
        .collect();
    // Metrics that repeat a fixed column (setup_ms, …) appear once, as the fixed column.
    let metrics: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.metrics.keys().map(String::as_str))
        .filter(|m| !RUN_COLUMNS.contains(m))
        .collect();

    let runs_csv = out_dir.join("runs.csv");
    let mut w = csv::Writer::from_writer(Vec::new());
    let header: Vec<String> = RUN_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(params.iter().map(|p| format!("param.{p}")))
        .chain(metrics.iter().map(|m| m.to_string()))
        .collect();
    w.write_record(&header)?;
    for r in &runs {
        let mut row = vec![
            r.key.clone(),
            r.index.to_string(),
            r.setting.to_string(),
            r.setting_label.clone(),
            r.contender.clone(),
            r.repetition.to_string(),
            r.seed.to_string(),
            r.status().as_str().to_string(),
            r.reason().unwrap_or_default(),
            u8::from(!r.flags.is_empty()).to_string(),
            r.flags.join("; "),
            r.started_unix.to_string(),
            r.duration_s.to_string(),
            opt(r.setup_ms),
            opt(r.teardown_ms),
            opt(r.host_steal),
            r.session_id.to_string(),
            r.attempt.to_string(),
        ];
        row.extend(
            params
                .iter()
                .map(|p| r.params.get(*p).cloned().unwrap_or_default()),
        );
        row.extend(metrics.iter().map(|m| opt(r.metrics.get(*m).copied())));
        w.write_record(&row)?;
    }
    quiclab_outputs::write_in_claimed(&runs_csv, &w.into_inner().map_err(|e| anyhow!("{e}"))?)
        .with_context(|| format!("writing {}", runs_csv.display()))?;

    let series_csv = out_dir.join("series.csv");
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["run_key", "name", "unit", "t_s", "value"])?;
    let mut points = 0;
    for s in store.series()? {
        for (t, v) in &s.points {
            w.write_record([
                s.run_key.as_str(),
                &s.name,
                &s.unit,
                &t.to_string(),
                &v.to_string(),
            ])?;
            points += 1;
        }
    }
    quiclab_outputs::write_in_claimed(&series_csv, &w.into_inner().map_err(|e| anyhow!("{e}"))?)
        .with_context(|| format!("writing {}", series_csv.display()))?;
    Ok(ExportSummary {
        runs_csv,
        series_csv,
        runs: runs.len(),
        series_points: points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;
    use crate::store::Environment;
    use crate::store::tests::{run, scenario, temp_db};

    #[test]
    fn runs_csv_has_a_column_per_parameter_and_metric() {
        let path = temp_db("export");
        let mut s = Store::create_or_resume(&path, &scenario(), false).unwrap();
        s.begin_session(&Environment::default()).unwrap();
        let mut a = run("a", 0, Status::Failed);
        a.document = quiclab_model::document::RunDocument::Failed {
            reason: "comma, and \"quotes\"".into(),
            partial: None,
        };
        s.record(&a, &[]).unwrap();
        let mut b = run("b", 1, Status::Failed);
        b.metrics.clear();
        b.params.insert("loss".into(), "2%".into());
        s.record(&b, &[]).unwrap();
        let dir = path.parent().unwrap().join("csv");
        let summary = export_csv(&s, &dir).unwrap();
        assert_eq!(summary.runs, 2);
        let mut r = csv::Reader::from_path(&summary.runs_csv).unwrap();
        let headers = r.headers().unwrap().clone();
        let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(&rows[0][col("total_ms")], "12.5");
        assert_eq!(&rows[1][col("total_ms")], "");
        assert_eq!(&rows[0][col("reason")], "comma, and \"quotes\"");
        assert_eq!(&rows[1][col("param.loss")], "2%");
        assert_eq!(&rows[1][col("status")], "failed");
        assert_eq!(&rows[0][col("seed")], (u64::MAX - 7).to_string());
    }
}
