//! Clock faults, per process and live, without touching the machine's clock.
//!
//! A process started with [`ClockControl::env`] loads lockcheck's own clock
//! interposer (native/clockshim.c, embedded in this binary) through
//! LD_PRELOAD. The interposer reads its skew from a small shared page, a file
//! in the run directory that the controller writes through a [`ClockControl`]:
//! jump forward or back (`set_offset`), run fast or slow (`set_rate`), or
//! flip between two offsets (`strobe`). This reaches Redis (whose key expiry
//! follows the wall clock), JVMs (ZooKeeper) and the workers themselves (their
//! own view of a lease).
//!
//! It cannot reach Go programs (etcd, nats-server): Go reads the vDSO directly
//! and never calls libc's clock functions. For those, a time namespace
//! (`cluster::timens`) shifts the monotonic clock once, at start (the workload's
//! `backend.monotonic_offset`), and [`reach`] says plainly that a live skew does
//! not reach them, so that a verdict never claims a fault that did not happen.
//!
//! What a time namespace can and cannot do: it shifts CLOCK_MONOTONIC and
//! CLOCK_BOOTTIME of every process in it by a constant fixed before the first
//! process enters, never CLOCK_REALTIME, and never a rate. A constant offset on
//! the whole of one process changes no duration that process measures; it
//! matters only where a monotonic reading leaves the process (written to disk
//! and read back after a restart under another offset, or compared with another
//! node's). etcd does neither with its leases: measured on etcd 3.4 (3 members
//! at 0, +600 s and -300 s; leadership moved mid-lease; a leader killed and
//! restarted at another offset; one member restarted from +3000 s to -400 s), a
//! 5-6 s lease expired within the same half second as without offsets, because
//! a new leader (or a restarted one) renews every lease to its full TTL.

mod page;
mod remote;
mod shim;
mod skew;
mod start;

pub use lockcheck_servers::cluster::timens::{monotonic_hook, time_namespace};
pub use page::{clock_file, read_file, reset_file, ClockControl, Skew, TORN_AFTER};
pub use remote::{host_hook, reset_remote, OutOfReach, RemoteClock};
pub use shim::{group_out_of_reach, install_shim, reach, Reach, Unreachable, CLOCK_FILE_ENV};
pub use skew::{ClockChange, SkewClock, SkewUpdate};
pub use start::{prepare_hook, process_clock};

use super::duration::{Dur, SignedDur};
use super::node::{self, NodeTarget};
use super::spec::{Entry, Kind, Needs, Refusal, Setting, Setup, Spec};
use super::{ClientProc, Fault, Place, Scene, Target};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use futures_util::future::join_all;
use lockcheck_history::fault_ops;
use lockcheck_journal::{Effect, Journal};
use lockcheck_servers::cluster::ssh::host::Host;
use lockcheck_servers::cluster::Runtime;
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "clock",
    keys: &["nodes", "target", "offset", "offset2", "period", "rate"],
    instead: &[],
    ops: &fault_ops::CLOCK,
    read: ClockSpec::read,
    undo: None,
    undo_journaled: Some(undo_journaled),
    requires: None,
};

/// Resets a clock page a run left skewed, here or on a node's host: the
/// journal's own `ClockSkew` and `RemoteClockSkew`, which this kind writes.
fn undo_journaled(effect: &Effect) -> Option<Result<String>> {
    let said = |was: bool| if was { "reset" } else { "was not skewed" }.to_string();
    Some(match effect {
        Effect::ClockSkew { file, .. } => match reset_file(file) {
            Ok(was) => Ok(said(was)),
            Err(_) if !file.exists() => Ok("file gone".into()),
            Err(e) => Err(e),
        },
        Effect::RemoteClockSkew { host, file, .. } => {
            reset_remote(&Host::new(host.clone()), file).map(|r| r.map_or("file gone".into(), said))
        }
        _ => return None,
    })
}

/// `kind = "clock"`: whose clocks, and what happens to them: `rate`, `period`
/// (a strobe between `offset` and `offset2`) or `offset` (a jump).
#[derive(Debug, Clone, PartialEq)]
pub struct ClockSpec {
    pub clocks: Clocks,
    pub change: ClockChange,
}

