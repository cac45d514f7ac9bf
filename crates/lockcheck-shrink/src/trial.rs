//! Running candidates for real: each rerun is a child `lockcheck run` (as the
//! audit runs its scenarios, and for the same reasons: a run owns its process),
//! several at once, its verdict read back from its stdout. A candidate "still
//! breaks" when k of m reruns give the anomaly: servers, schedulers and clocks are
//! not deterministic, so one run proves a break happened, not that it comes back.

use super::candidate::Candidate;
use anyhow::{anyhow, Context, Result};
use lockcheck_audit::execute::{spawn, wait};
use lockcheck_check::AnomalyKind;
use lockcheck_exit::{self as exit, Exit};
use lockcheck_run::RunReport;
use std::path::{Path, PathBuf};

/// How many of how many reruns must give the anomaly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub k: u32,
    pub m: u32,
}

/// What the reruns of one candidate gave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trial {
    pub flagged: u32,
    pub ran: u32,
    pub breaks: bool,
    /// The run directories of the flagged reruns.
    pub flagged_dirs: Vec<PathBuf>,
}

/// Whether `need` of `n` reruns can no longer give the anomaly, after `t`.
fn out_of_reach(t: &Trial, n: u32, need: u32) -> bool {
    t.ran - t.flagged > n - need.min(n)
}

/// Runs candidates as child runs and says which still give `kind`.
pub struct Runner {
    exe: PathBuf,
    /// Where candidate files and their run directories go.
    dir: PathBuf,
    seed: u64,
    kind: AnomalyKind,
    jobs: usize,
    tries: usize,
    /// The longest a wave of reruns has taken: what a confirmation will cost.
    slowest_wave: std::time::Duration,
    runtime: tokio::runtime::Runtime,
}

/// One rerun, read back.
struct Rerun {
    flagged: bool,
    dir: Option<PathBuf>,
}

impl Runner {
    pub fn new(
        exe: PathBuf,
        dir: PathBuf,
        seed: u64,
        kind: AnomalyKind,
        jobs: usize,
    ) -> Result<Runner> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        Ok(Runner {
            exe,
            dir,
            seed,
            kind,
            jobs: jobs.max(1),
            tries: 0,
            slowest_wave: std::time::Duration::ZERO,
            runtime,
        })
    }

    /// The folder candidate files and their run directories go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `c` as a workload file of its own (`name.toml` in the runner's folder).
    pub fn write(&self, c: &Candidate, name: &str, header: &str) -> Result<PathBuf> {
        let path = self.dir.join(format!("{name}.toml"));
        std::fs::write(&path, format!("{header}{}", c.text()?))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// Reruns `c` until the rule is decided: stops as soon as k reruns gave the
    /// anomaly, or so many did not that k can no longer be reached.
    pub fn trial(&mut self, c: &Candidate, rule: Rule) -> Result<Trial> {
        self.tries += 1;
        let file = self.write(c, &format!("try-{:03}", self.tries), "")?;
        let results = self.dir.join(format!("try-{:03}", self.tries));
        let mut t = Trial::default();
        while t.flagged < rule.k && t.ran - t.flagged <= rule.m - rule.k {
            let left = (rule.k - t.flagged) as usize;
            let wave = left.min(self.jobs).min((rule.m - t.ran) as usize).max(1);
            for r in self.reruns(&file, wave, &results)? {
                t.ran += 1;
                if r.flagged {
                    t.flagged += 1;
                    t.flagged_dirs.extend(r.dir);
                }
            }
        }
        t.breaks = t.flagged >= rule.k;
        // A candidate's runs are evidence only for the search: the disk is not.
        let _ = std::fs::remove_dir_all(&results);
        let _ = std::fs::remove_file(&file);
        Ok(t)
    }

    /// Runs the workload file `n` times, `jobs` at once, its run directories under
    /// `results` (kept): how many gave the anomaly, and where. It stops early once
    /// `need` of the `n` can no longer give it (0: never): a confirmation that
    /// missed twice of ten where nine are needed has its answer, and a walk back
    /// through candidates that fade costs a wave each, not ten reruns.
    pub fn rate(&mut self, file: &Path, n: u32, need: u32, results: &Path) -> Result<Trial> {
        let mut t = Trial::default();
        while t.ran < n && !out_of_reach(&t, n, need) {
            let wave = (n - t.ran).min(self.jobs as u32) as usize;
            for r in self.reruns(file, wave, results)? {
                t.ran += 1;
                if r.flagged {
                    t.flagged += 1;
                    t.flagged_dirs.extend(r.dir);
                }
            }
        }
        t.breaks = t.flagged > 0;
        Ok(t)
    }

    /// How long `n` reruns would take, `jobs` at once, at the slowest wave seen
    /// so far (zero before any ran).
    pub fn estimate(&self, n: u32) -> std::time::Duration {
        self.slowest_wave * n.div_ceil(self.jobs as u32)
    }

    /// `n` child runs of `file` at once. A run refused as a bad workload (exit 2)
    /// gave nothing; one this machine cannot run (exit 5) stops everything, as
    /// does a signal (the children are stopped first: each undoes its faults).
    fn reruns(&mut self, file: &Path, n: usize, results: &Path) -> Result<Vec<Rerun>> {
        let (exe, seed, kind) = (self.exe.clone(), self.seed, self.kind);
        let started = std::time::Instant::now();
        let out = self.runtime.block_on(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let mut int = signal(SignalKind::interrupt())?;
            let mut term = signal(SignalKind::terminate())?;
            let mut children = Vec::new();
            for _ in 0..n {
                children.push(spawn(&exe, file, seed, results)?);
            }
            let pids: Vec<Option<u32>> = children.iter().map(|c| c.id()).collect();
            let all = futures_util::future::join_all(children.iter_mut().map(wait));
            tokio::pin!(all);
            let outputs = tokio::select! {
                o = &mut all => o,
                _ = int.recv() => return Err(stop(&pids, &mut all, "SIGINT").await),
                _ = term.recv() => return Err(stop(&pids, &mut all, "SIGTERM").await),
            };
            outputs.into_iter().map(|o| read(o, kind, file)).collect()
        });
        self.slowest_wave = self.slowest_wave.max(started.elapsed());
        out
    }
}

