//! The `ssh` runtime: one server node per host of `backend.hosts`, started,
//! signalled and stopped there over SSH ([`host`]), with the same recipes and
//! command lines as local processes, on the backend's usual ports at the host's
//! address (what its SSH configuration calls `HostName`, resolved here). The
//! clients and the resource stay on this machine and dial those addresses
//! (the clients may run on the hosts instead: `run::on_hosts`, through
//! `remote.rs`). Servers already running there are [`attach`]'s.
//!
//! Each node's data and log live on its host under
//! `<remote_dir>/lockcheck-<run>-<node>/` (the directory is journaled before it
//! is made, and removed at the end); its log is copied into the run directory's
//! `nodes/<node>.log` when the cluster stops. Every server is journaled as it
//! spawns, every SIGSTOP before it is sent, each with its host, so that
//! `lockcheck recover` reaches the hosts again after a controller killed with -9.
//! The connections to the hosts (one `ControlMaster` each) are processes of the
//! run, journaled too.
//!
//! A stop (also drop: Ctrl-C, SIGTERM and a panic unwind through it) resumes what
//! it stopped, ends every server (SIGTERM, then SIGKILL after the grace), copies
//! the logs and removes the directories.

pub mod attach;
mod changes;
pub mod hooks;
pub mod host;
mod links;
pub mod node;
mod remote;

use super::node::log_tail;
use super::plan::{ClusterPlan, ClusterSpec, NetworkKind, Runtime};
use super::recipe::ClusterError;
use super::recipes::recipe;
use super::running::{Cluster, Layout};
use crate::backend::BackendKind;
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use changes::{Chain, Changes};
use futures_util::future::join_all;
pub use hooks::{HostsSetup, OnHosts};
use host::{Host, Master};
use lockcheck_journal::{Effect, Journal, Proc, RemoteHost};
pub use node::{HostPrepare, NodeHost};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The backends whose servers the ssh runtime runs: those whose recipe says it
/// can ([`super::recipe::ServerRecipe::ssh`]).
pub fn backends() -> Vec<BackendKind> {
    BackendKind::ALL
        .into_iter()
        .filter(|&k| recipe(k).ssh())
        .collect()
}

/// Where the servers run and how to reach them (`[backend]` of a workload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSpec {
    /// One host per node, in node order, as the SSH configuration names them.
    pub hosts: Vec<String>,
    /// The SSH configuration file to use instead of the user's own (`ssh -F`).
    pub ssh_config: Option<PathBuf>,
    /// The server program on the hosts (a path there), instead of the backend's
    /// usual name looked up on the host's `PATH` and in `/usr/sbin`.
    pub program: Option<PathBuf>,
    /// The directory on the hosts under which the run's directory is made.
    pub remote_dir: PathBuf,
    /// Whether lockcheck starts and stops the servers ([`SshCluster`]), or uses
    /// those already running there and only faults them (`manage = false`,
    /// [`attach::AttachedCluster`]).
    pub manage: bool,
}

