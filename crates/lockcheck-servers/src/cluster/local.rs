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
use super::node::{empty, log_tail, NodeSpec};
use super::plan::{ClusterPlan, ClusterSpec, NetworkKind, Prepare, DATA_DIR};
use super::recipe::{detached_pid, ClusterError, Init, ServerRecipe};
use super::recipes::recipe;
use crate::backend::BackendKind;
use anyhow::{bail, Context, Result};
use lockcheck_journal::{Effect, Journal, Proc};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl ClusterSpec {
    /// The backend's usual shape (its recipe's default number of nodes) with its
    /// files under `dir`.
    pub fn new(kind: BackendKind, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        ClusterSpec {
            kind,
            nodes: recipe(kind).default_nodes(),
            journal_dir: dir.clone(),
            dir,
            binary: None,
            ready_timeout: recipe(kind).ready_timeout(),
            stop_grace: Duration::from_secs(5),
            prepare: None,
            prepare_on_host: None,
            on_hosts: None,
            network: NetworkKind::Loopback,
            on_network: None,
            lease: None,
            options: Default::default(),
        }
    }
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
            bail!("a {} cluster needs at least one node", spec.kind);
        }
        let recipe = recipe(spec.kind);
        let binary = recipe.binary().resolve(spec.binary.as_deref())?;
        let ports = recipe.ports(spec.nodes);
        let names: Vec<String> = node_names(spec.nodes);
        let home = super::home::Home::new(
            spec.dir.join(DATA_DIR),
            recipe.refuses_root(),
            &spec.journal_dir,
        )?;
        let nodes = names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                // A namespace of its own has the backend's usual ports free.
                let addr = |port: u16| match network {
                    None => free_loopback_addr(),
                    Some(net) => Ok(SocketAddr::from((net.addr(i), port))),
                };
                let client = addr(ports.client)?;
                let peer = ports.peer.map(addr).transpose()?;
                let election = ports.election.map(addr).transpose()?;
                Ok(NodeSpec {
                    data_dir: home.dir().join(&name),
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
            home: Arc::new(home),
            coordinator: Vec::new(),
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
        let coordinator = match self.recipe().coordinator() {
            Some(kind) => Some(Box::new(self.start_coordinator(kind).await?)),
            None => None,
        };
        self.start_nodes(network, coordinator).await
    }

    /// Runs every node (after the coordinator, if any) and waits until all serve.
    async fn start_nodes(
        self,
        network: Option<Arc<Network>>,
        coordinator: Option<Box<LocalCluster>>,
    ) -> Result<LocalCluster> {
        let mut cluster = LocalCluster {
            children: (0..self.nodes.len()).map(|_| None).collect(),
            frozen: (0..self.nodes.len()).map(|_| None).collect(),
            plan: self,
            network,
            coordinator,
        };
        if let Some(c) = &cluster.coordinator {
            cluster.plan.coordinator = c.endpoints();
        }
        // All members first, then the wait: an etcd member is not healthy until a
        // quorum of its peers is up.
        for i in 0..cluster.plan.nodes.len() {
            cluster.spawn(i, false).await?;
            cluster.wait_founded(i).await;
        }
        let all: Vec<usize> = (0..cluster.plan.nodes.len()).collect();
        cluster.wait_ready(&all).await?;
        Ok(cluster)
    }

    /// The recipe of the backend's servers.
    pub fn recipe(&self) -> &'static dyn ServerRecipe {
        recipe(self.spec.kind)
    }

    /// Starts the one-node cluster of `kind` the nodes need first, its files under
    /// `<dir>/coordinator/`, journaled in the run's journal.
    /// A coordinator needs none itself.
    async fn start_coordinator(&self, kind: BackendKind) -> Result<LocalCluster> {
        let mut spec = ClusterSpec::new(kind, self.spec.dir.join("coordinator"));
        spec.nodes = 1;
        spec.journal_dir = self.spec.journal_dir.clone();
        let what = || format!("starting the {kind} the {} nodes need", self.spec.kind);
        if recipe(kind).coordinator().is_some() {
            bail!("{}: it needs a coordinator itself", what());
        }
        let plan = ClusterPlan::new(spec).with_context(what)?;
        fs::create_dir_all(plan.spec.dir.join("nodes"))
            .with_context(|| format!("creating {}", plan.spec.dir.join("nodes").display()))?;
        plan.start_nodes(None, None).await.with_context(what)
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
    /// The coordinator the nodes need (Patroni's etcd), stopped after them.
    coordinator: Option<Box<LocalCluster>>,
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
                    tracing::warn!("port taken while starting {}, retrying: {e:#}", spec.kind);
                    spec.forget_data()?;
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
        let recipe = self.plan.recipe();
        self.plan.nodes.iter().map(|n| recipe.endpoint(n)).collect()
    }

    /// The process id of a running node, for faults that signal it (SIGSTOP, SIGKILL).
    pub fn pid(&self, node: &str) -> Option<u32> {
        let i = self.plan.index(node).ok()?;
        self.children[i].as_ref().map(|c| c.id())
    }

    /// Whether the node's process is alive (running or stopped).
    pub fn is_running(&mut self, node: &str) -> Result<bool> {
        let i = self.plan.index(node)?;
        self.reap(i);
        Ok(self.children[i].is_some())
    }

    /// Kills a node with SIGKILL, as a crash would: no shutdown, data directory kept.
    /// Killing a node that is already down does nothing.
    pub async fn kill(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if let Some(mut child) = self.children[i].take() {
            // SIGKILL ends a stopped process too; wait so it leaves no zombie and its
            // ports are free for the restart. A frozen one dies once thawed: it
            // runs nothing of its own in between.
            let _ = child.kill();
            // Should the thaw fail, the wait would never end: the journal keeps
            // the freeze for `recover` instead.
            self.thaw_index(i).await?;
            // The kernel tears a big process down (a JVM's heap) in its own time:
            // waited for off the runtime, whose clock times the clients' ops.
            off_runtime(move || Ok(child.wait()?))
                .await
                .with_context(|| format!("waiting for killed node {node}"))?;
        }
        Ok(())
    }

    /// Starts a node that is down (killed, or exited) again, on the same ports and
    /// data directory, and waits until it serves. A node still running is an error:
    /// a fault must kill it first, so that the history says so.
    pub async fn restart(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
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
            let i = self.plan.index(node)?;
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
        // A member whose data was wiped may need the others to take it back first
        // (etcd: as a new member, that catches up from the leader).
        let rejoin = self
            .plan
            .recipe()
            .readmit(&self.plan, i, &self.running())
            .await?;
        self.spawn(i, rejoin).await
    }

    /// Freezes a running node's processes (its server and what it forked) with
    /// the cgroup freezer; journaled, so that `recover` thaws it.
    pub async fn freeze(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.reap(i);
        let Some(child) = &self.children[i] else {
            bail!("node {node} is not running: nothing to freeze");
        };
        if self.frozen[i].is_some() {
            return Ok(());
        }
        let root = child.id() as i32;
        let journal = lockcheck_journal::Journal::for_run(&self.plan.spec.dir)?;
        let cgroup = super::freezer::cgroup_for(node)?;
        let id = journal.record(lockcheck_journal::Effect::Frozen {
            node: node.to_string(),
            cgroup: cgroup.clone(),
        })?;
        let dir = cgroup.clone();
        // Moving the processes and waiting for the kernel to freeze them takes
        // from microseconds to the freezer's own timeout: off the runtime.
        match off_runtime(move || super::freezer::freeze(&dir, root)).await {
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
    pub async fn thaw(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.thaw_index(i).await
    }

    /// Thaws node `i` if it is frozen, off the runtime.
    async fn thaw_index(&mut self, i: usize) -> Result<()> {
        let Some(frozen) = self.frozen[i].take() else {
            return Ok(());
        };
        let (name, dir) = (self.plan.nodes[i].name.clone(), self.plan.spec.dir.clone());
        off_runtime(move || thaw_frozen(frozen, &name, &dir)).await
    }

    /// Empties the data directory of a node that is down, so that its restart comes
    /// back with nothing: a Redis without its keys, an etcd member without its log
    /// (re-admitted as a new member at restart).
    pub async fn wipe(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.reap(i);
        if let Some(child) = &self.children[i] {
            bail!(
                "node {node} is still running (pid {}): kill it before wiping its data",
                child.id()
            );
        }
        let data = self.plan.nodes[i].data_dir.clone();
        // A database's files are many: removed off the runtime.
        off_runtime(move || empty(&data).with_context(|| format!("wiping {}", data.display())))
            .await
    }

    /// The node that currently leads, where the backend has one (see
    /// [`ServerRecipe::leader`]).
    pub async fn leader(&self) -> Option<String> {
        self.plan.recipe().leader(&self.plan, &self.running()).await
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

    /// Stops every node: SIGCONT (a paused node cannot act on SIGTERM), SIGTERM, and
    /// SIGKILL for any still there after the grace. Waits without holding up the
    /// runtime: its other tasks (a run's clients) go on meanwhile.
    pub async fn stop(&mut self) {
        for i in 0..self.frozen.len() {
            if let Err(e) = self.thaw_index(i).await {
                tracing::warn!("{e:#}");
            }
        }
        let running = self.terminate();
        let deadline = Instant::now() + self.plan.spec.stop_grace;
        while !self.stopped(&running, deadline) {
            tokio::time::sleep(STOP_POLL).await;
        }
        let killed = self.kill_rest(&running);
        self.reap_killed(killed).await;
        let (leftovers, grace) = (self.leftovers(), self.plan.spec.stop_grace);
        let _ = off_runtime(move || {
            kill_leftovers(&leftovers, grace);
            Ok(())
        })
        .await;
        // The coordinator (a cluster of its own) stops as it drops.
        if let Some(c) = self.coordinator.take() {
            let _ = off_runtime(move || {
                drop(c);
                Ok(())
            })
            .await;
        }
    }

    /// Waits for the killed nodes off the runtime, then removes the nodes' network.
    async fn reap_killed(&self, killed: Vec<Child>) {
        let network = self.network.clone();
        let _ = off_runtime(move || {
            reap_all(killed);
            remove_network(network.as_deref());
            Ok(())
        })
        .await;
    }

    /// [`LocalCluster::stop`] without the wait for a clean shutdown (a JVM takes
    /// a third of a second), for servers whose data goes with the run: SIGKILL
    /// at once. A cluster with a coordinator, or whose servers start processes
    /// apart from themselves, stops as usual: those go only on a clean shutdown.
    pub async fn discard(&mut self) {
        let detaches = (0..self.plan.nodes.len())
            .any(|i| self.plan.recipe().detached(&self.plan, i).is_some());
        if self.coordinator.is_some() || detaches {
            return self.stop().await;
        }
        for i in 0..self.frozen.len() {
            if let Err(e) = self.thaw_index(i).await {
                tracing::warn!("{e:#}");
            }
        }
        let killed: Vec<Child> = self.children.iter_mut().filter_map(Option::take).collect();
        for child in &killed {
            // A paused server dies of SIGKILL too; SIGCONT spares it nothing.
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        }
        self.reap_killed(killed).await;
    }

    /// What the nodes' servers started apart from themselves and left running
    /// ([`ServerRecipe::detached`]).
    fn leftovers(&self) -> Vec<u32> {
        (0..self.plan.nodes.len())
            .filter_map(|i| self.plan.recipe().detached(&self.plan, i))
            .filter_map(|d| detached_pid(&d.pid_file, &d.owner))
            .collect()
    }

    /// [`LocalCluster::stop`] for drop, which cannot wait asynchronously.
    fn stop_now(&mut self) {
        for i in 0..self.frozen.len() {
            if let Some(frozen) = self.frozen[i].take() {
                let name = &self.plan.nodes[i].name;
                if let Err(e) = thaw_frozen(frozen, name, &self.plan.spec.dir) {
                    tracing::warn!("{e:#}");
                }
            }
        }
        let running = self.terminate();
        let deadline = Instant::now() + self.plan.spec.stop_grace;
        while !self.stopped(&running, deadline) {
            std::thread::sleep(STOP_POLL);
        }
        reap_all(self.kill_rest(&running));
        remove_network(self.network.as_deref());
        kill_leftovers(&self.leftovers(), self.plan.spec.stop_grace);
        // The coordinator, dropped after this, stops itself.
    }

    /// SIGCONT and SIGTERM to every node running; returns which they were.
    fn terminate(&mut self) -> Vec<usize> {
        let running: Vec<usize> = (0..self.children.len())
            .filter(|&i| self.children[i].is_some())
            .collect();
        for &i in &running {
            if let Some(child) = &self.children[i] {
                let pid = Pid::from_raw(child.id() as i32);
                let _ = kill(pid, Signal::SIGCONT);
                let _ = kill(pid, Signal::SIGTERM);
            }
        }
        running
    }

    /// Whether the wait for `running` to exit is over: all have, or a quorum
    /// system has lost its quorum, or the grace ran out.
    fn stopped(&mut self, running: &[usize], deadline: Instant) -> bool {
        for &i in running {
            self.reap(i);
        }
        running.iter().all(|&i| self.children[i].is_none())
            || self.quorum_gone()
            || Instant::now() >= deadline
    }

    /// Members of a quorum system left without a quorum may not shut down
    /// cleanly (see [`ServerRecipe::stops_with_quorum`]): once a majority has
    /// exited, the rest get SIGKILL.
    fn quorum_gone(&self) -> bool {
        let quorum = self.plan.nodes.len() / 2 + 1;
        self.plan.recipe().stops_with_quorum()
            && self.children.iter().filter(|c| c.is_none()).count() >= quorum
    }

    /// SIGKILL to those of `running` still there; returns them, to be reaped.
    fn kill_rest(&mut self, running: &[usize]) -> Vec<Child> {
        let without_quorum = self.quorum_gone();
        let mut killed = Vec::new();
        for &i in running {
            if let Some(mut child) = self.children[i].take() {
                if !without_quorum {
                    tracing::warn!(
                        "node {} ignored SIGTERM for {:?}: killing it",
                        self.plan.nodes[i].name,
                        self.plan.spec.stop_grace
                    );
                }
                let _ = child.kill();
                killed.push(child);
            }
        }
        killed
    }

    /// Forgets a node's process if it has exited.
    fn reap(&mut self, i: usize) {
        if let Some(child) = &mut self.children[i] {
            if !matches!(child.try_wait(), Ok(None)) {
                self.children[i] = None;
            }
        }
    }

    async fn spawn(&mut self, i: usize, rejoin: bool) -> Result<()> {
        let node = &self.plan.nodes[i];
        fs::create_dir_all(&node.data_dir)
            .with_context(|| format!("creating {}", node.data_dir.display()))?;
        // Append: a restarted node's log follows its earlier life.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log_path)
            .with_context(|| format!("opening {}", node.log_path.display()))?;
        let recipe = self.plan.recipe();
        if let Some(Init { command, what }) = recipe.init(&self.plan, i)? {
            super::template::init(command, node, what, &self.plan.binary).await?;
            recipe.after_init(&self.plan, i)?;
        }
        let mut cmd = recipe.command(&self.plan, i, rejoin)?;
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
        let journal = Journal::for_run(&self.plan.spec.journal_dir)?;
        if let Ok(proc) = Proc::of(node.name.clone(), pid) {
            journal.record(Effect::Process(proc))?;
        }
        // What it will start apart from itself, before it can: a controller killed
        // once it has must leave it to `recover`, not to run on.
        if let Some(d) = self.plan.recipe().detached(&self.plan, i) {
            journal.record(Effect::Detached {
                node: node.name.clone(),
                pid_file: d.pid_file,
                owner: d.owner,
            })?;
        }
        Ok(())
    }

    /// Waits until node `i`, just started, is far enough along for the next
    /// member ([`ServerRecipe::founded`]); one that exits or takes past the
    /// readiness timeout is left for [`LocalCluster::wait_ready`] to report.
    async fn wait_founded(&mut self, i: usize) {
        let deadline = Instant::now() + self.plan.spec.ready_timeout;
        let recipe = self.plan.recipe();
        while !recipe.founded(&self.plan.nodes[i]).await && Instant::now() < deadline {
            self.reap(i);
            if self.children[i].is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until each of `nodes` answers its readiness check; a node that exits
    /// or stays silent past the timeout is an error carrying its log's tail.
    async fn wait_ready(&mut self, nodes: &[usize]) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.plan.spec.ready_timeout;
        let mut pending: Vec<usize> = nodes.to_vec();
        while !pending.is_empty() {
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
            }
            // Asked all at once: a member that has yet to answer holds up none
            // of the others.
            let recipe = self.plan.recipe();
            let answers = futures_util::future::join_all(
                pending
                    .iter()
                    .map(|&i| recipe.ready(self.plan.nodes[i].client_listen)),
            )
            .await;
            pending = pending
                .iter()
                .zip(answers)
                .filter_map(|(&i, ready)| (!ready).then_some(i))
                .collect();
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
        self.stop_now();
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

/// The names of a cluster's `n` nodes: n1..nN.
fn node_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i}")).collect()
}

/// How often a stop looks whether the nodes have exited.
const STOP_POLL: Duration = Duration::from_millis(10);

/// Runs `f`, which blocks (waits for a process, spins on the kernel, runs a
/// program), on a thread of its own: the run's runtime has one thread, which
/// also times the clients' ops, and must not stall while a node stops.
async fn off_runtime<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f).await?
}

/// Thaws a frozen node and strikes the freeze from the run's journal.
fn thaw_frozen(
    (frozen, id): (super::freezer::Frozen, u64),
    name: &str,
    run_dir: &Path,
) -> Result<()> {
    frozen
        .thaw()
        .with_context(|| format!("thawing node {name}"))?;
    lockcheck_journal::Journal::for_run(run_dir)?.undone(id)
}

/// Kills processes the servers left behind (once the servers are gone) and waits,
/// up to `grace`, until they are gone too (a zombie init has yet to reap counts as
/// gone).
fn kill_leftovers(pids: &[u32], grace: Duration) {
    for &pid in pids {
        tracing::warn!("a detached server process {pid} outlived its node: killing it");
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    let alive = |pid: &u32| {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().to_string())
            })
            .is_some_and(|rest| !rest.starts_with('Z'))
    };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && pids.iter().any(alive) {
        std::thread::sleep(STOP_POLL);
    }
}

/// Waits for killed servers to go, so that none is left a zombie.
fn reap_all(killed: Vec<Child>) {
    for mut child in killed {
        let _ = child.wait();
    }
}

/// Every server has exited: its namespace goes at once.
fn remove_network(network: Option<&Network>) {
    if let Some(net) = network {
        if let Err(e) = net.remove() {
            tracing::warn!("{e:#}");
        }
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
