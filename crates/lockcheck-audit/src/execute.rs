//! Running the battery: each run of each scenario is a child `lockcheck run`
//! process, several at once (`--jobs`), started while the budget has room for one
//! more, its verdict read back from its stdout and its run directory.
//!
//! Why child processes rather than `run::run` in this process: a run owns its
//! process (its signal handlers, its current-thread runtime, the workers it
//! re-executes, the file descriptors it raises its limit for), so runs side by side
//! in one process would fight over all of that; a crash, a panic or an exit in one
//! run must leave the others and the audit going; and a child stopped by SIGTERM
//! already undoes its faults and stops its servers. Each child runs in a process
//! group of its own (a Ctrl-C at the terminal reaches the audit alone, which stops
//! every child with SIGTERM and waits for them) and is sent SIGTERM by the kernel if
//! the audit dies first.

use super::battery::ScenarioWorkload;
use super::pace::{Jobs, Level, Pace};
use super::plan::{Plan, Tally, Want, Why};
use anyhow::{anyhow, Context, Result};
use lockcheck_check::provoked::Provocation;
use lockcheck_check::{AnomalyKind, Validity};
use lockcheck_report::RunDir;
use lockcheck_resource::Fence;
use lockcheck_run::RunReport;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How one run of a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Checked, no anomaly the scenario does not allow.
    Valid,
    /// Checked, anomalies found.
    Flagged,
    /// The checker gave up within its limits.
    Unknown,
    /// Some planned fault never started: the run did not test what it claims.
    MissedFaults,
    /// Checked and valid, but no client acquired the lock once the first fault
    /// had begun (a server that came back only as the run ended, a service down
    /// from then on): the run saw nothing of what the fault does, and a clean
    /// figure from it would be a clean bill for a scenario never tested.
    Unobserved,
    /// Checked and valid, but the fault never reached what the holder asks
    /// whether it holds (its library reads a clock the fault does not move): so
    /// for every run of the scenario, which the audit then lists as not
    /// applicable, measured.
    OutOfReach,
    /// The run did not end with a verdict (its error is kept).
    Error,
}

impl Outcome {
    /// The run was checked and tested what its scenario claims: it counts in k/N.
    pub fn counts(self) -> bool {
        matches!(self, Outcome::Valid | Outcome::Flagged)
    }
}

