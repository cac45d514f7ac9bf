//! `lockcheck run WORKLOAD`. (Owned by the run work.)

use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workload file (workloads/*.toml).
    pub workload: PathBuf,
}

pub fn main(args: Args) -> Result<u8> {
    anyhow::bail!(
        "running {}: the runner is being built",
        args.workload.display()
    )
}
