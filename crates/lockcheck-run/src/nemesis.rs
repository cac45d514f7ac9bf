//! The fault schedule (Jepsen's nemesis generator): when each `[[faults]]` entry
//! starts and stops, and the history records of both. A fault aimed at the holder
//! waits, once its quiet period is over, for the next client to acquire the lock and
//! hits it before that client's next op: the adversarial schedule that finds a
//! lease's hole in seconds instead of waiting for luck.

use super::controller::{Acquired, Recorder};
use super::live::{stopped, Live};
use super::workload::FaultEntry;
use anyhow::Result;
use lockcheck_fault::schedule;
use lockcheck_fault::{ClientProc, Fault, Scene, Target};
use lockcheck_history::{OpType, Process};
use lockcheck_servers::cluster::Cluster;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

enum Phase {
    /// Nothing until then; then start (or, for the holder, arm).
    Quiet(Instant),
    /// Waiting for the next acquire.
    Armed,
    /// Applied; stop at the instant.
    Active(Instant),
    /// Happened once and has no interval.
    Done,
}

struct Scheduled {
    entry: FaultEntry,
    fault: Box<dyn Fault>,
    phase: Phase,
    /// With a `[schedule]`, the later occurrences' starts (from the run's start);
    /// without, `entry.interval` spaces them.
    slots: Option<VecDeque<Duration>>,
    /// What the status line shows while it is active.
    label: String,
}

/// Where a `[[faults]]` entry stood, for the account of the faults a run missed.
#[derive(Debug, Clone)]
enum Standing {
    /// Its next occurrence was not due yet: due then (run time), or never in this
    /// run (a `[schedule]` for a run cut short had no room for it).
    NotDue(Option<Duration>),
    /// Due since then (run time), waiting for a client to acquire the lock.
    Armed(Duration),
    /// Due since then, and found nothing to hit each time it tried.
    NothingToHit(Duration),
    /// Its latest occurrence started.
    Started,
    /// Started at that run time, and reached none of its targets (why, in words):
    /// it changed nothing.
    Unreached(Duration, String),
}

/// What became of one entry so far: occurrences started, and where it stands.
#[derive(Debug, Clone)]
struct Entry {
    started: u64,
    standing: Standing,
}

impl Default for Entry {
    fn default() -> Entry {
        Entry {
            started: 0,
            standing: Standing::NotDue(None),
        }
    }
}

/// The nemesis's account of its faults, shared with the run, which reads it
/// once the nemesis has stopped (or was given up on): it is kept as the faults go,
/// never written only at the end.
#[derive(Debug, Default)]
pub struct Tally(Mutex<Vec<Entry>>);

impl Tally {
    pub fn new(entries: usize) -> Arc<Tally> {
        Arc::new(Tally(Mutex::new(vec![Entry::default(); entries])))
    }

