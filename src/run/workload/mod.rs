//! Workloads are files: `workloads/*.toml` say which lock service to start, how the
//! clients use the lock, what the resource does with stale tokens, which faults to
//! inject and which anomalies the design tolerates on purpose.
//!
//! Every key is checked: an unknown key or a bad value is an error that names the
//! file, the line, the key and what is expected. Durations carry their unit
//! (`"250ms"`, `"2s"`, `"1m"`). Every fault must fit the run: due before it ends
//! and over by then (a `[schedule]` must start every entry at least once), else
//! the workload is refused with the figures (see `planned_faults`).
//!
//! ```toml
//! name = "redis-pause"          # optional: the file's stem; names the run directory
//! duration = "6s"
//! seed = 1                      # optional, 0: the fault schedule's random choices
//! resource = "unfenced"         # or "fenced": reject tokens lower than one applied
//!                               #   (or a [resource] table, below)
//! allow = ["double-holder"]     # optional: anomaly kinds the design tolerates
//!
//! [backend]
//! kind = "redis"                # redis | redlock | etcd | zookeeper | nats |
//!                               #   postgres-advisory | postgres-lease | mariadb
//! nodes = 1                     # optional: redlock 5; etcd, zookeeper, nats 3;
//!                               #   the others 1
//! lease = "1s"                  # or a preset (LEASE_PRESETS): client-go and consul
//!                               #   on any backend; etcd-session, curator,
//!                               #   redis-docs, pglock, postgres-keepalive,
//!                               #   rds-postgres-keepalive, mariadb-wait-timeout,
//!                               #   skysql-wait-timeout, go-mysql-lock,
//!                               #   nats-kv-leader-elect on their own backend
//! renew_every = "300ms"         # optional (client-go: 2s): renew during long holds
//! fencing_token = true          # optional: true, except redlock (it has none)
//! acquire_timeout = "500ms"     # optional, 1s: how long one acquire waits
//! network = "loopback"          # optional: loopback | namespaces (local runtime:
//!                               #   each node in a network namespace of its own,
//!                               #   so `partition-nodes` can cut node links and
//!                               #   `latency-nodes` slow them)
//! monotonic_offset = "+600s"    # optional, local runtime: every node starts in a
//!                               #   time namespace whose CLOCK_MONOTONIC and
//!                               #   CLOCK_BOOTTIME are this far off the machine's
//!                               #   (whole run, restarts too); or per node:
//!                               #   { n1 = "+600s", n3 = "-60s" }. The one clock
//!                               #   change that reaches Go servers (etcd, nats),
//!                               #   which ignore the clock interposer. Realtime is
//!                               #   untouched; a negative offset may not take the
//!                               #   clock below 0 (the machine's uptime).
//!
//! [clients]
//! count = 3
//! op_timeout = "10s"            # optional: no reply by then = info, id retired
//! self_fencing_margin = "200ms" # optional: each worker checks its own lease
//!                               #   deadline (less this margin) before each write
//! self_fencing = "library"      # optional, with [client]: each holder asks its
//!                               #   lock library (`held`) before each write and
//!                               #   stops writing when it says no
//!
//! [client]                      # optional: a lock library of your own, through an
//! command = ["python3", "lock.py"] #   adapter program (docs/clients.md); relative
//!                               #   paths are the workload file's folder's
//!
//! [critical_section]
//! hold = "300ms"                # acquire to release, spread after each write
//! writes = 3
//! think = "50ms"                # optional, 0: between release and next acquire
//!
//! [[faults]]
//! kind = "pause"                # SIGSTOP / SIGCONT
//! target = "holder"             # holder | random | client-N
//! duration = "2500ms"
//! after = "1s"                  # optional, 1s: quiet period at the start
//! interval = "1s"               # optional: gap between occurrences; none = once
//! ```
//!
//! The resource as a table instead, to choose which resource and its fence:
//!
//! ```toml
//! [resource]
//! kind = "postgres"             # optional: lockcheck (its own server, the
//!                               #   default) | postgres (a private server the
//!                               #   workers UPDATE themselves)
//! fence = "<="                  # "<=": WHERE id = $3 AND token <= $2, a holder
//!                               #   writes as often as it likes with its token;
//!                               # "<": token < $2, each token writes once (the
//!                               #   holder's own second write is rejected too);
//!                               # "none": no token condition
//! ```
//!
//! The fault catalogue (each entry also takes `duration`, and `after` /
//! `interval` unless a `[schedule]` lays the faults out):
//!
//! ```toml
//! # Optional: lay all faults out from the seed instead (then no after/interval)
//! [schedule]
//! mix = "random"                # random (seeded) | interval (in turn)
//! gap = "2s"                    # mean gap (random) or gap (interval)
//! quiet = "1s"                  # optional, 1s: nothing before
//! heal = "2s"                   # optional, 0: all healed this long before the end
//!
//! # Server nodes: `nodes` = one | minority | majority | all | primary | nN
//! [[faults]]
//! kind = "pause-node"           # pause server nodes, resume them
//! nodes = "primary"
//! method = "sigstop"            # optional: sigstop (the main process) |
//!                               #   freezer (the cgroup freezer: all of its
//!                               #   processes; docker pause for a container)
//! duration = "3s"
//!
//! [[faults]]
//! kind = "kill"                 # kill -9, restart when it ends
//! nodes = "minority"
//! wipe = true                   # optional, false: restart with empty data
//! duration = "500ms"
//!
//! [[faults]]
//! kind = "clock"                # live, per node (not Go servers: reported),
//! nodes = "majority"            #   or a worker's own: target = "holder"
//! offset = "+20s"               # a jump; or rate = 2.0; or a strobe:
//!                               #   offset2 = "-1s", period = "20ms"
//! duration = "4s"
//!
//! [[faults]]
//! kind = "partition"            # client-to-node links: the holder cut off from
//! target = "holder"             #   every node, or `nodes = "primary"`: those
//!                               #   nodes cut off from every client
//! cut = "blackhole"             # optional: blackhole (hang) | reset (RST)
//! duration = "4s"
//!
//! [[faults]]
//! kind = "partition-nodes"      # links between server nodes (iptables rules in
//! shape = "isolate"             #   the nodes' namespaces: needs network =
//! nodes = "primary"             #   "namespaces", 2+ nodes). shape: isolate (one
//!                               #   node: `nodes` = primary | one | nN), halves,
//!                               #   majorities-ring (4+), bridge (3+), or links
//!                               #   with links = [["n1", "n3"]]
//! cut = "blackhole"             # optional: blackhole (DROP) | reset (TCP RST)
//! duration = "4s"
//!
//! [[faults]]
//! kind = "latency"              # the clients' links to the nodes
//! nodes = "all"
//! delay = "50ms"                # each way
//! jitter = "10ms"               # optional, 0
//! duration = "4s"
//!
//! [[faults]]
//! kind = "latency-nodes"        # links between server nodes, through proxies
//! shape = "all"                 #   their namespaces redirect peer connections
//! delay = "100ms"               #   to from the start (network = "namespaces");
//! jitter = "30ms"               #   shapes as partition-nodes, and all (the
//! duration = "4s"               #   default): every link
//! ```

