//! A backend's servers as Docker containers, driven through the Docker Engine API
//! (bollard, over the local socket): one container per node (`lockcheck-<run>-n1`)
//! on a bridge network made for the run (`lockcheck-<run>`), each client port
//! published on 127.0.0.1 only, so that the workers and the resource on this machine
//! dial loopback exactly as with local processes. Every object carries the label
//! `lockcheck.run=<run>`: [`remove_run`] finds and removes them all, at the end, on
//! drop, and from `lockcheck recover` (the run's journal names the run).
//!
//! The nodes run the same command lines as local ones ([`ClusterPlan::command`]):
//! each container gets a fixed address on the run's network, so the peer addresses
//! an etcd member is given are plain socket addresses, and the run directory is
//! mounted at its own path, so data directories and clock files keep their names.
//! Data survives a kill and a restart (the container is started again, not made
//! anew); [`DockerCluster::wipe`] empties it. Logs are collected into
//! `nodes/<node>.log` when the cluster stops (and when a node fails to start).
//!
//! Images: the official image of each backend by default; `lockcheck image build`
//! makes `lockcheck/host:latest`, an image with no programs of its own that runs
//! this machine's servers from read-only mounts (listed in its `lockcheck.host-mounts`
//! label), for machines that cannot pull.

use super::local::{etcd_leader, free_loopback_addr, log_tail, probe};
use super::{server_binary, Cluster, ClusterError, ClusterPlan, ClusterSpec, NodeSpec, Runtime};
use crate::backend::BackendKind;
use crate::fault::journal::{Effect, Journal};
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
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The label every object of a run carries, valued with the run's id.
pub const RUN_LABEL: &str = "lockcheck.run";
/// On an image: the directories of this machine it runs from, `:`-separated,
/// mounted read-only at the same paths.
pub const MOUNTS_LABEL: &str = "lockcheck.host-mounts";
/// The image `lockcheck image build` makes.
pub const HOST_IMAGE: &str = "lockcheck/host:latest";

/// The image users pull for each backend.
pub fn default_image(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Redis | BackendKind::Redlock => "redis",
        BackendKind::Etcd => "quay.io/coreos/etcd",
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => "postgres",
        BackendKind::Nats => "nats",
        BackendKind::Zookeeper => "zookeeper",
        BackendKind::Mariadb => "mariadb",
    }
}

/// Whether the docker runtime runs a backend's servers yet, and if not, why.
/// PostgreSQL refuses to run as root (the host image has only root), and the
/// ZooKeeper, NATS and MariaDB command lines have not been tried in containers.
pub fn unsupported(kind: BackendKind) -> Option<&'static str> {
    match kind {
        BackendKind::Redis | BackendKind::Redlock | BackendKind::Etcd => None,
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => {
            Some("postgres refuses to run as root, and the host image has no other user; use the local runtime")
        }
        BackendKind::Nats | BackendKind::Zookeeper | BackendKind::Mariadb => {
            Some("its servers are not run in containers yet; use the local runtime")
        }
    }
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
    /// Each node's container name.
    containers: Vec<String>,
    /// Each running node's main process, as this machine sees it; none while down.
    pids: Vec<Option<u32>>,
    /// Undone (in the journal) once everything is removed.
    journal: Option<(std::sync::Arc<Journal>, u64)>,
    removed: bool,
}

impl DockerCluster {
    /// Starts `spec`'s nodes as containers of `image` and waits until all serve.
    /// A daemon that cannot be reached or an image that is not here is
    /// [`ClusterError::Docker`]; on any failure everything made is removed again.
    pub async fn start(spec: ClusterSpec, image: &str) -> Result<DockerCluster> {
        if spec.nodes == 0 {
            bail!("a {:?} cluster needs at least one node", spec.kind);
        }
        if let Some(why) = unsupported(spec.kind) {
            bail!("{:?} under the docker runtime: {why}", spec.kind);
        }
        let docker = connect().await?;
        let mounts = image_mounts(&docker, image).await?;
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
        // Written down before anything exists, so that `recover` finds it all.
        let journal = Journal::for_run(&dir)?;
        let id = journal.record(Effect::Containers { run: run.clone() })?;
        let network = format!("lockcheck-{run}");
        let mut cluster = DockerCluster {
            docker,
            plan: ClusterPlan {
                // Replaced below, once the network says which addresses it has.
                nodes: Vec::new(),
                binary: PathBuf::new(),
                cluster_token: format!("lockcheck-{run}"),
                spec: ClusterSpec {
                    dir: dir.clone(),
                    ..spec
                },
            },
            containers: Vec::new(),
            pids: Vec::new(),
            run,
            journal: Some((journal, id)),
            removed: false,
        };
        match cluster.create(&network, &mounts, image).await {
            Ok(()) => Ok(cluster),
            Err(e) => {
                cluster.collect_logs().await;
                cluster.remove().await;
                Err(e)
            }
        }
    }