    fn set(&self, i: usize, f: impl FnOnce(&mut Entry)) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = all.get_mut(i) {
            f(e)
        }
    }

    /// Every entry started its `planned` occurrences (see [`planned`]).
    pub fn all_started(&self, planned: &[u64]) -> bool {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        planned
            .iter()
            .enumerate()
            .all(|(i, &want)| all.get(i).is_some_and(|e| e.started >= want))
    }

    /// Planned against started, entry by entry: `planned[i]` occurrences of
    /// `entries[i]` (see [`planned`]), the run having lasted `ran` (`--time-limit`
    /// said so when `cut_short`).
    pub fn account(
        &self,
        entries: &[FaultEntry],
        planned: &[u64],
        ran: Duration,
        cut_short: bool,
    ) -> FaultAccount {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut missed = Vec::new();
        for (i, (entry, &want)) in entries.iter().zip(planned).enumerate() {
            let Entry { started, standing } = all.get(i).cloned().unwrap_or_default();
            if started >= want {
                continue;
            }
            let end = format!(
                "the run ended at {:.1} s{}",
                ran.as_secs_f64(),
                if cut_short { " (--time-limit)" } else { "" }
            );
            let why = match standing {
                Standing::NotDue(Some(at)) => format!(
                    "due at {:.1} s; {end} before it",
                    at.as_secs_f64()
                ),
                Standing::NotDue(None) => format!("the schedule had no room for it: {end}"),
                Standing::Started => format!("its next occurrence was not due yet when {end}"),
                Standing::Armed(since) => format!(
                    "armed at {:.1} s for the next client to acquire the lock; none did before {end}",
                    since.as_secs_f64()
                ),
                Standing::NothingToHit(since) => format!(
                    "due at {:.1} s, it found nothing to hit until {end}",
                    since.as_secs_f64()
                ),
                Standing::Unreached(at, why) => format!(
                    "at {:.1} s it reached none of its targets ({why}), and {end}",
                    at.as_secs_f64()
                ),
            };
            missed.push(MissedFault {
                fault: i,
                kind: entry.spec.kind().ops.start.to_string(),
                planned: want,
                started,
                why,
            });
        }
        FaultAccount {
            planned: planned.iter().sum(),
            started: all.iter().map(|e| e.started).sum(),
            missed,
            allowed: false,
            unseen: None,
            out_of_reach: false,
        }
    }
}

/// How many occurrences of each `[[faults]]` entry a run of the workload's own
/// `duration` asks for: with a `[schedule]`, the slots it lays out from the seed;
/// without, the first occurrence of each entry (an `interval` repeats it as often
/// as the run leaves room for, which the workload does not promise).
pub fn planned(
    entries: &[FaultEntry],
    plan: Option<&schedule::Plan>,
    seed: u64,
) -> Result<Vec<u64>> {
    let Some(plan) = plan else {
        return Ok(vec![1; entries.len()]);
    };
    let durations: Vec<Duration> = entries.iter().map(|e| e.duration).collect();
    let mut per_fault = vec![0; entries.len()];
    for slot in schedule::timeline(&durations, plan, seed)? {
        per_fault[slot.fault] += 1;
    }
    Ok(per_fault)
}

/// verdict.json's `faults`: the workload's faults, planned against started (the
/// run directory's types; [`Tally::account`] makes them).
pub use lockcheck_rundir::{FaultAccount, MissedFault};

/// How long a timed fault that found nothing to hit waits before it tries again.
const RETRY: Duration = Duration::from_millis(100);

pub struct Nemesis {
    faults: Vec<Scheduled>,
    /// The run's start, which `[schedule]` slots count from.
    start: Instant,
    clients: Vec<ClientProc>,
    rng: ChaCha8Rng,
    recorder: Arc<Recorder>,
    live: Arc<Live>,
    cluster: Arc<tokio::sync::Mutex<Box<dyn Cluster>>>,
    tally: Arc<Tally>,
}