/// Stops every child run with SIGTERM and waits for them to undo their faults.
async fn stop<F: std::future::Future>(
    pids: &[Option<u32>],
    all: &mut std::pin::Pin<&mut F>,
    signal: &str,
) -> anyhow::Error {
    for pid in pids.iter().flatten() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    all.as_mut().await;
    Exit::interrupted(format!(
        "interrupted by {signal}; every run it started was stopped"
    ))
}

/// A child's end: did it give the anomaly? Exit 2 and 6 gave nothing (said on
/// stderr); exit 5 is this machine's problem and ends the search.
fn read(
    output: std::io::Result<std::process::Output>,
    kind: AnomalyKind,
    file: &Path,
) -> Result<Rerun> {
    let output = output.context("waiting for a run")?;
    let code = output.status.code();
    let report: Option<RunReport> = matches!(code, Some(0 | 1 | 3))
        .then(|| serde_json::from_slice(&output.stdout).ok())
        .flatten();
    if let Some(r) = report {
        let flagged = r.verdict.anomalies.iter().any(|a| a.kind == kind);
        return Ok(Rerun {
            flagged,
            dir: Some(r.run_dir),
        });
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let tail = said.lines().rev().take(2).collect::<Vec<_>>().join(" / ");
    match code.and_then(|c| u8::try_from(c).ok()) {
        Some(exit::ENVIRONMENT) => Err(Exit::environment(format!(
            "{}: this machine cannot run it: {tail}",
            file.display()
        ))),
        Some(exit::INTERRUPTED) | None => {
            Err(anyhow!("{}: a run was stopped: {tail}", file.display()))
        }
        Some(c) => {
            eprintln!(
                "lockcheck: {}: a run ended in exit {c} (counted as not breaking): {tail}",
                file.display()
            );
            Ok(Rerun {
                flagged: false,
                dir: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(flagged: u32, ran: u32) -> Trial {
        Trial {
            flagged,
            ran,
            breaks: flagged > 0,
            flagged_dirs: vec![],
        }
    }

    #[test]
    fn a_confirmation_stops_once_its_rate_is_out_of_reach() {
        // 9 of 10 needed: one miss leaves it reachable, two do not.
        assert!(!out_of_reach(&after(4, 5), 10, 9));
        assert!(out_of_reach(&after(0, 2), 10, 9));
        assert!(out_of_reach(&after(7, 9), 10, 9));
        // A replay needs nothing: it runs all of them.
        assert!(!out_of_reach(&after(0, 9), 10, 0));
        // Needing all: the first miss decides.
        assert!(out_of_reach(&after(3, 4), 10, 10));
        assert!(!out_of_reach(&after(4, 4), 10, 10));
    }
}