mod duration;
mod faults;
mod located;
mod plan;
mod preset;
mod raw;
#[cfg(test)]
mod tests;

pub use duration::{Dur, SignedDur};
pub use plan::PlannedFault;
pub use preset::{Lease, LeasePreset, LEASE_PRESETS};

use crate::backend::BackendKind;
use crate::check::AnomalyKind;
use crate::cluster::{NetworkKind, Runtime};
use crate::fault::clock::ClockChange;
use crate::fault::netns::NodeShape;
use crate::fault::node::{NodeTarget, PauseMethod};
use crate::fault::proxy::{Links, Mode as LinkMode};
use crate::fault::schedule::Mix;
use crate::fault::shape::Cut;
use crate::fault::Target;
use crate::resource::{self, Fence, Mode};
use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use faults::{clock_change, freezer_refused, link_mode, node_shape, runtime_refuses};
use located::{line_of, located};

/// A workload, read and validated.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `name` in the file, else the file's stem: names the run directory.
    pub name: String,
    /// Where it was read from, and its text (copied into the run directory).
    pub path: PathBuf,
    pub text: String,
    pub duration: Duration,
    pub seed: u64,
    pub allow: Vec<AnomalyKind>,
    pub backend: Backend,
    pub clients: Clients,
    pub section: CriticalSection,
    pub resource: resource::Spec,
    pub faults: Vec<FaultEntry>,
    /// Where the servers run: lockcheck's own processes (default), its own
    /// containers, or someone else's servers (`backend.endpoints`).
    pub runtime: Runtime,
    /// `[schedule]`: the faults laid out from the seed, instead of each entry's
    /// own `after` / `interval`.
    pub schedule: Option<Schedule>,
    /// `[client] command`: the adapter program each worker runs instead of the
    /// built-in recipe of `backend.kind`.
    pub client: Option<crate::backend::adapter::Program>,
}