/// One run of one scenario, read back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// 1 .. --runs.
    pub run: u32,
    pub seed: u64,
    pub outcome: Outcome,
    /// Wall time of the child, start to exit.
    pub wall_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
    /// Kinds of the anomalies that flagged it (allowed ones left out).
    pub anomalies: Vec<String>,
    pub first_anomaly_s: Option<f64>,
    /// Each deposed holder's zombie window (another acquired while it still
    /// believed it held), in ms.
    pub zombie_windows_ms: Vec<f64>,
    /// Fenced: stale writes the resource applied (the checker's
    /// `stale-write-accepted`). Unfenced: applied writes that carried a token
    /// lower than one applied before them (the fence's replay); without tokens,
    /// applied writes of deposed holders.
    pub stale_writes_accepted: usize,
    pub writes_rejected_by_fence: u64,
    /// What the run exercised (history.md v1.2), from its history; none for a run
    /// that left no history to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provoked: Option<Provocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunRecord {
    /// Flagged with the token itself broken ([`AnomalyKind::breaks_the_token`]).
    pub fn breaks_the_token(&self) -> bool {
        self.anomalies.iter().any(|a| {
            a.parse::<AnomalyKind>()
                .is_ok_and(AnomalyKind::breaks_the_token)
        })
    }

    pub(super) fn failed(run: u32, seed: u64, wall_s: f64, error: String) -> RunRecord {
        RunRecord {
            run,
            seed,
            outcome: Outcome::Error,
            wall_s,
            run_dir: None,
            anomalies: Vec::new(),
            first_anomaly_s: None,
            zombie_windows_ms: Vec::new(),
            stale_writes_accepted: 0,
            writes_rejected_by_fence: 0,
            provoked: None,
            error: Some(error),
        }
    }

    /// What a child's verdict (its `--json` stdout) and run directory say.
    pub fn of_report(run: u32, seed: u64, wall_s: f64, report: &RunReport) -> Result<RunRecord> {
        let outcome = match report.verdict.valid {
            _ if report.faults.out_of_reach => Outcome::OutOfReach,
            _ if report.missed_faults && report.faults.missed.is_empty() => Outcome::Unobserved,
            _ if report.missed_faults => Outcome::MissedFaults,
            Validity::Valid => Outcome::Valid,
            Validity::Invalid => Outcome::Flagged,
            Validity::Unknown => Outcome::Unknown,
        };
        let mut anomalies: Vec<String> = report
            .verdict
            .anomalies
            .iter()
            .filter(|a| !a.allowed)
            .map(|a| a.kind.name().to_string())
            .collect();
        anomalies.sort();
        anomalies.dedup();
        let dir = RunDir::load(&report.run_dir)
            .with_context(|| format!("reading back {}", report.run_dir.display()))?;
        let title = dir.title();
        let analysis = dir.input(&title, &report.verdict).analyze();
        // With the resource's fence on, what got past it is what the checker found
        // applied out of order; replaying the resource's log through the same
        // fence would give 0 by construction.
        let stale = if report.fence != Fence::Off {
            report
                .verdict
                .anomalies
                .iter()
                .filter(|a| a.kind == AnomalyKind::StaleWriteAccepted)
                .count()
        } else if analysis.fencing.applicable {
            analysis.fencing.would_reject.len()
        } else {
            analysis.zombies.writes_accepted_after
        };
        let provoked = analysis.provoked.map(|p| p.class);
        let fences_itself = report.self_fencing_margin_ms.is_some()
            || report
                .client
                .as_ref()
                .is_some_and(|c| c.self_fencing.is_some());
        let outcome = if acted_when_deposed(fences_itself, outcome, provoked) {
            anomalies.push(AnomalyKind::DoubleHolder.name().to_string());
            anomalies.sort();
            anomalies.dedup();
            Outcome::Flagged
        } else {
            outcome
        };
        Ok(RunRecord {
            run,
            seed,
            outcome,
            wall_s,
            run_dir: Some(report.run_dir.clone()),
            anomalies,
            first_anomaly_s: report.figures.first_anomaly_s,
            zombie_windows_ms: analysis
                .zombies
                .all
                .iter()
                .map(|z| z.window_ns as f64 / 1e6)
                .collect(),
            stale_writes_accepted: stale,
            writes_rejected_by_fence: report.figures.writes_rejected_by_fence,
            provoked,
            error: report.faults.unseen.clone(),
        })
    }
}

/// Whether a holder that fences itself (its own lease deadline, or its library's
/// `held`) wrote once deposed: such a run allows two holders at once, since the
/// holder claims it never acts as one, so a late write of its reaching the
/// resource fails it even where the checker had nothing to flag (the write came
/// before the successor's first one, or carried no token to compare).
fn acted_when_deposed(
    fences_itself: bool,
    outcome: Outcome,
    provoked: Option<Provocation>,
) -> bool {
    fences_itself
        && outcome == Outcome::Valid
        && matches!(
            provoked,
            Some(Provocation::Provoked | Provocation::ProvokedBeforeFault)
        )
}

/// What the audit needs to start its runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `lockcheck` program each run re-executes.
    pub exe: PathBuf,
    /// Where the runs' directories go.
    pub results: PathBuf,
    /// Which run to start next, and when a scenario is done.
    pub plan: Plan,
    pub first_seed: u64,
    pub jobs: Jobs,
    pub budget: Duration,
    /// The share of the runs this process makes: run numbers, and so seeds,
    /// of its shard.
    pub share: super::plan::Share,
    /// Runs already made, by battery index (an audit resumed): counted as if
    /// this process had made them.
    pub given: Vec<Vec<RunRecord>>,
    /// Time the runs already made took, counted against the budget.
    pub elapsed_before: Duration,
}

/// One run to do: scenario `scenario` (an index into the battery), run `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub scenario: usize,
    pub run: u32,
}

/// What a run costs on top of its workload's duration (servers starting and
/// stopping, the check, the report), as measured on the runs that ended: before
/// any did, `FIRST_GUESS`.
#[derive(Debug, Clone, Default)]
pub struct Overhead {
    seen: Vec<f64>,
}

