//! `[backend]`: the lock service, its servers and its lease, read and checked
//! against what the backend's recipe allows.

use super::located::line_of;
use super::preset::{Lease, LEASE_PRESETS};
use super::raw;
use crate::backend::BackendKind;
use crate::cluster::NetworkKind;
use crate::fault::duration::Dur;
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backend {
    pub kind: BackendKind,
    /// Server nodes: 1 for Redis, 5 independent instances for Redlock, 3 for etcd.
    pub nodes: usize,
    pub lease: Lease,
    /// Whether acquire asks the backend for a fencing token (Redis `INCR`, etcd revision).
    pub fencing_token: bool,
    /// How long one acquire may wait for the lock before it fails.
    pub acquire_timeout: Duration,
    /// The servers' addresses under the external runtime (n1 first).
    pub endpoints: Vec<String>,
    /// The image under the docker runtime, instead of the backend's official one.
    pub image: Option<String>,
    /// The hosts under the ssh runtime (`hosts`, `ssh_config`, `program`,
    /// `remote_dir`); none without `hosts`.
    pub ssh: Option<crate::cluster::SshSpec>,
    /// Where the local runtime's nodes listen: loopback, or network namespaces.
    pub network: NetworkKind,
    /// `monotonic_offset`: (node, offset in ns) for each node started in a time
    /// namespace with its monotonic and boot-time clocks shifted, in node order.
    pub monotonic_offsets: Vec<(String, i64)>,
    /// `redis-sentinel`: a grant or renewal counts once this many replicas
    /// acknowledged it (`WAIT`).
    pub replica_acks: Option<u32>,
    /// `primary_check` (patroni): how a node's application tells its node leads.
    pub primary_check: crate::backend::patroni::PrimaryCheck,
    /// `etcd`: the one member the clients talk to (`"follower"`), instead of all.
    pub client_endpoint: Option<crate::backend::ClientEndpoint>,
}

