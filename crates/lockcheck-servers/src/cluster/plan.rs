//! What a cluster is before it runs, whatever runs it: where (the runtime, the
//! network), what to start ([`ClusterSpec`], with the hooks that adjust its nodes)
//! and the plan of names, ports and directories ([`ClusterPlan`]). Shared by every
//! runtime; it imports none of them.

use super::home::Home;
use super::netns;
use super::node::NodeSpec;
use super::ssh::hooks::OnHosts;
use super::ssh::node::HostPrepare;
use crate::backend::BackendKind;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// Where a backend's servers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// Local processes on loopback, started and stopped by lockcheck.
    #[default]
    Local,
    /// One Docker container per node, started and removed by lockcheck.
    Docker,
    /// Servers lockcheck did not start: it only connects to them.
    External,
    /// One server per host of `backend.hosts`, reached over SSH: started and
    /// stopped there by lockcheck.
    Ssh,
}

impl Runtime {
    /// Every runtime, in the order `--runtime`'s help lists them.
    pub const ALL: [Runtime; 4] = [
        Runtime::Local,
        Runtime::Docker,
        Runtime::External,
        Runtime::Ssh,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Runtime::Local => "local",
            Runtime::Docker => "docker",
            Runtime::External => "external",
            Runtime::Ssh => "ssh",
        }
    }

    /// Whether the servers' processes run on other machines: a fault then acts on
    /// them through the cluster (`Cluster::sigstop`), never by a local pid.
    pub fn remote(self) -> bool {
        self == Runtime::Ssh
    }
}

/// Where a local cluster's nodes listen (`[backend] network`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkKind {
    /// All on loopback, each on its own ports.
    #[default]
    Loopback,
    /// Each node in a network namespace of its own, joined by a bridge: the links
    /// between nodes can then be cut (`partition-nodes`).
    Namespaces,
}

/// Where a run directory keeps its nodes' data (`data/<node>/` locally, the
/// containers' volumes under docker); their logs are in `nodes/`.
pub const DATA_DIR: &str = "data";

impl ClusterSpec {
    /// Empties every node's data directory after a start given up on (a port
    /// taken): the nodes that did start founded a cluster on the ports given
    /// up, and started again on that data they refuse the node that did not
    /// (etcd: "request cluster ID mismatch"; an audit's run ended so in exit 5,
    /// docs/audits/etcd.md). The directories stay, emptied: one may be a
    /// mount point (disk-full's tmpfs), which the next start finds in place.
    pub fn forget_data(&self) -> Result<()> {
        let data = self.dir.join(DATA_DIR);
        let entries = |dir: &Path| -> Result<Vec<PathBuf>> {
            match std::fs::read_dir(dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                listing => Ok(listing
                    .and_then(|l| l.map(|e| e.map(|e| e.path())).collect())
                    .with_context(|| format!("listing {}", dir.display()))?),
            }
        };
        for node in entries(&data)? {
            for file in entries(&node)? {
                let gone = if file.is_dir() && !file.is_symlink() {
                    std::fs::remove_dir_all(&file)
                } else {
                    std::fs::remove_file(&file)
                };
                gone.with_context(|| format!("removing {} to start again", file.display()))?;
            }
        }
        Ok(())
    }
}

/// What to start: the backend, how many nodes, and where their files go.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub kind: BackendKind,
    pub nodes: usize,
    /// The run directory: nodes' data go under `data/`, their logs under `nodes/`.
    pub dir: PathBuf,
    /// The server program to run instead of the default one (tests, odd installs).
    pub binary: Option<PathBuf>,
    /// How long all nodes together may take to answer their readiness check.
    pub ready_timeout: Duration,
    /// How long a node may take to exit after SIGTERM before it gets SIGKILL.
    pub stop_grace: Duration,
    /// Adjusts each node's command before every start, restarts included.
    pub prepare: Option<Prepare>,
    /// The same for a node on a host of its own (the ssh runtime), on that host.
    pub prepare_on_host: Option<HostPrepare>,
    /// Where each node is a host of its own (ssh): runs once the hosts are
    /// reached, before any node starts.
    pub on_hosts: Option<OnHosts>,
    /// Where the nodes listen: loopback, or each in a network namespace of its own
    /// (so that faults can cut the links between nodes).
    pub network: NetworkKind,
    /// With `network` = namespaces: runs once the network exists, before any node.
    pub on_network: Option<netns::OnNetwork>,
    /// The run directory whose journal lists the servers as they spawn (for
    /// `lockcheck recover`): `dir` itself, unless the cluster is one part of a run
    /// that keeps it in a folder of its own (the resource's PostgreSQL).
    pub journal_dir: PathBuf,
    /// The workload's lease, for servers that keep the lease themselves (the TTL
    /// of Patroni's leader key).
    pub lease: Option<Duration>,
    /// The backend's own `[backend]` keys, for a recipe whose servers they
    /// change (redis's `persistence`).
    pub options: crate::backend::Options,
}

