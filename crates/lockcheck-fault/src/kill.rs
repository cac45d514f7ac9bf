//! `kind = "kill"`: server nodes killed (-9) and restarted when the fault ends,
//! on their data or wiped. Recorded as nemesis `kill` / `start`.

use super::node::{self, pick, targets, NodeTarget, TIMED};
use super::spec::{Entry, Kind, Refusal, Setting, Spec};
use super::{Fault, Scene, Target};
use anyhow::{bail, Result};
use async_trait::async_trait;
use lockcheck_history::fault_ops;
use lockcheck_servers::cluster::Runtime;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "kill",
    keys: &["nodes", "wipe"],
    instead: &[("target", node::NOT_A_CLIENT)],
    ops: &fault_ops::KILL,
    read: KillSpec::read,
    undo: None,
    undo_journaled: None,
    requires: None,
};

/// `kind = "kill"`: which nodes, and whether they restart with empty data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillSpec {
    pub nodes: NodeTarget,
    pub wipe: bool,
}

impl KillSpec {
    fn read(entry: &mut Entry<'_>, _: &Setting) -> Result<Arc<dyn Spec>> {
        Ok(Arc::new(KillSpec {
            nodes: entry.take("nodes")?.unwrap_or(NodeTarget::One),
            wipe: entry.take("wipe")?.unwrap_or(false),
        }))
    }
}

impl Spec for KillSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn fault(&self, _: Duration) -> Box<dyn Fault> {
        Box::new(KillNodes::new(self.nodes.clone(), self.wipe))
    }

    fn needs(&self) -> super::spec::Needs {
        node::needs(&self.nodes)
    }

    fn refused_unmanaged(&self) -> Option<Refusal> {
        Some(Refusal::unmanaged(
            &KIND,
            "lockcheck would have to start the team's server again itself, outside whatever \
             runs it (systemd, a container, a supervisor that may restart it too, on the same \
             port); pause it instead (pause-node), or let lockcheck start the servers \
             (manage = true)",
        ))
    }

    fn refused_by(&self, runtime: Runtime) -> Option<Refusal> {
        match runtime {
            Runtime::External => Some(Refusal::kind(
                &KIND,
                runtime,
                "killing and restarting a server needs its process; lockcheck did not start these servers",
            )),
            _ => None,
        }
    }
}

/// Kill -9 server nodes, and restart them when it ends, on their data
/// directories, or (`wipe`) empty: a Redis without its keys, an etcd member
/// re-admitted with no log. Recorded as nemesis `kill` / `start`.
pub struct KillNodes {
    nodes: NodeTarget,
    wipe: bool,
    killed: Vec<String>,
}

impl KillNodes {
    pub fn new(nodes: NodeTarget, wipe: bool) -> KillNodes {
        KillNodes {
            nodes,
            wipe,
            killed: Vec::new(),
        }
    }
}

#[async_trait]
impl Fault for KillNodes {
    fn target(&self) -> &Target {
        &TIMED
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some((names, _)) = pick(&self.nodes, scene).await? else {
            return Ok(None);
        };
        let mut cluster = scene.cluster.expect("pick checked").lock().await;
        for n in names {
            if !cluster.is_up(&n) {
                continue; // already down
            }
            cluster.kill(&n).await?;
            self.killed.push(n.clone());
            if self.wipe {
                cluster.wipe(&n).await?;
            }
        }
        if self.killed.is_empty() {
            return Ok(None);
        }
        let mut value = targets(&self.killed);
        value["wipe"] = json!(self.wipe);
        Ok(Some(value))
    }

    async fn stop(&mut self, scene: &mut Scene<'_>) -> Result<Value> {
        let Some(cluster) = scene.cluster else {
            bail!("a node fault needs the run's cluster");
        };
        let mut cluster = cluster.lock().await;
        let value = targets(&self.killed);
        // Together: a majority of a quorum system restarted one at a time would
        // never become ready. The restarted process is journaled by the cluster as
        // it spawns it (local and ssh runtimes) or belongs to the run's journaled
        // containers (docker).
        let killed = std::mem::take(&mut self.killed);
        cluster.restart_together(&killed).await?;
        Ok(value)
    }
}
