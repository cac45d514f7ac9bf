//! What lockcheck's clock interposer costs a server that reads the clock on every
//! command: redis-benchmark's SET throughput on a plain redis-server and on one
//! under the interposer (skewing at rate 1.5, so every clock call does the
//! arithmetic), interleaved, best of `--rounds`. libfaketime, which re-reads its
//! file, halves it; the interposer reads a shared page.
//!
//!     cargo run --release --example clock_shim_cost -- --rounds 3

#[path = "../tests/fault_support/mod.rs"]
mod fault_support;

use anyhow::{bail, Context, Result};
use clap::Parser;
use fault_support::Redis;
use lockcheck::fault::clock::ClockControl;
use std::process::Command;

#[derive(Parser)]
struct Args {
    /// Measurements of each server, interleaved; the best counts (the machine is
    /// shared: a burst of other work during one must not decide the comparison).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// SET requests per measurement.
    #[arg(long, default_value_t = 20_000)]
    requests: usize,
}

/// SET requests per second redis-benchmark measures on `redis`.
fn set_per_sec(redis: &Redis, requests: usize) -> Result<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &redis.addr.port().to_string()])
        .args([
            "-t",
            "set",
            "-n",
            &requests.to_string(),
            "-c",
            "4",
            "-q",
            "--csv",
        ])
        .output()
        .context("redis-benchmark (Debian package redis-tools)")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some(line) = text.lines().find(|l| l.starts_with("\"SET\"")) else {
        bail!("no SET line in redis-benchmark's output: {text}");
    };
    line.split(',')
        .nth(1)
        .map(|v| v.trim_matches('"'))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no rate in {line}"))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let clock = ClockControl::create(dir.path(), "n1")?;
    clock.set_rate(1.5)?;
    let plain = Redis::start(dir.path(), &[]);
    let shimmed = Redis::start(dir.path(), &clock.env());
    let (mut p, mut s) = (0f64, 0f64);
    for _ in 0..args.rounds {
        p = p.max(set_per_sec(&plain, args.requests)?);
        s = s.max(set_per_sec(&shimmed, args.requests)?);
    }
    println!(
        "redis SET throughput: {p:.0} ops/s plain, {s:.0} ops/s under the clock interposer ({:.0}%)",
        100.0 * s / p
    );
    Ok(())
}
