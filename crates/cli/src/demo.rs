//! `quiclab demo`: flags in, the table out; the demo is `quiclab_runner::demo`'s.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where to write the scenario, results and report (results of an earlier demo are replaced)
    #[arg(long, default_value = "quiclab-demo")]
    pub out: PathBuf,
    /// Repetitions per protocol and setting
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=quiclab_experiment::MAX_REPETITIONS as i64))]
    pub repetitions: u32,
    /// Print what the demo measured as one JSON document (progress stays on stderr)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DemoArgs) -> Result<i32> {
    let json = args.json;
    let start = move |description: &str, runs: usize| {
        let line = format!(
            "quiclab demo: {description} — {runs} runs, each in a fresh lab of two network \
             namespaces joined by the emulated link\n"
        );
        // With --json, stdout is the one document.
        match json {
            true => eprintln!("{line}"),
            false => println!("{line}"),
        }
    };
    let demo = quiclab_runner::demo::run(
        &args.out,
        args.repetitions,
        start,
        &quiclab_lab::guard::set_exit_hint,
    )?;
    let code = if demo.failed > 0 { 1 } else { 0 };
    if json {
        return crate::emit(true, &demo, String::new).map(|_| code);
    }
    print!("\n{}", demo.summary);
    print!("{}", demo.summary.left_out_lines(&args.out));
    println!(
        "\nreport:  {}\nresults: {} ({} runs; `quiclab export {} --csv` for pandas/R)\n\
         Next: write your own scenario (docs/experiments.md) and `quiclab run FILE`.",
        demo.report_html.display(),
        demo.store.display(),
        demo.runs,
        args.out.display()
    );
    Ok(code)
}