/// The running servers of one backend on their hosts. Dropping it stops them.
pub struct SshCluster {
    plan: ClusterPlan,
    hosts: Vec<Host>,
    /// The open connections; closed after the servers stopped.
    masters: Vec<Master>,
    /// Each node's server and its journal entry, or none while it is down.
    procs: Vec<Option<(Proc, u64)>>,
    /// Each node's directory on its host, and its journal entry.
    dirs: Vec<(PathBuf, u64)>,
    /// Each node whose data was wiped since it last started: its peers may
    /// have to take it back first (etcd: as a new member).
    wiped: Vec<bool>,
    journal: Arc<Journal>,
    /// The masters' sockets' directory, removed once they are closed.
    control: Option<ControlDir>,
    /// The servers stopped and the chains in force on the hosts.
    changes: Changes,
    /// What the links between the nodes go through (the proxies of
    /// `latency-nodes`): kept until the servers have stopped.
    held: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

impl SshCluster {
    /// Reaches every host, starts a node on each and waits until all serve. On
    /// failure everything started is stopped and removed again.
    pub async fn start(spec: ClusterSpec, ssh: SshSpec) -> Result<SshCluster> {
        if spec.nodes != ssh.hosts.len() || spec.nodes == 0 {
            bail!(
                "the ssh runtime runs one node per host: {} nodes, {} hosts",
                spec.nodes,
                ssh.hosts.len()
            );
        }
        if spec.prepare.is_some() || spec.network != NetworkKind::Loopback {
            bail!("the ssh runtime starts its servers as their recipes say (and its hooks on the hosts), without a time namespace, network namespace or hook of this machine's");
        }
        let dir = spec.dir.clone();
        let Connected {
            journal,
            control,
            masters,
            hosts,
            addrs,
        } = connect(&ssh, &dir).await?;
        let mut plan = placed(spec, &ssh, &addrs)?;
        let run = run_name(&dir);
        let mut dirs = Vec::new();
        for (i, node) in plan.nodes.iter_mut().enumerate() {
            // A directory per node, not per host: two hosts may share a disk.
            let home = ssh.remote_dir.join(format!("{run}-{}", node.name));
            node.data_dir = home.join("data");
            let id = journal.record(Effect::RemoteDir {
                host: hosts[i].remote.clone(),
                dir: home.clone(),
            })?;
            dirs.push((home, id));
        }
        let n = plan.nodes.len();
        let mut cluster = SshCluster {
            plan,
            hosts,
            masters,
            procs: vec![None; n],
            dirs,
            changes: Changes::new(journal.clone(), n),
            wiped: vec![false; n],
            journal,
            control: Some(control),
            held: Vec::new(),
        };
        let all: Vec<usize> = (0..n).collect();
        let started = async {
            if let Some(hook) = cluster.plan.spec.on_hosts.clone() {
                cluster.set_up_links(&hook).await?;
            }
            cluster.spawn_all(&all).await?;
            cluster.wait_ready(&all).await
        };
        if let Err(e) = started.await {
            cluster.stop().await;
            return Err(e);
        }
        Ok(cluster)
    }

    /// Node `i`'s host, its directory there and its program.
    fn host_of(&self, i: usize) -> NodeHost {
        NodeHost {
            host: self.hosts[i].clone(),
            node: self.plan.nodes[i].name.clone(),
            home: self.dirs[i].0.clone(),
            program: self.plan.binary.clone(),
        }
    }

    /// The nodes up, by name and client address.
    fn running(&self) -> Vec<(String, SocketAddr)> {
        (0..self.plan.nodes.len())
            .filter(|&i| self.procs[i].is_some())
            .map(|i| {
                (
                    self.plan.nodes[i].name.clone(),
                    self.plan.nodes[i].client_listen,
                )
            })
            .collect()
    }

    /// Node `i`'s log on its host.
    fn remote_log(&self, i: usize) -> PathBuf {
        let node = &self.plan.nodes[i];
        node.data_dir
            .parent()
            .unwrap_or(&node.data_dir)
            .join(format!("{}.log", node.name))
    }

