//! How one backend's servers are run ([`ServerRecipe`]): the program and its
//! package, the ports, the one-off setup, readiness; and what goes wrong bringing
//! servers up ([`ClusterError`]). Each backend's file implements the recipe; the
//! runtimes ask it and never name a backend.

use super::node::NodeSpec;
use super::plan::ClusterPlan;
use crate::backend::BackendKind;
use anyhow::Result;
use async_trait::async_trait;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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

/// A Debian package a backend's servers need on the machine that runs them, and
/// the file (a path) or program (a name on `PATH`) whose presence says it is
/// installed. Each backend's folder lists its own (`backends/<backend>/packages.txt`),
/// as scripts/setup reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Package {
    pub check: &'static str,
    pub name: &'static str,
}

/// How one backend's servers are run: the program and its Debian package, how
/// many nodes, which ports, the one-off setup of a node's data, its command line,
/// when it serves, who leads, and what a container needs. Each backend's folder
/// implements it (`backends/<backend>/server.rs`); `recipe` finds it. The runtimes
/// (`local`, `docker`) ask the recipe and never name a backend.
#[async_trait]
pub trait ServerRecipe: Send + Sync {
    /// The server program, and where it comes from.
    fn binary(&self) -> ServerBinary;
    /// Every Debian package its servers need (its folder's packages.txt holds
    /// them for scripts/setup): by default the server program's.
    fn packages(&self) -> Vec<Package> {
        let binary = self.binary();
        vec![Package {
            check: binary.name,
            name: binary.package,
        }]
    }
    /// How many nodes run unless the workload says otherwise.
    fn default_nodes(&self) -> usize;
    /// Whether the server refuses to run as root: when lockcheck is root it runs
    /// as an unprivileged account, which must reach its data (`home`).
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
    /// Whether its servers can keep a workload's lease of `ttl` themselves (a
    /// leader key's TTL), or why not; any lease by default.
    fn lease(&self, _ttl: Duration) -> Result<(), String> {
        Ok(())
    }
    /// Whether the ssh runtime can run its servers on hosts of their own: not
    /// where a node's data needs a one-off setup on this machine's side, nor where
    /// its command line names a file of this machine's.
    fn ssh(&self) -> bool {
        false
    }
    /// What a server killed with -9 keeps, as this recipe starts it with the
    /// backend's `options`, in words (said by the audit's restart scenarios);
    /// `None`: nothing is said.
    fn persistence(&self, _options: &crate::backend::Options) -> Option<String> {
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
    /// Whether `node`, just started to found a new cluster, is far enough along
    /// for the next member to start: by default at once, all members together.
    async fn founded(&self, _node: &NodeSpec) -> bool {
        true
    }
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
    pub(super) fn resolve_from(
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
pub(super) fn find_executable(name: &Path) -> Option<PathBuf> {
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
