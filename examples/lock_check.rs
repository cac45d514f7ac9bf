//! Times the lock checker on a generated history and prints time and peak memory.
//!
//!     cargo run --release --example lock_check -- --write /tmp/h.jsonl   # generate 1.2M lines
//!     cargo run --release --example lock_check -- /tmp/h.jsonl           # read + check it
//!
//! Generating and checking are separate runs so that the peak memory printed is the
//! reader's and the checker's alone.

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::check::{lock, Limits};
use lockcheck::history::{read_jsonl, synth};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// A history to read and check.
    file: Option<PathBuf>,
    /// Generate a history into this file (and its resource log next to it) instead.
    #[arg(long)]
    write: Option<PathBuf>,
    #[arg(long, default_value_t = 1_200_000)]
    lines: usize,
    #[arg(long, default_value_t = 1)]
    overlaps: usize,
    #[arg(long, default_value_t = 8)]
    clients: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(out) = &args.write {
        let s = synth::generate(&synth::SynthConfig {
            seed: args.seed,
            clients: args.clients,
            lines: args.lines,
            overlaps: args.overlaps,
            ..Default::default()
        });
        std::fs::write(out, s.history_jsonl())
            .with_context(|| format!("writing {}", out.display()))?;
        println!("wrote {} lines to {}", s.history.ops.len(), out.display());
        return Ok(());
    }
    let file = args
        .file
        .context("give a history file, or --write FILE to generate one")?;
    let t0 = Instant::now();
    let history = read_jsonl(&file)?;
    let read = t0.elapsed();
    let t1 = Instant::now();
    let verdict = lock::check(&history, &lock::LockInput::default(), &Limits::default());
    let checked = t1.elapsed();
    println!(
        "{} lines: read {:.3} s, checked {:.3} s, total {:.3} s, peak RSS {} MiB",
        history.ops.len(),
        read.as_secs_f64(),
        checked.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        peak_rss_kib() / 1024
    );
    println!(
        "verdict: {:?}, {} anomalies",
        verdict.valid,
        verdict.anomalies.len()
    );
    for a in &verdict.anomalies {
        println!(
            "  {}: {} (indexes {:?})",
            a.kind.name(),
            a.explanation,
            a.indexes
        );
    }
    Ok(())
}

/// Peak resident set size of this process (Linux: VmHWM).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
