//! Starting, watching and stopping the servers of a backend, behind one small
//! [`Cluster`] trait with four runtimes: local processes on loopback (the default,
//! [`local`]), one Docker container per node on a network made for the run
//! ([`docker`]), servers on other hosts reached with the system's OpenSSH client
//! ([`ssh`]), and servers someone else runs ([`external`]), which lockcheck only
//! talks to.
//!
//! What differs between backends is one [`ServerRecipe`] per backend, in a file of
//! its own (`redis.rs`, `etcd.rs`, `postgres.rs`, ...), found through [`recipe`]:
//! the server program and the Debian package that installs it (so that a missing
//! server is an environment problem named precisely: the runner exits 5 with it,
//! rather than a failed spawn), ports, command line, one-off setup, readiness,
//! leader, image. The runtimes never name a backend.

pub mod docker;
mod etcd;
pub mod external;
pub mod freezer;
pub mod home;
pub mod local;
mod mariadb;
mod nats;
pub mod netns;
pub mod patroni;
pub mod postgres;
mod redis;
mod redis_sentinel;
mod setup;
pub mod ssh;
mod zookeeper;

pub use docker::DockerCluster;
pub use external::ExternalCluster;
pub use local::{ClusterPlan, ClusterSpec, LocalCluster, NodeSpec, Prepare};
pub use ssh::{SshCluster, SshSpec};

use crate::backend::BackendKind;
use anyhow::{Context, Result};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a backend's servers run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
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
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Local => "local",
            Runtime::Docker => "docker",
            Runtime::External => "external",
            Runtime::Ssh => "ssh",
        }
    }

    /// Whether the servers' processes run on other machines: a fault then acts on
    /// them through the cluster ([`Cluster::sigstop`]), never by a local pid.
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

/// The running servers of one backend, whatever runs them. Node faults go through
/// it: kill and restart a node, wipe its data, find the leader, signal its process.
/// Dropping a cluster stops what it started.
#[async_trait]
pub trait Cluster: Send + Sync {
    fn kind(&self) -> BackendKind;
    fn runtime(&self) -> Runtime;
    /// The nodes' names, n1..nN, in node order.
    fn node_names(&self) -> Vec<String>;
    /// The addresses (`host:port`) clients dial, one per node, in node order: what
    /// `backend::connect` takes.
    fn endpoints(&self) -> Vec<String>;
    /// The run directory (nodes' data, logs, clock files).
    fn dir(&self) -> &Path;
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
    fn node_host(&self, _node: &str) -> Option<ssh::NodeHost> {
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
    fn hosts(&self) -> Vec<ssh::host::Host> {
        Vec::new()
    }
    /// Stops every node and removes what the cluster made; also what drop does.
    async fn stop(&mut self);
    /// The nodes' network namespaces, where they run in their own
    /// (`NetworkKind::Namespaces`): what node-to-node partitions cut.
    fn network(&self) -> Option<std::sync::Arc<netns::Network>> {
        None
    }
}

#[async_trait]
impl Cluster for LocalCluster {
    fn kind(&self) -> BackendKind {
        LocalCluster::kind(self)
    }
    fn runtime(&self) -> Runtime {
        Runtime::Local
    }
    fn node_names(&self) -> Vec<String> {
        self.nodes().iter().map(|n| n.name.clone()).collect()
    }
    fn endpoints(&self) -> Vec<String> {
        LocalCluster::endpoints(self)
    }
    fn dir(&self) -> &Path {
        &self.plan().spec.dir
    }
    fn program(&self) -> Option<&Path> {
        Some(&self.plan().binary)
    }
    fn pid(&self, node: &str) -> Option<u32> {
        LocalCluster::pid(self, node)
    }
    async fn kill(&mut self, node: &str) -> Result<()> {
        LocalCluster::kill(self, node).await
    }
    async fn restart(&mut self, node: &str) -> Result<()> {
        LocalCluster::restart(self, node).await
    }
    async fn restart_together(&mut self, nodes: &[String]) -> Result<()> {
        LocalCluster::restart_together(self, nodes).await
    }
    async fn wipe(&mut self, node: &str) -> Result<()> {
        LocalCluster::wipe(self, node).await
    }
    async fn freeze(&mut self, node: &str) -> Result<()> {
        LocalCluster::freeze(self, node).await
    }
    async fn thaw(&mut self, node: &str) -> Result<()> {
        LocalCluster::thaw(self, node).await
    }
    async fn leader(&self) -> Option<String> {
        LocalCluster::leader(self).await
    }
    async fn stop(&mut self) {
        LocalCluster::stop(self).await
    }
    fn network(&self) -> Option<std::sync::Arc<netns::Network>> {
        LocalCluster::network(self)
    }
}

/// A server program a backend runs, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerBinary {
    /// The program's name, looked up on `PATH`.
    pub name: &'static str,
    /// The Debian package that installs it.
    pub package: &'static str,
    /// An environment variable that, when set, names the program to run instead
    /// (a path, or a name looked up on `PATH`).
    pub env: &'static str,
}

