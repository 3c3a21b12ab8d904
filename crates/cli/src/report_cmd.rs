//! `quiclab report DIR` and `quiclab export DIR --csv`: what a results database becomes for people
//! (an offline HTML report with figures) and for pandas/R (flat CSV).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use quiclab_report::compare::{CompareChoice, compare_dirs};
use quiclab_report::from_store::ReportChoice;
use quiclab_runner::metric_registry;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Results directory (holding results.sqlite)
    pub dir: PathBuf,
    /// Contender the improvement bars compare against (default: h1 when it ran, else the first
    /// contender that ran, e.g. the first flow mix)
    #[arg(long)]
    pub baseline: Option<String>,
    /// Metrics to show, comma-separated; the first is the primary one (CDFs, wins table).
    /// Default: the workload kind's (e.g. page: plt_ms, connections, loss_ratio)
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Include runs whose emulator fidelity was flagged in the statistics (default: shown apart)
    #[arg(long)]
    pub include_flagged: bool,
    /// Draw the time series only of the traced runs matching this filter: key=value parts of the
    /// run key, all required, e.g. `proto=h3,loss=2%,rep=1`; repeatable; default: every traced run
    #[arg(long, value_name = "FILTER")]
    pub series: Vec<String>,
    /// Print the report's files and notes as one JSON document
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Results directory (holding results.sqlite)
    pub dir: PathBuf,
    /// Write DIR/runs.csv (a row per run, a column per parameter and metric) and DIR/series.csv
    /// (CSV is the only format: the flag may be left out)
    #[arg(long)]
    pub csv: bool,
    /// Write the CSV files here instead of DIR
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// Print the files written and their counts as one JSON document
    #[arg(long)]
    pub json: bool,
}

pub fn report(args: ReportArgs) -> Result<i32> {
    let choice = ReportChoice {
        baseline: args.baseline,
        metrics: args.metrics,
        include_flagged: args.include_flagged,
        series: args.series,
    };
    let out = write(&args.dir, &choice)?;
    crate::emit(args.json, &out, || format!("{}\n", out.html.display())).map(|_| 0)
}

/// The report of `dir` as `choice` asks (`quiclab run --report` and the demo: the defaults), its
/// notes printed.
pub fn write(dir: &std::path::Path, choice: &ReportChoice) -> Result<quiclab_report::ReportOutput> {
    let out = quiclab_runner::report_results(dir, choice)?;
    for note in &out.notes {
        eprintln!("quiclab report: note: {note}");
    }
    Ok(out)
}

pub fn export(args: ExportArgs) -> Result<i32> {
    let s = quiclab_runner::export_results(&args.dir, args.to.as_deref())?;
    let text = || {
        let (runs, series) = (s.runs_csv.display(), s.series_csv.display());
        format!(
            "{runs} ({} runs)\n{series} ({} points)\n",
            s.runs, s.series_points
        )
    };
    crate::emit(args.json, &s, text).map(|_| 0)
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Results before (a results directory, holding results.sqlite; only read)
    pub a: PathBuf,
    /// Results after, judged against A run for run (same settings and repetition)
    pub b: PathBuf,
    /// Metrics to judge, comma-separated or repeated (default: the workload kind's report metrics)
    #[arg(long, value_delimiter = ',')]
    pub metric: Vec<String>,
    /// The smallest difference that matters, in % of A
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    pub margin: f64,
    /// Where compare.html and compare.json go (new, empty or quiclab's)
    #[arg(long, value_name = "DIR", default_value = "quiclab-compare")]
    pub out: PathBuf,
    /// Print compare.json's document
    #[arg(long)]
    pub json: bool,
}

pub fn compare(args: CompareArgs) -> Result<i32> {
    let choice = CompareChoice {
        metrics: args.metric,
        margin: args.margin / 100.0,
    };
    let c = compare_dirs(&args.a, &args.b, &choice, &metric_registry(), &args.out)?;
    crate::emit(args.json, &c, || c.text()).map(|_| 0)
}
