//! The live stage: the run's clock starts with everything up, the clients and the
//! nemesis go until the run's end (its duration, or the fault's effect seen
//! through), then the clients finish the section under way.

use super::clients::Clients;
use super::controller::{Pipes, Recorder, Shared, Slot};
use super::live::Live;
use super::nemesis;
use super::phases::{self, Phases};
use super::prepare::Prepared;
use super::servers::Servers;
use super::workload;
use anyhow::{anyhow, Result};
use lockcheck_history::{self as history, HistoryWriter};
use lockcheck_resource as resource;
use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// What the live part of a run leaves for the stage that stops it.
pub(super) struct Ran {
    pub recorder: Arc<Recorder>,
    /// The history values of the nodes started with a shifted clock, which end
    /// with the servers.
    pub shifted: Vec<serde_json::Value>,
    /// The first task of the run that failed.
    pub failure: Option<anyhow::Error>,
    pub tally: Arc<nemesis::Tally>,
    /// How many times each fault is planned to start.
    pub planned: Vec<u64>,
}

/// Drives the clients through `pipes`, and the nemesis, for the run's duration.
pub(super) async fn drive(
    run: &Prepared,
    servers: &Servers,
    clients: &Clients,
    pipes: Vec<Pipes>,
) -> Result<Ran> {
    let (w, seed, duration) = (&run.w, run.seed, run.duration);
    // The run's clock starts here, with everything up.
    let recorder = Arc::new(Recorder::new(HistoryWriter::create(
        &run.dir.join("history.jsonl"),
    )?));
    let shifted = time_namespaces(&w.backend.monotonic_offsets);
    for value in &shifted {
        let f = lockcheck_history::f::CLOCK_SKEW;
        recorder.record(
            history::Process::Nemesis,
            history::OpType::Info,
            f,
            value.clone(),
            None,
            None,
        )?;
    }
    let live = Arc::new(Live::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (acquired_tx, acquired_rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        recorder: recorder.clone(),
        live: live.clone(),
        workload: w.clone(),
        next_process: AtomicU64::new(w.clients.count as u64),
        acquired: acquired_tx,
        ask_held: clients.ask_held,
    });
    let plan = w.schedule.map(|s| s.plan(duration));
    // What the workload asks for is what its own duration holds, whatever
    // `--time-limit` cuts off.
    let planned = nemesis::planned(
        &w.faults,
        w.schedule.map(|s| s.plan(w.duration)).as_ref(),
        seed,
    )?;
    let nemesis = nemesis::Nemesis::new(
        &w.faults,
        plan.as_ref(),
        clients.workers.procs().to_vec(),
        seed,
        recorder.clone(),
        live.clone(),
        servers.cluster.clone(),
    )?;
    let tally = nemesis.tally();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(nemesis.run(acquired_rx, stopped.clone()));
    for (i, p) in pipes.into_iter().enumerate() {
        tasks.spawn(Slot::new(i, p, shared.clone()).run(stopped.clone()));
    }
    drop(shared);

    let status = run.opts.live.then(|| {
        show_status(
            live.clone(),
            recorder.started(),
            duration,
            servers.res.stats_handle(),
        )
    });
    // Clients finish the section under way. A stuck worker costs at most an acquire
    // and one more op timing out (then its id is retired and the section ends).
    let finish = w.mode.finishing() + (w.clients.op_timeout + w.backend.acquire_timeout) * 2;
    let after_effect = (w.end == workload::End::AfterEffect).then(|| AfterEffect {
        live: live.clone(),
        tally: tally.clone(),
        planned: planned.clone(),
        wait: w.backend.lease.ttl + AFTER_EFFECT_MARGIN,
    });
    let failure = supervise(
        &mut tasks,
        duration,
        after_effect,
        &stop,
        finish,
        &run.phases,
    )
    .await;
    if let Some(status) = status {
        status.abort();
        eprint!("\r\x1b[2K");
    }
    Ok(Ran {
        recorder,
        shifted,
        failure,
        tally,
        planned,
    })
}

