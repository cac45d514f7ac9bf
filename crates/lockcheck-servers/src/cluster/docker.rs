//! A backend's servers as Docker containers, driven through the Docker Engine API
//! (bollard, over the local socket): one container per node (`lockcheck-<run>-n1`)
//! on a bridge network made for the run (`lockcheck-<run>`), each client port
//! published on 127.0.0.1 only, so that the workers and the resource on this machine
//! dial loopback exactly as with local processes. Every object carries the label
//! `lockcheck.run=<run>`: [`remove_run`] finds and removes them all, at the end, on
//! drop, and from `lockcheck recover` (the run's journal names the run).
//!
//! The nodes run the same command lines as local ones (`ClusterPlan::command`,
//! planned by [`ClusterPlan::new`] and moved onto the run's network): each
//! container gets a fixed address there, so the peer addresses an etcd member or a
//! ZooKeeper server is given are plain socket addresses, and the run directory is
//! mounted at its own path, so data directories, configuration files and clock
//! files keep their names. A node runs as the owner of its data directory (so
//! PostgreSQL as `postgres`); a database's one-off setup (`initdb`) runs in a
//! container of its own first. Data survives a kill and a restart (the container
//! is started again, not made anew); [`DockerCluster::wipe`] empties it, and a
//! wiped etcd member is re-admitted and gets a container made anew. A node is
//! frozen with `docker pause` (the cgroup freezer). Logs are collected into
//! `nodes/<node>.log` when the cluster stops (and when a node fails to start).
//!
//! Images: the official image of each backend by default; `lockcheck image build`
//! makes `lockcheck/host:latest`, an image with no programs of its own that runs
//! this machine's servers from read-only mounts (listed in its `lockcheck.host-mounts`
//! label), for machines that cannot pull.

use super::node::log_tail;
use super::plan::{ClusterPlan, ClusterSpec, Prepare, Runtime};
use super::recipe::{ClusterError, Init};
use super::recipes::recipe;
pub use super::recipes::{default_image, HOST_IMAGE};
use super::running::{Cluster, Layout};
use crate::backend::BackendKind;
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam, IpamConfig,
    NetworkCreateRequest, NetworkingConfig, PortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, ListVolumesOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use lockcheck_journal::{Effect, Journal};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The label every object of a run carries, valued with the run's id.
pub const RUN_LABEL: &str = "lockcheck.run";
/// On an image: the directories of this machine it runs from, `:`-separated,
/// mounted read-only at the same paths.
pub const MOUNTS_LABEL: &str = "lockcheck.host-mounts";
/// This machine's users and groups, mounted read-only into the containers of an
/// image that runs this machine's programs.
const HOST_ACCOUNTS: [&str; 2] = ["/etc/passwd", "/etc/group"];
/// Why the docker runtime cannot run `kind`'s servers, if it cannot: a backend
/// whose nodes need another cluster running first (Patroni's etcd).
pub fn refuses(kind: BackendKind) -> Option<String> {
    recipe(kind).coordinator().map(|c| {
        format!(
            "{} runs under the local runtime only: its nodes need {c} running first, which \
             the docker runtime does not start",
            kind.name()
        )
    })
}

/// Whether a start failed because Docker could not publish a node's port.
fn port_taken(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}").to_ascii_lowercase();
    text.contains("port is already allocated") || text.contains("address already in use")
}

/// Connects to the local Docker Engine and agrees on an API version it speaks.
pub async fn connect() -> Result<Docker, ClusterError> {
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| ClusterError::Docker(format!("cannot reach the Docker Engine: {e}")))?;
    let docker = docker.negotiate_version().await.map_err(|e| {
        ClusterError::Docker(format!(
            "cannot reach the Docker Engine ({e}); is dockerd running, and may this user use /var/run/docker.sock?"
        ))
    })?;
    Ok(docker)
}

