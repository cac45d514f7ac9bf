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

use anyhow::{Context, Result};
use candidate::Candidate;
use lockcheck_audit::stats::wilson;
use lockcheck_check::AnomalyKind;
use lockcheck_run::workload::Workload;
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
    let (shrunk, confirm) = search_and_settle(&mut oracle, &r, opts, started, progress)?;
    out.ops_after = confirm
        .flagged_dirs
        .first()
        .and_then(|d| lockcheck_rundir::read_run(d).ok())
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
/// time gone, one confirmation at the slowest reruns seen so far, one step back
/// (two waves of reruns: a confirmation of a candidate where the break fades
/// stops at its second miss), and the one trial the search may have started
/// just before its deadline (up to m reruns). Without the step back, a search
/// whose last cut broke by luck handed over a 1-in-4 reproducer with no time to
/// walk back to the cut before it (a Patroni shrink: the pause cut to 6.8 s).
fn search_budget(opts: &Options, started: Instant, runner: &Runner) -> Duration {
    let waves = |n: usize| u32::try_from(n * opts.jobs.max(1)).unwrap_or(u32::MAX);
    opts.budget
        .saturating_sub(started.elapsed())
        .saturating_sub(runner.estimate(opts.confirm))
        .saturating_sub(runner.estimate(waves(2)))
        .saturating_sub(runner.estimate(opts.rule.m))
}