/// The overhead assumed before any run has ended: a local cluster of three starts
/// and stops in 2-4 s here, the check and report take 1 s.
pub const FIRST_GUESS: Duration = Duration::from_secs(5);

impl Overhead {
    pub fn record(&mut self, wall: Duration, duration: Duration) {
        self.seen.push(wall.saturating_sub(duration).as_secs_f64());
    }

    /// The largest overhead seen so far (a run that starts must end within the
    /// budget, so the worst case counts), else the first guess.
    pub fn estimate(&self) -> Duration {
        self.seen
            .iter()
            .copied()
            .reduce(f64::max)
            .map_or(FIRST_GUESS, Duration::from_secs_f64)
    }

    /// Whether a run of `duration` started after `elapsed` still ends within `budget`.
    pub fn fits(&self, elapsed: Duration, duration: Duration, budget: Duration) -> bool {
        elapsed + duration + self.estimate() <= budget
    }
}

/// What the progress display is told after each event.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// The battery is written out and about to run.
    Planned {
        scenarios: usize,
        /// Runs at most (every "can it break?" scenario to twice `--runs`
        /// without a break, were half its runs unchecked, every twin to its cap).
        runs: usize,
        jobs: usize,
        dir: &'a Path,
    },
    Started {
        scenario: &'a str,
        slot: Slot,
    },
    /// The audit paced itself to `now` runs at once, leaving `left`.
    Paced {
        left: Level,
        now: usize,
    },
    Ended {
        scenario: &'a str,
        slot: Slot,
        record: &'a RunRecord,
        /// This scenario's runs so far: flagged, provoked, and those that count.
        flagged: usize,
        provoked: usize,
        counted: usize,
        /// Runs ended so far.
        done: usize,
    },
}

/// How a scenario's runs ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its question was answered or not asked.
    Done(Why),
    /// It wanted more runs when the budget ran out or a signal stopped the audit.
    CutShort,
}

/// What the runs gave: each scenario's records and how it ended (by battery index).
#[derive(Debug, Clone, Default)]
pub struct Executed {
    pub records: Vec<Vec<RunRecord>>,
    pub endings: Vec<Ending>,
    pub elapsed: Duration,
    /// A signal stopped the audit: the runs in flight were stopped, none after started.
    pub interrupted: Option<&'static str>,
    /// How many runs at once, level by level, with the timer lateness seen at each.
    pub levels: Vec<Level>,
}

impl Executed {
    /// How each scenario stands: done, or cut short if it still wants runs.
    fn endings(&self, plan: &Plan, in_flight: &[u32]) -> Vec<Ending> {
        let tallies: Vec<Tally> = (0..self.records.len())
            .map(|i| self.tally(i, in_flight[i]))
            .collect();
        (0..tallies.len())
            .map(|i| match plan.want(i, &tallies) {
                Want::Done(why) => Ending::Done(why),
                Want::Start | Want::Wait => Ending::CutShort,
            })
            .collect()
    }

    pub(super) fn tally(&self, i: usize, in_flight: u32) -> Tally {
        let r = &self.records[i];
        let n = |f: &dyn Fn(&RunRecord) -> bool| r.iter().filter(|r| f(r)).count() as u32;
        let provoked = |r: &RunRecord| r.provoked == Some(Provocation::Provoked);
        Tally {
            started: r.len() as u32 + in_flight,
            in_flight,
            checked: n(&|r| r.outcome.counts()),
            flagged: n(&|r| r.outcome == Outcome::Flagged),
            flagged_provoked: n(&|r| r.outcome == Outcome::Flagged && provoked(r)),
            flagged_token: n(&|r| r.outcome == Outcome::Flagged && r.breaks_the_token()),
            provoked: n(&|r| r.outcome.counts() && provoked(r)),
            out_of_reach: n(&|r| r.outcome == Outcome::OutOfReach),
        }
    }
}

/// Runs the battery's scenarios as `opts.plan` asks, calling `progress` on each
/// start and end with the budget's time left, and `checkpoint` after each end
/// with what the runs gave so far (the runs in flight counted as cut short).
pub fn execute(
    battery: &[ScenarioWorkload],
    opts: &Options,
    progress: &mut dyn FnMut(Event<'_>, Duration),
    checkpoint: &mut dyn FnMut(&Executed),
) -> Result<Executed> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(execute_async(battery, opts, progress, checkpoint))
}

