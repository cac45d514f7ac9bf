//! Times the lock checker on a generated history and prints time and peak memory.
//!
//!     cargo run --release --example lock_check -- --write /tmp/h.jsonl   # generate 1.2M lines
//!     cargo run --release --example lock_check -- /tmp/h.jsonl           # read + check it
//!     cargo run --release --example lock_check -- --whole /tmp/h.jsonl   # via a whole History
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
    /// Read the whole history as `Op`s first (as `check` does for other models)
    /// instead of line by line.
    #[arg(long)]
    whole: bool,
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
    let input = lock::LockInput::default();
    let (verdict, lines) = if args.whole {
        let history = read_jsonl(&file)?;
        let v = lock::check(&history, &input, &Limits::default());
        (v, history.ops.len())
    } else {
        lock::check_jsonl(&file, &input, &Limits::default(), false)?
    };
    let cpu = cpu_seconds();
    println!(
        "{lines} lines read and checked in {:.3} s wall, {cpu:.3} s CPU; peak RSS {} MiB",
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

/// User + system CPU time of this process: on a machine shared with other work,
/// wall time overstates the checker's cost.
fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) } != 0 {
        return 0.0;
    }
    // SAFETY: filled above.
    let u = unsafe { u.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
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
