//! Shrink and replay: the smallest run that still breaks the lock.
//!
//! A run that found two holders proves the lock broke; its dozen fault events,
//! its clients and its thousands of ops do not show *how*. `shrink` reads the run
//! directory back as the workload it actually was (every fault an explicit event,
//! from the history: `realise`), then keeps cutting (`search`: delta debugging over
//! the events, then fewer clients, shorter faults, an earlier start, a shorter
//! run, a smaller critical section), keeping each cut only if the cut workload
//! still gives the same anomaly in k of m reruns (`trial`). What it hands over is
//! an ordinary workload, `shrunk.toml`, confirmed by rerunning it and stating how
//! often the anomaly came back. `replay` reruns the realised schedule as it was.
//!
//! Nothing here judges a run: the verdict of every rerun is `lockcheck run`'s.

pub mod candidate;
mod ddmin;
pub mod realise;
pub mod search;
pub mod trial;

use crate::audit::stats::wilson;
use crate::check::AnomalyKind;
use crate::run::workload::Workload;
use anyhow::{Context, Result};
use candidate::Candidate;
use realise::{realise, Realised};
use search::{Oracle, Progress, Search, Shrunk};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use trial::{Rule, Runner, Trial};

/// The defaults: a candidate still breaks when 2 of 3 reruns give the anomaly;
/// the shrink gets 10 minutes; the result is rerun 10 times and must break in 9.
pub const RULE: Rule = Rule { k: 2, m: 3 };
pub const BUDGET: Duration = Duration::from_secs(600);
pub const CONFIRM: u32 = 10;
pub const RELIABLE: f64 = 0.9;

/// How to shrink or replay.
#[derive(Debug, Clone)]
pub struct Options {
    /// The anomaly to keep (default: the first the run flagged and did not allow).
    pub kind: Option<AnomalyKind>,
    /// A candidate still breaks when k of m reruns give the anomaly.
    pub rule: Rule,
    /// Reruns at once.
    pub jobs: usize,
    /// The whole shrink's time, its confirmation included: the search stops
    /// early enough to leave one confirmation its time, and keeps the best so far.
    pub budget: Duration,
    /// Reruns of the result, for its reproduction rate.
    pub confirm: u32,
    /// The rate (of `confirm` reruns) the result must break at; the search walks
    /// back to a larger candidate until one does.
    pub reliable: f64,
    /// The folder relative paths of the workload were written from, where the run
    /// directory does not say.
    pub workload_dir: Option<PathBuf>,
    /// The lockcheck program the reruns run.
    pub exe: PathBuf,
}

/// The realised workload as an oracle: real reruns, and the workload reader's
/// own refusals (a fault that no longer fits the run is never run).
struct Real<'a> {
    runner: &'a mut Runner,
    rule: Rule,
    seed: u64,
    dir: PathBuf,
}

impl Oracle for Real<'_> {
    fn trial(&mut self, c: &Candidate) -> Result<Trial> {
        self.runner.trial(c, self.rule)
    }

    fn refuses(&self, c: &Candidate) -> Option<String> {
        let text = match c.text() {
            Ok(t) => t,
            Err(e) => return Some(format!("{e:#}")),
        };
        Workload::parse(&text, &self.dir.join("candidate.toml"))
            .and_then(|w| w.planned_faults(None, self.seed).map(|_| ()))
            .err()
            .map(|e| format!("{e:#}"))
    }
}

/// How a shrink ended.
pub struct Shrinking {
    pub kind: AnomalyKind,
    /// The realised run's own reruns: does the anomaly come back at all?
    pub first: Trial,
    pub search: Option<Shrunk>,
    /// The result's reruns, and the file it is in (`shrunk.toml`), if it came back.
    pub confirm: Option<Trial>,
    pub file: Option<PathBuf>,
    /// Ops of the original run and of the first flagged confirming rerun.
    pub ops_before: u64,
    pub ops_after: Option<u64>,
    pub elapsed: Duration,
}

