//! `lockcheck shrink RUN_DIR`: the smallest workload that still breaks the lock
//! the way run RUN_DIR did, written to RUN_DIR/shrunk.toml and confirmed by reruns.
//! `lockcheck replay RUN_DIR`: rerun a stored run's realised schedule N times.
//! Exit: 1 the anomaly came back (shrunk.toml written; a replay that reproduced
//! it), 3 it never came back (nothing written), 2 a valid run or a bad argument,
//! 5 this machine cannot run it, 130 interrupted (`crate::exit`).

use crate::check::AnomalyKind;
use crate::exit::{self, Exit};
use crate::fault::duration::Dur;
use crate::shrink::{self, rate_text, trial::Rule};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

/// What shrink and replay share.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// The anomaly to reproduce (default: the first the run flagged that its
    /// workload does not allow).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<AnomalyKind>,
    /// Reruns at once (default: what this machine holds, as audit chooses).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// The folder the run's workload file was in, for its relative paths (an
    /// adapter program), where the run directory does not record it.
    #[arg(long, value_name = "DIR")]
    pub workload_dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A run directory of `lockcheck run` (results/...) that flagged an anomaly.
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
    /// A candidate still breaks when this many of its reruns give the anomaly...
    #[arg(long, value_name = "K", default_value_t = shrink::RULE.k,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub needed: u32,
    /// ...of this many.
    #[arg(long, value_name = "M", default_value_t = shrink::RULE.m,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub reruns: u32,
    /// The whole shrink's time, its confirmation included (default 10m): the
    /// search stops early enough to confirm the best so far.
    #[arg(long, value_name = "DURATION", value_parser = budget)]
    pub budget: Option<Duration>,
    /// Reruns of the result, for its reproduction rate.
    #[arg(long, value_name = "N", default_value_t = shrink::CONFIRM,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub confirm: u32,
    /// The share of those reruns the result must break in; the search walks back
    /// to a larger kept candidate until one does.
    #[arg(long, value_name = "FRACTION", default_value_t = shrink::RELIABLE, value_parser = fraction)]
    pub reliable: f64,
}

fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!(
            "expected a fraction above 0 and at most 1, like 0.9; found {s}"
        )),
    }
}

fn budget(s: &str) -> Result<Duration, String> {
    let Dur(d) = s.parse()?;
    if d.is_zero() {
        return Err("expected a budget longer than 0".into());
    }
    Ok(d)
}

impl Common {
    pub fn options(
        &self,
        rule: Rule,
        budget: Duration,
        confirm: u32,
        reliable: f64,
    ) -> Result<shrink::Options> {
        let jobs = match self.jobs {
            Some(j) => usize::from(j),
            None => crate::run::capacity::parallel_runs().0,
        };
        Ok(shrink::Options {
            kind: self.kind,
            rule,
            jobs,
            budget,
            confirm,
            reliable,
            workload_dir: self.workload_dir.clone(),
            exe: std::env::current_exe().context("finding the lockcheck program")?,
        })
    }
}

pub fn main(args: Args) -> Result<u8> {
    if args.needed > args.reruns {
        return Err(Exit::usage(format!(
            "--needed {} of --reruns {}: cannot need more reruns than there are",
            args.needed, args.reruns
        )));
    }
    let rule = Rule {
        k: args.needed,
        m: args.reruns,
    };
    let budget = args.budget.unwrap_or(shrink::BUDGET);
    let opts = args
        .common
        .options(rule, budget, args.confirm, args.reliable)?;
    shrink_dir(&args.run_dir, &opts)
}

/// Shrinks one run directory and says how it went; the exit code.
pub fn shrink_dir(dir: &std::path::Path, opts: &shrink::Options) -> Result<u8> {
    let s = shrink::shrink(dir, opts, &mut |line| eprintln!("{line}"))?;
    let kind = s.kind.name();
    if !s.first.breaks {
        println!(
            "NOT REPRODUCED: {kind} came back in {} reruns of the run as it happened (needed {} of {}): nothing to shrink, nothing written",
            rate_text(&s.first),
            opts.rule.k,
            opts.rule.m
        );
        return Ok(exit::UNKNOWN);
    }
    let (Some(search), Some(confirm)) = (&s.search, &s.confirm) else {
        return Err(anyhow::anyhow!(
            "a shrink that came back has a search and a confirmation"
        ));
    };
    let ops = |n: Option<u64>| n.map_or("?".into(), |n| n.to_string());
    println!(
        "shrink of {} for {kind}, {:.0} s:",
        dir.display(),
        s.elapsed.as_secs_f64()
    );
    println!("  before: {}, {} ops", search.start, s.ops_before);
    println!("  after:  {}, {} ops", search.best.size(), ops(s.ops_after));
    println!("  reproduced: {} reruns", rate_text(confirm));
    if confirm.flagged > 0 && confirm.flagged < opts.needed() {
        println!(
            "  below the {} of {} asked: {}",
            opts.needed(),
            opts.confirm,
            if search.out_of_time {
                "the budget ran out before the walk back found a candidate that breaks as often (a longer --budget may)"
            } else {
                "no kept candidate broke as often, the run as it happened included"
            }
        );
    }
    let Some(file) = &s.file else {
        println!(
            "NOT REPRODUCED: the shrunk workload never gave {kind} in {} reruns: nothing written",
            confirm.ran
        );
        return Ok(exit::UNKNOWN);
    };
    if let Some(d) = confirm.flagged_dirs.first() {
        println!(
            "  a flagged rerun: {}",
            d.join(crate::report::REPORT_FILE).display()
        );
    }
    println!(
        "  for the bug report: lockcheck run {} --test-count 10",
        file.display()
    );
    println!("{}", file.display());
    Ok(exit::ANOMALIES)
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// A run directory of `lockcheck run` (results/...) that flagged an anomaly.
    pub run_dir: PathBuf,
    #[command(flatten)]
    pub common: Common,
    /// How many times to rerun it.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
}

pub fn replay(args: ReplayArgs) -> Result<u8> {
    let rule = Rule { k: 1, m: 1 };
    let opts = args
        .common
        .options(rule, Duration::MAX, args.runs, shrink::RELIABLE)?;
    let r = shrink::replay(&args.run_dir, args.runs, &opts)?;
    println!(
        "{}: {} came back in {} replays of {}",
        if r.rate.flagged > 0 {
            "REPRODUCED"
        } else {
            "NOT REPRODUCED"
        },
        r.kind.name(),
        rate_text(&r.rate),
        args.run_dir.display()
    );
    println!("  the schedule replayed: {}", r.file.display());
    println!("  its runs: {}", r.results.display());
    Ok(if r.rate.flagged > 0 {
        exit::ANOMALIES
    } else {
        exit::UNKNOWN
    })
}
