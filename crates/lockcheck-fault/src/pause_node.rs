//! `kind = "pause-node"`: server nodes stopped and resumed, as a GC pause or a
//! stalled VM stops them: with SIGSTOP (the main process) or the cgroup freezer
//! (every process of the node; `docker pause` for a container); or only its disk
//! syncs, with strace (`method = "fsync"`, [`super::sync_stall`]). Recorded as
//! nemesis `pause` / `resume`, the method named in the `pause` value.
//!
//! A node's main process is what its recipe runs: the server itself, or, for
//! `patroni`, the node's agent (Patroni), whose PostgreSQL runs detached from it:
//! `sigstop` then pauses the agent alone while its database goes on serving, which
//! is the pause that splits a Patroni cluster's brain.

use super::node::{self, pick, stop, targets, NodeTarget, PauseMethod, Stopped, TIMED};
use super::spec::{Entry, Kind, Refusal, Requirement, Setting, Spec};
use super::sync_stall::SyncStall;
use super::{Fault, Scene, Target};
use anyhow::{bail, Result};
use async_trait::async_trait;
use lockcheck_history::fault_ops;
use lockcheck_journal::Journal;
use lockcheck_servers::cluster::Runtime;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "pause-node",
    keys: &["nodes", "method"],
    instead: &[("target", node::NOT_A_CLIENT)],
    ops: &fault_ops::PAUSE,
    read: PauseNodeSpec::read,
    undo: None,
    undo_journaled: None,
    requires: Some(requires),
};

/// Its methods that need more than signals: `method = "freezer"` on local
/// nodes (containers are paused by Docker), refused at load where this says
/// why; `method = "fsync"`, strace delaying a node's syncs.
fn requires() -> Vec<Requirement> {
    let freezer = lockcheck_servers::cluster::freezer::unavailable();
    let strace = super::sync_stall::unavailable();
    vec![
        Requirement {
            name: "freezer".into(),
            ok: freezer.is_none(),
            detail: freezer.unwrap_or_else(|| {
                "the cgroup freezer for pause-node of local nodes (method = \"freezer\")".into()
            }),
            install: None,
        },
        Requirement {
            name: "fsync stall".into(),
            ok: strace.is_none(),
            install: strace.is_some().then_some("strace"),
            detail: strace.unwrap_or_else(|| {
                "strace delays a local node's fsync/fdatasync (pause-node, method = \"fsync\")"
                    .into()
            }),
        },
    ]
}

/// `kind = "pause-node"`: which nodes, and how they are stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseNodeSpec {
    pub nodes: NodeTarget,
    pub method: PauseMethod,
}

impl PauseNodeSpec {
    fn read(entry: &mut Entry<'_>, _: &Setting) -> Result<Arc<dyn Spec>> {
        Ok(Arc::new(PauseNodeSpec {
            nodes: entry.take("nodes")?.unwrap_or(NodeTarget::One),
            method: entry.take("method")?.unwrap_or_default(),
        }))
    }
}

impl Spec for PauseNodeSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn fault(&self, duration: Duration) -> Box<dyn Fault> {
        Box::new(PauseNodes::new(self.nodes.clone(), duration).method(self.method))
    }

    fn needs(&self) -> super::spec::Needs {
        node::needs(&self.nodes)
    }

    /// SIGSTOP of the process found listening; a freezer or strace would have
    /// to take over a cgroup or a process of the team's setup.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        (self.method != PauseMethod::Sigstop).then(|| Refusal {
            key: "method",
            why: "with backend.manage = false a server is paused with method = \"sigstop\" \
                  (the process found listening on its port), not through a cgroup or a tracer"
                .into(),
        })
    }

    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        if runtime == Runtime::External {
            return Some(Refusal::kind(
                &KIND,
                runtime,
                "pausing a server needs its process; lockcheck did not start these servers",
            ));
        }
        if self.method == PauseMethod::Fsync && runtime != Runtime::Local {
            return Some(Refusal {
                key: "method",
                why: format!(
                    "method = \"fsync\" (strace attached to the server's process) is \
                     available under the local runtime only, not the {} runtime",
                    runtime.name()
                ),
            });
        }
        if self.method == PauseMethod::Fsync {
            return crate::sync_stall::unavailable().map(|why| Refusal {
                key: "method",
                why: format!("method = \"fsync\" attaches strace to the server: {why}"),
            });
        }
        // Docker pauses containers with the freezer whatever this machine allows.
        let why = match (self.method, runtime) {
            (PauseMethod::Freezer, Runtime::Local) => {
                lockcheck_servers::cluster::freezer::unavailable()
            }
            (PauseMethod::Freezer, Runtime::Ssh) => {
                return Some(Refusal {
                    key: "method",
                    why: "the freezer is not available under the ssh runtime yet: \
                          use method = \"sigstop\" (SIGSTOP of the server's process on its host)"
                        .into(),
                })
            }
            _ => None,
        }?;
        Some(Refusal {
            key: "method",
            why: format!(
                "the freezer is unavailable under the {} runtime: {why}",
                runtime.name()
            ),
        })
    }
}