/// A change to a node's command line made just before it starts, for what must be in
/// place from the server's first instruction: a clock interposer in its environment,
/// a time namespace, a wrapper. Runs again at each restart of the node.
#[derive(Clone)]
pub struct Prepare(pub Arc<PrepareFn>);

/// What a [`Prepare`] runs: the node about to start, and its command.
pub type PrepareFn = dyn Fn(&NodeSpec, &mut Command) -> Result<()> + Send + Sync;

impl Prepare {
    /// One hook that runs each of `hooks` in turn; none if there are none.
    pub fn chain(hooks: Vec<Prepare>) -> Option<Prepare> {
        match hooks.len() {
            0 => None,
            1 => hooks.into_iter().next(),
            _ => Some(Prepare(Arc::new(
                move |node: &NodeSpec, cmd: &mut Command| {
                    hooks.iter().try_for_each(|Prepare(h)| h(node, cmd))
                },
            ))),
        }
    }
}

impl std::fmt::Debug for Prepare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepare(..)")
    }
}

/// Names, ports and directories chosen, nothing running yet.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    pub spec: ClusterSpec,
    /// The resolved server program.
    pub binary: PathBuf,
    pub nodes: Vec<NodeSpec>,
    /// Distinguishes this cluster from any other on the machine (etcd's
    /// `--initial-cluster-token`), so that members of two runs never join up.
    pub cluster_token: String,
    /// Where the nodes' data directories are (`<dir>/data`, or a stand-in the
    /// server can reach); it goes with the last plan, once the servers stopped.
    pub home: Arc<Home>,
    /// The client addresses of the coordinator the nodes need
    /// (`ServerRecipe::coordinator`), once it runs; empty without one.
    pub coordinator: Vec<String>,
}

impl ClusterPlan {
    /// The position of node `node` in node order: the one lookup of a node by its
    /// name, for every runtime.
    pub fn index(&self, node: &str) -> Result<usize> {
        self.nodes
            .iter()
            .position(|n| n.name == node)
            .with_context(|| format!("no node named {node} in this {} cluster", self.spec.kind))
    }

    /// The nodes' names, in node order.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// The addresses the nodes advertise to clients (`host:port`), in node order:
    /// what clients dial where each node has an address of its own (a container,
    /// a host).
    pub fn advertised(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| n.client_advertise.to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start given up on leaves each node's directory in place and empty.
    #[test]
    fn a_start_given_up_on_forgets_every_nodes_data() {
        let run = tempfile::tempdir().unwrap();
        let spec = ClusterSpec::new(BackendKind::Redis, run.path());
        spec.forget_data().unwrap(); // no data yet: nothing to do
        let data = run.path().join(DATA_DIR);
        std::fs::create_dir_all(data.join("n1/member/wal")).unwrap();
        std::fs::write(data.join("n1/member/wal/0.wal"), "founded").unwrap();
        std::fs::create_dir_all(data.join("n2")).unwrap();
        std::fs::write(data.join("n2/myid"), "2").unwrap();
        spec.forget_data().unwrap();
        for node in ["n1", "n2"] {
            let left: Vec<_> = std::fs::read_dir(data.join(node)).unwrap().collect();
            assert!(left.is_empty(), "{node}: {left:?}");
        }
    }
}