impl Options {
    /// The reruns of `confirm` a result must break in.
    pub fn needed(&self) -> u32 {
        ((self.reliable * f64::from(self.confirm)).ceil() as u32).clamp(1, self.confirm)
    }
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
        let settled = match known.take() {
            // Nothing cut this round: the candidate it started from stands.
            Some((trial, dir)) if shrunk.kept.len() == 1 => Settled {
                chosen: 0,
                trial,
                dir,
                cut_short: false,
            },
            k => {
                let label = match round {
                    1 => "confirm".to_string(),
                    n => format!("confirm-{n}"),
                };
                // No deadline for a budget too long to add (there is none).
                let deadline = started.checked_add(opts.budget);
                settle(
                    oracle.runner,
                    &shrunk.kept,
                    opts,
                    &label,
                    k,
                    deadline,
                    progress,
                )?
            }
        };
        let (chosen, confirm, results) = (settled.chosen, settled.trial, settled.dir);
        let walked_back = shrunk.kept_by.get(chosen + 1).copied().flatten();
        let merged = Shrunk {
            start: first,
            best: shrunk.kept[chosen].clone(),
            kept: shrunk.kept,
            kept_by: shrunk.kept_by,
            trials: shrunk.trials + total.as_ref().map_or(0, |t| t.trials),
            runs: shrunk.runs + total.as_ref().map_or(0, |t| t.runs),
            out_of_time: shrunk.out_of_time || settled.cut_short,
        };
        let again = walked_back.filter(|_| {
            confirm.flagged >= opts.needed()
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

/// Reruns a kept candidate for its rate: the real runner, or a fake in tests.
trait Confirm {
    /// Up to `n` reruns of `c`, stopping once `need` of them are out of reach;
    /// their run directories go to the folder `name`.
    fn confirm(&mut self, c: &Candidate, n: u32, need: u32, name: &str)
        -> Result<(Trial, PathBuf)>;
    /// What `n` reruns will take, from the slowest seen so far.
    fn estimate(&self, n: u32) -> Duration;
}

impl Confirm for Runner {
    fn confirm(
        &mut self,
        c: &Candidate,
        n: u32,
        need: u32,
        name: &str,
    ) -> Result<(Trial, PathBuf)> {
        let results = self.dir().join(name);
        let file = self.write(c, name, "")?;
        let t = self.rate(&file, n, need, &results)?;
        let _ = std::fs::remove_file(&file);
        Ok((t, results))
    }

    fn estimate(&self, n: u32) -> Duration {
        Runner::estimate(self, n)
    }
}

/// What a confirmation settled on: the kept candidate `chosen`, its reruns
/// and their folder.
struct Settled {
    chosen: usize,
    trial: Trial,
    dir: PathBuf,
    /// The budget ran out before the walk back ended: the best confirmed so
    /// far stands, which may be larger than the smallest reliable one, or
    /// (none met the rate) not reliable.
    cut_short: bool,
}

/// The smallest kept candidate that breaks in at least `opts.reliable` of
/// `opts.confirm` reruns. A search over noisy trials keeps cuts that broke by luck
/// in k of m; the last one kept sits where the break starts to fade. So the
/// confirmation bisects back along the kept chain (each smaller than the one
/// before) for the latest that meets the rate: a handful of confirmations, and a
/// reproducer that reproduces. None meets it: the one that broke most often, its
/// rate said as it is (0 of them: nothing is handed over).
/// `known`: the first kept candidate's confirmation, from an earlier round
/// (`label` names this round's run directories). The search left time for the
/// first confirmation; each step back after it starts only while one more fits
/// before `deadline`, so the walk back cannot carry the shrink past its budget.
fn settle(
    runner: &mut dyn Confirm,
    kept: &[Candidate],
    opts: &Options,
    label: &str,
    known: Option<(Trial, PathBuf)>,
    deadline: Option<Instant>,
    progress: &mut dyn FnMut(&str),
) -> Result<Settled> {
    let need = opts.needed();
    let mut tried: Vec<(usize, Trial, PathBuf)> = Vec::new();
    tried.extend(known.map(|(t, dir)| (0, t, dir)));
    let (mut lo, mut hi) = (0, kept.len() - 1);
    let mut probe = hi;
    let mut cut_short = false;
    loop {
        let (t, results) = runner.confirm(
            &kept[probe],
            opts.confirm,
            need,
            &format!("{label}-{probe}"),
        )?;
        let met = t.flagged >= need;
        progress(&format!(
            "shrink [confirm] kept candidate {} of {} ({}): {} reruns{}",
            probe + 1,
            kept.len(),
            kept[probe].size(),
            rate_text(&t),
            if met {
                format!(", ≥ {need}: reliable")
            } else if t.ran < opts.confirm {
                format!(", stopped: {need} of {} out of reach", opts.confirm)
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
        let next = runner.estimate(opts.confirm);
        if deadline.is_some_and(|d| Instant::now() + next > d) {
            progress(&format!(
                "shrink [confirm] the budget has no {} s left for another confirmation: the walk back stops here",
                next.as_secs()
            ));
            cut_short = true;
            break;
        }
    }
    let best = tried
        .iter()
        .filter(|(_, t, _)| t.flagged >= need)
        .max_by_key(|(i, _, _)| *i)
        // Confirmations that stopped early ran fewer reruns: compared by share.
        .or_else(|| {
            let share = |t: &Trial| f64::from(t.flagged) / f64::from(t.ran.max(1));
            tried
                .iter()
                .max_by(|a, b| share(&a.1).total_cmp(&share(&b.1)).then(a.0.cmp(&b.0)))
        })
        .map(|(i, _, _)| *i)
        .unwrap_or(0);
    let mut chosen = None;
    for (i, t, results) in tried {
        if i == best {
            chosen = Some(Settled {
                chosen: i,
                trial: t,
                dir: results,
                cut_short,
            });
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
    let rate = runner.rate(&file, runs, 0, &results)?;
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

fn ops_of(r: &lockcheck_run::RunReport) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept candidates of 7, 6, 5, 4 and 3 clients; the break comes back
    /// 10 of 10 with 5 or more, 4 of 10 with fewer. Each confirmation
    /// "takes" `each`.
    struct Fake {
        each: Duration,
        asked: Vec<u64>,
    }

    impl Confirm for Fake {
        fn confirm(
            &mut self,
            c: &Candidate,
            n: u32,
            _: u32,
            name: &str,
        ) -> Result<(Trial, PathBuf)> {
            self.asked.push(c.clients());
            let flagged = if c.clients() >= 5 { n } else { 4 };
            let t = Trial {
                flagged,
                ran: n,
                breaks: true,
                flagged_dirs: vec![],
            };
            Ok((t, PathBuf::from(name)))
        }

        fn estimate(&self, _: u32) -> Duration {
            self.each
        }
    }

    fn chain() -> Vec<Candidate> {
        (3..=7)
            .rev()
            .map(|n| Candidate {
                base: toml::from_str(&format!("duration = \"8s\"\n[clients]\ncount = {n}\n"))
                    .unwrap(),
                events: vec![],
            })
            .collect()
    }

    fn opts() -> Options {
        Options {
            kind: None,
            rule: Rule { k: 2, m: 3 },
            jobs: 1,
            budget: Duration::from_secs(600),
            confirm: 10,
            reliable: 0.9,
            workload_dir: None,
            exe: PathBuf::new(),
        }
    }

    /// Settles the chain when one confirmation takes `each` and the deadline
    /// is `left` away: what it chose, and the clients of each candidate asked.
    fn settle_chain(
        each: u64,
        left: u64,
        known: Option<(Trial, PathBuf)>,
    ) -> (Settled, Vec<Candidate>, Vec<u64>) {
        let mut fake = Fake {
            each: Duration::from_secs(each),
            asked: vec![],
        };
        let kept = chain();
        let deadline = Instant::now().checked_add(Duration::from_secs(left));
        let s = settle(
            &mut fake,
            &kept,
            &opts(),
            "confirm",
            known,
            deadline,
            &mut |_| {},
        )
        .unwrap();
        (s, kept, fake.asked)
    }

    #[test]
    fn the_walk_back_finds_the_smallest_reliable_candidate_when_time_allows() {
        let (s, kept, asked) = settle_chain(60, 3600, None);
        assert_eq!(kept[s.chosen].clients(), 5);
        assert_eq!(s.trial.flagged, 10);
        assert!(!s.cut_short);
        assert_eq!(asked, vec![3, 5, 4]);
    }

    #[test]
    fn the_walk_back_stops_when_the_budget_has_no_time_for_another_confirmation() {
        // One confirmation takes an hour and the deadline is in ten minutes:
        // the first (which the search left time for) runs, no step back does.
        let (s, _, asked) = settle_chain(3600, 600, None);
        assert_eq!(asked, vec![3]);
        assert!(s.cut_short);
        assert_eq!(s.trial.flagged, 4, "its rate is said as it is");
    }

    #[test]
    fn a_known_reliable_start_stands_when_the_walk_back_is_cut_short() {
        // A later round: kept[0] was confirmed reliable in the round before.
        let known = Trial {
            flagged: 10,
            ran: 10,
            breaks: true,
            flagged_dirs: vec![],
        };
        let (s, _, asked) = settle_chain(3600, 600, Some((known, PathBuf::from("confirm-0"))));
        assert_eq!(asked, vec![3]);
        assert_eq!(s.chosen, 0);
        assert_eq!(s.trial.flagged, 10);
    }
}