async fn execute_async(
    battery: &[ScenarioWorkload],
    opts: &Options,
    progress: &mut dyn FnMut(Event<'_>, Duration),
    checkpoint: &mut dyn FnMut(&Executed),
) -> Result<Executed> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let started = Instant::now();
    let elapsed = || opts.elapsed_before + started.elapsed();
    let names: Vec<String> = battery.iter().map(|s| s.scenario.name()).collect();
    let mut out = Executed {
        records: opts.given.clone(),
        ..Executed::default()
    };
    let mut overhead = Overhead::default();
    let mut pace = Pace::new(opts.jobs);
    let mut in_flight = vec![0u32; battery.len()];
    // Scenarios the budget has no room for (with nothing running to show the
    // overhead is smaller): no run of theirs starts again.
    let mut barred = vec![false; battery.len()];
    let mut done = 0usize;
    let mut running = tokio::task::JoinSet::new();
    let mut pids: HashMap<tokio::task::Id, u32> = HashMap::new();
    let mut owed = owed(&opts.given, opts.share);
    loop {
        while running.len() < pace.level() && out.interrupted.is_none() {
            let Some((i, local)) = next(&out, &in_flight, &owed, &barred, &opts.plan) else {
                break;
            };
            let s = &battery[i];
            let fits = overhead.fits(elapsed(), s.duration(), opts.budget);
            // Runs going may show the overhead is smaller: wait for them; with none, a
            // shorter scenario may fit (a lost run that does not stays lost: cut short).
            if !fits && !running.is_empty() {
                break;
            }
            if !owed.is_empty() {
                owed.remove(0);
            } else if !fits {
                barred[i] = true;
            }
            if !fits {
                continue;
            }
            let slot = Slot {
                scenario: i,
                run: opts.share.run(local),
            };
            in_flight[i] += 1;
            launch(&mut running, &mut pids, opts, s, slot)?;
            progress(
                Event::Started {
                    scenario: &names[i],
                    slot,
                },
                opts.budget.saturating_sub(elapsed()),
            );
        }
        if let Some(left) = pace.look(running.len()) {
            progress(
                Event::Paced {
                    left,
                    now: pace.level(),
                },
                opts.budget.saturating_sub(elapsed()),
            );
            // A level up starts its run now, not after the next run ends.
            continue;
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            ended = running.join_next_with_id() => {
                let Some(ended) = ended else { continue };
                let (id, (slot, seed, duration, wall, output)) =
                    ended.map_err(|e| anyhow!("a run's task failed: {e}"))?;
                pids.remove(&id);
                overhead.record(wall, duration);
                done += 1;
                let record = read_back(slot.run, seed, wall, output).await;
                in_flight[slot.scenario] -= 1;
                out.records[slot.scenario].push(record);
                let t = out.tally(slot.scenario, 0);
                let mine = &out.records[slot.scenario];
                progress(
                    Event::Ended {
                        scenario: &names[slot.scenario],
                        slot,
                        record: mine.last().expect("just pushed"),
                        flagged: t.flagged as usize,
                        provoked: t.provoked as usize,
                        counted: mine.iter().filter(|r| r.outcome.counts()).count(),
                        done,
                    },
                    opts.budget.saturating_sub(elapsed()),
                );
                let mut so_far = out.clone();
                so_far.endings = out.endings(&opts.plan, &in_flight);
                so_far.interrupted = Some(UNFINISHED);
                so_far.elapsed = elapsed();
                so_far.levels = pace.levels();
                checkpoint(&so_far);
            }
            _ = int.recv() => stop(&mut out, &pids, "SIGINT"),
            _ = term.recv() => stop(&mut out, &pids, "SIGTERM"),
            _ = hup.recv() => stop(&mut out, &pids, "SIGHUP"),
        }
    }
    out.endings = out.endings(&opts.plan, &in_flight);
    for records in &mut out.records {
        records.sort_by_key(|r| r.run);
    }
    out.elapsed = elapsed();
    out.levels = pace.levels();
    Ok(out)
}

