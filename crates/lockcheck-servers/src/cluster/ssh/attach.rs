//! `manage = false` under the ssh runtime: servers the team already runs on
//! its hosts, which lockcheck finds, faults and leaves running as it found them.
//!
//! Each node's server is the process listening on the backend's client port on
//! its host (`ss -ltnp` there, as root or as the server's own user: only they
//! see which process owns the socket), checked to be the backend's program by
//! its name, then to answer the backend's protocol at the host's address, where
//! the clients dial it. The port, not a name pattern: it is what the clients
//! reach, so the process it finds is the one the clients depend on, even with
//! several servers of one program on a host (a Sentinel next to its Redis).
//!
//! What a fault does to them is journaled with the host before it is done (a
//! SIGSTOP, an iptables chain) and undone by the stop, a drop (error, Ctrl-C,
//! SIGTERM, a panic) and `lockcheck recover`. The servers themselves are never
//! journaled as the run's: nothing (not recover either) ends them. Kill and
//! restart are refused when the workload is read (`fault::kill`): lockcheck
//! would have to start the team's server again itself, outside whatever runs
//! it (systemd, a container, its own supervisor), which may well restart it
//! too, on the same port.

use super::changes::{Chain, Changes};
use super::host::{quote, Host, Master};
use super::{connect, placed, recipe, Connected, ControlDir, SshSpec};
use crate::cluster::plan::{ClusterPlan, ClusterSpec, Runtime};
use crate::cluster::running::{Cluster, Layout};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use futures_util::future::join_all;
use lockcheck_journal::{Journal, Proc};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a server found listening has to answer the backend's protocol.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Servers already running on their hosts, one per host. Dropping it resumes
/// what it stopped and removes its chains; the servers run on.
pub struct AttachedCluster {
    plan: ClusterPlan,
    hosts: Vec<Host>,
    /// The open connections; closed after the undo.
    masters: Vec<Master>,
    /// Each node's server, as found on its host.
    servers: Vec<Proc>,
    /// The servers stopped and the chains in force on the hosts.
    changes: Changes,
    journal: Arc<Journal>,
    control: Option<ControlDir>,
}

impl AttachedCluster {
    /// Reaches every host and finds the server of `spec.kind` on each; an error
    /// names the host (and its place in `backend.hosts`) without one.
    pub async fn start(spec: ClusterSpec, ssh: SshSpec) -> Result<AttachedCluster> {
        if spec.nodes != ssh.hosts.len() || spec.nodes == 0 {
            bail!(
                "the ssh runtime has one node per host: {} nodes, {} hosts",
                spec.nodes,
                ssh.hosts.len()
            );
        }
        let dir = spec.dir.clone();
        let Connected {
            journal,
            control,
            masters,
            hosts,
            addrs,
        } = connect(&ssh, &dir).await?;
        let plan = placed(spec, &ssh, &addrs)?;
        let program = plan
            .binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let port = recipe(plan.spec.kind).ports(plan.nodes.len()).client;
        let found = join_all(hosts.iter().map(|h| {
            let (host, program) = (h.clone(), program.clone());
            tokio::task::spawn_blocking(move || find(&host, port, &program))
        }))
        .await;
        let mut servers = Vec::new();
        for (i, f) in found.into_iter().enumerate() {
            let at = format!(
                "backend.hosts[{i}] = {:?} ({})",
                ssh.hosts[i], plan.nodes[i].name
            );
            servers.push(f?.with_context(|| at.clone())?);
            answers(&plan, i).await.with_context(|| at.clone())?;
        }
        let n = servers.len();
        Ok(AttachedCluster {
            plan,
            hosts,
            masters,
            servers,
            changes: Changes::new(journal.clone(), n),
            journal,
            control: Some(control),
        })
    }

    /// What the run did on the hosts and has not undone yet, taken out of the
    /// cluster (which then has nothing left to undo), to be undone off the
    /// async runtime.
    fn undo(&mut self) -> Undo {
        let hosts: Vec<HostUndo> = (0..self.hosts.len())
            .zip(self.changes.take(self.hosts.len()))
            .map(|(i, in_force)| HostUndo {
                host: self.hosts[i].clone(),
                server: self.servers[i].clone(),
                stopped: in_force.stopped,
                chains: in_force.chains,
            })
            .collect();
        Undo {
            hosts,
            masters: std::mem::take(&mut self.masters),
            control: self.control.take(),
            journal: self.journal.clone(),
        }
    }
}

/// Resumes what the run stopped and removes its chains, the hosts in parallel,
/// then closes the connections. An undo that fails stays in the journal for
/// `lockcheck recover`.
struct Undo {
    hosts: Vec<HostUndo>,
    masters: Vec<Master>,
    control: Option<ControlDir>,
    journal: Arc<Journal>,
}

struct HostUndo {
    host: Host,
    server: Proc,
    stopped: Option<u64>,
    chains: Vec<(Chain, u64)>,
}

