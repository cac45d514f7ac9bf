//! A cluster while it runs, whatever runs it: the [`Cluster`] trait every runtime
//! implements, through which node faults act.

use super::netns;
use super::plan::{ClusterPlan, Runtime};
use super::ssh::host::Host;
use super::ssh::node::NodeHost;
use crate::backend::BackendKind;
use anyhow::{Context, Result};
use async_trait::async_trait;
use std::path::Path;

/// What a cluster is, whatever runs it: its backend and runtime, the run
/// directory, and each node's name and client address, in node order. Each
/// runtime says it once ([`Cluster::layout`]); the accessors of [`Cluster`] read it.
pub struct Layout<'a> {
    pub kind: BackendKind,
    pub runtime: Runtime,
    /// The run directory (nodes' data, logs, clock files).
    pub dir: &'a Path,
    /// n1..nN.
    pub node_names: Vec<String>,
    /// The addresses (`host:port`) clients dial, one per node: what
    /// `backend::connect` takes.
    pub endpoints: Vec<String>,
}

impl<'a> Layout<'a> {
    /// The nodes lockcheck planned, each dialled at the address it advertises
    /// (a container's, a host's).
    pub fn planned(plan: &'a ClusterPlan, runtime: Runtime) -> Layout<'a> {
        Layout {
            kind: plan.spec.kind,
            runtime,
            dir: &plan.spec.dir,
            node_names: plan.node_names(),
            endpoints: plan.advertised(),
        }
    }
}

/// The running servers of one backend, whatever runs them. Node faults go through
/// it: kill and restart a node, wipe its data, find the leader, signal its process.
/// Dropping a cluster stops what it started.
#[async_trait]
pub trait Cluster: Send + Sync {
    fn layout(&self) -> Layout<'_>;
    fn kind(&self) -> BackendKind {
        self.layout().kind
    }
    fn runtime(&self) -> Runtime {
        self.layout().runtime
    }
    /// The nodes' names, n1..nN, in node order.
    fn node_names(&self) -> Vec<String> {
        self.layout().node_names
    }
    /// The addresses (`host:port`) clients dial, one per node, in node order: what
    /// `backend::connect` takes.
    fn endpoints(&self) -> Vec<String> {
        self.layout().endpoints
    }
    /// The run directory (nodes' data, logs, clock files).
    fn dir(&self) -> &Path {
        self.layout().dir
    }
    /// The server program as this machine sees it, where it is known (a clock fault
    /// asks whether its interposer can reach it).
    fn program(&self) -> Option<&Path>;
    /// The process id, on this machine, of a running node's server (a container's
    /// main process for Docker); none for a node that is down or not ours.
    fn pid(&self, node: &str) -> Option<u32>;
    /// Whether a node's server is up (running or stopped), as far as the cluster
    /// knows: one killed by a fault is not.
    fn is_up(&self, node: &str) -> bool {
        self.pid(node).is_some()
    }
    /// Kills a node as a crash would (SIGKILL), keeping its data.
    async fn kill(&mut self, node: &str) -> Result<()>;
    /// Starts a node that is down again, same addresses and data; waits until it serves.
    async fn restart(&mut self, node: &str) -> Result<()>;
    /// Restarts several nodes that are down and waits until they all serve. Where
    /// a node serves only with a quorum, they must start together: the default
    /// (one after the other) suits runtimes whose `restart` does not wait for that.
    async fn restart_together(&mut self, nodes: &[String]) -> Result<()> {
        for n in nodes {
            self.restart(n)
                .await
                .with_context(|| format!("restarting {n}"))?;
        }
        Ok(())
    }
    /// Empties the data of a node that is down: it comes back with nothing.
    async fn wipe(&mut self, node: &str) -> Result<()>;
    /// Freezes a running node with the cgroup freezer: every process of the node
    /// stops at once, not only its main one (a container is paused). Undone by
    /// [`Cluster::thaw`], and by `stop`.
    async fn freeze(&mut self, node: &str) -> Result<()> {
        anyhow::bail!(
            "node {node}: the cgroup freezer is unavailable under the {} runtime",
            self.runtime().name()
        )
    }
    /// Thaws a node [`Cluster::freeze`] froze; one killed meanwhile is left alone.
    async fn thaw(&mut self, node: &str) -> Result<()> {
        anyhow::bail!(
            "node {node}: the cgroup freezer is unavailable under the {} runtime",
            self.runtime().name()
        )
    }
    /// Stops a running node's server with SIGSTOP where it runs, for a runtime
    /// whose processes are on other machines ([`Runtime::remote`]); journaled,
    /// and undone by [`Cluster::sigcont`] and by `stop`. Elsewhere a fault
    /// signals [`Cluster::pid`] itself.
    async fn sigstop(&mut self, node: &str) -> Result<()> {
        anyhow::bail!(
            "node {node}: the {} runtime's servers are signalled by their pid on this machine",
            self.runtime().name()
        )
    }
    /// Resumes a node [`Cluster::sigstop`] stopped; one killed meanwhile is left alone.
    async fn sigcont(&mut self, node: &str) -> Result<()> {
        anyhow::bail!(
            "node {node}: the {} runtime's servers are signalled by their pid on this machine",
            self.runtime().name()
        )
    }
    /// The address a node's peers reach it at, where it is a host of its own
    /// (ssh); none elsewhere (namespaced nodes have theirs in [`Cluster::network`]).
    fn node_addr(&self, _node: &str) -> Option<std::net::IpAddr> {
        None
    }
    /// The node's host, its directory there and its program, where the node is
    /// a host of its own (ssh): what a fault puts files on or runs scripts on.
    fn node_host(&self, _node: &str) -> Option<NodeHost> {
        None
    }
    /// Adds packet-filter rules for what `node` sends (iptables matches and
    /// target, like `-d 10.0.0.2 -j DROP`), in a chain of lockcheck's own on its
    /// host, journaled; where the node is a host of its own (ssh). Returns the
    /// handle [`Cluster::unfilter`] takes; `stop` removes any left.
    async fn filter(&mut self, node: &str, _rules: &[String]) -> Result<u64> {
        anyhow::bail!(
            "node {node}: packet filters on the nodes' hosts are the ssh runtime's, not the {} runtime's",
            self.runtime().name()
        )
    }
    /// Removes the rules [`Cluster::filter`] added.
    async fn unfilter(&mut self, _filter: u64) -> Result<()> {
        anyhow::bail!(
            "packet filters on the nodes' hosts are the ssh runtime's, not the {} runtime's",
            self.runtime().name()
        )
    }
    /// The node that leads now, where the backend has one.
    async fn leader(&self) -> Option<String>;
    /// The hosts the nodes run on, in node order, reached through the run's
    /// open connections, where each node is a host of its own (ssh): where
    /// clients may run too (`clients_on = "hosts"`). Empty elsewhere.
    fn hosts(&self) -> Vec<Host> {
        Vec::new()
    }
    /// Stops every node and removes what the cluster made; also what drop does.
    async fn stop(&mut self);
    /// [`Cluster::stop`] for servers whose data nobody reads afterwards (a run
    /// that drops it): where no clean shutdown is owed, a quicker one.
    async fn discard(&mut self) {
        self.stop().await
    }
    /// The nodes' network namespaces, where they run in their own
    /// (`NetworkKind::Namespaces`): what node-to-node partitions cut.
    fn network(&self) -> Option<std::sync::Arc<netns::Network>> {
        None
    }
}