/// How one backend's servers are run: the program and its Debian package, how
/// many nodes, which ports, the one-off setup of a node's data, its command line,
/// when it serves, who leads, and what a container needs. One file per backend
/// (`cluster/<backend>.rs`) implements it; [`recipe`] finds it. The runtimes
/// ([`local`], [`docker`]) ask the recipe and never name a backend.
#[async_trait]
pub trait ServerRecipe: Send + Sync {
    /// The server program, and where it comes from.
    fn binary(&self) -> ServerBinary;
    /// How many nodes run unless the workload says otherwise.
    fn default_nodes(&self) -> usize;
    /// Whether the server refuses to run as root: when lockcheck is root it runs
    /// as an unprivileged account, which must reach its data ([`home`]).
    fn refuses_root(&self) -> bool {
        false
    }
    /// Where the backend is one server by design (more nodes would be several
    /// unrelated locks), what to use for several instead; `None`: any number.
    fn single_instance(&self) -> Option<&'static str> {
        None
    }
    /// Where the backend runs a fixed number of nodes ([`ServerRecipe::default_nodes`]),
    /// what they are, in words; `None`: as many as the workload asks.
    fn fixed_nodes(&self) -> Option<&'static str> {
        None
    }
    /// The ports a node of a cluster of `nodes` listens on, and which addresses
    /// it has besides the client one.
    fn ports(&self, nodes: usize) -> Ports;
    /// Whether its nodes may run in network namespaces of their own
    /// (`backend.network = "namespaces"`): a server that admits loopback
    /// clients only may not.
    fn namespaces(&self) -> bool {
        true
    }
    /// Whether its nodes elect a leader among themselves, so that isolating the
    /// primary from its peers (`partition-nodes`, `isolate`) means something: by
    /// default any cluster of several nodes.
    fn elects_leader(&self) -> bool {
        self.default_nodes() > 1
    }
    /// Another backend's cluster, of one node, that this one's nodes need running
    /// before they start and for their whole life (Patroni's DCS: etcd); its
    /// client addresses are the plan's `coordinator`.
    fn coordinator(&self) -> Option<BackendKind> {
        None
    }
    /// How long all nodes together may take to serve at the start.
    fn ready_timeout(&self) -> Duration {
        Duration::from_secs(20)
    }
    /// What a client is given to reach `node` (`backend::connect`'s endpoints): by
    /// default the address it dials.
    fn endpoint(&self, node: &NodeSpec) -> String {
        node.client_advertise.to_string()
    }
    /// A process node `i`'s server starts apart from itself, which outlives it
    /// (Patroni's PostgreSQL, which it detaches), as its pid file and the argument
    /// of its command line that makes it this node's ([`detached_pid`]): journaled
    /// as the node starts, so that `recover` finds it after a kill -9, and killed
    /// after the node's own process at the cluster's stop.
    fn detached(&self, _plan: &ClusterPlan, _i: usize) -> Option<Detached> {
        None
    }
    /// The one-off program that prepares node `i`'s data directory before its
    /// first start (and after a wipe), if it needs one now: nothing is run here,
    /// the runtime runs it (on this machine, or in the node's container).
    fn init(&self, _plan: &ClusterPlan, _i: usize) -> Result<Option<Init>> {
        Ok(None)
    }
    /// What follows a successful [`ServerRecipe::init`] of node `i` on this
    /// machine's side (a rule for clients from outside its loopback).
    fn after_init(&self, _plan: &ClusterPlan, _i: usize) -> Result<()> {
        Ok(())
    }
    /// The command line that runs node `i` (after [`ServerRecipe::init`]),
    /// for local processes and containers alike. `rejoin`: the node was
    /// re-admitted empty by [`ServerRecipe::readmit`] and joins the running
    /// cluster instead of founding one.
    fn command(&self, plan: &ClusterPlan, i: usize, rejoin: bool) -> Result<Command>;
    /// Whether the node at `addr` answers as a server of its kind does once it
    /// serves.
    async fn ready(&self, addr: SocketAddr) -> bool;
    /// The node that leads now, asking the `running` ones (name, an address this
    /// machine reaches it at); by default the first node, the one server every
    /// client talks to.
    async fn leader(
        &self,
        plan: &ClusterPlan,
        _running: &[(String, SocketAddr)],
    ) -> Option<String> {
        plan.nodes.first().map(|n| n.name.clone())
    }
    /// Before node `i` starts again: where its data was wiped and the running
    /// members must take it back as a new member, does so and returns true (its
    /// command then rejoins); false where a restart needs nothing of the others.
    async fn readmit(
        &self,
        _plan: &ClusterPlan,
        _i: usize,
        _running: &[(String, SocketAddr)],
    ) -> Result<bool> {
        Ok(false)
    }
    /// Whether the members left once a quorum has exited cannot shut down
    /// cleanly (a leader waits out its leadership transfer): a stop kills them.
    fn stops_with_quorum(&self) -> bool {
        false
    }
    /// The directories of /etc this machine's server program follows links
    /// into (its JVM's configuration), which the host image mounts.
    fn host_etc(&self) -> &'static [&'static str] {
        &[]
    }
    /// The image users pull, whose command lines are the servers' own; none
    /// where the command line names this machine's files (the host image runs
    /// them from mounts).
    fn official_image(&self) -> Option<&'static str> {
        None
    }
}