/// Reads `[backend]` of the workload at `path` (whose text is `text`); `bad(key,
/// what)` makes the error about a key.
pub(super) fn read(
    b: raw::Backend,
    path: &Path,
    text: &str,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Backend> {
    let file = path.display();
    let kind = b.kind;
    let hosts = b.hosts.clone().unwrap_or_default();
    let nodes = nodes(&b, &hosts, bad)?;
    let fencing_token = b.fencing_token.unwrap_or(kind.token().is_some());
    if kind.token().is_none() && fencing_token {
        bail!(bad(
            "backend.fencing_token",
            format!("{kind} hands out no fencing token: expected false")
        ));
    }
    let lease = lease(&b, &file, text, bad)?;
    let monotonic_offsets = monotonic_offsets(b.monotonic_offset, nodes, bad)?;
    let replica_acks = b.replica_acks;
    if let Some(n) = replica_acks {
        let replicas = crate::backend::redis_sentinel::SERVERS - 1;
        if kind != BackendKind::RedisSentinel {
            bail!(bad(
                "backend.replica_acks",
                format!("only redis-sentinel waits for its replicas (WAIT); {kind} has none")
            ));
        }
        if n == 0 || n as usize > replicas {
            bail!(bad(
                "backend.replica_acks",
                format!("expected 1 to {replicas} (the replicas), found {n}")
            ));
        }
    }
    let client_endpoint = b.client_endpoint;
    if client_endpoint.is_some() && kind != BackendKind::Etcd {
        bail!(bad(
            "backend.client_endpoint",
            format!("only etcd's clients are pinned to one member; {kind} has no such option")
        ));
    }
    let primary_check = b.primary_check;
    if kind != BackendKind::Patroni && primary_check.is_some() {
        bail!(bad(
            "backend.primary_check",
            "only for kind = \"patroni\": how a node's application tells that its node is the primary".into()
        ));
    }
    let network = network(kind, b.network, bad)?;
    Ok(Backend {
        kind,
        nodes,
        lease,
        fencing_token,
        acquire_timeout: b.acquire_timeout.map_or(Duration::from_secs(1), |d| d.0),
        endpoints: b.endpoints.unwrap_or_default(),
        image: b.image,
        ssh: (!hosts.is_empty()).then(|| crate::cluster::SshSpec {
            hosts,
            // Relative to the workload's own directory.
            ssh_config: b
                .ssh_config
                .map(|p| path.parent().unwrap_or(Path::new("")).join(p)),
            program: b.program,
            remote_dir: b.remote_dir.unwrap_or_else(|| "/tmp".into()),
            manage: b.manage.unwrap_or(true),
        }),
        network,
        monotonic_offsets,
        replica_acks,
        primary_check: primary_check.unwrap_or_default(),
        client_endpoint,
    })
}

/// `nodes`: the backend's usual number unless given, one per host under ssh, and
/// what the backend's recipe allows.
fn nodes(
    b: &raw::Backend,
    hosts: &[String],
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<usize> {
    let kind = b.kind;
    if b.manage.is_some() && hosts.is_empty() {
        bail!(bad(
            "backend.manage",
            "only with backend.hosts (runtime = \"ssh\"): whether lockcheck starts the servers on the hosts, or uses those already running there (false)".into()
        ));
    }
    if let (Some(n), false) = (b.nodes, hosts.is_empty()) {
        if n != hosts.len() {
            bail!(bad(
                "backend.nodes",
                format!(
                    "the ssh runtime runs one node per host: {n} nodes, {} hosts (leave nodes out)",
                    hosts.len()
                )
            ));
        }
    }
    let nodes = b
        .nodes
        .or((!hosts.is_empty()).then_some(hosts.len()))
        .unwrap_or(crate::cluster::default_nodes(kind));
    if nodes == 0 {
        bail!(bad("backend.nodes", "expected at least 1 node".into()));
    }
    let single = crate::cluster::recipe(kind).single_instance();
    if let (Some(instead), true) = (single, nodes != 1) {
        bail!(bad(
            "backend.nodes",
            format!("{kind} is a single instance: expected 1, found {nodes} ({instead})")
        ));
    }
    if let Some(what) = crate::cluster::recipe(kind).fixed_nodes() {
        let fixed = crate::cluster::default_nodes(kind);
        if nodes != fixed {
            bail!(bad(
                "backend.nodes",
                format!("{kind} is {what}: expected {fixed}, found {nodes}")
            ));
        }
    }
    Ok(nodes)
}

/// `lease` (a duration or a preset that fits the backend) and `renew_every`.
fn lease(
    b: &raw::Backend,
    file: &std::path::Display<'_>,
    text: &str,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Lease> {
    let kind = b.kind;
    let lease_line = line_of(text, b.lease.span().start);
    let lease = match *b.lease.get_ref() {
        raw::LeaseSpec::Preset(p) if !p.fits(kind) => {
            let fitting: Vec<&str> = LEASE_PRESETS
                .iter()
                .filter(|q| q.fits(kind))
                .map(|q| q.name)
                .collect();
            bail!(
                "{file}:{lease_line}: backend.lease: the preset {} is what {} users run ({}), \
                 not {}: give the lease as a duration, or a preset for {}: {}",
                p.name,
                p.backend_names(),
                p.source,
                kind.name(),
                kind.name(),
                fitting.join(", ")
            )
        }
        raw::LeaseSpec::Preset(p) => Lease {
            ttl: p.ttl,
            renew_every: p.renew_every,
            preset: Some(p),
        },
        raw::LeaseSpec::Ttl(Dur(ttl)) => Lease {
            ttl,
            renew_every: None,
            preset: None,
        },
    };
    let lease = Lease {
        renew_every: b.renew_every.map(|d| d.0).or(lease.renew_every),
        ..lease
    };
    if lease.ttl.is_zero() {
        bail!(bad(
            "backend.lease",
            "expected a lease longer than 0".into()
        ));
    }
    if matches!(lease.renew_every, Some(r) if r.is_zero()) {
        bail!(bad(
            "backend.renew_every",
            "expected a period longer than 0".into()
        ));
    }
    Ok(lease)
}

/// `monotonic_offset`: (node, offset in ns) for every node, or for those named.
fn monotonic_offsets(
    offset: Option<raw::MonotonicOffset>,
    nodes: usize,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Vec<(String, i64)>> {
    Ok(match offset {
        None => Vec::new(),
        Some(raw::MonotonicOffset::All(d)) => (1..=nodes).map(|i| (format!("n{i}"), d.0)).collect(),
        Some(raw::MonotonicOffset::PerNode(map)) => {
            let mut v = Vec::new();
            for (node, d) in map {
                let i = node
                    .strip_prefix('n')
                    .and_then(|i| i.parse::<usize>().ok())
                    .filter(|i| (1..=nodes).contains(i));
                let Some(i) = i else {
                    bail!(bad(
                        &format!("backend.monotonic_offset.{node}"),
                        format!("expected a node of this backend, n1 .. n{nodes}")
                    ));
                };
                v.push((i, node, d.0));
            }
            v.sort();
            v.into_iter().map(|(_, n, d)| (n, d)).collect()
        }
    })
}

/// `network`: loopback, or namespaces where the backend's servers admit them.
fn network(
    kind: BackendKind,
    network: Option<NetworkKind>,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<NetworkKind> {
    let network = network.unwrap_or_default();
    // Their servers, as lockcheck sets them up, let in loopback clients only.
    if network == NetworkKind::Namespaces && !crate::cluster::recipe(kind).namespaces() {
        let able: Vec<&str> = BackendKind::ALL
            .into_iter()
            .filter(|&k| crate::cluster::recipe(k).namespaces())
            .map(BackendKind::name)
            .collect();
        bail!(bad(
            "backend.network",
            format!("{kind} runs on loopback only (its server admits loopback clients); namespaces are for {}", able.join(", "))
        ));
    }
    Ok(network)
}
