//! `lockcheck worker`: one lock client in its own process, driven by the controller
//! of `lockcheck run` over stdin/stdout (see `run::worker`). Hidden: people never run it.

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The worker's configuration, as JSON (`run::worker::Config`).
    #[arg(long)]
    pub config: String,
}

pub fn main(args: Args) -> Result<u8> {
    let config: crate::run::worker::Config =
        serde_json::from_str(&args.config).context("the worker's --config")?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the worker's runtime")?
        .block_on(crate::run::worker::serve(config))?;
    Ok(0)
}