/// The next run to start, by battery index and this shard's run number. The
/// runs a resumed audit lost in flight come first: until they are going again,
/// the tallies are not the ones the plan saw.
fn next(
    out: &Executed,
    in_flight: &[u32],
    owed: &[(usize, u32)],
    barred: &[bool],
    plan: &Plan,
) -> Option<(usize, u32)> {
    if let Some(&o) = owed.first() {
        return Some(o);
    }
    let tallies: Vec<Tally> = (0..in_flight.len())
        .map(|i| out.tally(i, in_flight[i]))
        .collect();
    let i = plan.next(&tallies, barred)?;
    Some((i, tallies[i].started + 1))
}

/// The runs a killed audit had in flight when a later one ended: the numbers
/// (this shard's, 1-based) missing below each scenario's highest recorded, by
/// battery index. Runs end out of order, so its scorecard may hold run 2 and
/// not run 1; made again, the scenario's runs stay numbered 1..n with no hole
/// a reader could take for a run left out.
fn owed(given: &[Vec<RunRecord>], share: super::plan::Share) -> Vec<(usize, u32)> {
    given
        .iter()
        .enumerate()
        .flat_map(|(i, records)| {
            let made: std::collections::BTreeSet<u32> =
                records.iter().filter_map(|r| share.local(r.run)).collect();
            let top = made.last().copied().unwrap_or(0);
            (1..top)
                .filter(move |n| !made.contains(n))
                .map(move |n| (i, n))
        })
        .collect()
}

/// A run's task's result: its slot, seed, workload duration, wall time and output.
type RunEnd = (Slot, u64, Duration, Duration, Output);

/// Starts run `slot` of `s` as a child `lockcheck run`, awaited in `running`,
/// its pid kept in `pids` for a signal to reach.
fn launch(
    running: &mut tokio::task::JoinSet<RunEnd>,
    pids: &mut HashMap<tokio::task::Id, u32>,
    opts: &Options,
    s: &ScenarioWorkload,
    slot: Slot,
) -> Result<()> {
    // Run n has seed `--seed` + n - 1 on any machine, in any shard.
    let seed = opts.first_seed.wrapping_add(u64::from(slot.run) - 1);
    let mut child = spawn(&opts.exe, &s.workload.path, seed, &opts.results)?;
    let pid = child.id();
    let duration = s.duration();
    let handle = running.spawn(async move {
        let begun = Instant::now();
        let output = wait(&mut child).await;
        (slot, seed, duration, begun.elapsed(), output)
    });
    if let Some(pid) = pid {
        pids.insert(handle.id(), pid);
    }
    Ok(())
}

/// What a scorecard written while the audit runs says stopped it: should the
/// audit die before its end (SIGKILL, a crash), this is what is left.
pub const UNFINISHED: &str =
    "the audit's end never came (this scorecard was written after the last run that ended)";