impl ClockSpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        let target = entry.target(setting)?;
        let nodes = entry.take::<NodeTarget>("nodes")?;
        let clocks = match (target, nodes) {
            (Some(_), Some(_)) => {
                return Err(entry.bad(
                    "target",
                    "a clock fault skews either a client's clock (`target`) or nodes' (`nodes`), not both",
                ))
            }
            (Some(t), None) => Clocks::Client(t),
            (None, n) => Clocks::Nodes(n.unwrap_or(NodeTarget::One)),
        };
        let offset = entry.take::<SignedDur>("offset")?;
        let offset2 = entry.take::<SignedDur>("offset2")?;
        let period = entry.take::<Dur>("period")?;
        let rate = entry.take::<f64>("rate")?;
        let change = match (rate, period, offset, offset2) {
            (Some(rate), None, None, None) if rate.is_finite() && rate > 0.0 => {
                ClockChange::Rate { rate }
            }
            (Some(rate), None, None, None) => {
                return Err(entry.bad("rate", format!("expected a positive number, found {rate}")))
            }
            (None, Some(period), a, Some(b)) if !period.0.is_zero() => ClockChange::Strobe {
                offset_ns: a.map_or(0, |a| a.0),
                offset2_ns: b.0,
                period: period.0,
            },
            (None, None, Some(a), None) => ClockChange::Jump { offset_ns: a.0 },
            _ => {
                return Err(entry.bad(
                    "kind",
                    "a clock fault takes `offset` (a jump), or `rate`, or `period` + `offset2` \
                     (+ `offset`) for a strobe",
                ))
            }
        };
        Ok(Arc::new(ClockSpec { clocks, change }))
    }
}

impl Spec for ClockSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(ClockFault::new(self.clocks.clone(), self.change))
    }

    /// A client's clock is the worker's; a server's is the interposer's, loaded
    /// as lockcheck starts the server.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        matches!(self.clocks, Clocks::Nodes(_)).then(|| {
            Refusal::unmanaged(
                &KIND,
                "a server's clock is skewed through the interposer loaded as lockcheck starts it; \
                 a server already running has none (a client's clock, `target`, is fine)",
            )
        })
    }

    fn needs(&self) -> Needs {
        let on_nodes = match &self.clocks {
            Clocks::Nodes(target) => node::needs(target),
            Clocks::Client(_) => Needs::default(),
        };
        Needs {
            client_clocks: matches!(self.clocks, Clocks::Client(_)),
            ..on_nodes
        }
    }

    fn prepare_run(&self, setup: &mut Setup<'_>) {
        start::prepare_run(matches!(self.clocks, Clocks::Nodes(_)), setup)
    }

    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        match runtime {
            Runtime::External => Some(Refusal::kind(
                &KIND,
                runtime,
                "a server's clock is skewed through the interposer lockcheck loads into the servers it starts; these it did not start",
            )),
            // The servers' hosts get the interposer (`remote`); the clients run
            // on this machine, under its own.
            _ => None,
        }
    }
}

/// Whose clocks a clock fault skews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clocks {
    Nodes(NodeTarget),
    /// A worker's own clock: its view of its lease (started under the interposer).
    Client(Target),
}

/// Skews the clocks of server nodes (or of a worker), live, and resets them when
/// it ends. Recorded as nemesis `clock-skew` / `clock-reset`; a node the
/// interposer cannot reach is listed under `unreachable` with the reason, never
/// skewed in words only.
pub struct ClockFault {
    clocks: Clocks,
    change: ClockChange,
    /// (node, journal id, clock) of each clock skewed now.
    active: Vec<(String, u64, Box<dyn SkewClock>)>,
    journal: Option<Arc<Journal>>,
}

impl ClockFault {
    pub fn new(clocks: Clocks, change: ClockChange) -> ClockFault {
        ClockFault {
            clocks,
            change,
            active: Vec::new(),
            journal: None,
        }
    }

    fn names(&self) -> Vec<String> {
        self.active.iter().map(|(n, _, _)| n.clone()).collect()
    }

    /// The clock of `n` (a node, or a worker), or why a live skew cannot reach
    /// it: a node of another host through its page there (of which the first
    /// change says [`OutOfReach`]), anything else through its page in the run
    /// directory `dir`.
    async fn clock_of(
        &self,
        n: &str,
        dir: &std::path::Path,
        scene: &Scene<'_>,
    ) -> Result<std::result::Result<Box<dyn SkewClock>, String>> {
        // Workers are this program: only a node may be a binary the interposer misses.
        let (host, program) = match (&self.clocks, scene.cluster) {
            (Clocks::Nodes(_), Some(c)) => {
                let c = c.lock().await;
                (
                    c.node_host(n),
                    c.program().map(std::path::Path::to_path_buf),
                )
            }
            (Clocks::Nodes(_), None) => bail!("a clock fault needs the run's cluster"),
            (Clocks::Client(_), _) => (None, Some(std::env::current_exe()?)),
        };
        if let Some(host) = host {
            // Whether it has a page, its first change finds out.
            return Ok(Ok(Box::new(RemoteClock::of(host))));
        }
        let path = clock_file(dir, n);
        if path.exists() {
            return Ok(Ok(Box::new(ClockControl::attach(&path)?)));
        }
        let binary = program.context("a clock fault needs a server program lockcheck runs")?;
        Ok(Err(match reach(&binary)? {
            Reach::Unreachable(u) => u.to_string(),
            Reach::Live => {
                format!("unreachable: {n} was started without lockcheck's clock interposer")
            }
        }))
    }
}

