//! `lockcheck worker`: one lock client in its own process. (Owned by the run work.)

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> Result<u8> {
    anyhow::bail!("the worker is being built")
}