/// A signal: every run in flight is sent SIGTERM (each undoes its faults and
/// stops its servers) and awaited; no run starts after.
fn stop(out: &mut Executed, pids: &HashMap<tokio::task::Id, u32>, signal: &'static str) {
    if out.interrupted.is_none() {
        out.interrupted = Some(signal);
        for &pid in pids.values() {
            // The child is ours and not yet reaped (its task holds it): the pid is its own.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

pub fn spawn(
    exe: &Path,
    workload: &Path,
    seed: u64,
    results: &Path,
) -> Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("run")
        .arg(workload)
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--results")
        .arg(results)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    lockcheck_servers::backend::adapter::signal_on_parent_death(&mut cmd, libc::SIGTERM);
    cmd.spawn()
        .with_context(|| format!("starting {} run {}", exe.display(), workload.display()))
}

/// What a child left: its exit code, stdout and stderr.
pub type Output = std::io::Result<std::process::Output>;

pub async fn wait(child: &mut tokio::process::Child) -> Output {
    use tokio::io::AsyncReadExt;
    let (mut so, mut se) = (Vec::new(), Vec::new());
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let read_out = async {
        if let Some(s) = stdout.as_mut() {
            s.read_to_end(&mut so).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    let read_err = async {
        if let Some(s) = stderr.as_mut() {
            s.read_to_end(&mut se).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    let (a, b) = tokio::join!(read_out, read_err);
    a?;
    b?;
    let status = child.wait().await?;
    Ok(std::process::Output {
        status,
        stdout: so,
        stderr: se,
    })
}

/// A child's end, read back: its verdict where it printed one (exit 0, 1 or 3),
/// else its error (the last lines of its stderr).
async fn read_back(run: u32, seed: u64, wall: Duration, output: Output) -> RunRecord {
    let wall_s = wall.as_secs_f64();
    let output = match output {
        Ok(o) => o,
        Err(e) => return RunRecord::failed(run, seed, wall_s, format!("waiting for the run: {e}")),
    };
    let code = output.status.code();
    let said = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = said.lines().rev().take(3).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" / ");
    let report: Option<RunReport> = matches!(code, Some(0 | 1 | 3))
        .then(|| serde_json::from_slice(&output.stdout).ok())
        .flatten();
    let Some(report) = report else {
        let how = code.map_or_else(
            || {
                format!(
                    "killed by signal {:?}",
                    std::os::unix::process::ExitStatusExt::signal(&output.status)
                )
            },
            |c| format!("exit {c}"),
        );
        return RunRecord::failed(run, seed, wall_s, format!("{how}: {tail}"));
    };
    // The run directory is read on a blocking thread: the other runs go on meanwhile.
    let read =
        tokio::task::spawn_blocking(move || RunRecord::of_report(run, seed, wall_s, &report)).await;
    match read {
        // Each run removed its servers' data itself as it ended (`lockcheck run`
        // without `--keep-data`): an audit's hundreds of runs do not fill the disk.
        Ok(Ok(r)) => r,
        Ok(Err(e)) => RunRecord::failed(run, seed, wall_s, format!("{e:#}")),
        Err(e) => RunRecord::failed(run, seed, wall_s, format!("reading the run back: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_a_killed_audit_lost_in_flight_are_owed_by_their_numbers() {
        let made = |runs: &[u32]| -> Vec<RunRecord> {
            runs.iter()
                .map(|&r| RunRecord::failed(r, u64::from(r), 1.0, "x".into()))
                .collect()
        };
        let whole = super::super::plan::Share::WHOLE;
        // Run 2 ended before run 1 and the audit died: run 1 is owed; a
        // scenario with no hole, or with none made, owes nothing.
        let given = vec![made(&[2]), made(&[1, 2, 3]), vec![], made(&[4, 1])];
        assert_eq!(owed(&given, whole), vec![(0, 1), (3, 2), (3, 3)]);
        // Shard 2 of 3 runs 2, 5, 8: its 5 is its second.
        let share = super::super::plan::Share { index: 2, of: 3 };
        assert_eq!(owed(&[made(&[8, 2])], share), vec![(0, 2)]);
    }

    #[test]
    fn a_run_starts_only_if_it_ends_within_the_budget() {
        let s = Duration::from_secs;
        let mut o = Overhead::default();
        assert_eq!(o.estimate(), FIRST_GUESS);
        // 8 s of workload + 5 s first guess from 0 s: 13 s.
        assert!(o.fits(s(0), s(8), s(13)));
        assert!(!o.fits(s(1), s(8), s(13)));
        // Runs measured 3 s and 4 s over their workload: the worst counts.
        o.record(s(11), s(8));
        o.record(s(16), s(12));
        assert_eq!(o.estimate(), s(4));
        assert!(o.fits(s(1), s(8), s(13)));
        assert!(!o.fits(s(2), s(8), s(13)));
        // A run shorter than its workload (it never started) costs nothing extra.
        let mut quick = Overhead::default();
        quick.record(s(1), s(8));
        assert_eq!(quick.estimate(), s(0));
    }

    #[test]
    fn a_holder_that_fences_itself_fails_when_its_late_write_got_in() {
        use Provocation::*;
        let p = Some(Provoked);
        // Self-fencing: a deposed holder's write reached the resource.
        assert!(acted_when_deposed(true, Outcome::Valid, p));
        // It was deposed but withheld every write: self-fencing held.
        assert!(!acted_when_deposed(
            true,
            Outcome::Valid,
            Some(DeposedNotProvoked)
        ));
        // A fenced or unfenced run: a late write is the fence's business.
        assert!(!acted_when_deposed(false, Outcome::Valid, p));
        // Already flagged, or not counted: nothing to add.
        assert!(!acted_when_deposed(true, Outcome::Flagged, p));
        assert!(!acted_when_deposed(true, Outcome::Unobserved, p));
    }
}