/// The history values of the nodes started in a time namespace, one per offset:
/// `{"targets": ["n1"], "monotonic_offset_ms": 600000, "method": "time-namespace"}`.
fn time_namespaces(offsets: &[(String, i64)]) -> Vec<serde_json::Value> {
    let mut by_offset: Vec<(i64, Vec<&str>)> = Vec::new();
    for (node, ns) in offsets {
        match by_offset.iter_mut().find(|(o, _)| o == ns) {
            Some((_, nodes)) => nodes.push(node),
            None => by_offset.push((*ns, vec![node])),
        }
    }
    by_offset
        .into_iter()
        .map(|(ns, nodes)| {
            serde_json::json!({
                "targets": nodes,
                "monotonic_offset_ms": ns / 1_000_000,
                "method": "time-namespace",
            })
        })
        .collect()
}

/// `end = "after-effect"`: beyond one lease after a holder was deposed, its
/// successor holds a grant of its own and the deposed holder's section has run
/// out (or been cut off); the margin lets its last writes land.
const AFTER_EFFECT_MARGIN: Duration = Duration::from_millis(500);

/// `end = "after-effect"`: what tells the run that its fault's effect was seen through.
struct AfterEffect {
    live: Arc<Live>,
    tally: Arc<nemesis::Tally>,
    planned: Vec<u64>,
    /// One lease plus [`AFTER_EFFECT_MARGIN`].
    wait: Duration,
}

impl AfterEffect {
    /// When the run may end, once every planned fault started (none before): as
    /// soon as the first deposition's question is answered (its late writes judged,
    /// the successor's write applied), else `wait` after the first fault's effect
    /// was seen through (it is over and a holder was deposed), which covers what
    /// the run cannot see answered (a killed worker, a deposed leader).
    fn due(&self) -> Option<std::time::Instant> {
        if !self.tally.all_started(&self.planned) {
            return None;
        }
        let waited = self.live.effect_seen()? + self.wait;
        Some(self.live.answered().map_or(waited, |a| a.min(waited)))
    }

    /// Why the run ended at [`AfterEffect::due`], for the log.
    fn why(&self) -> &'static str {
        match self.live.answered() {
            Some(_) => "its first deposition was answered",
            None => "one lease had passed since its fault's effect",
        }
    }
}

/// Lets the run go for `duration`, or until `after_effect` is due (the first task
/// to fail ends it early), raises the stop flag, and waits up to `finish` for the
/// clients and the nemesis to wind down. Returns the first failure.
async fn supervise(
    tasks: &mut tokio::task::JoinSet<Result<()>>,
    duration: Duration,
    after_effect: Option<AfterEffect>,
    stop: &tokio::sync::watch::Sender<bool>,
    finish: Duration,
    phases: &Phases,
) -> Option<anyhow::Error> {
    let failed = |done: Result<Result<()>, tokio::task::JoinError>| match done {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(anyhow!("a run task failed: {e}")),
    };
    let ended = tokio::time::sleep(duration);
    tokio::pin!(ended);
    let mut look = tokio::time::interval(Duration::from_millis(50));
    let mut failure = None;
    while failure.is_none() {
        tokio::select! {
            _ = &mut ended => break,
            _ = look.tick(), if after_effect.is_some() => {
                let due = after_effect.as_ref().and_then(AfterEffect::due);
                if due.is_some_and(|t| t <= std::time::Instant::now()) {
                    let why = after_effect.as_ref().map_or("", AfterEffect::why);
                    tracing::info!("the run ends early: {why}");
                    break;
                }
            }
            done = tasks.join_next() => match done {
                Some(done) => failure = failed(done),
                None => break,
            },
        }
    }
    phases.done(phases::LIVE);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(finish + Duration::from_secs(2), async {
        while let Some(done) = tasks.join_next().await {
            if let Some(e) = failed(done) {
                failure.get_or_insert(e);
            }
        }
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
        failure.get_or_insert(anyhow!(
            "the clients did not finish within {finish:?} of the end"
        ));
    }
    phases.done("sections finished");
    failure
}

/// The live status line on stderr, redrawn four times a second.
fn show_status(
    live: Arc<Live>,
    start: std::time::Instant,
    duration: Duration,
    stats: resource::StatsHandle,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            let line = live.line(start.elapsed(), duration, stats.get());
            // A line wider than the terminal wraps, and `\r` no longer erases it.
            let line: String = line
                .chars()
                .take(terminal_width().saturating_sub(1))
                .collect();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    })
}

/// The width of the terminal on stderr, 80 if it cannot be told.
fn terminal_width() -> usize {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we pass.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        size.ws_col as usize
    } else {
        80
    }
}