/// How the faults follow one another when a `[schedule]` table is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub mix: Mix,
    /// Nothing before this (the cluster settles, the history gets a baseline).
    pub quiet: Duration,
    /// Every fault has ended this long before the run ends.
    pub heal: Duration,
}

impl Schedule {
    /// The schedule for a run of `run` (the workload's duration, or `--time-limit`).
    pub fn plan(&self, run: Duration) -> crate::fault::schedule::Plan {
        crate::fault::schedule::Plan {
            run,
            quiet: self.quiet,
            heal: self.heal,
            mix: self.mix,
        }
    }
}

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
    /// Where the local runtime's nodes listen: loopback, or network namespaces.
    pub network: NetworkKind,
    /// `monotonic_offset`: (node, offset in ns) for each node started in a time
    /// namespace with its monotonic and boot-time clocks shifted, in node order.
    pub monotonic_offsets: Vec<(String, i64)>,
}

#[derive(Debug, Clone)]
pub struct Clients {
    pub count: usize,
    /// How long the controller waits for a worker's reply (beyond an acquire's own
    /// wait) before it records `info` and retires the process id.
    pub op_timeout: Duration,
    /// Self-fencing: before each write a worker checks, on its own clock, that its
    /// lease (less this margin) has not run out, and refuses to write if it has.
    pub self_fencing_margin: Option<Duration>,
    /// `self_fencing = "library"`: before each write a holder asks its lock library
    /// (the adapter's `held`) and stops writing if it says the lock is gone.
    pub self_fencing_library: bool,
}

impl Clients {
    /// The margin as the workers and verdict.json carry it.
    pub fn self_fencing_margin_ms(&self) -> Option<u64> {
        self.self_fencing_margin.map(|m| m.as_millis() as u64)
    }
}

/// What a holder does while it holds the lock.
#[derive(Debug, Clone)]
pub struct CriticalSection {
    /// Time from acquire to release, spread evenly after each write.
    pub hold: Duration,
    /// Writes to the protected resource per critical section, each carrying the token.
    pub writes: u32,
    /// Pause between a release and the next acquire.
    pub think: Duration,
}

/// One `[[faults]]` entry: what to break, whom, and when.
#[derive(Debug, Clone)]
pub struct FaultEntry {
    pub kind: FaultKind,
    /// The client a client fault hits; `Random` (timed) for node faults, which
    /// pick their nodes with `nodes`.
    pub target: Target,
    /// The server nodes a node fault (pause-node, kill, clock) hits.
    pub nodes: NodeTarget,
    /// Kill: restart the node with its data directory wiped.
    pub wipe: bool,
    /// Pause-node: SIGSTOP or the cgroup freezer.
    pub pause_method: PauseMethod,
    /// Clock: what happens to the clocks.
    pub clock: Option<ClockChange>,
    /// Clock: the clock of the `target` client's worker, not of server nodes.
    pub clock_of_client: bool,
    /// Partition, latency: what the links between the clients and the nodes do,
    /// and which links.
    pub link: Option<LinkMode>,
    pub links: Option<Links>,
    /// Partition-nodes: which node-to-node links, and how they are cut.
    pub node_partition: Option<(NodeShape, Cut)>,
    /// Latency-nodes: which node-to-node links are slowed (by `link`).
    pub node_latency: Option<NodeShape>,
    /// How long each occurrence lasts.
    pub duration: Duration,
    /// Quiet period from the start of the run to the first occurrence.
    pub after: Duration,
    /// Gap from the end of one occurrence to the start of the next; `None`: once.
    pub interval: Option<Duration>,
    /// Where the entry is in the workload's text, for errors that name a line.
    pub span: std::ops::Range<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGSTOP / SIGCONT a client process.
    Pause,
    /// SIGSTOP / SIGCONT server nodes.
    PauseNode,
    /// Kill -9 server nodes, restart them when the fault ends.
    Kill,
    /// Skew the clocks of server nodes: jump, rate or strobe.
    Clock,
    /// Cut the links between the clients and server nodes (black hole or reset).
    Partition,
    /// Delay the bytes between the clients and server nodes.
    Latency,
    /// Cut the links between server nodes (in their network namespaces).
    PartitionNodes,
    /// Delay the bytes between server nodes (through proxies their namespaces
    /// redirect them to).
    LatencyNodes,
}