/// A one-off program that prepares a node's data, and its name for messages.
pub struct Init {
    pub command: Command,
    pub what: &'static str,
}

/// The ports a server listens on in a namespace of its own (where nothing else
/// listens; on loopback each node gets free ports instead): its clients', and
/// where it has them, its peers' and its leader election's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub client: u16,
    pub peer: Option<u16>,
    pub election: Option<u16>,
}

impl Ports {
    /// A server with clients only.
    pub const fn client(client: u16) -> Ports {
        Ports {
            client,
            peer: None,
            election: None,
        }
    }
}

/// Where a run directory keeps its nodes' data (`data/<node>/` locally, the
/// containers' volumes under docker); their logs are in `nodes/`.
pub const DATA_DIR: &str = "data";

/// The registry: each backend's server recipe, one line per backend.
pub fn recipe(kind: BackendKind) -> &'static dyn ServerRecipe {
    match kind {
        BackendKind::Redis => &redis::REDIS,
        BackendKind::RedisSentinel => &redis_sentinel::RedisSentinel,
        BackendKind::Redlock => &redis::REDLOCK,
        BackendKind::Etcd => &etcd::Etcd,
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => &postgres::Postgres,
        BackendKind::Nats => &nats::Nats,
        BackendKind::Zookeeper => &zookeeper::Zookeeper,
        BackendKind::Mariadb => &mariadb::Mariadb,
        BackendKind::Patroni => &patroni::Patroni,
    }
}

/// The server program behind each backend.
pub fn server_binary(kind: BackendKind) -> ServerBinary {
    recipe(kind).binary()
}

/// How many server nodes a backend runs unless the workload says otherwise.
pub fn default_nodes(kind: BackendKind) -> usize {
    recipe(kind).default_nodes()
}

/// Sends `request` to `addr` and reads until the reply holds `healthy` (or the
/// server closes): the readiness probe of servers with a plain-text answer.
async fn answers(addr: SocketAddr, request: &[u8], healthy: &str) -> bool {
    let ask = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(request).await.ok()?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            let n = s.read(&mut buf).await.ok()?;
            reply.extend_from_slice(&buf[..n]);
            if n == 0 || String::from_utf8_lossy(&reply).contains(healthy) {
                break;
            }
        }
        Some(String::from_utf8_lossy(&reply).contains(healthy))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Some(true))
    )
}

/// What can go wrong bringing a cluster up, in words that say what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The server program is not installed (an environment problem: exit 5).
    #[error(
        "the server program `{binary}` was not found{hint}; install it with \
         `apt-get install {package}`"
    )]
    MissingBinary {
        binary: String,
        package: &'static str,
        /// Where the name came from, when it was not the default.
        hint: String,
    },
    /// A node's process ended while we waited for it to serve.
    #[error("node {node} exited while starting ({status}); last lines of {log}:\n{tail}")]
    Exited {
        node: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    /// The Docker Engine cannot be reached, or the image is not there (exit 5).
    #[error("{0}")]
    Docker(String),
    /// A node never answered its readiness check.
    #[error("node {node} did not become ready within {secs:.1}s; last lines of {log}:\n{tail}")]
    NotReady {
        node: String,
        secs: f64,
        log: PathBuf,
        tail: String,
    },
}