impl HostUndo {
    /// Undoes it all; returns the journal entries undone.
    fn run(&self) -> Vec<u64> {
        let mut undone = Vec::new();
        if let Some(id) = self.stopped {
            match self.host.signal(&self.server, "CONT") {
                Ok(_) => undone.push(id),
                Err(e) => tracing::warn!("resuming the server on host {}: {e:#}", self.host.name()),
            }
        }
        for (chain, id) in &self.chains {
            match self.host.remove_chain(chain.table, &chain.name) {
                Ok(_) => undone.push(*id),
                Err(e) => {
                    tracing::warn!(
                        "removing chain {} on host {}: {e:#}",
                        chain.name,
                        self.host.name()
                    )
                }
            }
        }
        undone
    }
}

impl Undo {
    fn run(self) {
        let undone: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = self.hosts.iter().map(|h| s.spawn(|| h.run())).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        for id in undone {
            if let Err(e) = self.journal.undone(id) {
                tracing::warn!("{e:#}");
            }
        }
        drop(self.masters);
        drop(self.control);
    }
}

/// The one process listening on TCP `port` on `host`, which must be `program`
/// (its name as the kernel keeps it: 15 bytes at most).
fn find(host: &Host, port: u16, program: &str) -> Result<Proc> {
    let out = host.run(&format!(
        "command -v ss >/dev/null 2>&1 || {{ echo 'ss is not there (Debian package iproute2): it finds the server by its port' >&2; exit 1; }}\n\
         out=$(ss -Hltnp {filter}) || exit 1\n\
         [ -n \"$out\" ] || {{ echo none; exit 0; }}\n\
         pids=$(echo \"$out\" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)\n\
         [ -n \"$pids\" ] || {{ echo hidden; exit 0; }}\n\
         for p in $pids; do echo \"$p $(lc_stat $p | cut -d' ' -f20) $(cat /proc/$p/comm)\"; done",
        filter = quote(&format!("sport = :{port}"))
    ))?;
    let lines: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let want: String = program.chars().take(15).collect();
    match lines[..] {
        ["none"] => bail!(
            "no server listens on port {port} on host {} (manage = false uses the {program} already running there)",
            host.name()
        ),
        ["hidden"] => bail!(
            "something listens on port {port} on host {}, but the SSH account cannot see which process: \
             log in as root or as the server's own user, who may signal it",
            host.name()
        ),
        [line] => {
            let mut words = line.splitn(3, ' ');
            let (Some(pid), Some(start), Some(name)) = (words.next(), words.next(), words.next())
            else {
                bail!("host {}: the process on port {port} vanished while it was looked at ({line:?})", host.name());
            };
            if name != want {
                bail!(
                    "the process listening on port {port} on host {} is {name} (pid {pid}), not {program}: \
                     if it is the server under another name, give its path as backend.program",
                    host.name()
                );
            }
            Ok(Proc {
                name: program.to_string(),
                pid: pid.parse().with_context(|| format!("a pid from {line:?}"))?,
                start_time: start
                    .parse()
                    .with_context(|| format!("a start time from {line:?}"))?,
            })
        }
        _ => bail!(
            "several processes listen on port {port} on host {} ({}): which one to pause is not clear",
            host.name(),
            lines.join("; ")
        ),
    }
}

/// Whether node `i`'s server answers the backend's protocol where the clients
/// dial it, within [`ANSWER_WITHIN`].
async fn answers(plan: &ClusterPlan, i: usize) -> Result<()> {
    let addr = plan.nodes[i].client_listen;
    let deadline = Instant::now() + ANSWER_WITHIN;
    while !plan.recipe().ready(addr).await {
        if Instant::now() >= deadline {
            bail!(
                "the {} server found there does not answer at {addr}, where the clients dial it",
                plan.spec.kind
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[async_trait]
impl Cluster for AttachedCluster {
    fn layout(&self) -> Layout<'_> {
        Layout::planned(&self.plan, Runtime::Ssh)
    }
    fn program(&self) -> Option<&Path> {
        None
    }
    fn pid(&self, _node: &str) -> Option<u32> {
        None
    }
    /// The team's servers are up as far as lockcheck knows: it never ends them.
    fn is_up(&self, node: &str) -> bool {
        self.plan.index(node).is_ok()
    }
    async fn kill(&mut self, node: &str) -> Result<()> {
        bail!("node {node}: lockcheck did not start its server (backend.manage = false) and does not kill it")
    }
    async fn restart(&mut self, node: &str) -> Result<()> {
        bail!("node {node}: lockcheck did not start its server (backend.manage = false) and does not start it again")
    }
    async fn wipe(&mut self, node: &str) -> Result<()> {
        bail!("node {node}: lockcheck did not start its server (backend.manage = false) and leaves its data alone")
    }
    async fn sigstop(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.changes
            .sigstop(&self.hosts[i], i, &self.servers[i], node)
            .await
    }
    async fn sigcont(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.changes
            .sigcont(&self.hosts[i], i, Some(&self.servers[i]), node)
            .await
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
        let running: Vec<(String, SocketAddr)> = self
            .plan
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.client_listen))
            .collect();
        self.plan.recipe().leader(&self.plan, &running).await
    }
    async fn stop(&mut self) {
        // Off the runtime, whose other tasks go on meanwhile.
        let undo = self.undo();
        if let Err(e) = tokio::task::spawn_blocking(move || undo.run()).await {
            tracing::warn!("undoing the faults on the hosts: {e}");
        }
    }
}

impl Drop for AttachedCluster {
    fn drop(&mut self) {
        self.undo().run();
    }
}
