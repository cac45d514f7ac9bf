//! A backend's servers as local processes on loopback: free ports, one data directory
//! (`<dir>/data/<node>`) and one log (`<dir>/nodes/<node>.log`) per node, a readiness
//! check, and a stop that always happens (SIGCONT, SIGTERM, then SIGKILL after a grace;
//! also on drop), so that no server outlives the run and none is left stopped.
//!
//! Starting is two steps so that a proxy can later sit on a link: [`ClusterPlan::new`]
//! picks names, ports and directories; the caller may then change each node's
//! *advertised* addresses (what clients, or peers, are told to dial) to a proxy's
//! before [`ClusterPlan::start`] runs the servers on the *listen* addresses.
//! [`LocalCluster::start`] does both for the common case, and retries with new ports
//! if another process took one in between.
//!
//! Nodes are named n1..nN. A node keeps its ports and data directory for the
//! cluster's life, so [`LocalCluster::kill`] then [`LocalCluster::restart`] brings the
//! same member back (a Redis without persistence comes back empty; an etcd member
//! replays its WAL). [`LocalCluster::wipe`] between the two brings it back with
//! nothing (an etcd member is then re-admitted as a new member).
//!
//! With [`NetworkKind::Namespaces`] each node runs in a network namespace of its
//! own (`super::netns`), on its backend's usual ports at its namespace's address:
//! the server enters the namespace between fork and exec, so its pid is the one
//! faults signal, and the namespaces go when the cluster stops.
//!
//! Servers run in their own process groups, so a Ctrl-C at the terminal reaches only
//! lockcheck, which resumes and stops them itself. Each server process is written
//! into the run's journal (`<dir>/journal.jsonl`) as it is spawned, restarts
//! included, so that `lockcheck recover` ends the servers of a controller killed
//! with -9. Faults signal a node through
//! [`LocalCluster::pid`]; what must hold from a server's first instruction (a clock
//! interposer, a time namespace) goes in through [`ClusterSpec::prepare`].

use super::netns::{self, Network};
use super::{default_nodes, server_binary, ClusterError, NetworkKind};
use crate::backend::BackendKind;
use crate::journal::{Effect, Journal, Proc};
use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
    /// Where the nodes listen: loopback, or each in a network namespace of its own
    /// (so that faults can cut the links between nodes).
    pub network: NetworkKind,
    /// With `network` = namespaces: runs once the network exists, before any node.
    pub on_network: Option<netns::OnNetwork>,
    /// The run directory whose journal lists the servers as they spawn (for
    /// `lockcheck recover`): `dir` itself, unless the cluster is one part of a run
    /// that keeps it in a folder of its own (the resource's PostgreSQL).
    pub journal_dir: PathBuf,
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

impl ClusterSpec {
    /// The backend's usual shape (see [`default_nodes`]) with its files under `dir`.
    pub fn new(kind: BackendKind, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        ClusterSpec {
            kind,
            nodes: default_nodes(kind),
            journal_dir: dir.clone(),
            dir,
            binary: None,
            ready_timeout: Duration::from_secs(20),
            stop_grace: Duration::from_secs(5),
            prepare: None,
            network: NetworkKind::Loopback,
            on_network: None,
        }
    }
}

/// One node's identity, addresses and files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// n1, n2, ...
    pub name: String,
    /// Where the server accepts clients.
    pub client_listen: SocketAddr,
    /// What clients are told to dial: the listen address, unless a proxy is in between.
    pub client_advertise: SocketAddr,
    /// Where the server accepts its peers (etcd), if it has any.
    pub peer_listen: Option<SocketAddr>,
    /// What peers are told to dial to reach this node.
    pub peer_advertise: Option<SocketAddr>,
    /// Where a ZooKeeper server listens for leader election (its peer address is
    /// for the quorum's traffic).
    pub election: Option<SocketAddr>,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
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
}

impl ClusterPlan {
    /// Resolves the server program (a missing one is [`ClusterError::MissingBinary`])
    /// and picks free loopback ports and the nodes' directories. For nodes in
    /// namespaces ([`NetworkKind::Namespaces`]) use [`LocalCluster::start`], which
    /// makes their network first.
    pub fn new(spec: ClusterSpec) -> Result<Self> {
        if spec.network != NetworkKind::Loopback {
            bail!("nodes in namespaces need their network first: use LocalCluster::start");
        }
        Self::plan(spec, None)
    }

