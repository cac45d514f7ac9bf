//! `lockcheck recover [RUN_DIR]`: undoes what a run killed with -9 left behind,
//! from the journal the controller kept in its run directory: resumes the
//! processes it stopped, resets the clocks it skewed, removes the rules that cut
//! links between nodes, kills the servers and workers it started (those still
//! running, recognised by pid and start time), and then removes the nodes'
//! network namespaces, bridge and veths.

use crate::journal::JOURNAL_FILE;
use crate::recover::{undo_pending, ALREADY_GONE};
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The run directory (default: results/latest).
    #[arg(default_value = "results/latest")]
    pub run_dir: PathBuf,
    /// Print one JSON object instead of words.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: Args) -> Result<u8> {
    let dir = &args.run_dir;
    if !dir.join(JOURNAL_FILE).exists() {
        anyhow::bail!(
            "{} has no {}: not a run directory, or its run changed nothing",
            dir.display(),
            JOURNAL_FILE
        );
    }
    let (done, warnings) =
        undo_pending(dir).with_context(|| format!("recovering {}", dir.display()))?;
    if args.json {
        println!(
            "{}",
            json!({ "run_dir": dir, "undone": done, "warnings": warnings })
        );
    } else {
        // After a run that ended normally every process is gone: say so once.
        let (gone, acted): (Vec<_>, Vec<_>) = done.iter().partition(|u| u.action == ALREADY_GONE);
        if acted.is_empty() {
            println!("{}: nothing left to undo", dir.display());
        }
        for u in &acted {
            println!("{}: {}", u.effect, u.action);
        }
        if !gone.is_empty() {
            println!("{} process(es) of the run had already ended", gone.len());
        }
        for w in &warnings {
            eprintln!("warning: {w}");
        }
    }
    // Anything we could not undo is a problem the user must look at.
    Ok(if warnings.is_empty() { 0 } else { 1 })
}
