//! `lockcheck analyze RUN_DIR`: re-checks a stored run (with other `--allow`, or a
//! newer checker) without running anything; rewrites verdict.json (keeping the
//! runner's `run` figures) and, where the run has one, report.html.

use crate::check::choice::{Checked, ModelKind};
use crate::check::AnomalyKind;
use crate::history::import::Format;
use crate::report::{summary, RunDir, HISTORY_FILE, REPORT_FILE};
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The run directory (history.jsonl; resource.jsonl, verdict.json, workload.toml where present).
    pub run_dir: PathBuf,
    /// Accept an anomaly kind the design tolerates on purpose (repeatable). Without
    /// any, the workload's `allow` list applies.
    #[arg(long = "allow", value_name = "KIND")]
    pub allow: Vec<AnomalyKind>,
    /// Print verdict.json's content instead of words.
    #[arg(long)]
    pub json: bool,
    /// Also write JUnit XML: one test case per check.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

pub fn main(args: Args) -> Result<u8> {
    let run = RunDir::load(&args.run_dir)?;
    let allow = if args.allow.is_empty() {
        run.workload_allow()?
    } else {
        args.allow.clone()
    };
    let verdict = run.recheck(&allow);
    let title = run.title();
    let input = run.input(&title, &verdict);
    let analysis = input.analyze();
    let doc = run.verdict_document(&verdict, &analysis)?;
    run.write_verdict(&doc)?;
    let html = args.run_dir.join(REPORT_FILE);
    if html.exists() {
        crate::report::write_html_for(&input, &html)?;
    }
    if let Some(path) = &args.junit {
        super::report::write_junit(path, &title, &run, &verdict)?;
    }
    // A run that missed planned faults still did not test what it claims.
    let missed = run.missed_faults();
    let code = match verdict.valid.exit_code() {
        crate::exit::VALID if missed.as_ref().is_some_and(|m| !m.allowed) => crate::exit::UNKNOWN,
        code => code,
    };
    if args.json {
        println!("{}", serde_json::to_string(&doc)?);
    } else {
        // The verdict as `check` prints it, then the analyses.
        let model = if verdict.model == "fenced-mutex" {
            ModelKind::FencedMutex
        } else {
            ModelKind::Lock
        };
        let checked = Checked {
            verdict,
            format: Format::Jsonl,
            model,
            ops: run.history.ops.len(),
        };
        print!(
            "{}\n{}",
            checked.in_words(&args.run_dir.join(HISTORY_FILE)),
            summary::analysis_text(&analysis)
        );
        if let Some(m) = missed {
            println!("{}", m.headline());
            for line in &m.lines {
                println!("  {line}");
            }
        }
    }
    Ok(code)
}
