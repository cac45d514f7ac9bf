//! `[backend]`: the lock service, its servers and its lease, read and checked
//! against what the backend's recipe allows.

use super::located::{key_line, line_of};
use super::preset::{lease_presets, Lease};
use super::raw;
use anyhow::{anyhow, bail, Result};
use lockcheck_fault::duration::Dur;
use lockcheck_servers::backend::{BackendKind, Options, Why};
use lockcheck_servers::cluster::NetworkKind;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backend {
    pub kind: BackendKind,
    /// Server nodes: 1 for Redis, 5 independent instances for Redlock, 3 for etcd.
    pub nodes: usize,
    pub lease: Lease,
    /// `renew`: whether the holder renews between its writes or its lock client
    /// renews on its own (then `lease.renew_every` is always set).
    pub renew: raw::Renew,
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
    pub ssh: Option<lockcheck_servers::cluster::SshSpec>,
    /// Where the local runtime's nodes listen: loopback, or network namespaces.
    pub network: NetworkKind,
    /// `monotonic_offset`: (node, offset in ns) for each node started in a time
    /// namespace with its monotonic and boot-time clocks shifted, in node order.
    pub monotonic_offsets: Vec<(String, i64)>,
    /// The backend's own keys, as written: read and checked by the backend
    /// (`BackendKind::read_options`), carried to its clients and its servers.
    pub options: Options,
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
    let (lease, renew) = lease(&b, &file, text, bad)?;
    let monotonic_offsets = monotonic_offsets(b.monotonic_offset, nodes, bad)?;
    options(kind, &b.options, &file, text, bad)?;
    let network = network(kind, b.network, bad)?;
    Ok(Backend {
        kind,
        nodes,
        lease,
        renew,
        fencing_token,
        acquire_timeout: b.acquire_timeout.map_or(Duration::from_secs(1), |d| d.0),
        endpoints: b.endpoints.unwrap_or_default(),
        image: b.image,
        ssh: (!hosts.is_empty()).then(|| lockcheck_servers::cluster::SshSpec {
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
        options: b.options,
    })
}

/// The backend's own keys, as the backend reads them: a key it does not read is
/// refused with the keys it does (the common ones and its own), a bad value where
/// it is.
fn options(
    kind: BackendKind,
    options: &Options,
    file: &std::path::Display<'_>,
    text: &str,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<()> {
    let Err(e) = kind.read_options(options) else {
        return Ok(());
    };
    let key = format!("backend.{}", e.key);
    let at = |what: String| match key_line(text, "backend", &e.key) {
        Some(line) => anyhow!("{file}:{line}: {key}: {what}"),
        None => bad(&key, what),
    };
    bail!(match e.why {
        Why::Unknown => {
            let expected: Vec<String> = raw::BACKEND_KEYS
                .iter()
                .copied()
                .chain(kind.option_keys())
                .map(|k| format!("`{k}`"))
                .collect();
            at(format!(
                "unknown field `{}`, expected one of {}",
                e.key,
                expected.join(", ")
            ))
        }
        Why::Type => at(e.what),
        Why::Value if e.key.is_empty() => bad("backend", e.what),
        Why::Value => bad(&key, e.what),
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
        .unwrap_or(lockcheck_servers::cluster::default_nodes(kind));
    if nodes == 0 {
        bail!(bad("backend.nodes", "expected at least 1 node".into()));
    }
    let single = lockcheck_servers::cluster::recipe(kind).single_instance();
    if let (Some(instead), true) = (single, nodes != 1) {
        bail!(bad(
            "backend.nodes",
            format!("{kind} is a single instance: expected 1, found {nodes} ({instead})")
        ));
    }
    if let Some(what) = lockcheck_servers::cluster::recipe(kind).fixed_nodes() {
        let fixed = lockcheck_servers::cluster::default_nodes(kind);
        if nodes != fixed {
            bail!(bad(
                "backend.nodes",
                format!("{kind} is {what}: expected {fixed}, found {nodes}")
            ));
        }
    }
    Ok(nodes)
}

/// `lease` (a duration or a preset that fits the backend), `renew_every` and `renew`.
fn lease(
    b: &raw::Backend,
    file: &std::path::Display<'_>,
    text: &str,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<(Lease, raw::Renew)> {
    let kind = b.kind;
    let lease_line = line_of(text, b.lease.span().start);
    let lease = match *b.lease.get_ref() {
        raw::LeaseSpec::Preset(p) if !kind.fits(p) => {
            let fitting: Vec<&str> = lease_presets()
                .into_iter()
                .filter(|q| kind.fits(q))
                .map(|q| q.name)
                .collect();
            bail!(
                "{file}:{lease_line}: backend.lease: the preset {} is what {} users run ({}), \
                 not {}: give the lease as a duration, or a preset for {}: {}",
                p.name,
                lockcheck_servers::backend::preset_backends(p),
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
    let renew = b.renew.unwrap_or_default();
    if renew == raw::Renew::Section {
        return Ok((lease, renew));
    }
    // A watchdog renews well within the lease: a third of it unless told.
    let every = lease.renew_every.unwrap_or(lease.ttl / 3);
    if every >= lease.ttl {
        bail!(bad(
            "backend.renew_every",
            format!(
                "a client renewing in the background renews within its lease: expected less than {} ms, found {} ms",
                lease.ttl.as_millis(),
                every.as_millis()
            )
        ));
    }
    let lease = Lease {
        renew_every: Some(every),
        ..lease
    };
    Ok((lease, renew))
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
    if network == NetworkKind::Namespaces && !lockcheck_servers::cluster::recipe(kind).namespaces()
    {
        let able: Vec<&str> = BackendKind::ALL
            .into_iter()
            .filter(|&k| lockcheck_servers::cluster::recipe(k).namespaces())
            .map(BackendKind::name)
            .collect();
        bail!(bad(
            "backend.network",
            format!("{kind} runs on loopback only (its server admits loopback clients); namespaces are for {}", able.join(", "))
        ));
    }
    Ok(network)
}