    /// Starts nodes `nodes` (down) on their hosts, all at once, each journaled as
    /// it spawns.
    async fn spawn_all(&mut self, nodes: &[usize]) -> Result<()> {
        let recipe = self.plan.recipe();
        let mut starts = Vec::new();
        for &i in nodes {
            if self.procs[i].is_some() {
                bail!(
                    "node {} is still running: kill it before restarting",
                    self.plan.nodes[i].name
                );
            }
            // A wiped member may need the others to take it back first. The
            // recipe looks for the member's data on this machine, where a node of
            // a host has none: asked only after a wipe, when its host has none either.
            let rejoin = self.wiped[i] && recipe.readmit(&self.plan, i, &self.running()).await?;
            let mut cmd = recipe.command(&self.plan, i, rejoin)?;
            let (host, node, data, log) = (
                self.host_of(i),
                self.plan.nodes[i].clone(),
                self.plan.nodes[i].data_dir.clone(),
                self.remote_log(i),
            );
            let prepare = self.plan.spec.prepare_on_host.clone();
            starts.push(tokio::task::spawn_blocking(move || {
                if let Some(HostPrepare(prepare)) = prepare {
                    prepare(&node, &mut cmd, &host).with_context(|| {
                        format!(
                            "preparing node {} to start on host {}",
                            node.name,
                            host.host_name()
                        )
                    })?;
                }
                host.host.spawn(&node.name, &cmd, &data, &log)
            }));
        }
        let mut first = None;
        for (&i, started) in nodes.iter().zip(join_all(starts).await) {
            match started? {
                Ok(Ok(proc)) => {
                    let id = self.journal.record(Effect::RemoteProcess {
                        host: self.hosts[i].remote.clone(),
                        proc: proc.clone(),
                    })?;
                    self.procs[i] = Some((proc, id));
                    self.wiped[i] = false;
                }
                Ok(Err(program)) => {
                    first.get_or_insert(anyhow::Error::from(ClusterError::MissingBinary {
                        binary: program,
                        package: recipe.binary().package,
                        hint: format!(" on host {}", self.hosts[i].name()),
                    }));
                }
                Err(e) => {
                    first.get_or_insert(
                        e.context(format!("starting node {}", self.plan.nodes[i].name)),
                    );
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Waits until each of `nodes` answers its readiness check; a node whose
    /// server exited, or that stays silent past the timeout, is an error
    /// carrying its log's tail.
    async fn wait_ready(&mut self, nodes: &[usize]) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.plan.spec.ready_timeout;
        let mut pending = nodes.to_vec();
        let mut next_look = started + Duration::from_millis(500);
        while !pending.is_empty() {
            let mut still = Vec::new();
            for &i in &pending {
                if !self
                    .plan
                    .recipe()
                    .ready(self.plan.nodes[i].client_listen)
                    .await
                {
                    still.push(i);
                }
            }
            pending = still;
            let Some(&i) = pending.first() else { break };
            // Whether the servers are still there: a look over SSH now and then.
            if Instant::now() >= next_look {
                next_look = Instant::now() + Duration::from_millis(500);
                for &j in &pending {
                    let Some((proc, _)) = &self.procs[j] else {
                        continue;
                    };
                    let (host, proc) = (self.hosts[j].clone(), proc.clone());
                    if !tokio::task::spawn_blocking(move || host.alive(&proc)).await?? {
                        let node = self.plan.nodes[j].clone();
                        self.fetch_log(j).await;
                        self.forget(j)?;
                        return Err(ClusterError::Exited {
                            node: node.name.clone(),
                            status: format!("on host {}", self.hosts[j].name()),
                            tail: log_tail(&node.log_path),
                            log: node.log_path,
                        }
                        .into());
                    }
                }
            }
            if Instant::now() >= deadline {
                let node = self.plan.nodes[i].clone();
                self.fetch_log(i).await;
                return Err(ClusterError::NotReady {
                    node: node.name,
                    secs: started.elapsed().as_secs_f64(),
                    tail: log_tail(&node.log_path),
                    log: node.log_path,
                }
                .into());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(())
    }

    /// Node `i`'s server is gone: struck from the journal.
    fn forget(&mut self, i: usize) -> Result<()> {
        if let Some((_, id)) = self.procs[i].take() {
            self.journal.undone(id)?;
        }
        self.changes.forget_stopped(i)
    }

    /// Copies node `i`'s log from its host into `nodes/<node>.log`.
    async fn fetch_log(&self, i: usize) {
        let (host, remote, local) = (
            self.hosts[i].clone(),
            self.remote_log(i),
            self.plan.nodes[i].log_path.clone(),
        );
        let copied = tokio::task::spawn_blocking(move || copy_log(&host, &remote, &local)).await;
        if let Ok(Err(e)) = copied {
            tracing::warn!("{e:#}");
        }
    }

    /// What a stop needs, taken out of the cluster (which then has nothing left
    /// to stop), so that it can run off the async runtime.
    fn teardown(&mut self) -> Teardown {
        // Once: a second would find the directories gone and empty the logs.
        let hosts = if self.control.is_some() {
            self.hosts.len()
        } else {
            0
        };
        let grace = if self.plan.recipe().stops_with_quorum() {
            // Members without a quorum wait out a leadership transfer: not long.
            Duration::from_secs(1)
        } else {
            self.plan.spec.stop_grace
        };
        let nodes = (0..hosts)
            .zip(self.changes.take(hosts))
            .map(|(i, in_force)| NodeTeardown {
                chains: in_force.chains,
                host: self.hosts[i].clone(),
                proc: self.procs[i].take(),
                stopped: in_force.stopped,
                remote_log: self.remote_log(i),
                log: self.plan.nodes[i].log_path.clone(),
                dir: self.dirs[i].clone(),
            })
            .collect();
        Teardown {
            nodes,
            grace,
            held: std::mem::take(&mut self.held),
            masters: std::mem::take(&mut self.masters),
            control: self.control.take(),
            journal: self.journal.clone(),
        }
    }
}

/// The run's connections to its hosts, and where this machine reaches them.
struct Connected {
    journal: Arc<Journal>,
    /// The masters' sockets' directory; dropped after the masters.
    control: ControlDir,
    masters: Vec<Master>,
    hosts: Vec<Host>,
    /// Each host's address (its `HostName`, resolved here), in node order.
    addrs: Vec<std::net::IpAddr>,
}

/// Opens one connection (a journaled `ControlMaster`) to each of `ssh.hosts`,
/// all at once, for the run in `dir`; the first host that cannot be reached
/// fails it, and the connections already open close again.
async fn connect(ssh: &SshSpec, dir: &Path) -> Result<Connected> {
    std::fs::create_dir_all(dir.join("nodes"))
        .with_context(|| format!("creating {}", dir.join("nodes").display()))?;
    let journal = Journal::for_run(dir)?;
    let control = ControlDir::new(dir)?;
    let logs = dir.join("nodes");
    let opened = join_all(ssh.hosts.iter().enumerate().map(|(i, name)| {
        let remote = RemoteHost {
            name: name.clone(),
            ssh_config: ssh.ssh_config.clone(),
        };
        let (journal, control, log) = (
            journal.clone(),
            control.0.clone(),
            logs.join(format!("ssh-{name}.log")),
        );
        tokio::task::spawn_blocking(move || {
            let (master, host) = Master::open(remote, &control, i, &log, journal)?;
            let addr = host.address()?;
            Ok::<_, anyhow::Error>((master, host, addr))
        })
    }))
    .await;
    let (mut masters, mut hosts, mut addrs) = (Vec::new(), Vec::new(), Vec::new());
    let mut first = None;
    for o in opened {
        match o? {
            Ok((m, h, a)) => {
                masters.push(m);
                hosts.push(h);
                addrs.push(a);
            }
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first {
        return Err(e);
    }
    Ok(Connected {
        journal,
        control,
        masters,
        hosts,
        addrs,
    })
}

/// A name for what the run in `dir` makes on the hosts, `lockcheck-<run>-<random>`:
/// unique among runs sharing a host, and one [`Host::remove_dir`] accepts.
pub fn run_name(dir: &Path) -> String {
    format!(
        "lockcheck-{}-{:08x}",
        super::netns::run_id(dir),
        rand::random::<u32>()
    )
}

/// The plan of `spec`'s nodes, one per host: each listening on the backend's
/// usual ports at its host's address in `addrs`, running `ssh.program` or the
/// backend's usual program as the hosts find it.
fn placed(spec: ClusterSpec, ssh: &SshSpec, addrs: &[std::net::IpAddr]) -> Result<ClusterPlan> {
    let recipe = recipe(spec.kind);
    // Planned with any program of this machine's: the hosts' is theirs.
    let mut plan = ClusterPlan::new(ClusterSpec {
        binary: Some(std::env::current_exe().context("finding lockcheck's own program")?),
        ..spec
    })?;
    plan.binary = ssh
        .program
        .clone()
        .unwrap_or_else(|| PathBuf::from(recipe.binary().name));
    let ports = recipe.ports(plan.nodes.len());
    for (node, &ip) in plan.nodes.iter_mut().zip(addrs) {
        let at = move |port| SocketAddr::new(ip, port);
        node.client_listen = SocketAddr::new(ip, ports.client);
        node.client_advertise = node.client_listen;
        node.peer_listen = ports.peer.map(at);
        node.peer_advertise = node.peer_listen;
        node.election = ports.election.map(at);
    }
    Ok(plan)
}

/// Everything a stop does: resume, end the servers, copy the logs, remove the
/// directories (the hosts in parallel), then close the connections.
struct Teardown {
    nodes: Vec<NodeTeardown>,
    grace: Duration,
    /// Dropped once the servers are gone (the proxies their links go through).
    held: Vec<Box<dyn std::any::Any + Send + Sync>>,
    masters: Vec<Master>,
    control: Option<ControlDir>,
    journal: Arc<Journal>,
}

struct NodeTeardown {
    host: Host,
    /// Chains still in force, and their journal entries: removed first.
    chains: Vec<(Chain, u64)>,
    proc: Option<(Proc, u64)>,
    stopped: Option<u64>,
    remote_log: PathBuf,
    log: PathBuf,
    dir: (PathBuf, u64),
}

impl NodeTeardown {
    fn run(&self, grace: Duration) -> Result<()> {
        for (chain, _) in &self.chains {
            self.host.remove_chain(chain.table, &chain.name)?;
        }
        let procs: Vec<&Proc> = self.proc.iter().map(|(p, _)| p).collect();
        self.host.end(&procs, Some(grace))?;
        copy_log(&self.host, &self.remote_log, &self.log)?;
        self.host.remove_dir(&self.dir.0)?;
        Ok(())
    }
}

impl Teardown {
    fn run(self) {
        let ended: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .nodes
                .iter()
                .map(|n| s.spawn(|| n.run(self.grace)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a stop thread panicked")))
                })
                .collect()
        });
        for (n, result) in self.nodes.iter().zip(ended) {
            match result {
                Ok(()) => {
                    let ids = [n.proc.as_ref().map(|(_, id)| *id), n.stopped, Some(n.dir.1)];
                    let chains = n.chains.iter().map(|(_, id)| *id);
                    for id in ids.into_iter().flatten().chain(chains) {
                        if let Err(e) = self.journal.undone(id) {
                            tracing::warn!("{e:#}");
                        }
                    }
                }
                // Left in the journal for `lockcheck recover`.
                Err(e) => tracing::warn!("stopping the server on host {}: {e:#}", n.host.name()),
            }
        }
        drop(self.held);
        drop(self.masters);
        drop(self.control);
    }
}

/// Writes `remote`'s content on `host` into `local`.
fn copy_log(host: &Host, remote: &Path, local: &Path) -> Result<()> {
    let text = host.read(remote)?;
    std::fs::write(local, text).with_context(|| format!("writing {}", local.display()))
}

/// A directory of this machine's for the masters' sockets: `ssh/` in the run
/// directory, unless its path is too long for a socket's (107 bytes, and ssh
/// adds 17 while it makes one), then one in the temporary directory.
struct ControlDir(PathBuf);

impl ControlDir {
    fn new(run_dir: &Path) -> Result<ControlDir> {
        let in_run = run_dir.join("ssh");
        let dir = if in_run.as_os_str().len() <= 80 {
            in_run
        } else {
            std::env::temp_dir().join(format!(
                "lockcheck-ssh-{}-{:06x}",
                std::process::id(),
                rand::random::<u32>() & 0xff_ffff
            ))
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ControlDir(dir))
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[async_trait]
impl Cluster for SshCluster {
    fn layout(&self) -> Layout<'_> {
        Layout::planned(&self.plan, Runtime::Ssh)
    }
    /// The program is on the hosts, not here.
    fn program(&self) -> Option<&Path> {
        None
    }
    /// No process of this machine's.
    fn pid(&self, _node: &str) -> Option<u32> {
        None
    }
    fn is_up(&self, node: &str) -> bool {
        self.plan.index(node).is_ok_and(|i| self.procs[i].is_some())
    }
    async fn kill(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        let Some((proc, _)) = self.procs[i].clone() else {
            return Ok(());
        };
        let host = self.hosts[i].clone();
        tokio::task::spawn_blocking(move || host.end(&[&proc], None))
            .await?
            .with_context(|| format!("killing node {node}"))?;
        self.forget(i)
    }
    async fn restart(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.spawn_all(&[i]).await?;
        self.wait_ready(&[i]).await
    }
    async fn restart_together(&mut self, nodes: &[String]) -> Result<()> {
        let idx = nodes
            .iter()
            .map(|n| self.plan.index(n))
            .collect::<Result<Vec<_>>>()?;
        self.spawn_all(&idx).await?;
        self.wait_ready(&idx).await
    }
    async fn wipe(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if self.procs[i].is_some() {
            bail!(
                "node {node} is still running on host {}: kill it before wiping its data",
                self.hosts[i].name()
            );
        }
        let (host, data) = (self.hosts[i].clone(), self.plan.nodes[i].data_dir.clone());
        // The next start makes the directory again, empty.
        tokio::task::spawn_blocking(move || host.remove_dir(&data))
            .await?
            .with_context(|| format!("wiping node {node}'s data"))?;
        self.wiped[i] = true;
        Ok(())
    }
    async fn sigstop(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        let Some((proc, _)) = &self.procs[i] else {
            bail!("node {node} is not running: nothing to stop");
        };
        self.changes.sigstop(&self.hosts[i], i, proc, node).await
    }
    async fn sigcont(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        let proc = self.procs[i].as_ref().map(|(p, _)| p);
        self.changes.sigcont(&self.hosts[i], i, proc, node).await
    }
    fn node_host(&self, node: &str) -> Option<NodeHost> {
        Some(self.host_of(self.plan.index(node).ok()?))
    }
    fn node_addr(&self, node: &str) -> Option<std::net::IpAddr> {
        let i = self.plan.index(node).ok()?;
        Some(self.plan.nodes[i].client_listen.ip())
    }
    async fn filter(&mut self, node: &str, rules: &[String]) -> Result<u64> {
        let i = self.plan.index(node)?;
        self.changes.filter(&self.hosts[i], i, rules).await
    }
    async fn unfilter(&mut self, filter: u64) -> Result<()> {
        self.changes.unfilter(&self.hosts, filter).await
    }
    fn hosts(&self) -> Vec<Host> {
        self.hosts.clone()
    }
    async fn leader(&self) -> Option<String> {
        self.plan.recipe().leader(&self.plan, &self.running()).await
    }
    async fn stop(&mut self) {
        // Off the runtime, whose other tasks go on meanwhile.
        let teardown = self.teardown();
        if let Err(e) = tokio::task::spawn_blocking(move || teardown.run()).await {
            tracing::warn!("stopping the ssh cluster: {e}");
        }
    }
}

impl Drop for SshCluster {
    fn drop(&mut self) {
        self.teardown().run();
    }
}