    /// [`ClusterPlan::new`], on `network` if given: each node at its namespace's
    /// address, on its backend's usual ports.
    fn plan(spec: ClusterSpec, network: Option<&Network>) -> Result<Self> {
        if spec.nodes == 0 {
            bail!("a {:?} cluster needs at least one node", spec.kind);
        }
        let binary = server_binary(spec.kind).resolve(spec.binary.as_deref())?;
        // NATS routes between the nodes of a cluster; a single server has no peers.
        let has_peers = match spec.kind {
            BackendKind::Etcd | BackendKind::Zookeeper => true,
            BackendKind::Nats => spec.nodes > 1,
            BackendKind::Redis
            | BackendKind::Redlock
            | BackendKind::PostgresAdvisory
            | BackendKind::PostgresLease
            | BackendKind::Mariadb => false,
        };
        let names: Vec<String> = node_names(spec.nodes);
        let nodes = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let [client_port, peer_port, election_port] = usual_ports(spec.kind);
                // A namespace of its own has the backend's usual ports free.
                let addr = |port: u16| match network {
                    None => free_loopback_addr(),
                    Some(net) => Ok(SocketAddr::from((net.addr(i), port))),
                };
                let client = addr(client_port)?;
                let peer = if has_peers {
                    Some(addr(peer_port)?)
                } else {
                    None
                };
                let election = if spec.kind == BackendKind::Zookeeper {
                    Some(addr(election_port)?)
                } else {
                    None
                };
                Ok(NodeSpec {
                    data_dir: spec.dir.join("data").join(&name),
                    log_path: spec.dir.join("nodes").join(format!("{name}.log")),
                    name,
                    client_listen: client,
                    client_advertise: client,
                    peer_listen: peer,
                    peer_advertise: peer,
                    election,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let cluster_token = format!(
            "lockcheck-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        Ok(ClusterPlan {
            spec,
            binary,
            nodes,
            cluster_token,
        })
    }

    /// Runs every node and waits until all serve. On failure everything started is
    /// stopped again.
    pub async fn start(self) -> Result<LocalCluster> {
        self.start_on(None).await
    }

    /// [`ClusterPlan::start`], each node in its namespace of `network` if given;
    /// the cluster then owns the network, and removes it when it stops.
    async fn start_on(self, network: Option<Arc<Network>>) -> Result<LocalCluster> {
        fs::create_dir_all(self.spec.dir.join("nodes"))
            .with_context(|| format!("creating {}", self.spec.dir.join("nodes").display()))?;
        let mut cluster = LocalCluster {
            children: (0..self.nodes.len()).map(|_| None).collect(),
            frozen: (0..self.nodes.len()).map(|_| None).collect(),
            plan: self,
            network,
        };
        // All members first, then the wait: an etcd member is not healthy until a
        // quorum of its peers is up.
        for i in 0..cluster.plan.nodes.len() {
            cluster.spawn(i, false)?;
        }
        let all: Vec<usize> = (0..cluster.plan.nodes.len()).collect();
        cluster.wait_ready(&all).await?;
        Ok(cluster)
    }

    /// The one-off program that prepares node `i`'s data directory before its
    /// server's first start (and after a wipe), with its name, where it needs one
    /// (`initdb`, `mariadb-install-db`). Run before [`ClusterPlan::command`]: here,
    /// or in the node's container.
    pub(super) fn init_command(&self, i: usize) -> Result<Option<(Command, &'static str)>> {
        Ok(match self.spec.kind {
            BackendKind::PostgresAdvisory | BackendKind::PostgresLease => {
                super::postgres::init(self, i)?.map(|c| (c, "initdb"))
            }
            BackendKind::Mariadb => {
                super::mariadb::init(self, i)?.map(|c| (c, "mariadb-install-db"))
            }
            _ => None,
        })
    }

    /// The command line that runs node `i` (after [`ClusterPlan::init_command`]).
    /// `rejoin`: an etcd member that comes back without its data joins the running
    /// cluster as a new member instead of bootstrapping a new one.
    pub(super) fn command(&self, i: usize, rejoin: bool) -> Result<Command> {
        let node = &self.nodes[i];
        let mut cmd = Command::new(&self.binary);
        match self.spec.kind {
            BackendKind::PostgresAdvisory | BackendKind::PostgresLease => {
                return super::postgres::command(self, i)
            }
            BackendKind::Nats => return super::nats::command(self, i),
            BackendKind::Mariadb => return super::mariadb::command(self, i),
            BackendKind::Zookeeper => return super::zookeeper::command(self, i),
            BackendKind::Redis | BackendKind::Redlock => {
                // No persistence: a killed instance comes back empty, as the
                // Redis-docs setup the Redlock debate assumes.
                cmd.arg("--port")
                    .arg(node.client_listen.port().to_string())
                    .arg("--bind")
                    .arg(node.client_listen.ip().to_string())
                    .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                    .arg("--dir")
                    .arg(&node.data_dir);
                // Protected mode refuses every client not on loopback; a node in its
                // namespace is reached from the host, over the run's own bridge.
                if !node.client_listen.ip().is_loopback() {
                    cmd.args(["--protected-mode", "no"]);
                }
            }
            BackendKind::Etcd => {
                let url = |a: SocketAddr| format!("http://{a}");
                let peer_listen = node.peer_listen.expect("etcd nodes have peer addresses");
                let peer_advertise = node.peer_advertise.expect("etcd nodes have peer addresses");
                let initial_cluster = self
                    .nodes
                    .iter()
                    .filter_map(|n| Some(format!("{}={}", n.name, url(n.peer_advertise?))))
                    .collect::<Vec<_>>()
                    .join(",");
                // Short heartbeat and election timeouts: a paused leader is replaced
                // in about a second, which keeps runs and tests short.
                cmd.arg("--name")
                    .arg(&node.name)
                    .arg("--data-dir")
                    .arg(&node.data_dir)
                    .arg("--listen-client-urls")
                    .arg(url(node.client_listen))
                    .arg("--advertise-client-urls")
                    .arg(url(node.client_advertise))
                    .arg("--listen-peer-urls")
                    .arg(url(peer_listen))
                    .arg("--initial-advertise-peer-urls")
                    .arg(url(peer_advertise))
                    .arg("--initial-cluster")
                    .arg(initial_cluster)
                    .arg("--initial-cluster-state")
                    .arg(if rejoin { "existing" } else { "new" })
                    .arg("--initial-cluster-token")
                    .arg(&self.cluster_token)
                    .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
                    // Membership changes are lockcheck's own (re-admitting a wiped
                    // member right after a crash): the strict check would refuse them
                    // until the leader has seen its peers healthy for 5 s.
                    .arg("--strict-reconfig-check=false");
            }
        }
        Ok(cmd)
    }
}

/// The running servers of one backend. Dropping it stops them all.
#[derive(Debug)]
pub struct LocalCluster {
    plan: ClusterPlan,
    /// The process of each node, or none while it is killed.
    children: Vec<Option<Child>>,
    /// The nodes' namespaces, bridge and veths, when they have their own network;
    /// removed once the nodes have stopped.
    network: Option<Arc<Network>>,
    /// Each node frozen with the cgroup freezer, and the journal entry saying so.
    frozen: Vec<Option<(super::freezer::Frozen, u64)>>,
}

impl LocalCluster {
    /// Plans and starts a cluster, retrying with other ports when one turns out to be
    /// taken (another process may bind a port between our probe and the server's bind).
    pub async fn start(spec: ClusterSpec) -> Result<Self> {
        if spec.network == NetworkKind::Namespaces {
            let names: Vec<String> = node_names(spec.nodes);
            let network = Arc::new(Network::create(&netns::run_id(&spec.dir), &names)?);
            // Each node alone in its namespace: no port can be taken.
            let plan = ClusterPlan::plan(spec, Some(&network))?;
            if let Some(netns::OnNetwork(hook)) = &plan.spec.on_network {
                hook(&network, &plan.nodes)?;
            }
            return plan.start_on(Some(network)).await;
        }
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            match ClusterPlan::new(spec.clone())?.start().await {
                Err(e) if attempt < ATTEMPTS && is_port_taken(&e) => {
                    tracing::warn!("port taken while starting {:?}, retrying: {e:#}", spec.kind);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    pub fn kind(&self) -> BackendKind {
        self.plan.spec.kind
    }

    pub fn plan(&self) -> &ClusterPlan {
        &self.plan
    }

    pub fn nodes(&self) -> &[NodeSpec] {
        &self.plan.nodes
    }

    /// The nodes' own network, when they run in namespaces.
    pub fn network(&self) -> Option<Arc<Network>> {
        self.network.clone()
    }

    /// The addresses (`host:port`) clients should dial, one per node, in node order:
    /// what `backend::connect` takes.
    pub fn endpoints(&self) -> Vec<String> {
        self.plan
            .nodes
            .iter()
            .map(|n| n.client_advertise.to_string())
            .collect()
    }

    /// The process id of a running node, for faults that signal it (SIGSTOP, SIGKILL).
    pub fn pid(&self, node: &str) -> Option<u32> {
        let i = self.index(node).ok()?;
        self.children[i].as_ref().map(|c| c.id())
    }

    /// Whether the node's process is alive (running or stopped).
    pub fn is_running(&mut self, node: &str) -> Result<bool> {
        let i = self.index(node)?;
        self.reap(i);
        Ok(self.children[i].is_some())
    }

    /// Kills a node with SIGKILL, as a crash would: no shutdown, data directory kept.
    /// Killing a node that is already down does nothing.
    pub fn kill(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        if let Some(mut child) = self.children[i].take() {
            // SIGKILL ends a stopped process too; wait so it leaves no zombie and its
            // ports are free for the restart. A frozen one dies once thawed: it
            // runs nothing of its own in between.
            let _ = child.kill();
            // Should the thaw fail, the wait would never end: the journal keeps
            // the freeze for `recover` instead.
            self.thaw_index(i)?;
            child
                .wait()
                .with_context(|| format!("waiting for killed node {node}"))?;
        }
        Ok(())
    }

    /// Starts a node that is down (killed, or exited) again, on the same ports and
    /// data directory, and waits until it serves. A node still running is an error:
    /// a fault must kill it first, so that the history says so.
    pub async fn restart(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        self.respawn(i).await?;
        self.wait_ready(&[i]).await
    }

    /// Starts several nodes that are down, all before waiting for any: in a quorum
    /// system (etcd, ZooKeeper) a node that comes back alone among dead peers never
    /// becomes ready, so a majority restarted one at a time would wait forever.
    pub async fn restart_together(&mut self, nodes: &[String]) -> Result<()> {
        // Try every node; report the first failure after all were tried.
        let (mut started, mut first) = (Vec::new(), None);
        for node in nodes {
            let i = self.index(node)?;
            match self.respawn(i).await {
                Ok(()) => started.push(i),
                Err(e) => {
                    first.get_or_insert(e.context(format!("restarting {node}")));
                }
            }
        }
        let ready = self.wait_ready(&started).await;
        first.map_or(ready, Err)
    }

    /// Spawns node `i` again once its killed process is gone; the caller waits for
    /// it to serve.
    async fn respawn(&mut self, i: usize) -> Result<()> {
        let node = self.plan.nodes[i].name.clone();
        // A fault may just have sent SIGKILL itself: give the process a moment to go.
        let deadline = Instant::now() + Duration::from_millis(500);
        self.reap(i);
        while self.children[i].is_some() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            self.reap(i);
        }
        if let Some(child) = &self.children[i] {
            bail!(
                "node {node} is still running (pid {}): kill it before restarting",
                child.id()
            );
        }
        // An etcd member whose data was wiped cannot restart as itself (etcd refuses:
        // "member has already been bootstrapped"): the cluster forgets it and takes
        // it back as a new member, with a new member id, that catches up from the
        // leader.
        let rejoin = self.kind() == BackendKind::Etcd
            && !self.plan.nodes[i].data_dir.join("member").exists();
        if rejoin {
            self.etcd_readmit(i)
                .await
                .with_context(|| format!("re-admitting wiped member {node}"))?;
        }
        self.spawn(i, rejoin)
    }

    /// Freezes a running node's processes (its server and what it forked) with
    /// the cgroup freezer; journaled, so that `recover` thaws it.
    pub fn freeze(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        self.reap(i);
        let Some(child) = &self.children[i] else {
            bail!("node {node} is not running: nothing to freeze");
        };
        if self.frozen[i].is_some() {
            return Ok(());
        }
        let root = child.id() as i32;
        let journal = crate::journal::Journal::for_run(&self.plan.spec.dir)?;
        let cgroup = super::freezer::cgroup_for(node)?;
        let id = journal.record(crate::journal::Effect::Frozen {
            node: node.to_string(),
            cgroup: cgroup.clone(),
        })?;
        match super::freezer::freeze(&cgroup, root) {
            Ok(frozen) => {
                self.frozen[i] = Some((frozen, id));
                Ok(())
            }
            // Nothing stays frozen: a failed freeze thaws and removes its cgroup.
            Err(e) => {
                journal.undone(id)?;
                Err(e.context(format!("freezing node {node}")))
            }
        }
    }

    /// Thaws a node [`LocalCluster::freeze`] froze (one not frozen: nothing to do).
    pub fn thaw(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        self.thaw_index(i)
    }

    fn thaw_index(&mut self, i: usize) -> Result<()> {
        if let Some((frozen, id)) = self.frozen[i].take() {
            frozen
                .thaw()
                .with_context(|| format!("thawing node {}", self.plan.nodes[i].name))?;
            crate::journal::Journal::for_run(&self.plan.spec.dir)?.undone(id)?;
        }
        Ok(())
    }

    /// Removes member `i` from the running etcd cluster and adds it again, empty.
    /// Membership changes need a leader (a follower without one drops them), so this
    /// waits for one and tries again until the ready timeout; each try starts from
    /// the member list, so a change that took effect unseen is not made twice.
    async fn etcd_readmit(&mut self, i: usize) -> Result<()> {
        let running: Vec<(String, SocketAddr)> = (0..self.plan.nodes.len())
            .filter(|&j| self.children[j].is_some())
            .map(|j| {
                (
                    self.plan.nodes[j].name.clone(),
                    self.plan.nodes[j].client_listen,
                )
            })
            .collect();
        let node = &self.plan.nodes[i];
        let peer = node
            .peer_advertise
            .map(|a| format!("http://{a}"))
            .context("an etcd member without a peer address")?;
        etcd_readmit(
            &node.name,
            &running,
            self.plan.nodes.len(),
            peer,
            self.plan.spec.ready_timeout,
        )
        .await
    }

    /// Empties the data directory of a node that is down, so that its restart comes
    /// back with nothing: a Redis without its keys, an etcd member without its log
    /// (re-admitted as a new member at restart).
    pub fn wipe(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        self.reap(i);
        if let Some(child) = &self.children[i] {
            bail!(
                "node {node} is still running (pid {}): kill it before wiping its data",
                child.id()
            );
        }
        let data = &self.plan.nodes[i].data_dir;
        match fs::remove_dir_all(data) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("wiping {}", data.display()))
            }
            _ => Ok(()),
        }
    }