impl Nemesis {
    pub fn new(
        entries: &[FaultEntry],
        plan: Option<&schedule::Plan>,
        clients: Vec<ClientProc>,
        seed: u64,
        recorder: Arc<Recorder>,
        live: Arc<Live>,
        cluster: Arc<tokio::sync::Mutex<Box<dyn Cluster>>>,
    ) -> Result<Nemesis> {
        let tally = Tally::new(entries.len());
        let start = Instant::from_std(recorder.started());
        // A `[schedule]` lays every occurrence out from the seed before the run.
        let mut slots: Option<Vec<VecDeque<Duration>>> = match plan {
            Some(plan) => {
                let durations: Vec<Duration> = entries.iter().map(|e| e.duration).collect();
                let mut per_fault = vec![VecDeque::new(); entries.len()];
                for slot in schedule::timeline(&durations, plan, seed)? {
                    per_fault[slot.fault].push_back(slot.at);
                }
                Some(per_fault)
            }
            None => None,
        };
        let faults = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut mine = slots.as_mut().map(|s| std::mem::take(&mut s[i]));
                let first = match mine.as_mut() {
                    Some(q) => q.pop_front(),
                    None => Some(e.after),
                };
                tally.set(i, |t| t.standing = Standing::NotDue(first));
                let phase = first.map_or(Phase::Done, |at| Phase::Quiet(start + at));
                Scheduled {
                    entry: e.clone(),
                    fault: e.spec.fault(e.duration),
                    phase,
                    slots: mine,
                    label: String::new(),
                }
            })
            .collect();
        Ok(Nemesis {
            faults,
            start,
            clients,
            rng: ChaCha8Rng::seed_from_u64(seed),
            recorder,
            live,
            cluster,
            tally,
        })
    }

    /// Its account of the faults, kept as they go: the run reads it at the end.
    pub fn tally(&self) -> Arc<Tally> {
        self.tally.clone()
    }

    /// Runs the schedule until `stop`, then ends every active fault (resumes every
    /// paused client) before returning, whatever the outcome.
    pub async fn run(
        mut self,
        mut acquired: mpsc::UnboundedReceiver<Acquired>,
        mut stop: watch::Receiver<bool>,
    ) -> Result<()> {
        let result = self.schedule(&mut acquired, &mut stop).await;
        // Clients finishing their sections still report acquires: let them through.
        acquired.close();
        let healed = self.stop_all().await;
        result.and(healed)
    }

    async fn schedule(
        &mut self,
        acquired: &mut mpsc::UnboundedReceiver<Acquired>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<()> {
        loop {
            let next = self
                .faults
                .iter()
                .filter_map(|s| match s.phase {
                    Phase::Quiet(t) | Phase::Active(t) => Some(t),
                    Phase::Armed | Phase::Done => None,
                })
                .min();
            let timer = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stopped(stop) => return Ok(()),
                _ = timer => self.advance().await?,
                event = acquired.recv() => {
                    let Some(Acquired { slot, ack }) = event else { return Ok(()) };
                    self.on_acquired(slot).await?;
                    let _ = ack.send(());
                }
            }
        }
    }

    /// Moves every fault whose time has come.
    async fn advance(&mut self) -> Result<()> {
        let now = Instant::now();
        for i in 0..self.faults.len() {
            match self.faults[i].phase {
                Phase::Quiet(t) if t <= now => {
                    let due = now.saturating_duration_since(self.start);
                    if *self.faults[i].fault.target() == Target::Holder {
                        self.faults[i].phase = Phase::Armed;
                        self.live.arm_holder_fault();
                        self.tally.set(i, |e| e.standing = Standing::Armed(due));
                    } else {
                        let holder = self.live.holder();
                        if !self.start(i, holder).await? {
                            self.faults[i].phase = Phase::Quiet(now + RETRY);
                            self.tally.set(i, |e| {
                                if !matches!(e.standing, Standing::NothingToHit(_)) {
                                    e.standing = Standing::NothingToHit(due)
                                }
                            });
                        }
                    }
                }
                Phase::Active(t) if t <= now => self.stop(i).await?,
                _ => {}
            }
        }
        Ok(())
    }

    async fn on_acquired(&mut self, slot: usize) -> Result<()> {
        for i in 0..self.faults.len() {
            if matches!(self.faults[i].phase, Phase::Armed) && self.start(i, Some(slot)).await? {
                self.live.holder_fault_landed();
            }
        }
        Ok(())
    }

    /// Starts fault `i`; false if it found nothing to hit.
    async fn start(&mut self, i: usize, holder: Option<usize>) -> Result<bool> {
        let stopped: Vec<usize> = self
            .faults
            .iter()
            .flat_map(|f| f.fault.stopped_clients())
            .collect();
        let mut scene = Scene {
            clients: &self.clients,
            holder,
            stopped: &stopped,
            rng: &mut self.rng,
            cluster: Some(&self.cluster),
        };
        let s = &mut self.faults[i];
        let Some(mut value) = s.fault.start(&mut scene).await? else {
            return Ok(false);
        };
        name_entry(&mut value, i);
        let start_f = s.entry.spec.kind().ops.start;
        s.label = format!("{start_f} {}", targets_of(&value));
        s.phase = Phase::Active(Instant::now() + s.entry.duration);
        // A start that reached none of its targets (a clock fault on a server
        // the interposer cannot reach) changed nothing: it does not count.
        let unreached = value["targets"].as_array().is_some_and(|t| t.is_empty())
            && value.get("unreachable").is_some();
        let standing = if unreached {
            let at = Instant::now().saturating_duration_since(self.start);
            Standing::Unreached(at, unreachable_why(&value))
        } else {
            Standing::Started
        };
        self.tally.set(i, |e| {
            e.started += u64::from(!unreached);
            e.standing = standing;
        });
        if !unreached {
            self.live.fault_took_effect();
        }
        self.recorder
            .record(Process::Nemesis, OpType::Info, start_f, value, None, None)?;
        self.live.set_faults(self.active_labels());
        Ok(true)
    }

    async fn stop(&mut self, i: usize) -> Result<()> {
        let mut scene = Scene {
            clients: &self.clients,
            holder: self.live.holder(),
            stopped: &[],
            rng: &mut self.rng,
            cluster: Some(&self.cluster),
        };
        let s = &mut self.faults[i];
        let mut value = s.fault.stop(&mut scene).await?;
        name_entry(&mut value, i);
        let stop_f = s.entry.spec.kind().ops.end;
        s.phase = match (&mut s.slots, s.entry.interval) {
            (Some(slots), _) => slots
                .pop_front()
                .map_or(Phase::Done, |at| Phase::Quiet(self.start + at)),
            (None, Some(gap)) => Phase::Quiet(Instant::now() + gap),
            (None, None) => Phase::Done,
        };
        if let Phase::Quiet(t) = s.phase {
            let next = t.saturating_duration_since(self.start);
            self.tally
                .set(i, |e| e.standing = Standing::NotDue(Some(next)));
        }
        self.recorder
            .record(Process::Nemesis, OpType::Info, stop_f, value, None, None)?;
        self.live.fault_over();
        self.live.set_faults(self.active_labels());
        Ok(())
    }

    /// Ends every active fault; tries them all and returns the first error.
    async fn stop_all(&mut self) -> Result<()> {
        let mut first = Ok(());
        for i in 0..self.faults.len() {
            if matches!(self.faults[i].phase, Phase::Active(_)) {
                let r = self.stop(i).await;
                if first.is_ok() {
                    first = r;
                }
            }
            self.faults[i].phase = Phase::Done;
        }
        first
    }

    fn active_labels(&self) -> Vec<String> {
        self.faults
            .iter()
            .filter(|s| matches!(s.phase, Phase::Active(_)))
            .map(|s| s.label.clone())
            .collect()
    }
}

/// Names the `[[faults]]` entry (its index, from 0) a record starts or ends, so
/// that a reader of the history alone (`lockcheck shrink`, `replay`) can lay the
/// run's faults out again as they happened (history format v1.2's optional
/// `fault`).
fn name_entry(value: &mut serde_json::Value, entry: usize) {
    if let Some(map) = value.as_object_mut() {
        map.insert("fault".into(), entry.into());
    }
}

/// The reasons a fault's start value gives for the targets it could not reach
/// (`"unreachable": [{"node": "n1", "why": "..."}]`), in one line.
fn unreachable_why(value: &serde_json::Value) -> String {
    let mut whys: Vec<String> = Vec::new();
    for u in value["unreachable"].as_array().into_iter().flatten() {
        let why = format!(
            "{}: {}",
            u["node"].as_str().unwrap_or("?"),
            u["why"].as_str().unwrap_or("unreachable")
        );
        if !whys.contains(&why) {
            whys.push(why);
        }
    }
    whys.join("; ")
}

fn targets_of(value: &serde_json::Value) -> String {
    value
        .get("targets")
        .and_then(|t| t.as_array())
        .map(|t| {
            t.iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}