impl ClusterError {
    /// Whether the cause is an environment problem (the runner's exit code 5).
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            ClusterError::MissingBinary { .. } | ClusterError::Docker(_)
        )
    }
}

impl ServerBinary {
    /// The program to run: `explicit` if given, else the environment override, else
    /// the default name, each resolved on `PATH` unless it is a path.
    pub fn resolve(&self, explicit: Option<&Path>) -> Result<PathBuf, ClusterError> {
        self.resolve_from(explicit, std::env::var_os(self.env))
    }

    /// [`ServerBinary::resolve`] with the environment override's value given.
    fn resolve_from(
        &self,
        explicit: Option<&Path>,
        env: Option<std::ffi::OsString>,
    ) -> Result<PathBuf, ClusterError> {
        let env = env.filter(|v| !v.is_empty());
        let (wanted, hint) = match (explicit, env) {
            (Some(p), _) => (p.to_path_buf(), format!(" (configured as {})", p.display())),
            (None, Some(v)) => {
                let p = PathBuf::from(v);
                let hint = format!(" (from ${} = {})", self.env, p.display());
                (p, hint)
            }
            (None, None) => (PathBuf::from(self.name), String::new()),
        };
        find_executable(&wanted).ok_or_else(|| ClusterError::MissingBinary {
            binary: wanted.display().to_string(),
            package: self.package,
            hint,
        })
    }
}

/// `name` itself if it is a path to an executable file, else the first executable
/// of that name on `PATH` (and in /usr/sbin, where Debian puts some servers).
fn find_executable(name: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.components().count() > 1 || name.is_absolute() {
        return executable(name).then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

/// Whether this machine can run one backend (for `lockcheck doctor`).
#[derive(Debug)]
pub struct Availability {
    pub kind: BackendKind,
    pub binary: ServerBinary,
    /// The program that would run, or why there is none.
    pub found: Result<PathBuf, ClusterError>,
}

/// Every backend lockcheck knows, and whether its server program is here.
pub fn available_backends() -> Vec<Availability> {
    BackendKind::ALL
        .into_iter()
        .map(|kind| {
            let binary = server_binary(kind);
            Availability {
                kind,
                binary,
                found: binary.resolve(None),
            }
        })
        .collect()
}

/// Where a node's detached server keeps its pid ([`ServerRecipe::detached`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detached {
    /// The pid file the detached server writes (its pid on the first line).
    pub pid_file: PathBuf,
    /// An argument of its command line that makes it this node's (its data
    /// directory), so that a pid reused by another program is never signalled.
    pub owner: String,
}

/// The pid of the detached server `pid_file` names, if it still runs as the one
/// `owner` identifies.
pub fn detached_pid(pid_file: &Path, owner: &str) -> Option<u32> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    let pid: u32 = text.lines().next()?.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    String::from_utf8_lossy(&cmdline)
        .split('\0')
        .any(|a| a == owner)
        .then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_names_its_package() {
        let err = server_binary(BackendKind::Etcd)
            .resolve(Some(Path::new("/nonexistent/etcd-nope")))
            .unwrap_err();
        assert!(err.is_environment());
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/etcd-nope"), "{msg}");
        assert!(msg.contains("apt-get install etcd-server"), "{msg}");
    }

    #[test]
    fn the_environment_overrides_the_default_and_explicit_overrides_both() {
        let redis = server_binary(BackendKind::Redis);
        let env = Some("/nonexistent/from-env".into());
        let err = redis.resolve_from(None, env.clone()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("$LOCKCHECK_REDIS_SERVER = /nonexistent/from-env"),
            "{msg}"
        );
        assert!(msg.contains("apt-get install redis-server"), "{msg}");
        assert_eq!(
            redis.resolve_from(Some(Path::new("/bin/sh")), env).unwrap(),
            Path::new("/bin/sh")
        );
        // Set but empty counts as unset.
        let found = redis.resolve_from(None, Some("".into()));
        assert_eq!(found.ok(), find_executable(Path::new("redis-server")));
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path() {
        // `sh` is on every PATH this runs on; a bare name that is nowhere is missing.
        assert!(find_executable(Path::new("sh")).is_some());
        assert!(find_executable(Path::new("lockcheck-no-such-server")).is_none());
    }
}
