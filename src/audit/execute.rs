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
use crate::check::Validity;
use crate::report::RunDir;
use crate::run::RunReport;
use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How one run of a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
    /// Applied writes that carried a token lower than one applied before them (the
    /// fence's replay); without tokens, applied writes of deposed holders.
    pub stale_writes_accepted: usize,
    pub writes_rejected_by_fence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RunRecord {
    fn failed(run: u32, seed: u64, wall_s: f64, error: String) -> RunRecord {
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
            error: Some(error),
        }
    }

    /// What a child's verdict (its `--json` stdout) and run directory say.
    pub fn of_report(run: u32, seed: u64, wall_s: f64, report: &RunReport) -> Result<RunRecord> {
        let outcome = match report.verdict.valid {
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
        let stale = if analysis.fencing.applicable {
            analysis.fencing.would_reject.len()
        } else {
            analysis.zombies.writes_accepted_after
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
            error: report.faults.unseen.clone(),
        })
    }
}

/// What the audit needs to start its runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `lockcheck` program each run re-executes.
    pub exe: PathBuf,
    /// Where the runs' directories go.
    pub results: PathBuf,
    pub runs: u32,
    pub first_seed: u64,
    pub jobs: usize,
    pub budget: Duration,
}

/// One run to do: scenario `scenario` (an index into the battery), run `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub scenario: usize,
    pub run: u32,
}

/// The order runs start in: round by round, every scenario's first run before any
/// scenario's second, so that a budget that runs out leaves each scenario with as
/// many runs as the others, give or take one, and every scenario run once if at all
/// possible.
pub fn order(scenarios: usize, runs: u32) -> Vec<Slot> {
    (1..=runs)
        .flat_map(|run| (0..scenarios).map(move |scenario| Slot { scenario, run }))
        .collect()
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
const FIRST_GUESS: Duration = Duration::from_secs(5);

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
        runs: usize,
        jobs: usize,
        dir: &'a Path,
    },
    Started {
        scenario: &'a str,
        slot: Slot,
    },
    Ended {
        scenario: &'a str,
        slot: Slot,
        record: &'a RunRecord,
        /// This scenario's runs so far: flagged, of those that count.
        flagged: usize,
        counted: usize,
        /// Runs ended so far, of all the audit's.
        done: usize,
        total: usize,
    },
}

/// What the runs gave: each scenario's records (by battery index), and the
/// slots the budget left out.
#[derive(Debug, Clone, Default)]
pub struct Executed {
    pub records: Vec<Vec<RunRecord>>,
    pub left_out: Vec<Slot>,
    pub elapsed: Duration,
    /// A signal stopped the audit: the runs in flight were stopped, none after started.
    pub interrupted: Option<&'static str>,
}

/// Runs the battery's scenarios, calling `progress` on each start and end, and
/// `left(elapsed)` to say the time left.
pub fn execute(
    battery: &[ScenarioWorkload],
    opts: &Options,
    progress: &mut dyn FnMut(Event<'_>, Duration),
) -> Result<Executed> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(execute_async(battery, opts, progress))
}

async fn execute_async(
    battery: &[ScenarioWorkload],
    opts: &Options,
    progress: &mut dyn FnMut(Event<'_>, Duration),
) -> Result<Executed> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let started = Instant::now();
    let names: Vec<String> = battery.iter().map(|s| s.scenario.name()).collect();
    let mut out = Executed {
        records: vec![Vec::new(); battery.len()],
        ..Executed::default()
    };
    let mut overhead = Overhead::default();
    let slots = order(battery.len(), opts.runs);
    let total = slots.len();
    let mut done = 0usize;
    let mut pending = slots.into_iter().peekable();
    let mut running = tokio::task::JoinSet::new();
    let mut pids: HashMap<tokio::task::Id, u32> = HashMap::new();
    loop {
        while running.len() < opts.jobs && out.interrupted.is_none() {
            let Some(slot) = pending.peek().copied() else {
                break;
            };
            let s = &battery[slot.scenario];
            if !overhead.fits(started.elapsed(), s.duration(), opts.budget) {
                // Runs already going may show the overhead is smaller: wait for them;
                // with none going, a shorter scenario further on may still fit.
                if !running.is_empty() {
                    break;
                }
                out.left_out.push(slot);
                pending.next();
                continue;
            }
            pending.next();
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
            progress(
                Event::Started {
                    scenario: &names[slot.scenario],
                    slot,
                },
                opts.budget.saturating_sub(started.elapsed()),
            );
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
                let mine = &mut out.records[slot.scenario];
                mine.push(record);
                let counted = mine.iter().filter(|r| r.outcome.counts()).count();
                let flagged = mine.iter().filter(|r| r.outcome == Outcome::Flagged).count();
                progress(
                    Event::Ended {
                        scenario: &names[slot.scenario],
                        slot,
                        record: mine.last().expect("just pushed"),
                        flagged,
                        counted,
                        done,
                        total,
                    },
                    opts.budget.saturating_sub(started.elapsed()),
                );
            }
            _ = int.recv() => stop(&mut out, &pids, "SIGINT"),
            _ = term.recv() => stop(&mut out, &pids, "SIGTERM"),
            _ = hup.recv() => stop(&mut out, &pids, "SIGHUP"),
        }
    }
    if out.interrupted.is_some() {
        out.left_out.extend(pending);
    }
    for records in &mut out.records {
        records.sort_by_key(|r| r.run);
    }
    out.elapsed = started.elapsed();
    Ok(out)
}

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

fn spawn(exe: &Path, workload: &Path, seed: u64, results: &Path) -> Result<tokio::process::Child> {
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
    crate::backend::adapter::signal_on_parent_death(&mut cmd, libc::SIGTERM);
    cmd.spawn()
        .with_context(|| format!("starting {} run {}", exe.display(), workload.display()))
}

/// What a child left: its exit code, stdout and stderr.
type Output = std::io::Result<std::process::Output>;

async fn wait(child: &mut tokio::process::Child) -> Output {
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
    fn runs_go_round_by_round() {
        let o = order(3, 2);
        let pairs: Vec<(usize, u32)> = o.iter().map(|s| (s.scenario, s.run)).collect();
        assert_eq!(pairs, [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]);
        assert!(order(0, 5).is_empty());
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
}
