//! Where everything meets: a workload (`workload`) starts a backend cluster
//! (`cluster`), the protected resource (`resource`), one worker process per client
//! (`worker`, driven by `controller`), and the fault schedule (`nemesis`); the run
//! records the history, stops everything, checks it (`check::lock`) and writes the
//! run directory with the figures (`figures`).
//!
//! [`run`] is a pipeline, one stage a file, each handing the next what it made:
//! `prepare` (the machine's checks, the run directory: `Prepared`), `setup` (the
//! faults' hooks in the cluster to start: `FaultSetup`), `servers` (the cluster
//! and the resource: `Servers`), `clients` (the workers, through the faults'
//! proxies: `Clients`), `drive` (the live part: `Ran`), `stop` (everything
//! stopped, the faults accounted for: `Stopped`), then `judge` (the check: the
//! run's record, written into the run directory).
//!
//! Whatever happens (normal end, Ctrl-C, SIGTERM, an error, a panic) every paused
//! process is resumed and every process the run started is stopped before `run`
//! returns: workers, the servers and the faults are guards that undo themselves.

pub mod capacity;
mod clients;
pub mod controller;
mod drive;
pub mod figures;
mod judge;
mod live;
pub mod nemesis;
pub mod on_hosts;
pub mod phases;
mod prepare;
mod servers;
mod setup;
mod stop;
pub mod worker;
pub mod workload;

pub use judge::drop_server_data;
pub use live::{Live, LOCK_NAME};
pub use prepare::{new_run_dir, Options};

use anyhow::{anyhow, Context, Result};
use lockcheck_check as check;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::path::Path;
use workload::Workload;

/// What `verdict.json` holds: the checker's verdict and the run's figures (the run
/// directory's type, which the report reads it back with), and the adapter a run
/// tested as its `init` reply named it.
pub use lockcheck_rundir::{ClientInfo, RunReport};

/// The run was stopped by a signal: everything was cleaned up, nothing was checked.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {signal} after {secs:.1} s; everything the run started was stopped; the history so far is in {dir}")]
pub struct Interrupted {
    pub signal: &'static str,
    pub secs: f64,
    pub dir: String,
}

/// Runs a workload once: a fresh cluster, the clients, the faults; then the check.
/// Writes the run directory and points `results/latest` at it.
pub fn run(w: &Workload, opts: &Options) -> Result<RunReport> {
    let run = prepare::prepare(w, opts)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Every process a stage starts is owned by a guard local to this future, so
    // dropping it (a signal) stops them all.
    let outcome = runtime.block_on(interruptible(&run.dir, async {
        let setup = setup::faults(&run);
        let servers = servers::start(&run, setup.cluster).await?;
        let (clients, pipes) = clients::start(&run, &servers, setup.needs, setup.workers).await?;
        let ran = drive::drive(&run, &servers, &clients, pipes).await?;
        let stopped = stop::stop(&run, servers, clients, ran).await?;
        judge::judge(&run, stopped).await
    }));
    // Do not wait for a check a signal interrupted.
    runtime.shutdown_background();
    let report = outcome?;
    judge::write(&run, &report)?;
    Ok(report)
}

/// Runs `work` until it ends or a signal (SIGINT, SIGTERM, SIGHUP) comes, which
/// drops it: its guards stop the workers, the faults and the servers on the way
/// out. The check, once everything is stopped, stays interruptible too: it runs on
/// a blocking thread left behind.
async fn interruptible<T>(dir: &Path, work: impl Future<Output = Result<T>>) -> Result<T> {
    use tokio::signal::unix::{signal, SignalKind};
    let started = std::time::Instant::now();
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let interrupted = |signal| {
        anyhow!(Interrupted {
            signal,
            secs: started.elapsed().as_secs_f64(),
            dir: dir.display().to_string(),
        })
    };
    tokio::select! {
        r = work => r,
        _ = int.recv() => Err(interrupted("SIGINT")),
        _ = term.recv() => Err(interrupted("SIGTERM")),
        _ = hup.recv() => Err(interrupted("SIGHUP")),
    }
}

/// The summary of `--test-count N`: how often the workload found an anomaly, and
/// how quickly: the detection rate users compare backends and settings by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub runs: usize,
    pub runs_with_anomalies: usize,
    pub runs_unknown: usize,
    /// Runs whose planned faults did not all start (`--allow-missed-faults` not
    /// given), counted apart whatever their verdict: they did not test what the
    /// workload claims.
    #[serde(default)]
    pub runs_with_missed_faults: usize,
    /// Runs that provoked the danger (a deposed holder's late write reached the
    /// resource): a valid run counts as evidence for a fence only if it did.
    #[serde(default)]
    pub runs_provoked: usize,
    /// Run time of the first anomaly (allowed ones excluded), over the runs that had one.
    pub median_first_anomaly_s: Option<f64>,
    pub worst_first_anomaly_s: Option<f64>,
}

impl Summary {
    pub fn of(reports: &[RunReport]) -> Summary {
        let mut firsts: Vec<f64> = reports
            .iter()
            .filter_map(|r| r.figures.first_anomaly_s)
            .collect();
        firsts.sort_by(f64::total_cmp);
        let median = match firsts.len() {
            0 => None,
            n if n % 2 == 1 => Some(firsts[n / 2]),
            n => Some((firsts[n / 2 - 1] + firsts[n / 2]) / 2.0),
        };
        Summary {
            runs: reports.len(),
            runs_with_anomalies: reports
                .iter()
                .filter(|r| r.verdict.valid == check::Validity::Invalid)
                .count(),
            runs_unknown: reports
                .iter()
                .filter(|r| r.verdict.valid == check::Validity::Unknown)
                .count(),
            runs_with_missed_faults: reports.iter().filter(|r| r.missed_faults).count(),
            runs_provoked: reports
                .iter()
                .filter(|r| {
                    r.provoked.as_ref().map(|p| p.class)
                        == Some(check::provoked::Provocation::Provoked)
                })
                .count(),
            median_first_anomaly_s: median,
            worst_first_anomaly_s: firsts.last().copied(),
        }
    }

    /// 1 if any run found anomalies, else 3 if any was unknown or missed faults,
    /// else 0.
    pub fn exit_code(&self) -> u8 {
        if self.runs_with_anomalies > 0 {
            lockcheck_exit::ANOMALIES
        } else if self.runs_unknown > 0 || self.runs_with_missed_faults > 0 {
            lockcheck_exit::UNKNOWN
        } else {
            lockcheck_exit::VALID
        }
    }
}
