//! Measures the HTML report on a generated history: how long rendering takes, how big
//! the page is, and (with --browser) how long headless Chromium takes to load and draw
//! it, zoomed out (aggregated) and zoomed in on an anomaly (every op drawn).
//!
//!     cargo run --release --example report_bench -- --lines 1000000 --browser

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::check::{lock, Limits};
use lockcheck::history::synth::{generate, SynthConfig};
use lockcheck::report::{browser, write_html_for, Input};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 1_000_000)]
    lines: usize,
    #[arg(long, default_value_t = 8)]
    clients: usize,
    #[arg(long, default_value_t = 10)]
    overlaps: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where to write report.html (default: the system's temp directory).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also load the page in headless Chromium and print what it measured.
    #[arg(long)]
    browser: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let t = Instant::now();
    let syn = generate(&SynthConfig {
        seed: args.seed,
        clients: args.clients,
        lines: args.lines,
        overlaps: args.overlaps,
        fenced: false,
        ..Default::default()
    });
    let generated = t.elapsed();
    let t = Instant::now();
    let verdict = lock::check(
        &syn.history,
        &lock::LockInput {
            resource: Some(&syn.resource),
        },
        &Limits::default(),
    );
    let checked = t.elapsed();
    let out = args
        .out
        .unwrap_or_else(|| std::env::temp_dir().join("lockcheck-report-bench.html"));
    let input = Input {
        title: "report bench",
        history: &syn.history,
        resource: Some(&syn.resource),
        verdict: &verdict,
        run: None,
        workload: None,
    };
    let t = Instant::now();
    write_html_for(&input, &out)?;
    let rendered = t.elapsed();
    let bytes = std::fs::metadata(&out)?.len();
    let ops = syn.history.ops.len();
    println!(
        "{ops} ops, {} anomalies: generated {:.2} s, checked {:.2} s, report written in {:.2} s",
        verdict.anomalies.len(),
        generated.as_secs_f64(),
        checked.as_secs_f64(),
        rendered.as_secs_f64()
    );
    println!(
        "report.html: {:.1} MB ({:.1} bytes per op) at {}",
        bytes as f64 / 1e6,
        bytes as f64 / ops as f64,
        out.display()
    );
    if args.browser {
        let timeout = Duration::from_secs(300);
        let t = Instant::now();
        let r = browser::render(&out, "#bench", None, timeout)?;
        let get = |k: &str| r.body.get(k).map_or("?", String::as_str).to_string();
        println!(
            "chromium, zoomed out: {:.1} s wall for start + parse + load; script: decode {} ms, time-bin pyramid {} ms, load to first draw {} ms; redraw at 5 zoom levels: {} ms each; {} calls in view, drawn {}",
            t.elapsed().as_secs_f64(),
            get("decode-ms"),
            get("pyramid-ms"),
            get("load-ms"),
            get("redraw-ms"),
            get("visible-calls"),
            get("mode"),
        );
        if let Some(a) = verdict.anomalies.first() {
            let ix: Vec<String> = a.indexes.iter().map(u64::to_string).collect();
            let r = browser::render(&out, &format!("#ix={}", ix.join(",")), None, timeout)
                .context("zoomed in")?;
            println!(
                "chromium, zoomed in on the first anomaly: draw {} ms, mode {}, {} calls in view",
                r.body.get("draw-ms").map_or("?", String::as_str),
                r.body.get("mode").map_or("?", String::as_str),
                r.body.get("visible-calls").map_or("?", String::as_str),
            );
        }
    }
    Ok(())
}
