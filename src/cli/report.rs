//! `lockcheck report RUN_DIR`: rebuilds report.html (and JUnit XML) from a run
//! directory alone, with the stored verdict.

use crate::report::{junit, summary, RunDir, REPORT_FILE};
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The run directory (history.jsonl; resource.jsonl, verdict.json, workload.toml where present).
    pub run_dir: PathBuf,
    /// Where to write the HTML report (default RUN_DIR/report.html).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write JUnit XML: one test case per check.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print one JSON object (the files written) instead of words.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: Args) -> Result<u8> {
    let run = RunDir::load(&args.run_dir)?;
    let verdict = run.verdict_or_check()?;
    let title = run.title();
    let input = run.input(&title, &verdict);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.run_dir.join(REPORT_FILE));
    crate::report::write_html_for(&input, &out)?;
    let size = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    if let Some(path) = &args.junit {
        write_junit(path, &title, &run, &verdict)?;
    }
    if args.json {
        let doc = serde_json::json!({
            "report": out,
            "bytes": size,
            "junit": args.junit,
            "valid": verdict.valid,
        });
        println!("{doc}");
    } else {
        let missed = run.missed_faults();
        let untested = verdict.valid == crate::check::Validity::Valid
            && missed.as_ref().is_some_and(|m| !m.allowed);
        println!(
            "{}: wrote {} ({} KB)",
            if untested {
                "UNTESTED"
            } else {
                summary::validity_word(verdict.valid)
            },
            out.display(),
            size / 1024
        );
        if let Some(j) = &args.junit {
            println!("wrote {}", j.display());
        }
    }
    Ok(0)
}

/// Writes the JUnit XML of a run's verdict (shared by `report` and `analyze`).
pub fn write_junit(
    path: &std::path::Path,
    title: &str,
    run: &RunDir,
    verdict: &crate::check::Verdict,
) -> Result<()> {
    let duration = run.history.ops.last().map_or(0, |o| o.time);
    let missed = run.missed_faults();
    std::fs::write(
        path,
        junit::render_run(title, verdict, missed.as_ref(), duration),
    )
    .with_context(|| format!("writing {}", path.display()))
}