    /// The node that currently leads, where the backend has one: the etcd member
    /// that a quorum of members names as leader, the one Redis of `redis`; none for
    /// Redlock's independent servers or while etcd elects.
    pub async fn leader(&self) -> Option<String> {
        leader(&self.plan, &self.running()).await
    }

    /// The nodes whose process is alive (paused ones too), by name and client
    /// address: whom to ask who leads.
    fn running(&self) -> Vec<(String, SocketAddr)> {
        (0..self.plan.nodes.len())
            .filter(|&j| self.children[j].is_some())
            .map(|j| {
                (
                    self.plan.nodes[j].name.clone(),
                    self.plan.nodes[j].client_listen,
                )
            })
            .collect()
    }

    /// The running server that says it leads (`srvr`: `Mode: leader`, or
    /// `standalone` for a single server).
    /// Stops every node: SIGCONT (a paused node cannot act on SIGTERM), SIGTERM, and
    /// SIGKILL for any still there after the grace. Also what drop does.
    pub fn stop(&mut self) {
        let running: Vec<usize> = (0..self.children.len())
            .filter(|&i| self.children[i].is_some())
            .collect();
        for i in 0..self.frozen.len() {
            if let Err(e) = self.thaw_index(i) {
                tracing::warn!("{e:#}");
            }
        }
        for &i in &running {
            if let Some(child) = &self.children[i] {
                let pid = Pid::from_raw(child.id() as i32);
                let _ = kill(pid, Signal::SIGCONT);
                let _ = kill(pid, Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + self.plan.spec.stop_grace;
        // Members of a quorum system (etcd) left without a quorum cannot shut down
        // cleanly: a leader waits out its leadership-transfer timeout for peers that
        // are gone. Once a majority has exited, the rest get SIGKILL; their logs are
        // fsynced at every commit, so nothing a restart needs is lost.
        let quorum = self.plan.nodes.len() / 2 + 1;
        let quorum_gone = |c: &Self| {
            matches!(c.kind(), BackendKind::Etcd)
                && c.children.iter().filter(|c| c.is_none()).count() >= quorum
        };
        loop {
            for &i in &running {
                self.reap(i);
            }
            if running.iter().all(|&i| self.children[i].is_none())
                || quorum_gone(self)
                || Instant::now() >= deadline
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let without_quorum = quorum_gone(self);
        for &i in &running {
            if let Some(mut child) = self.children[i].take() {
                if !without_quorum {
                    tracing::warn!(
                        "node {} ignored SIGTERM for {:?}: killing it",
                        self.plan.nodes[i].name,
                        self.plan.spec.stop_grace
                    );
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // Every server has exited: its namespace goes at once.
        if let Some(net) = &self.network {
            if let Err(e) = net.remove() {
                tracing::warn!("{e:#}");
            }
        }
    }

    fn index(&self, node: &str) -> Result<usize> {
        self.plan
            .nodes
            .iter()
            .position(|n| n.name == node)
            .with_context(|| format!("no node named {node} in this {:?} cluster", self.kind()))
    }

    /// Forgets a node's process if it has exited.
    fn reap(&mut self, i: usize) {
        if let Some(child) = &mut self.children[i] {
            if !matches!(child.try_wait(), Ok(None)) {
                self.children[i] = None;
            }
        }
    }

    fn spawn(&mut self, i: usize, rejoin: bool) -> Result<()> {
        let node = &self.plan.nodes[i];
        fs::create_dir_all(&node.data_dir)
            .with_context(|| format!("creating {}", node.data_dir.display()))?;
        // Append: a restarted node's log follows its earlier life.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log_path)
            .with_context(|| format!("opening {}", node.log_path.display()))?;
        if let Some((init, what)) = self.plan.init_command(i)? {
            super::setup::run_to_end(init, node, what)?;
        }
        let mut cmd = self.plan.command(i, rejoin)?;
        if let Some(Prepare(prepare)) = &self.plan.spec.prepare {
            prepare(node, &mut cmd)
                .with_context(|| format!("preparing node {} to start", node.name))?;
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: a Ctrl-C at the terminal reaches lockcheck, which
            // stops the servers itself, in order, after resuming any it paused.
            .process_group(0);
        // Open until the spawn returns: the child enters it before it execs.
        let namespace = match &self.network {
            Some(net) => Some(net.open(&node.name)?),
            None => None,
        };
        if let Some(ns) = &namespace {
            use std::os::fd::AsRawFd;
            let fd = ns.as_raw_fd();
            // SAFETY: between fork and exec the closure only makes one syscall.
            unsafe { cmd.pre_exec(move || netns::enter(fd)) };
        }
        let child = cmd.spawn().with_context(|| {
            format!(
                "starting node {} ({})",
                node.name,
                self.plan.binary.display()
            )
        })?;
        let pid = child.id() as i32;
        self.children[i] = Some(child);
        // Journaled the moment it exists, not once it serves: a controller killed
        // while a restarted node is still coming up must not leave it to run on,
        // unknown to `lockcheck recover`.
        // One already gone cannot be left behind; the readiness wait reports it.
        if let Ok(proc) = Proc::of(node.name.clone(), pid) {
            Journal::for_run(&self.plan.spec.journal_dir)?.record(Effect::Process(proc))?;
        }
        Ok(())
    }

    /// Waits until each of `nodes` answers its readiness check; a node that exits
    /// or stays silent past the timeout is an error carrying its log's tail.
    async fn wait_ready(&mut self, nodes: &[usize]) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.plan.spec.ready_timeout;
        let mut pending: Vec<usize> = nodes.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for &i in &pending {
                let node = &self.plan.nodes[i];
                if let Some(child) = &mut self.children[i] {
                    if let Ok(Some(status)) = child.try_wait() {
                        self.children[i] = None;
                        return Err(ClusterError::Exited {
                            node: node.name.clone(),
                            status: status.to_string(),
                            log: node.log_path.clone(),
                            tail: log_tail(&node.log_path),
                        }
                        .into());
                    }
                }
                if !probe(self.plan.spec.kind, node.client_listen).await {
                    still.push(i);
                }
            }
            pending = still;
            if let Some(&i) = pending.first() {
                if Instant::now() >= deadline {
                    let node = &self.plan.nodes[i];
                    return Err(ClusterError::NotReady {
                        node: node.name.clone(),
                        secs: started.elapsed().as_secs_f64(),
                        log: node.log_path.clone(),
                        tail: log_tail(&node.log_path),
                    }
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        Ok(())
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
        // Its servers are gone: their ports may serve the next cluster.
        let mut seen = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = seen.as_mut() {
            let addrs = self
                .plan
                .nodes
                .iter()
                .flat_map(|n| [Some(n.client_listen), n.peer_listen, n.election])
                .flatten();
            // Namespaced nodes' ports were never handed out.
            for a in addrs.filter(|a| a.ip().is_loopback()) {
                seen.remove(&a.port());
            }
        }
    }
}

/// Removes member `node` from the running etcd cluster (`running`: the members up,
/// by name and client address; `total`: the cluster's size) and adds it again,
/// empty, at `peer`. Membership changes need a leader (a follower without one drops
/// them), so this waits for one and tries again until `timeout`; each try starts
/// from the member list, so a change that took effect unseen is not made twice.
pub(super) async fn etcd_readmit(
    node: &str,
    running: &[(String, SocketAddr)],
    total: usize,
    peer: String,
    timeout: Duration,
) -> Result<()> {
    let others: Vec<String> = running
        .iter()
        .filter(|(name, _)| name != node)
        .map(|(_, addr)| format!("http://{addr}"))
        .collect();
    let request = Duration::from_secs(2);
    let options = etcd_client::ConnectOptions::new()
        .with_timeout(request)
        .with_connect_timeout(request);
    let mut etcd = etcd_client::Client::connect(&others, Some(options))
        .await
        .with_context(|| format!("connecting to {}", others.join(",")))?;
    let deadline = Instant::now() + timeout;
    loop {
        let attempt = async {
            let members = etcd.member_list().await.context("listing members")?;
            let old = members
                .members()
                .iter()
                .find(|m| m.peer_urls().contains(&peer));
            if let Some(old) = old {
                etcd.member_remove(old.id())
                    .await
                    .context("removing the old member")?;
            }
            etcd.member_add([peer.clone()], None)
                .await
                .context("adding it again")?;
            anyhow::Ok(())
        };
        match attempt.await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {
                while etcd_leader(running, total).await.is_none() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// The member that a quorum of the cluster's `total` members names as leader, asking
/// each of `running` (name, client address) for its status; none while etcd elects.
/// The node of `plan` that leads now, asking the `running` ones (name, an address
/// this machine reaches it at): the runtimes differ only in those addresses.
pub(super) async fn leader(plan: &ClusterPlan, running: &[(String, SocketAddr)]) -> Option<String> {
    let first = || plan.nodes.first().map(|n| n.name.clone());
    match plan.spec.kind {
        BackendKind::Redis => first(),
        BackendKind::Redlock => None,
        BackendKind::Etcd => etcd_leader(running, plan.nodes.len()).await,
        BackendKind::Zookeeper => {
            for (name, addr) in running {
                if super::zookeeper::leads(*addr).await {
                    return Some(name.clone());
                }
            }
            None
        }
        // A JetStream cluster: the leader of the lock's stream.
        BackendKind::Nats if plan.nodes.len() > 1 => super::nats::stream_leader(running).await,
        // One server: it is the one every client talks to.
        BackendKind::PostgresAdvisory
        | BackendKind::PostgresLease
        | BackendKind::Nats
        | BackendKind::Mariadb => first(),
    }
}

/// Asks every running member for its status: its own member id and its leader's;
/// the leader is the one a quorum names.
pub(super) async fn etcd_leader(running: &[(String, SocketAddr)], total: usize) -> Option<String> {
    let mut ids = Vec::new();
    let mut votes: Vec<String> = Vec::new();
    for (name, addr) in running {
        if let Some((id, leader)) = etcd_status(*addr).await {
            ids.push((id, name.clone()));
            votes.push(leader);
        }
    }
    let quorum = total / 2 + 1;
    let named = votes
        .iter()
        .find(|v| votes.iter().filter(|w| w == v).count() >= quorum)?;
    ids.into_iter()
        .find(|(id, _)| id == named)
        .map(|(_, name)| name)
}

/// Whether a node answers as a server of its kind does when it is ready to serve:
/// Redis replies `+PONG` to `PING`; an etcd member's `/health` says `"health":"true"`
/// once the cluster has a leader.
pub(super) async fn probe(kind: BackendKind, addr: SocketAddr) -> bool {
    match kind {
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => {
            return super::postgres::ready(addr).await
        }
        BackendKind::Nats => return super::nats::ready(addr).await,
        _ => {}
    }
    let ask = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let (request, healthy): (&[u8], &str) = match kind {
            BackendKind::Redis | BackendKind::Redlock => (b"PING\r\n", "+PONG"),
            BackendKind::Etcd => (
                b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
                "\"health\":\"true\"",
            ),
            BackendKind::PostgresAdvisory | BackendKind::PostgresLease | BackendKind::Nats => {
                return None
            }
            // The server's greeting packet carries its version, MariaDB's included.
            BackendKind::Mariadb => (b"", "MariaDB"),
            BackendKind::Zookeeper => (b"srvr", super::zookeeper::SERVING),
        };
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

/// One etcd member's status over its HTTP gateway: (its member id, its leader's id),
/// both as etcd prints them (decimal strings); none if it does not answer in time or
/// has no leader.
async fn etcd_status(addr: SocketAddr) -> Option<(String, String)> {
    let ask = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let body = "{}";
        let request = format!(
            "POST /v3/maintenance/status HTTP/1.0\r\nHost: {addr}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(request.as_bytes()).await.ok()?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).await.ok()?;
        let reply = String::from_utf8_lossy(&reply);
        let json: serde_json::Value = serde_json::from_str(reply.split("\r\n\r\n").nth(1)?).ok()?;
        let id = json["header"]["member_id"].as_str()?.to_string();
        let leader = json["leader"].as_str().filter(|l| *l != "0")?.to_string();
        Some((id, leader))
    };
    tokio::time::timeout(Duration::from_secs(1), ask)
        .await
        .ok()
        .flatten()
}

/// The names of a cluster's `n` nodes: n1..nN.
fn node_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i}")).collect()
}

/// The ports a backend's servers usually listen on (client, peer, election), for
/// nodes in namespaces of their own, where nothing else listens.
fn usual_ports(kind: BackendKind) -> [u16; 3] {
    match kind {
        BackendKind::Redis | BackendKind::Redlock => [6379, 0, 0],
        BackendKind::Etcd => [2379, 2380, 0],
        BackendKind::Zookeeper => [2181, 2888, 3888],
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => [5432, 0, 0],
        BackendKind::Mariadb => [3306, 0, 0],
        BackendKind::Nats => [4222, 6222, 0],
    }
}

/// Ports handed out by this process to clusters still alive: the kernel may give the
/// same ephemeral port to two quick `bind(0)`s once the first listener is closed.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback address whose port nothing listens on right now.
pub(super) fn free_loopback_addr() -> Result<SocketAddr> {
    for _ in 0..100 {
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free loopback port")?;
        let mut seen = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if seen.get_or_insert_with(HashSet::new).insert(addr.port()) {
            return Ok(addr);
        }
    }
    bail!("no free loopback port found in 100 tries")
}

/// Whether a start failed because a server could not bind its port.
fn is_port_taken(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<ClusterError>().is_some_and(|ce| match ce {
            ClusterError::Exited { tail, .. } | ClusterError::NotReady { tail, .. } => {
                tail.to_ascii_lowercase().contains("address already in use")
            }
            ClusterError::MissingBinary { .. } | ClusterError::Docker(_) => false,
        })
    })
}

/// The last lines of a node's log, for error messages.
pub(super) fn log_tail(path: &Path) -> String {
    const TAIL: u64 = 2000;
    let read = || -> std::io::Result<String> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(TAIL)))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_else(|e| format!("(could not read the log: {e})"))
}
