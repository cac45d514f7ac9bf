//! `lockcheck run WORKLOAD`: start the backend, the resource and the clients, inject
//! the workload's faults, check the history, write the run directory.
//! Exit: 0 valid, 1 anomalies, 2 a bad workload or argument, 3 unknown or planned
//! faults missed, 5 environment problem, 130 interrupted (`crate::exit`).

use crate::check::{secs, Validity};
use crate::cluster::Runtime;
use crate::exit::{self, Exit};
use crate::run::{self, workload::Workload, Interrupted, RunReport, Summary};
use anyhow::{Context, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workload file (workloads/*.toml).
    pub workload: PathBuf,
    /// Run for this long instead of the workload's duration.
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    /// Seed of the fault schedule instead of the workload's.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where run directories go.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results: PathBuf,
    /// Print one JSON object (the verdict and figures) instead of words.
    #[arg(long)]
    pub json: bool,
    /// Run the workload N times, each on a new cluster, with seeds seed..seed+N-1,
    /// and end with the detection rate.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub test_count: u64,
    /// Where the servers run, instead of the workload's `runtime`: local processes,
    /// Docker containers, or the servers named by the workload's `backend.endpoints`.
    #[arg(long, value_parser = super::one_of(&Runtime::ALL, Runtime::name))]
    pub runtime: Option<Runtime>,
    /// The image for the docker runtime (default: the workload's `backend.image`,
    /// else the backend's official image).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Pass a run whose planned faults did not all start (`--time-limit` ended it
    /// first, a fault found nothing to hit): they are still listed. Without it such
    /// a run exits 3, whatever its verdict: it did not test what the workload claims.
    #[arg(long)]
    pub allow_missed_faults: bool,
    /// Keep the servers' data (`data/` in the run directory) after a run that
    /// ended; by default it is removed with the servers, the nodes' logs kept.
    #[arg(long)]
    pub keep_data: bool,
    /// When a run flags an anomaly its workload does not allow, shrink it as
    /// `lockcheck shrink` does with its defaults: RUN_DIR/shrunk.toml, the smallest
    /// workload that still breaks the lock that way. The exit code stays the run's.
    #[arg(long, conflicts_with = "json")]
    pub shrink: bool,
}

pub fn main(args: Args) -> Result<u8> {
    let mut w = Workload::load(&args.workload).map_err(Exit::usage)?;
    if let Some(runtime) = args.runtime {
        w = w.with_runtime(runtime).map_err(Exit::usage)?;
    }
    let time_limit = match args.time_limit {
        Some(s) => Some(
            Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    Exit::usage(format!(
                        "--time-limit: expected a positive number of seconds, found {s}"
                    ))
                })?,
        ),
        None => None,
    };
    let base_seed = args.seed.unwrap_or(w.seed);
    // Each seed's faults all start within the run, before any run begins.
    for i in 0..args.test_count {
        w.planned_faults(time_limit, base_seed.wrapping_add(i))
            .map_err(Exit::usage)?;
    }
    let mut opts = run::Options {
        time_limit,
        seed: None,
        results: args.results.clone(),
        worker_exe: std::env::current_exe().context("finding the lockcheck program")?,
        live: !args.json && std::io::stderr().is_terminal(),
        image: args.image.clone(),
        allow_missed_faults: args.allow_missed_faults,
        keep_data: args.keep_data,
    };
    let mut reports = Vec::new();
    for i in 0..args.test_count {
        let seed = base_seed.wrapping_add(i);
        opts.seed = Some(seed);
        if !args.json {
            let b = &w.backend;
            eprintln!(
                "lockcheck: running {} (seed {seed}): {} × {} node{}, lease {:.1} s{}, {} clients, {} resource, {}{:.0} s",
                w.name,
                b.kind.name(),
                b.nodes,
                if b.nodes == 1 { "" } else { "s" },
                b.lease.ttl.as_secs_f64(),
                b.lease.preset.map(|p| format!(" ({})", p.name)).unwrap_or_default(),
                w.clients.count,
                w.resource.describe(),
                match w.end {
                    run::workload::End::AfterEffect => "a lease after the fault's effect, at most ",
                    run::workload::End::Duration => "",
                },
                time_limit.unwrap_or(w.duration).as_secs_f64(),
            );
        }
        let report = match run::run(&w, &opts) {
            Ok(r) => r,
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                eprintln!("lockcheck: {e:#}");
                return Ok(exit::INTERRUPTED);
            }
            Err(e) => return Err(e),
        };
        if !args.json {
            print_report(&report);
        }
        reports.push(report);
    }
    let summary = Summary::of(&reports);
    if args.json {
        let out = if reports.len() == 1 {
            serde_json::to_value(&reports[0])?
        } else {
            serde_json::json!({ "summary": summary, "runs": reports })
        };
        println!("{}", serde_json::to_string(&out)?);
    } else if reports.len() > 1 {
        print_summary(&summary);
    }
    if args.shrink {
        if let Some(r) = reports
            .iter()
            .find(|r| r.verdict.valid == Validity::Invalid)
        {
            let common = super::shrink::Common {
                kind: None,
                jobs: None,
                workload_dir: None,
            };
            let opts = common.options(
                crate::shrink::RULE,
                crate::shrink::BUDGET,
                crate::shrink::CONFIRM,
                crate::shrink::RELIABLE,
            )?;
            super::shrink::shrink_dir(&r.run_dir, &opts)?;
        }
    }
    Ok(summary.exit_code())
}

/// Anomalies of one kind shown in words; verdict.json has them all.
const SHOWN: usize = 2;

fn print_report(r: &RunReport) {
    let v = &r.verdict;
    // A run that missed faults it planned never reads as a plain pass.
    let head = match v.valid {
        Validity::Valid if r.missed_faults && r.faults.missed.is_empty() => {
            "UNTESTED (valid, but the run saw nothing of its faults)"
        }
        Validity::Valid if r.missed_faults => "UNTESTED (valid, but planned faults missed)",
        Validity::Valid => "VALID",
        Validity::Invalid => "INVALID",
        Validity::Unknown => "UNKNOWN",
    };
    println!(
        "{head}: {} seed {} ({}, {} resource)",
        r.workload,
        r.seed,
        r.backend,
        crate::resource::Spec {
            kind: r.resource_kind,
            fence: r.fence,
        }
        .describe()
    );
    let mut kinds: Vec<_> = v.anomalies.iter().map(|a| a.kind).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let of_kind: Vec<_> = v.anomalies.iter().filter(|a| a.kind == kind).collect();
        let allowed = of_kind.iter().all(|a| a.allowed);
        println!(
            "  {} {} × {}{}",
            if allowed { "~" } else { "✗" },
            kind.name(),
            of_kind.len(),
            if allowed {
                " (allowed by the workload)"
            } else {
                ""
            }
        );
        for a in of_kind.iter().take(SHOWN) {
            let at = a
                .time
                .map(|t| format!("at {}: ", secs(t)))
                .unwrap_or_default();
            println!("      {at}{}", a.explanation);
            println!("        ops {:?}", a.indexes);
        }
        if of_kind.len() > 3 {
            println!(
                "      ... and {} more (verdict.json has them all)",
                of_kind.len() - 3
            );
        }
    }
    print_missed(&r.faults);
    for note in &v.notes {
        println!("  note: {note}");
    }
    let f = &r.figures;
    let ops: u64 = f.ops.values().flat_map(|o| o.values()).sum();
    let by_f: Vec<String> = f
        .ops
        .iter()
        .map(|(name, outcomes)| {
            let o: Vec<String> = outcomes.iter().map(|(k, n)| format!("{n} {k}")).collect();
            format!("{name} {}", o.join("/"))
        })
        .collect();
    println!("  {ops} ops in {:.1} s: {}", f.run_time_s, by_f.join(", "));
    for (what, l) in [
        ("acquire", f.acquire_latency_ms),
        ("write", f.write_latency_ms),
    ] {
        if let Some(l) = l {
            println!(
                "  {what} latency: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                l.p50, l.p90, l.p99, l.max
            );
        }
    }
    // An election's critical sections are leaderships, ended by a resignation.
    let sections = if r.election() {
        "leaderships resigned"
    } else {
        "critical sections completed"
    };
    println!(
        "  {} {sections}, {} faults, {} stale writes rejected by the fence{}",
        f.critical_sections,
        f.faults,
        f.writes_rejected_by_fence,
        f.first_anomaly_s
            .map(|s| format!(", first anomaly at {s:.3} s"))
            .unwrap_or_default()
    );
    if let Some(p) = &r.provoked {
        println!(
            "  {} ({} deposed, {} late writes, {} reached the resource)",
            p.class.sentence(),
            p.deposed,
            p.late_writes,
            p.late_writes_reached
        );
    }
    for u in &f.unreachable {
        println!("  not reached by a fault: {u}");
    }
    for m in &f.monotonic_offsets {
        println!("  clock shifted: {m}");
    }
    println!("  run directory: {}", r.run_dir.display());
}

/// The planned faults that did not start, each with why.
fn print_missed(f: &run::nemesis::FaultAccount) {
    if f.missed.is_empty() && f.unseen.is_none() {
        return;
    }
    let (mark, tail) = if f.allowed {
        ("~", " (allowed by --allow-missed-faults)")
    } else {
        (
            "✗",
            ": the run did not test what its workload claims (exit 3)",
        )
    };
    if let Some(why) = &f.unseen {
        println!("  {mark} faults unseen: {why}{tail}");
    }
    if f.missed.is_empty() {
        return;
    }
    let never: u64 = f.missed.iter().map(|m| m.planned - m.started).sum();
    println!(
        "  {mark} missed faults: {never} of {} planned never started{tail}",
        f.planned
    );
    for m in &f.missed {
        println!(
            "      faults[{}] ({}): {} of {} started; {}",
            m.fault, m.kind, m.started, m.planned, m.why
        );
    }
}

fn print_summary(s: &Summary) {
    let mut apart = Vec::new();
    if s.runs_unknown > 0 {
        apart.push(format!("{} unknown", s.runs_unknown));
    }
    if s.runs_with_missed_faults > 0 {
        apart.push(format!(
            "{} missed planned faults and tested less than the workload claims",
            s.runs_with_missed_faults
        ));
    }
    println!(
        "summary: {} of {} runs found anomalies{}",
        s.runs_with_anomalies,
        s.runs,
        if apart.is_empty() {
            String::new()
        } else {
            format!(" ({})", apart.join("; "))
        }
    );
    println!(
        "  provoked in {} of {} runs (a deposed holder's late write reached the resource)",
        s.runs_provoked, s.runs
    );
    if let (Some(m), Some(w)) = (s.median_first_anomaly_s, s.worst_first_anomaly_s) {
        println!("  time to the first anomaly: median {m:.3} s, worst {w:.3} s");
    }
}
