//! `lockcheck check HISTORY`: reads a history (lockcheck's JSON Lines, Jepsen EDN,
//! Porcupine logs), checks it against a model, prints the verdict. Reading and
//! checking are the checker's (`check::choice`); here are the flags and the output.

use super::Exit;
use crate::check::choice::{check_history, check_input, Initial, ModelKind, Options};
use crate::check::{AnomalyKind, Limits};
use crate::history::import::{self, Format};
use crate::history::Input;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history file: `-` for standard input; a pipe, FIFO or `/dev/stdin` works
    /// too (read once); gzip or zstd is undone.
    pub file: PathBuf,
    /// jsonl, jepsen-edn, porcupine-etcd or porcupine-kv (detected from the content
    /// when not given).
    #[arg(long)]
    pub format: Option<Format>,
    /// lock, mutex, fenced-mutex, register, cas-register, multi-register or kv
    /// (chosen from the format and the ops when not given).
    #[arg(long)]
    pub model: Option<ModelKind>,
    /// The register's value before any write: an integer, or nil for empty
    /// (default: nil for porcupine-etcd, as Porcupine's etcd model; else 0, as Knossos).
    #[arg(long, value_name = "VALUE")]
    pub initial: Option<Initial>,
    /// The resource's log of applied writes (resource.jsonl), for the lock model.
    #[arg(long, value_name = "FILE")]
    pub resource: Option<PathBuf>,
    /// Give up with verdict "unknown" after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub time_limit: f64,
    /// Print one JSON object instead of words.
    #[arg(long)]
    pub json: bool,
    /// Accept an anomaly kind the design tolerates on purpose (repeatable).
    #[arg(long = "allow", value_name = "KIND")]
    pub allow: Vec<AnomalyKind>,
    /// Also write the self-contained HTML report of this history to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Also write JUnit XML (one test case per check) to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

pub fn main(args: Args) -> Result<u8> {
    if !(args.time_limit > 0.0 && args.time_limit.is_finite()) {
        return Err(Exit::usage(format!(
            "--time-limit: expected a positive number of seconds, found {}",
            args.time_limit
        )));
    }
    let opts = Options {
        format: args.format,
        model: args.model,
        initial: args.initial,
        resource: args.resource,
        limits: Limits {
            time: Duration::from_secs_f64(args.time_limit),
            ..Limits::default()
        },
    };
    if args.file.as_os_str() == "-" && opts.resource.as_deref() == Some(Path::new("-")) {
        return Err(Exit::usage(
            "the history and --resource cannot both be standard input",
        ));
    }
    let input = Input::open(&args.file)?;
    let title = input.name.clone();
    // The report draws every op: with one, the history is read whole (once) and
    // checked from memory; without, it is streamed.
    let (mut checked, history) = match &args.report {
        None => (check_input(input, &opts)?, None),
        Some(_) => {
            let (history, format) = import::read_input(input, opts.format)?;
            (
                check_history(&history, &title, format, &opts)?,
                Some(history),
            )
        }
    };
    checked.verdict.apply_allow(&args.allow);
    if let (Some(out), Some(history)) = (&args.report, &history) {
        let resource = opts
            .resource
            .as_deref()
            .map(crate::history::read_resource)
            .transpose()?;
        let input = crate::report::Input {
            title: &title,
            history,
            resource: resource.as_deref(),
            verdict: &checked.verdict,
            run: None,
            workload: None,
        };
        crate::report::write_html_for(&input, out)?;
    }
    if let Some(out) = &args.junit {
        let xml = crate::report::junit::render(&title, &checked.verdict, 0);
        std::fs::write(out, xml).with_context(|| format!("writing {}", out.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&checked.verdict)?);
    } else {
        print!("{}", checked.in_words(Path::new(&title)));
    }
    Ok(checked.verdict.valid.exit_code())
}