    /// Makes the network and the containers, starts them, waits until all serve.
    async fn create(&mut self, network: &str, mounts: &[String], image: &str) -> Result<()> {
        let labels = HashMap::from([(RUN_LABEL.to_string(), self.run.clone())]);
        let (base, bits) = create_network(&self.docker, network, &labels).await?;
        let kind = self.plan.spec.kind;
        let dir = self.plan.spec.dir.clone();
        // An image that runs this machine's servers runs the very file found here;
        // any other runs the program its own PATH finds.
        self.plan.binary = if mounts.is_empty() {
            PathBuf::from(server_binary(kind).name)
        } else {
            server_binary(kind).resolve(self.plan.spec.binary.as_deref())?
        };
        let has_peers = matches!(kind, BackendKind::Etcd);
        for i in 0..self.plan.spec.nodes {
            let name = format!("n{}", i + 1);
            // .1 is the gateway; nodes from .2 on.
            let ip = IpAddr::V4(Ipv4Addr::from(u32::from(base) + 2 + i as u32));
            if bits > 30 {
                bail!("network {network}'s subnet /{bits} is too small");
            }
            // The same port number inside and out: the container's client port is
            // published on the loopback port that was free here.
            let client = free_loopback_addr()?;
            let peer = has_peers.then(|| SocketAddr::new(ip, 2380));
            self.plan.nodes.push(NodeSpec {
                client_listen: SocketAddr::new(ip, client.port()),
                client_advertise: client,
                peer_listen: peer,
                peer_advertise: peer,
                // ZooKeeper's; it does not run in containers yet (`unsupported`).
                election: None,
                data_dir: dir.join("data").join(&name),
                log_path: dir.join("nodes").join(format!("{name}.log")),
                name,
            });
        }
        std::fs::create_dir_all(dir.join("nodes"))?;
        for i in 0..self.plan.nodes.len() {
            let node = self.plan.nodes[i].clone();
            std::fs::create_dir_all(&node.data_dir)
                .with_context(|| format!("creating {}", node.data_dir.display()))?;
            let mut cmd = self.plan.command(i, false)?;
            if matches!(kind, BackendKind::Redis | BackendKind::Redlock) {
                // Clients arrive through Docker's port forwarding, from outside the
                // container's loopback: Redis' protected mode would refuse them.
                cmd.args(["--protected-mode", "no"]);
            }
            if let Some(super::Prepare(prepare)) = &self.plan.spec.prepare {
                prepare(&node, &mut cmd)
                    .with_context(|| format!("preparing node {} to start", node.name))?;
            }
            let args: Vec<String> = std::iter::once(cmd.get_program())
                .chain(cmd.get_args())
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let env: Vec<String> = cmd
                .get_envs()
                .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?)))
                .collect();
            let port = format!("{}/tcp", node.client_listen.port());
            let mut binds: Vec<String> = mounts.iter().map(|m| format!("{m}:{m}:ro")).collect();
            binds.push(format!("{0}:{0}:rw", dir.display()));
            let container = format!("lockcheck-{}-{}", self.run, node.name);
            let mut node_labels = labels.clone();
            node_labels.insert("lockcheck.node".into(), node.name.clone());
            let body = ContainerCreateBody {
                image: Some(image.to_string()),
                cmd: Some(args),
                env: Some(env),
                hostname: Some(node.name.clone()),
                labels: Some(node_labels),
                exposed_ports: Some(vec![port.clone()]),
                host_config: Some(HostConfig {
                    binds: Some(binds),
                    network_mode: Some(network.to_string()),
                    port_bindings: Some(HashMap::from([(
                        port,
                        Some(vec![PortBinding {
                            host_ip: Some("127.0.0.1".into()),
                            host_port: Some(node.client_advertise.port().to_string()),
                        }]),
                    )])),
                    ..Default::default()
                }),
                networking_config: Some(NetworkingConfig {
                    endpoints_config: Some(HashMap::from([(
                        network.to_string(),
                        EndpointSettings {
                            ipam_config: Some(EndpointIpamConfig {
                                ipv4_address: Some(node.client_listen.ip().to_string()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                    )])),
                }),
                ..Default::default()
            };
            self.docker
                .create_container(
                    Some(
                        CreateContainerOptionsBuilder::default()
                            .name(&container)
                            .build(),
                    ),
                    body,
                )
                .await
                .with_context(|| format!("creating container {container}"))?;
            self.containers.push(container);
            self.pids.push(None);
        }
        // All members first, then the wait: an etcd member is not healthy until a
        // quorum of its peers is up.
        for i in 0..self.containers.len() {
            self.start_node(i).await?;
        }
        let all: Vec<usize> = (0..self.containers.len()).collect();
        self.wait_ready(&all).await
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
                if !probe(self.plan.spec.kind, self.plan.nodes[i].client_advertise).await {
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

    fn index(&self, node: &str) -> Result<usize> {
        self.plan
            .nodes
            .iter()
            .position(|n| n.name == node)
            .with_context(|| {
                format!(
                    "no node named {node} in this {:?} cluster",
                    self.plan.spec.kind
                )
            })
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

    /// Writes each container's whole log (all its lives) into `nodes/<node>.log`.
    async fn collect_logs(&self) {
        for (i, container) in self.containers.iter().enumerate() {
            let options = LogsOptionsBuilder::default()
                .stdout(true)
                .stderr(true)
                .tail("all")
                .build();
            let mut stream = self.docker.logs(container, Some(options));
            let Ok(mut file) = std::fs::File::create(&self.plan.nodes[i].log_path) else {
                continue;
            };
            while let Some(Ok(chunk)) = stream.next().await {
                let _ = file.write_all(&chunk.into_bytes());
            }
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
}

#[async_trait]
impl Cluster for DockerCluster {
    fn kind(&self) -> BackendKind {
        self.plan.spec.kind
    }
    fn runtime(&self) -> Runtime {
        Runtime::Docker
    }
    fn node_names(&self) -> Vec<String> {
        self.plan.nodes.iter().map(|n| n.name.clone()).collect()
    }
    fn endpoints(&self) -> Vec<String> {
        self.plan
            .nodes
            .iter()
            .map(|n| n.client_advertise.to_string())
            .collect()
    }
    fn dir(&self) -> &Path {
        &self.plan.spec.dir
    }
    /// This machine's program, when the image runs it from a mount.
    fn program(&self) -> Option<&Path> {
        self.plan
            .binary
            .is_absolute()
            .then_some(self.plan.binary.as_path())
    }
    fn pid(&self, node: &str) -> Option<u32> {
        self.pids[self.index(node).ok()?]
    }

    /// SIGKILL to the container's main process, through the Engine: the container
    /// stops, its data stays.
    async fn kill(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
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
        Ok(())
    }

    async fn restart(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
        if self.main_pid(i).await.is_some() {
            bail!("node {node} is still running: kill it before restarting");
        }
        // A wiped etcd member cannot come back as itself: the others forget it and
        // take it back as a new member (see LocalCluster::restart). The container
        // keeps its first command line, so it joins with the `existing` state by
        // being made anew.
        let n = &self.plan.nodes[i];
        if self.plan.spec.kind == BackendKind::Etcd && !n.data_dir.join("member").exists() {
            bail!(
                "node {node}'s data was wiped: an etcd member re-admitted empty is not \
                 supported under the docker runtime yet (use the local runtime)"
            );
        }
        self.start_node(i).await?;
        self.wait_ready(&[i]).await
    }

    async fn wipe(&mut self, node: &str) -> Result<()> {
        let i = self.index(node)?;
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

    async fn leader(&self) -> Option<String> {
        match self.plan.spec.kind {
            BackendKind::Redis => self.plan.nodes.first().map(|n| n.name.clone()),
            BackendKind::Etcd => etcd_leader(&self.running(), self.plan.nodes.len()).await,
            // Independent servers (Redlock); the rest do not start (`unsupported`).
            _ => None,
        }
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
    for c in containers {
        let Some(id) = c.id else { continue };
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        docker
            .remove_container(&id, Some(options))
            .await
            .with_context(|| format!("removing container {id}"))?;
        let name = c.names.and_then(|n| n.into_iter().next()).unwrap_or(id);
        removed
            .containers
            .push(name.trim_start_matches('/').to_string());
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
