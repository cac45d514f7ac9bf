//! `lockcheck check HISTORY`. (Owned by the engine work.)

use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history file.
    pub file: PathBuf,
    /// Print one JSON object instead of words.
    #[arg(long)]
    pub json: bool,
    /// Accept an anomaly kind the design tolerates on purpose (repeatable).
    #[arg(long = "allow", value_name = "KIND")]
    pub allow: Vec<crate::check::AnomalyKind>,
}

pub fn main(args: Args) -> Result<u8> {
    let history = crate::history::read_jsonl(&args.file)?;
    anyhow::bail!(
        "checking {} ops: the checker is being built",
        history.ops.len()
    )
}