/// The directories an image wants mounted from this machine (its
/// [`MOUNTS_LABEL`]), or why the image cannot be used.
pub async fn image_mounts(docker: &Docker, image: &str) -> Result<Vec<String>, ClusterError> {
    let inspect = docker.inspect_image(image).await.map_err(|e| {
        ClusterError::Docker(format!(
            "the image {image} is not on this machine ({e}); pull it, or run \
             `lockcheck image build` and use --image {HOST_IMAGE}"
        ))
    })?;
    let label = inspect
        .config
        .and_then(|c| c.labels)
        .and_then(|l| l.get(MOUNTS_LABEL).cloned())
        .unwrap_or_default();
    Ok(label
        .split(':')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect())
}

/// A bridge network for the run with a subnet of its own. Docker gives a fixed
/// container address only on a network created with an explicit subnet, so this
/// lets Docker choose a free subnet, then makes the network again with it spelled
/// out (retrying if another network took it meanwhile: Docker refuses overlaps).
async fn create_network(
    docker: &Docker,
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<(Ipv4Addr, u8)> {
    let request = |ipam| NetworkCreateRequest {
        name: name.to_string(),
        driver: Some("bridge".into()),
        labels: Some(labels.clone()),
        ipam,
        ..Default::default()
    };
    for _ in 0..5 {
        docker
            .create_network(request(None))
            .await
            .with_context(|| format!("creating network {name}"))?;
        let subnet = docker
            .inspect_network(name, None)
            .await
            .ok()
            .and_then(|n| n.ipam?.config?.into_iter().find_map(|c| c.subnet));
        docker
            .remove_network(name)
            .await
            .with_context(|| format!("removing network {name}"))?;
        let Some(subnet) = subnet else {
            bail!("Docker gave network {name} no IPv4 subnet")
        };
        let ipam = Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(subnet.clone()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        if docker.create_network(request(Some(ipam))).await.is_ok() {
            let (base, bits) = subnet
                .split_once('/')
                .with_context(|| format!("subnet {subnet}"))?;
            return Ok((base.parse()?, bits.parse()?));
        }
    }
    bail!("no free subnet for network {name} after 5 tries")
}

/// The running containers of one backend. Dropping it removes them, with their
/// network and volumes.
pub struct DockerCluster {
    docker: Docker,
    plan: ClusterPlan,
    /// The run's id: names and labels its objects.
    run: String,
    /// The image, the directories of this machine it mounts, the run's network.
    image: String,
    mounts: Vec<String>,
    network: String,
    /// Each node's container name.
    containers: Vec<String>,
    /// Each running node's main process, as this machine sees it; none while down.
    pids: Vec<Option<u32>>,
    /// Each node's container is paused (the cgroup freezer).
    frozen: Vec<bool>,
    /// The output of each node's containers that are gone (its initialisations,
    /// the container of an etcd member made anew), written before the current
    /// one's into `nodes/<node>.log`.
    earlier_logs: Vec<Vec<u8>>,
    /// Undone (in the journal) once everything is removed.
    journal: Option<(std::sync::Arc<Journal>, u64)>,
    removed: bool,
}

impl DockerCluster {
    /// Starts `spec`'s nodes as containers of `image` and waits until all serve.
    /// A daemon that cannot be reached or an image that is not here is
    /// [`ClusterError::Docker`]; on any failure everything made is removed again.
    /// Tries again (up to 3 times, with new ports) when Docker could not publish a
    /// port: another process may bind it between our probe and Docker's bind.
    pub async fn start(spec: ClusterSpec, image: &str) -> Result<DockerCluster> {
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            match Self::start_once(spec.clone(), image).await {
                Err(e) if attempt < ATTEMPTS && port_taken(&e) => {
                    tracing::warn!("port taken while starting {}, retrying: {e:#}", spec.kind);
                    spec.forget_data()?;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(spec: ClusterSpec, image: &str) -> Result<DockerCluster> {
        if spec.nodes == 0 {
            bail!("a {} cluster needs at least one node", spec.kind);
        }
        if let Some(why) = refuses(spec.kind) {
            return Err(ClusterError::Docker(why).into());
        }
        let docker = connect().await?;
        let mounts = image_mounts(&docker, image).await?;
        if mounts.is_empty() && recipe(spec.kind).official_image().is_none() {
            return Err(ClusterError::Docker(format!(
                "{} runs this machine's server programs, and the image {image} mounts none \
                 of them; run `lockcheck image build` and use --image {HOST_IMAGE}",
                spec.kind.name()
            ))
            .into());
        }
        let dir = std::fs::canonicalize(&spec.dir)
            .with_context(|| format!("finding {}", spec.dir.display()))?;
        let stem = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                    c
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let run = format!("{stem}-{:08x}", rand::random::<u32>());
        let kind = spec.kind;
        let plan = ClusterPlan::new(ClusterSpec {
            dir: dir.clone(),
            // The plan resolves the program on this machine. An image with programs
            // of its own runs its own, found on its PATH (set below): any program
            // here does for planning.
            binary: if mounts.is_empty() {
                Some(std::env::current_exe().context("finding lockcheck's own program")?)
            } else {
                spec.binary.clone()
            },
            ..spec
        })?;
        // Written down before anything exists, so that `recover` finds it all.
        let journal = Journal::for_run(&dir)?;
        let id = journal.record(Effect::Containers { run: run.clone() })?;
        let nodes = plan.nodes.len();
        let mut cluster = DockerCluster {
            docker,
            plan: ClusterPlan {
                binary: if mounts.is_empty() {
                    PathBuf::from(recipe(kind).binary().name)
                } else {
                    plan.binary.clone()
                },
                cluster_token: format!("lockcheck-{run}"),
                ..plan
            },
            network: format!("lockcheck-{run}"),
            image: image.to_string(),
            mounts,
            containers: Vec::new(),
            pids: vec![None; nodes],
            frozen: vec![false; nodes],
            earlier_logs: vec![Vec::new(); nodes],
            run,
            journal: Some((journal, id)),
            removed: false,
        };
        match cluster.create().await {
            Ok(()) => Ok(cluster),
            Err(e) => {
                cluster.collect_logs().await;
                cluster.remove().await;
                Err(e)
            }
        }
    }

    fn labels(&self) -> HashMap<String, String> {
        HashMap::from([(RUN_LABEL.to_string(), self.run.clone())])
    }

    /// Makes the network and the containers, starts them, waits until all serve.
    async fn create(&mut self) -> Result<()> {
        let (base, bits) = create_network(&self.docker, &self.network, &self.labels()).await?;
        if bits > 30 {
            bail!("network {}'s subnet /{bits} is too small", self.network);
        }
        // The plan's shape (which nodes have peer and election addresses), moved
        // onto the run's network: each node gets a fixed address there (.1 is the
        // gateway; nodes from .2 on), on which it listens and its peers reach it,
        // at the ports the plan chose. The client port is also published on
        // 127.0.0.1 at the same number: it was free here.
        for (i, node) in self.plan.nodes.iter_mut().enumerate() {
            let ip = IpAddr::V4(Ipv4Addr::from(u32::from(base) + 2 + i as u32));
            let on_net = |a: SocketAddr| SocketAddr::new(ip, a.port());
            node.client_listen = SocketAddr::new(ip, node.client_listen.port());
            node.peer_listen = node.peer_listen.map(on_net);
            node.peer_advertise = node.peer_advertise.map(on_net);
            node.election = node.election.map(on_net);
        }
        std::fs::create_dir_all(self.plan.spec.dir.join("nodes"))?;
        for i in 0..self.plan.nodes.len() {
            let name = format!("lockcheck-{}-{}", self.run, self.plan.nodes[i].name);
            self.containers.push(name);
            self.make_container(i, false).await?;
        }
        // All members first, then the wait: an etcd member is not healthy until a
        // quorum of its peers is up.
        // Started together: each start takes the Engine a few hundred ms.
        let starts = self
            .containers
            .iter()
            .map(|c| self.docker.start_container(c, None));
        let started = futures_util::future::join_all(starts).await;
        for (container, done) in self.containers.iter().zip(started) {
            done.with_context(|| format!("starting container {container}"))?;
        }
        for i in 0..self.containers.len() {
            self.pids[i] = self.main_pid(i).await;
        }
        let all: Vec<usize> = (0..self.containers.len()).collect();
        self.wait_ready(&all).await
    }

    /// The user a node's programs run as in its container: whoever owns its data
    /// directory. That is root, or lockcheck's own user, except where the
    /// backend's setup gave it to an account of its own (PostgreSQL, which
    /// refuses root): numeric, so it needs no name in the image (the host image
    /// mounts this machine's /etc/passwd for programs that look their user up).
    fn user_of(&self, i: usize) -> Result<String> {
        use std::os::unix::fs::MetadataExt;
        let data = &self.plan.nodes[i].data_dir;
        let meta =
            std::fs::metadata(data).with_context(|| format!("finding {}", data.display()))?;
        Ok(format!("{}:{}", meta.uid(), meta.gid()))
    }

    /// A container's definition: `cmd` (its program, arguments and environment)
    /// with this machine's directories and the run directory mounted, as the
    /// node's user; on the run's network at the node's address with its client
    /// port published, or (`networked` false: a one-off setup) on no network.
    fn container_body(
        &self,
        i: usize,
        cmd: &Command,
        networked: bool,
    ) -> Result<ContainerCreateBody> {
        let node = &self.plan.nodes[i];
        let args: Vec<String> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let env: Vec<String> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?)))
            .collect();
        let dir = &self.plan.spec.dir;
        let mut binds: Vec<String> = self.mounts.iter().map(|m| format!("{m}:{m}:ro")).collect();
        if !self.mounts.is_empty() {
            // This machine's programs, run as this machine's accounts: a server
            // that runs as one of its own (PostgreSQL as `postgres`) looks its
            // uid up, and only this machine's files know it.
            binds.extend(
                HOST_ACCOUNTS
                    .iter()
                    .filter(|f| Path::new(f).is_file())
                    .map(|f| format!("{f}:{f}:ro")),
            );
        }
        binds.push(format!("{0}:{0}:rw", dir.display()));
        let mut labels = self.labels();
        labels.insert("lockcheck.node".into(), node.name.clone());
        let port = format!("{}/tcp", node.client_listen.port());
        let mut body = ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(args),
            env: Some(env),
            user: Some(self.user_of(i)?),
            hostname: Some(node.name.clone()),
            labels: Some(labels),
            host_config: Some(HostConfig {
                binds: Some(binds),
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        if networked {
            body.exposed_ports = Some(vec![port.clone()]);
            let host = body.host_config.as_mut().expect("set above");
            host.network_mode = Some(self.network.clone());
            host.port_bindings = Some(HashMap::from([(
                port,
                Some(vec![PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(node.client_advertise.port().to_string()),
                }]),
            )]));
            body.networking_config = Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(
                    self.network.clone(),
                    EndpointSettings {
                        ipam_config: Some(EndpointIpamConfig {
                            ipv4_address: Some(node.client_listen.ip().to_string()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                )])),
            });
        }
        Ok(body)
    }

    /// Makes node `i`'s container with the command line a local node would run
    /// (`rejoin`: an etcd member re-admitted empty), not started yet. Its data
    /// directory's one-off setup, if any, runs first, in a container of its own.
    async fn make_container(&mut self, i: usize, rejoin: bool) -> Result<()> {
        let node = self.plan.nodes[i].clone();
        std::fs::create_dir_all(&node.data_dir)
            .with_context(|| format!("creating {}", node.data_dir.display()))?;
        self.init_node(i).await?;
        // The node listens on the run's network, not on loopback: a recipe
        // opens it to clients from outside (Docker's port forwarding) from that.
        let mut cmd = self.plan.recipe().command(&self.plan, i, rejoin)?;
        if let Some(Prepare(prepare)) = &self.plan.spec.prepare {
            prepare(&node, &mut cmd)
                .with_context(|| format!("preparing node {} to start", node.name))?;
        }
        let body = self.container_body(i, &cmd, true)?;
        let container = &self.containers[i];
        self.docker
            .create_container(
                Some(
                    CreateContainerOptionsBuilder::default()
                        .name(container)
                        .build(),
                ),
                body,
            )
            .await
            .with_context(|| format!("creating container {container}"))?;
        Ok(())
    }

    /// Runs node `i`'s one-off data setup (`initdb`, `mariadb-install-db`), if it
    /// needs one now, in a container of the same image, mounts and user as its
    /// server's, on no network; its output goes to the node's log.
    async fn init_node(&mut self, i: usize) -> Result<()> {
        let Some(Init { command: cmd, what }) = self.plan.recipe().init(&self.plan, i)? else {
            return Ok(());
        };
        let body = self.container_body(i, &cmd, false)?;
        let name = format!("{}-init", self.containers[i]);
        self.docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                body,
            )
            .await
            .with_context(|| format!("creating container {name}"))?;
        let ran = async {
            self.docker
                .start_container(&name, None)
                .await
                .with_context(|| format!("starting container {name}"))?;
            let mut wait = self.docker.wait_container(&name, None);
            match wait.next().await {
                Some(Ok(_)) | None => Ok(()),
                Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                    Err(anyhow::anyhow!("exit status {code}"))
                }
                Some(Err(e)) => Err(e).with_context(|| format!("waiting for {name}")),
            }
        }
        .await;
        let output = self.container_log(&name).await;
        self.earlier_logs[i].extend_from_slice(&output);
        let _ = self
            .docker
            .remove_container(
                &name,
                Some(
                    RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await;
        if let Err(e) = ran {
            let node = &self.plan.nodes[i];
            bail!(
                "{what} for node {} failed in its container ({e:#}); its output:\n{}",
                node.name,
                String::from_utf8_lossy(&output)
            );
        }
        self.plan.recipe().after_init(&self.plan, i)
    }

    async fn start_node(&mut self, i: usize) -> Result<()> {
        let name = &self.containers[i];
        self.docker
            .start_container(name, None)
            .await
            .with_context(|| format!("starting container {name}"))?;
        self.pids[i] = self.main_pid(i).await;
        Ok(())
    }

    /// The container's main process as this machine sees it, if it runs.
    async fn main_pid(&self, i: usize) -> Option<u32> {
        let state = self
            .docker
            .inspect_container(&self.containers[i], None)
            .await
            .ok()?
            .state?;
        match (state.running, state.pid) {
            (Some(true), Some(pid)) if pid > 0 => u32::try_from(pid).ok(),
            _ => None,
        }
    }

    /// Waits until each of `nodes` answers its readiness check through its
    /// published port; a container that stops, or stays silent past the timeout, is
    /// an error carrying its log's tail.
    async fn wait_ready(&mut self, nodes: &[usize]) -> Result<()> {
        let started = Instant::now();
        let deadline = started + self.plan.spec.ready_timeout;
        let mut pending = nodes.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for &i in &pending {
                let recipe = self.plan.recipe();
                if !recipe.ready(self.plan.nodes[i].client_advertise).await {
                    still.push(i);
                }
            }
            pending = still;
            let Some(&i) = pending.first() else { break };
            let exited = self.main_pid(i).await.is_none();
            if exited || Instant::now() >= deadline {
                self.collect_logs().await;
                let node = &self.plan.nodes[i];
                let (log, tail) = (node.log_path.clone(), log_tail(&node.log_path));
                return Err(if exited {
                    ClusterError::Exited {
                        node: node.name.clone(),
                        status: format!("container {} stopped", self.containers[i]),
                        log,
                        tail,
                    }
                } else {
                    ClusterError::NotReady {
                        node: node.name.clone(),
                        secs: started.elapsed().as_secs_f64(),
                        log,
                        tail,
                    }
                }
                .into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The running members, by name and the address this machine reaches them at.
    fn running(&self) -> Vec<(String, SocketAddr)> {
        (0..self.plan.nodes.len())
            .filter(|&i| self.pids[i].is_some())
            .map(|i| {
                (
                    self.plan.nodes[i].name.clone(),
                    self.plan.nodes[i].client_advertise,
                )
            })
            .collect()
    }

    /// The run's id: every object of the run carries it in [`RUN_LABEL`].
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// A container's whole output (all its lives), or nothing if it cannot be read.
    async fn container_log(&self, container: &str) -> Vec<u8> {
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .tail("all")
            .build();
        let mut stream = self.docker.logs(container, Some(options));
        let mut out = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            out.extend_from_slice(&chunk.into_bytes());
        }
        out
    }

    /// Writes each node's log into `nodes/<node>.log`: its earlier containers'
    /// output, then its container's (all its lives).
    async fn collect_logs(&self) {
        for (i, container) in self.containers.iter().enumerate() {
            let mut log = self.earlier_logs[i].clone();
            log.extend(self.container_log(container).await);
            let _ = std::fs::write(&self.plan.nodes[i].log_path, log);
        }
    }

    /// Removes every object of the run, once.
    async fn remove(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        match remove_run(&self.docker, &self.run).await {
            Ok(_) => {
                if let Some((journal, id)) = self.journal.take() {
                    let _ = journal.undone(id);
                }
            }
            Err(e) => tracing::warn!("removing the containers of run {}: {e:#}", self.run),
        }
        self.pids.iter_mut().for_each(|p| *p = None);
    }

    /// Makes node `i`'s container anew, for a member re-admitted empty (see
    /// [`super::ServerRecipe::readmit`]): a container keeps its first command
    /// line, and the member must now join the running cluster, not found one.
    async fn remake(&mut self, i: usize) -> Result<()> {
        let container = self.containers[i].clone();
        let output = self.container_log(&container).await;
        self.earlier_logs[i].extend(output);
        self.docker
            .remove_container(
                &container,
                Some(
                    RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build(),
                ),
            )
            .await
            .with_context(|| format!("removing container {container}"))?;
        self.make_container(i, true).await
    }
}

#[async_trait]
impl Cluster for DockerCluster {
    fn layout(&self) -> Layout<'_> {
        Layout::planned(&self.plan, Runtime::Docker)
    }
    /// This machine's program, when the image runs it from a mount.
    fn program(&self) -> Option<&Path> {
        self.plan
            .binary
            .is_absolute()
            .then_some(self.plan.binary.as_path())
    }
    fn pid(&self, node: &str) -> Option<u32> {
        self.pids[self.plan.index(node).ok()?]
    }

    /// SIGKILL to the container's main process, through the Engine: the container
    /// stops, its data stays. A paused container is killed as well.
    async fn kill(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if self.main_pid(i).await.is_some() {
            let options = KillContainerOptionsBuilder::default()
                .signal("SIGKILL")
                .build();
            if let Err(e) = self
                .docker
                .kill_container(&self.containers[i], Some(options))
                .await
            {
                // It may have died of itself in between; only a live one is an error.
                if self.main_pid(i).await.is_some() {
                    return Err(e).with_context(|| format!("killing {}", self.containers[i]));
                }
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.main_pid(i).await.is_some() {
                if Instant::now() >= deadline {
                    bail!("{} still runs 5 s after SIGKILL", self.containers[i]);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.pids[i] = None;
        self.frozen[i] = false;
        Ok(())
    }

    async fn restart(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if self.main_pid(i).await.is_some() {
            bail!("node {node} is still running: kill it before restarting");
        }
        let recipe = self.plan.recipe();
        if recipe.readmit(&self.plan, i, &self.running()).await? {
            self.remake(i).await?;
        } else {
            // A wiped database is set up again before its server starts.
            self.init_node(i).await?;
        }
        self.start_node(i).await?;
        self.wait_ready(&[i]).await
    }

    async fn wipe(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if self.main_pid(i).await.is_some() {
            bail!("node {node} is still running: kill it before wiping its data");
        }
        let data = &self.plan.nodes[i].data_dir;
        match std::fs::remove_dir_all(data) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("wiping {}", data.display()))
            }
            _ => {}
        }
        std::fs::create_dir_all(data).with_context(|| format!("creating {}", data.display()))
    }

    /// `docker pause`: the Engine freezes the container's cgroup, every process
    /// in it at once (a PostgreSQL's backends as well as its postmaster).
    async fn freeze(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        self.docker
            .pause_container(&self.containers[i])
            .await
            .with_context(|| format!("pausing container {}", self.containers[i]))?;
        self.frozen[i] = true;
        Ok(())
    }

    async fn thaw(&mut self, node: &str) -> Result<()> {
        let i = self.plan.index(node)?;
        if !std::mem::replace(&mut self.frozen[i], false) {
            return Ok(()); // killed meanwhile: nothing is paused
        }
        self.docker
            .unpause_container(&self.containers[i])
            .await
            .with_context(|| format!("unpausing container {}", self.containers[i]))
    }

    async fn leader(&self) -> Option<String> {
        self.plan.recipe().leader(&self.plan, &self.running()).await
    }

    async fn stop(&mut self) {
        if !self.removed {
            self.collect_logs().await;
        }
        self.remove().await;
    }
}

impl Drop for DockerCluster {
    /// A run that ends early (an error, a signal, a panic) still removes its
    /// containers: on a thread of its own, since drop may run inside the runtime.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let docker = self.docker.clone();
        let run = self.run.clone();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(remove_run(&docker, &run))
        })
        .join();
        if let Ok(Ok(_)) = done {
            if let Some((journal, id)) = self.journal.take() {
                let _ = journal.undone(id);
            }
        }
    }
}

/// What [`remove_run`] removed.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Removed {
    pub containers: Vec<String>,
    pub networks: Vec<String>,
    pub volumes: Vec<String>,
}