/// How a partition cuts a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CutKind {
    Blackhole,
    Reset,
}

impl Workload {
    pub fn load(path: &Path) -> Result<Workload> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("{}: cannot read the workload: {e}", path.display()))?;
        Self::parse(&text, path)
    }

    /// Parses workload text; `path` names the file in errors and gives the default name.
    pub fn parse(text: &str, path: &Path) -> Result<Workload> {
        let file = path.display();
        let raw: raw::Workload = toml::from_str(text).map_err(|e| located(&file, text, &e))?;
        // Errors found after parsing name the key in the file's own dotted words.
        let bad = |key: &str, what: String| anyhow!("{file}: {key}: {what}");

        let kind = raw.backend.kind;
        let nodes = raw
            .backend
            .nodes
            .unwrap_or(crate::cluster::default_nodes(kind));
        if nodes == 0 {
            bail!(bad("backend.nodes", "expected at least 1 node".into()));
        }
        if kind == BackendKind::Redis && nodes != 1 {
            bail!(bad(
                "backend.nodes",
                format!("redis is a single instance: expected 1, found {nodes} (use kind = \"redlock\" for several)")
            ));
        }
        let fencing_token = raw.backend.fencing_token.unwrap_or(kind.token().is_some());
        if kind.token().is_none() && fencing_token {
            bail!(bad(
                "backend.fencing_token",
                format!("{kind} hands out no fencing token: expected false")
            ));
        }
        let resource = match raw.resource {
            None | Some(raw::ResourceSpec::Mode(Mode::Unfenced)) => resource::Spec {
                kind: resource::Kind::Lockcheck,
                fence: Fence::Off,
            },
            Some(raw::ResourceSpec::Mode(Mode::Fenced)) => resource::Spec {
                kind: resource::Kind::Lockcheck,
                fence: Fence::NotBelow,
            },
            Some(raw::ResourceSpec::Table(t)) => resource::Spec {
                kind: t.kind.unwrap_or_default(),
                fence: t.fence,
            },
        };
        if resource.fence != Fence::Off && !fencing_token {
            bail!(bad(
                "resource",
                "a fenced resource needs tokens: set backend.fencing_token = true, or leave the resource unfenced".into()
            ));
        }
        let lease_line = line_of(text, raw.backend.lease.span().start);
        let lease = match raw.backend.lease.into_inner() {
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
            renew_every: raw.backend.renew_every.map(|d| d.0).or(lease.renew_every),
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
        let monotonic_offsets = match raw.backend.monotonic_offset {
            None => Vec::new(),
            Some(raw::MonotonicOffset::All(d)) => {
                (1..=nodes).map(|i| (format!("n{i}"), d.0)).collect()
            }
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
        };
        let count = raw.clients.count;
        if count == 0 {
            bail!(bad("clients.count", "expected at least 1 client".into()));
        }
        let self_fencing_margin = raw.clients.self_fencing_margin.map(|d| d.0);
        if self_fencing_margin.is_some_and(|m| m >= lease.ttl) {
            bail!(bad(
                "clients.self_fencing_margin",
                format!(
                    "expected a margin shorter than the lease ({} ms): no write could pass",
                    lease.ttl.as_millis()
                )
            ));
        }
        let client = raw
            .client
            .map(|c| crate::backend::adapter::Program::of_workload(c.command, path))
            .transpose()
            .map_err(|e| bad("client.command", format!("{e:#}")))?;
        let self_fencing_library = raw.clients.self_fencing.is_some();
        if self_fencing_library && client.is_none() {
            bail!(bad(
                "clients.self_fencing",
                "\"library\" asks the lock library through its adapter's `held`: \
                 the workload needs a [client] command"
                    .into()
            ));
        }
        if raw.critical_section.writes == 0 {
            bail!(bad(
                "critical_section.writes",
                "expected at least 1 write per critical section".into()
            ));
        }
        let network = raw.backend.network.unwrap_or_default();
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
        let mut faults = Vec::new();
        let raw_timed: Vec<bool> = raw
            .faults
            .iter()
            .map(|f| f.get_ref().after.is_some() || f.get_ref().interval.is_some())
            .collect();
        for (i, f) in raw.faults.into_iter().enumerate() {
            let span = f.span();
            let f = f.into_inner();
            let key = |k: &str| format!("faults[{i}].{k}");
            if f.kind == FaultKind::Pause && f.target.is_none() {
                bail!(bad(
                    &key("target"),
                    "expected \"holder\", \"random\" or a client name like \"client-0\"".into()
                ));
            }
            if let Some(Target::Client(c)) = f.target {
                if c >= count {
                    bail!(bad(
                        &key("target"),
                        format!(
                            "there are {count} clients (client-0 .. client-{}): found {}",
                            count - 1,
                            Target::Client(c)
                        )
                    ));
                }
            }
            if f.duration.0.is_zero() {
                bail!(bad(
                    &key("duration"),
                    "expected a duration longer than 0".into()
                ));
            }
            let link_fault = matches!(f.kind, FaultKind::Partition | FaultKind::Latency);
            if link_fault && f.target.is_some() == f.nodes.is_some() {
                bail!(bad(&key("nodes"), "a link fault cuts either a client off (`target`: \"holder\", \"random\", \"client-N\") or nodes off (`nodes`): give one of them".into()));
            }
            let client_fault = f.kind == FaultKind::Pause;
            if client_fault && f.nodes.is_some() {
                bail!(bad(
                    &key("nodes"),
                    "a client pause hits a client: use `target`, or kind = \"pause-node\"".into()
                ));
            }
            let clock_of_client = f.kind == FaultKind::Clock && f.target.is_some();
            if clock_of_client && f.nodes.is_some() {
                bail!(bad(
                    &key("target"),
                    "a clock fault skews either a client's clock (`target`) or nodes' (`nodes`), not both".into()
                ));
            }
            if !client_fault && !link_fault && !clock_of_client && f.target.is_some() {
                bail!(bad(&key("target"), "a node fault hits server nodes: use `nodes` (\"one\", \"minority\", \"majority\", \"all\", \"primary\" or \"n2\")".into()));
            }
            if f.kind != FaultKind::PauseNode && f.method.is_some() {
                bail!(bad(
                    &key("method"),
                    "only a pause-node fault has a method (\"sigstop\" or \"freezer\")".into()
                ));
            }
            if f.kind != FaultKind::Kill && f.wipe.is_some() {
                bail!(bad(
                    &key("wipe"),
                    "only a kill restarts a node, wiped or not".into()
                ));
            }
            let clock = clock_change(&f, &|k, what| bad(&key(k), what))?;
            let link = link_mode(&f, &|k, what| bad(&key(k), what))?;
            let node_shape = node_shape(&f, nodes, network, &|k, what| bad(&key(k), what))?;
            let node_partition = node_shape
                .clone()
                .filter(|_| f.kind == FaultKind::PartitionNodes)
                .map(|shape| {
                    let cut = match f.cut.unwrap_or(CutKind::Blackhole) {
                        CutKind::Blackhole => Cut::Blackhole,
                        CutKind::Reset => Cut::Reset,
                    };
                    (shape, cut)
                });
            let node_latency = node_shape.filter(|_| f.kind == FaultKind::LatencyNodes);
            let links = link_fault.then(|| match (&f.target, &f.nodes) {
                (Some(t), _) => Links::FromClient(t.clone()),
                (None, n) => Links::ToNodes(n.clone().unwrap_or(NodeTarget::One)),
            });
            faults.push(FaultEntry {
                kind: f.kind,
                target: f.target.unwrap_or(Target::Random),
                nodes: f.nodes.unwrap_or(NodeTarget::One),
                wipe: f.wipe.unwrap_or(false),
                pause_method: f.method.unwrap_or_default(),
                clock,
                clock_of_client,
                link,
                links,
                node_partition,
                node_latency,
                duration: f.duration.0,
                after: f.after.map_or(Duration::from_secs(1), |d| d.0),
                interval: f.interval.map(|d| d.0),
                span,
            });
        }
        if raw.duration.0.is_zero() {
            bail!(bad("duration", "expected a duration longer than 0".into()));
        }
        let name = match raw.name {
            Some(n) => {
                if n.is_empty()
                    || !n
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                {
                    bail!(bad(
                        "name",
                        format!("expected letters, digits, '-', '_' or '.' (it names the run directory), found {n:?}")
                    ));
                }
                n
            }
            None => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "workload".into()),
        };
        let schedule = match raw.schedule {
            None => None,
            Some(sch) => {
                if let Some(i) = raw_timed.iter().position(|t| *t) {
                    bail!(bad(
                        &format!("faults[{i}]"),
                        "with a [schedule], the schedule says when faults happen: drop `after` and `interval`".into()
                    ));
                }
                let schedule = Schedule {
                    mix: match sch.mix {
                        raw::MixKind::Interval => Mix::Interval { gap: sch.gap.0 },
                        raw::MixKind::Random => Mix::Random {
                            mean_gap: sch.gap.0,
                        },
                    },
                    quiet: sch.quiet.map_or(Duration::from_secs(1), |d| d.0),
                    heal: sch.heal.map_or(Duration::ZERO, |d| d.0),
                };
                let durations: Vec<Duration> = faults.iter().map(|f| f.duration).collect();
                let plan = schedule.plan(raw.duration.0);
                crate::fault::schedule::timeline(&durations, &plan, 0)
                    .map_err(|e| bad("schedule", format!("{e:#}")))?;
                Some(schedule)
            }
        };
        let w = Workload {
            name,
            path: path.to_path_buf(),
            text: text.to_string(),
            duration: raw.duration.0,
            seed: raw.seed.unwrap_or(0),
            allow: raw.allow,
            backend: Backend {
                kind,
                nodes,
                lease,
                fencing_token,
                acquire_timeout: raw
                    .backend
                    .acquire_timeout
                    .map_or(Duration::from_secs(1), |d| d.0),
                endpoints: raw.backend.endpoints.unwrap_or_default(),
                image: raw.backend.image,
                network,
                monotonic_offsets,
            },
            clients: Clients {
                count,
                op_timeout: raw
                    .clients
                    .op_timeout
                    .map_or(Duration::from_secs(10), |d| d.0),
                self_fencing_margin,
                self_fencing_library,
            },
            section: CriticalSection {
                hold: raw.critical_section.hold.0,
                writes: raw.critical_section.writes,
                think: raw.critical_section.think.map_or(Duration::ZERO, |d| d.0),
            },
            resource,
            faults,
            schedule,
            runtime: raw.runtime.unwrap_or_default(),
            client,
        }
        .checked_for_runtime()?;
        w.planned_faults(None, w.seed)?;
        Ok(w)
    }

    /// The same workload under another runtime (`--runtime`), checked again: a
    /// fault the runtime cannot apply is an error here, never a silent skip.
    pub fn with_runtime(mut self, runtime: Runtime) -> Result<Workload> {
        self.runtime = runtime;
        self.checked_for_runtime()
    }

    /// Checks what depends on the runtime: the endpoints an external cluster needs
    /// (which also give its number of nodes), and the faults it can apply.
    fn checked_for_runtime(mut self) -> Result<Workload> {
        let file = self.path.display();
        let rt = self.runtime.name();
        let endpoints = self.backend.endpoints.len();
        match self.runtime {
            Runtime::External if endpoints == 0 => bail!(
                "{file}: backend.endpoints: the external runtime needs the servers' addresses, like [\"127.0.0.1:6379\"]"
            ),
            Runtime::External if self.backend.kind == BackendKind::Redis && endpoints != 1 => bail!(
                "{file}: backend.endpoints: redis is a single instance: expected 1 address, found {endpoints}"
            ),
            Runtime::External => self.backend.nodes = endpoints,

            _ if endpoints > 0 => bail!(
                "{file}: backend.endpoints: only for runtime = \"external\"; under the {rt} runtime lockcheck starts its own servers"
            ),
            _ => {}
        }
        if self.runtime != Runtime::Local && !self.backend.monotonic_offsets.is_empty() {
            bail!(
                "{file}: backend.monotonic_offset: only under the local runtime, where lockcheck starts each server itself in a time namespace of its own"
            );
        }
        if self.backend.network == NetworkKind::Namespaces && self.runtime != Runtime::Local {
            bail!(
                "{file}: backend.network: namespaces are the local runtime's; the {rt} runtime places its servers itself"
            );
        }
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(why) = runtime_refuses(self.runtime, f.kind) {
                bail!(
                    "{file}: faults[{i}].kind: {} is unavailable under the {rt} runtime: {why}",
                    f.kind.name()
                );
            }
            if f.pause_method == PauseMethod::Freezer {
                if let Some(why) = freezer_refused(self.runtime) {
                    bail!("{file}: faults[{i}].method: the freezer is unavailable under the {rt} runtime: {why}");
                }
            }
        }
        Ok(self)
    }
}