/// Pauses server nodes (the etcd leader, the Redis primary, a minority...) with
/// SIGSTOP or the cgroup freezer ([`PauseMethod`]), and resumes them when it ends.
/// Recorded as nemesis `pause` / `resume`, the method named in the `pause` value.
pub struct PauseNodes {
    nodes: NodeTarget,
    duration: Duration,
    method: PauseMethod,
    stopped: Option<Stopped>,
    /// The nodes frozen with the freezer; the cluster thaws any left at its stop.
    frozen: Vec<String>,
    /// The nodes stopped on other hosts through the cluster ([`Runtime::remote`]);
    /// the cluster resumes any left at its stop.
    remote: Vec<String>,
    /// The nodes whose syncs stall (method `fsync`), detached at the end or on drop.
    stalled: Vec<SyncStall>,
}

impl PauseNodes {
    /// Pauses with SIGSTOP; [`PauseNodes::method`] to choose.
    pub fn new(nodes: NodeTarget, duration: Duration) -> PauseNodes {
        PauseNodes {
            nodes,
            duration,
            method: PauseMethod::Sigstop,
            stopped: None,
            frozen: Vec::new(),
            remote: Vec::new(),
            stalled: Vec::new(),
        }
    }

    pub fn method(self, method: PauseMethod) -> PauseNodes {
        PauseNodes { method, ..self }
    }
}

#[async_trait]
impl Fault for PauseNodes {
    fn target(&self) -> &Target {
        &TIMED
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some((names, dir)) = pick(&self.nodes, scene).await? else {
            return Ok(None);
        };
        let mut cluster = scene.cluster.expect("pick checked").lock().await;
        // Only the nodes up: one killed by another fault is not paused.
        let up: Vec<String> = names.into_iter().filter(|n| cluster.is_up(n)).collect();
        if up.is_empty() {
            return Ok(None); // all down: try later
        }
        let paused = match self.method {
            // Signalled where they run, by the cluster, which journals it.
            PauseMethod::Sigstop if cluster.runtime().remote() => {
                for n in &up {
                    cluster.sigstop(n).await?;
                    self.remote.push(n.clone());
                }
                self.remote.clone()
            }
            PauseMethod::Sigstop => {
                let procs: Vec<(String, i32)> = up
                    .iter()
                    .filter_map(|n| Some((n.clone(), cluster.pid(n)? as i32)))
                    .collect();
                // Waits (spinning) until the kernel shows them stopped: off the
                // runtime, whose clock times the clients' ops.
                let journal = Journal::for_run(&dir)?;
                let targets = procs.clone();
                let stopped =
                    tokio::task::spawn_blocking(move || stop(journal, &targets)).await??;
                let names = stopped.names();
                self.stopped = Some(stopped);
                names
            }
            PauseMethod::Fsync => {
                let journal = Journal::for_run(&dir)?;
                for n in &up {
                    let Some(pid) = cluster.pid(n) else {
                        continue;
                    };
                    let (journal, node, delay) = (journal.clone(), n.clone(), self.duration);
                    let stall = tokio::task::spawn_blocking(move || {
                        SyncStall::begin(journal, &node, pid as i32, delay)
                    })
                    .await??;
                    self.stalled.push(stall);
                }
                self.stalled.iter().map(|s| s.node().to_string()).collect()
            }
            PauseMethod::Freezer => {
                for n in &up {
                    cluster.freeze(n).await?;
                    self.frozen.push(n.clone());
                }
                self.frozen.clone()
            }
        };
        let mut value = targets(&paused);
        value["duration_ms"] = json!(self.duration.as_millis() as u64);
        value["method"] = json!(self.method.name());
        Ok(Some(value))
    }

    async fn stop(&mut self, scene: &mut Scene<'_>) -> Result<Value> {
        if !self.stalled.is_empty() {
            let stalled = std::mem::take(&mut self.stalled);
            let value = targets(
                &stalled
                    .iter()
                    .map(|s| s.node().to_string())
                    .collect::<Vec<_>>(),
            );
            // Every one is detached; the first failure is reported after.
            let ended = tokio::task::spawn_blocking(move || {
                stalled
                    .into_iter()
                    .map(SyncStall::end)
                    .fold(Ok(()), Result::and)
            })
            .await?;
            return ended.map(|()| value);
        }
        if !self.frozen.is_empty() || !self.remote.is_empty() {
            let Some(cluster) = scene.cluster else {
                bail!("a node fault needs the run's cluster");
            };
            let mut cluster = cluster.lock().await;
            let value = targets(&[self.frozen.clone(), self.remote.clone()].concat());
            // Try every node; report the first failure after all were tried.
            let mut first = None;
            for n in std::mem::take(&mut self.frozen) {
                if let Err(e) = cluster.thaw(&n).await {
                    first.get_or_insert(e);
                }
            }
            for n in std::mem::take(&mut self.remote) {
                if let Err(e) = cluster.sigcont(&n).await {
                    first.get_or_insert(e);
                }
            }
            return first.map_or(Ok(value), Err);
        }
        let Some(stopped) = self.stopped.take() else {
            return Ok(targets(&[]));
        };
        let value = targets(&stopped.names());
        stopped.resume()?;
        Ok(value)
    }
}