/// The programs of a worker's adapter the skew of the worker's clock does not
/// reach (a Go library reads the vDSO), each said as `unreachable` with
/// `"adapter": true`. The worker's own clock moves; its library's does not, and
/// a holder that asks its library whether it still holds asks something the
/// fault never touched. A worker on an ssh host is not looked into here.
fn adapter_out_of_reach(worker: &ClientProc) -> Vec<serde_json::Value> {
    let Place::Here(pid) = worker.place else {
        return Vec::new();
    };
    group_out_of_reach(pid.as_raw())
        .into_iter()
        .map(|(p, u)| {
            serde_json::json!({
                "node": format!("{}'s adapter (pid {p})", worker.name),
                "why": u.to_string(),
                "adapter": true,
            })
        })
        .collect()
}

#[async_trait]
impl Fault for ClockFault {
    fn target(&self) -> &Target {
        match &self.clocks {
            Clocks::Nodes(_) => &node::TIMED,
            Clocks::Client(t) => t,
        }
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<serde_json::Value>> {
        // A worker's adapter the skew misses is said beside the nodes it missed.
        let (names, dir, mut unreachable) = match &self.clocks {
            Clocks::Nodes(nodes) => match node::pick(nodes, scene).await? {
                Some((names, dir)) => (names, dir, Vec::new()),
                None => return Ok(None),
            },
            Clocks::Client(t) => {
                let (Some(slot), Some(c)) = (t.pick_client(scene), scene.cluster) else {
                    return Ok(None);
                };
                let dir = c.lock().await.dir().to_path_buf();
                let worker = &scene.clients[slot];
                (vec![worker.name.clone()], dir, adapter_out_of_reach(worker))
            }
        };
        let journal = Journal::for_run(&dir)?;
        // Every node at once: over SSH a round trip each, and a jump on a
        // majority should land on all of it together.
        let attached = {
            let scene = &*scene;
            join_all(names.iter().map(|n| self.clock_of(n, &dir, scene))).await
        };
        let mut changes = Vec::new();
        for (n, clock) in names.into_iter().zip(attached) {
            let clock = match clock? {
                Ok(clock) => clock,
                Err(why) => {
                    unreachable.push(serde_json::json!({ "node": n, "why": why }));
                    continue;
                }
            };
            let id = journal.record(clock.effect(&n))?;
            // Off the runtime, whose clock times the clients' ops.
            let change = self.change;
            changes.push(tokio::task::spawn_blocking(move || {
                match clock.change(change) {
                    Ok(()) => Ok((n, id, clock)),
                    Err(e) => Err((n, id, e)),
                }
            }));
        }
        let mut first = None;
        for changed in join_all(changes).await {
            match changed? {
                Ok(active) => self.active.push(active),
                Err((n, id, e)) => match e.downcast::<OutOfReach>() {
                    Ok(OutOfReach(why)) => {
                        journal.undone(id)?;
                        unreachable.push(serde_json::json!({ "node": n, "why": why }));
                    }
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                },
            }
        }
        if let Some(e) = first {
            self.journal = Some(journal);
            return Err(e);
        }
        self.journal = Some(journal);
        let mut value = serde_json::json!({ "targets": self.names() });
        self.change.describe(&mut value);
        if !unreachable.is_empty() {
            value["unreachable"] = unreachable.into();
        }
        Ok(Some(value))
    }

    async fn stop(&mut self, _scene: &mut Scene<'_>) -> Result<serde_json::Value> {
        let value = serde_json::json!({ "targets": self.names() });
        // Every clock at once, each tried; the first failure reported after all were.
        let resets = std::mem::take(&mut self.active)
            .into_iter()
            .map(|(_, id, clock)| tokio::task::spawn_blocking(move || clock.reset().map(|()| id)));
        let mut first = None;
        for reset in join_all(resets).await {
            match (reset?, &self.journal) {
                (Ok(id), Some(j)) => j.undone(id)?,
                (Ok(_), None) => {}
                (Err(e), _) => {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(value), Err)
    }
}