/// Removes every container (with its anonymous volumes), network and volume
/// labelled with run `run`. Idempotent: a second call removes nothing.
pub async fn remove_run(docker: &Docker, run: &str) -> Result<Removed> {
    let label = format!("{RUN_LABEL}={run}");
    let filters = HashMap::from([("label".to_string(), vec![label])]);
    let mut removed = Removed::default();
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .context("listing the run's containers")?;
    // Removed together: each removal takes the Engine a few hundred ms.
    let removals = containers.into_iter().filter_map(|c| {
        let id = c.id?;
        let name = c
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or(id.clone());
        Some(async move {
            let options = RemoveContainerOptionsBuilder::default()
                .force(true)
                .v(true)
                .build();
            docker
                .remove_container(&id, Some(options))
                .await
                .with_context(|| format!("removing container {id}"))?;
            anyhow::Ok(name.trim_start_matches('/').to_string())
        })
    });
    for done in futures_util::future::join_all(removals).await {
        removed.containers.push(done?);
    }
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .context("listing the run's networks")?;
    for n in networks {
        let Some(name) = n.name else { continue };
        docker
            .remove_network(&name)
            .await
            .with_context(|| format!("removing network {name}"))?;
        removed.networks.push(name);
    }
    let volumes = docker
        .list_volumes(Some(
            ListVolumesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .context("listing the run's volumes")?;
    for v in volumes.volumes.unwrap_or_default() {
        docker
            .remove_volume(
                &v.name,
                None::<bollard::query_parameters::RemoveVolumeOptions>,
            )
            .await
            .with_context(|| format!("removing volume {}", v.name))?;
        removed.volumes.push(v.name);
    }
    Ok(removed)
}

/// [`remove_run`] from synchronous code (`lockcheck recover`).
pub fn remove_run_blocking(run: &str) -> Result<Removed> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async { remove_run(&connect().await?, run).await })
}