/// Run `dir` read back, the folder `sub` of it its reruns go to, and their runner.
fn open(dir: &Path, sub: &str, opts: &Options) -> Result<(Realised, PathBuf, Runner)> {
    let r = realise(dir, opts.kind, opts.workload_dir.as_deref())?;
    let work = dir.join(sub);
    let runner = Runner::new(
        opts.exe.clone(),
        work.clone(),
        r.report.seed,
        r.kind,
        opts.jobs,
    )?;
    Ok((r, work, runner))
}

/// Shrinks run `dir`. `progress` gets a line per trial.
pub fn shrink(dir: &Path, opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Shrinking> {
    let started = Instant::now();
    let (r, work, mut runner) = open(dir, "shrink", opts)?;
    let ops_before = ops_of(&r.report);
    progress(&format!(
        "shrink: {} in {}: {} as it happened, {} ops; first, does it come back ({} of {} reruns)?",
        r.kind.name(),
        dir.display(),
        r.candidate.size(),
        ops_before,
        opts.rule.k,
        opts.rule.m
    ));
    let mut oracle = Real {
        runner: &mut runner,
        rule: opts.rule,
        seed: r.report.seed,
        dir: work.clone(),
    };
    // The run as it happened must be a workload the reader takes, or every
    // "does not come back" below would be a refusal in disguise.
    if let Some(why) = oracle.refuses(&r.candidate) {
        return Err(anyhow::anyhow!(
            "{}: the run's faults as they happened do not make a workload lockcheck runs: {why}",
            dir.display()
        ));
    }
    let first = oracle.trial(&r.candidate)?;
    let mut out = Shrinking {
        kind: r.kind,
        first: first.clone(),
        search: None,
        confirm: None,
        file: None,
        ops_before,
        ops_after: None,
        elapsed: Duration::ZERO,
    };
    if !first.breaks {
        out.elapsed = started.elapsed();
        return Ok(out);
    }
    let (shrunk, confirm) = search_and_settle(&mut oracle, &r, opts, &work, started, progress)?;
    out.ops_after = confirm
        .flagged_dirs
        .first()
        .and_then(|d| std::fs::read_to_string(d.join("verdict.json")).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .map(|rep| ops_of(&rep));
    if confirm.flagged > 0 {
        let header = header(&r, &shrunk, &confirm, started.elapsed());
        let file = dir.join("shrunk.toml");
        std::fs::write(&file, format!("{header}{}", shrunk.best.text()?))
            .with_context(|| format!("writing {}", file.display()))?;
        out.file = Some(file);
    }
    out.search = Some(shrunk);
    out.confirm = Some(confirm);
    out.elapsed = started.elapsed();
    Ok(out)
}

/// What is left of the budget for a search: the whole shrink's budget, less the
/// time gone, one confirmation at the slowest reruns seen so far, and the one
/// trial the search may have started just before its deadline (up to m reruns).
fn search_budget(opts: &Options, started: Instant, runner: &Runner) -> Duration {
    opts.budget
        .saturating_sub(started.elapsed())
        .saturating_sub(runner.estimate(opts.confirm))
        .saturating_sub(runner.estimate(opts.rule.m))
}

/// The reruns of `opts.confirm` a result must break in.
fn needed(opts: &Options) -> u32 {
    ((opts.reliable * f64::from(opts.confirm)).ceil() as u32).clamp(1, opts.confirm)
}

/// The search and its confirmation, in rounds while time is left. When the
/// confirmation walks back past a cut (the candidate after it broke too seldom
/// in `confirm` reruns: two clients where the break needs a third to come back
/// reliably), that cut's dimension is left as it is and the search goes on from
/// the candidate it walked back to: the other dimensions (the run's length, the
/// faults) are still cut, where stopping there would keep them all.
fn search_and_settle(
    oracle: &mut Real<'_>,
    r: &Realised,
    opts: &Options,
    work: &Path,
    started: Instant,
    progress: &mut dyn FnMut(&str),
) -> Result<(Shrunk, Trial)> {
    let mut frozen = Vec::new();
    let mut from = r.candidate.clone();
    let mut known: Option<(Trial, PathBuf)> = None;
    let mut total: Option<Shrunk> = None;
    let mut round = 1;
    loop {
        let budget = search_budget(opts, started, oracle.runner);
        let shrunk = {
            let mut line = |p: &Progress<'_>| progress(&progress_line(p, opts.rule));
            Search::new(oracle, from.clone(), r.kind, budget, &mut line)
                .freezing(&frozen)
                .run()?
        };
        let first = total.as_ref().map_or(shrunk.start, |t| t.start);
        progress(&format!(
            "shrink: {first} → {} in {} trials ({} runs){}; confirming with {} reruns",
            shrunk.best.size(),
            shrunk.trials,
            shrunk.runs,
            if shrunk.out_of_time {
                ", the budget ran out: the best so far"
            } else {
                ""
            },
            opts.confirm
        ));
        let (chosen, confirm, results) = match known.take() {
            // Nothing cut this round: the candidate it started from stands.
            Some((t, dir)) if shrunk.kept.len() == 1 => (0, t, dir),
            k => {
                let label = match round {
                    1 => "confirm".to_string(),
                    n => format!("confirm-{n}"),
                };
                settle(oracle.runner, &shrunk.kept, opts, work, &label, k, progress)?
            }
        };
        let walked_back = shrunk.kept_by.get(chosen + 1).copied().flatten();
        let merged = Shrunk {
            start: first,
            best: shrunk.kept[chosen].clone(),
            kept: shrunk.kept,
            kept_by: shrunk.kept_by,
            trials: shrunk.trials + total.as_ref().map_or(0, |t| t.trials),
            runs: shrunk.runs + total.as_ref().map_or(0, |t| t.runs),
            out_of_time: shrunk.out_of_time,
        };
        let again = walked_back.filter(|_| {
            confirm.flagged >= needed(opts)
                && !merged.out_of_time
                && !search_budget(opts, started, oracle.runner).is_zero()
        });
        let Some(step) = again else {
            return Ok((merged, confirm));
        };
        frozen.push(search::dimension(step));
        progress(&format!(
            "shrink: the cut of the {} broke too seldom; round {}: on from {}, the {} left as they are",
            search::STEPS[step],
            round + 1,
            merged.best.size(),
            frozen
                .iter()
                .map(|&d| search::STEPS[d])
                .collect::<Vec<_>>()
                .join(", ")
        ));
        from = merged.best.clone();
        known = Some((confirm, results));
        total = Some(merged);
        round += 1;
    }
}

/// The smallest kept candidate that breaks in at least `opts.reliable` of
/// `opts.confirm` reruns. A search over noisy trials keeps cuts that broke by luck
/// in k of m; the last one kept sits where the break starts to fade. So the
/// confirmation bisects back along the kept chain (each smaller than the one
/// before) for the latest that meets the rate: a handful of confirmations, and a
/// reproducer that reproduces. None meets it: the one that broke most often, its
/// rate said as it is (0 of them: nothing is handed over).
/// `known`: the first kept candidate's confirmation, from an earlier round
/// (`label` names this round's run directories).
fn settle(
    runner: &mut Runner,
    kept: &[Candidate],
    opts: &Options,
    work: &Path,
    label: &str,
    known: Option<(Trial, PathBuf)>,
    progress: &mut dyn FnMut(&str),
) -> Result<(usize, Trial, PathBuf)> {
    let need = needed(opts);
    let mut tried: Vec<(usize, Trial, PathBuf)> = Vec::new();
    tried.extend(known.map(|(t, dir)| (0, t, dir)));
    let (mut lo, mut hi) = (0, kept.len() - 1);
    let mut probe = hi;
    loop {
        let results = work.join(format!("{label}-{probe}"));
        let file = runner.write(&kept[probe], &format!("{label}-{probe}"), "")?;
        let t = runner.rate(&file, opts.confirm, &results)?;
        let _ = std::fs::remove_file(&file);
        let met = t.flagged >= need;
        progress(&format!(
            "shrink [confirm] kept candidate {} of {} ({}): {} reruns{}",
            probe + 1,
            kept.len(),
            kept[probe].size(),
            rate_text(&t),
            if met {
                format!(", ≥ {need}: reliable")
            } else {
                format!(", fewer than {need}")
            }
        ));
        tried.push((probe, t, results));
        if met {
            lo = probe;
        } else if probe == 0 {
            break;
        } else {
            hi = probe - 1;
        }
        if lo >= hi && tried.iter().any(|(i, _, _)| *i == hi) {
            break;
        }
        probe = lo + (hi - lo).div_ceil(2);
        if tried.iter().any(|(i, _, _)| *i == probe) {
            break;
        }
    }
    let best = tried
        .iter()
        .filter(|(_, t, _)| t.flagged >= need)
        .max_by_key(|(i, _, _)| *i)
        .or_else(|| tried.iter().max_by_key(|(i, t, _)| (t.flagged, *i)))
        .map(|(i, _, _)| *i)
        .unwrap_or(0);
    let mut chosen = None;
    for (i, t, results) in tried {
        if i == best {
            chosen = Some((i, t, results));
        } else {
            let _ = std::fs::remove_dir_all(&results);
        }
    }
    chosen.ok_or_else(|| anyhow::anyhow!("no confirmation ran"))
}

/// How a replay ended.
pub struct Replayed {
    pub kind: AnomalyKind,
    pub rate: Trial,
    pub file: PathBuf,
    pub results: PathBuf,
}

/// Reruns run `dir`'s realised schedule `runs` times.
pub fn replay(dir: &Path, runs: u32, opts: &Options) -> Result<Replayed> {
    let (r, work, mut runner) = open(dir, "replay", opts)?;
    let header = format!(
        "# lockcheck replay: the schedule run {} realised ({}), its faults as they happened.\n\n",
        dir.display(),
        r.candidate.size()
    );
    let file = runner.write(&r.candidate, "replay", &header)?;
    let results = work.join("runs");
    let rate = runner.rate(&file, runs, &results)?;
    Ok(Replayed {
        kind: r.kind,
        rate,
        file,
        results,
    })
}

/// "7/10 (95 % interval 40–89 %)".
pub fn rate_text(t: &Trial) -> String {
    match wilson(t.flagged as usize, t.ran as usize) {
        Some(i) => format!(
            "{}/{} (95 % interval {:.0}–{:.0} %)",
            t.flagged,
            t.ran,
            i.low * 100.0,
            i.high * 100.0
        ),
        None => format!("{}/{}", t.flagged, t.ran),
    }
}

fn ops_of(r: &crate::run::RunReport) -> u64 {
    r.figures.ops.values().flat_map(|o| o.values()).sum()
}

fn progress_line(p: &Progress<'_>, rule: Rule) -> String {
    format!(
        "shrink [{}/{} {}] try {}: {} (start: {}): {}/{} flagged{}; {} left",
        p.step + 1,
        search::STEPS.len(),
        search::STEPS[p.step],
        p.trial,
        p.tried,
        p.start,
        p.result.flagged,
        p.result.ran,
        if p.result.breaks {
            format!(" ≥ {}: kept", rule.k)
        } else {
            String::new()
        },
        minutes(p.left)
    )
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

/// What `shrunk.toml` says of itself, in comments above the workload.
fn header(r: &Realised, s: &Shrunk, confirm: &Trial, took: Duration) -> String {
    let events: Vec<String> = s.best.events.iter().map(|e| e.describe()).collect();
    format!(
        "# lockcheck shrink: reproduces {kind} in {rate} reruns\n\
         # ({date}, lockcheck {version}); shrunk from run {dir}\n\
         # ({before}) to {after} in {took} ({trials} trials, {runs} runs){cut}.\n\
         # Faults: {events}.\n\
         # Reproduce: lockcheck run shrunk.toml --test-count 10\n\n",
        kind = r.kind.name(),
        rate = rate_text(confirm),
        date = chrono::Utc::now().format("%Y-%m-%d"),
        version = env!("CARGO_PKG_VERSION"),
        dir = r.dir.display(),
        before = s.start,
        after = s.best.size(),
        took = minutes(took),
        trials = s.trials,
        runs = s.runs,
        cut = if s.out_of_time {
            ", cut short by its budget"
        } else {
            ""
        },
        events = if events.is_empty() {
            "none".to_string()
        } else {
            events.join("; ")
        },
    )
}
