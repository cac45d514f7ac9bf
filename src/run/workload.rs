//! Workloads are files: `workloads/*.toml` say which lock service to start, how the
//! clients use the lock, what the resource does with stale tokens, which faults to
//! inject and which anomalies the design tolerates on purpose.
//!
//! Every key is checked: an unknown key or a bad value is an error that names the
//! file, the line, the key and what is expected. Durations carry their unit
//! (`"250ms"`, `"2s"`, `"1m"`).
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
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The lease a holder gets, and how often a holder renews it during a long hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub ttl: Duration,
    pub renew_every: Option<Duration>,
    /// The preset this came from, with the settings it stands for, for reports.
    pub preset: Option<&'static LeasePreset>,
}

/// The TTLs the industry actually runs, by name: `lease = "client-go"`.
#[derive(Debug, PartialEq)]
pub struct LeasePreset {
    pub name: &'static str,
    pub ttl: Duration,
    /// The holder's renewal period (client-go's retry period); `None`: the recipe
    /// relies on the backend's own keep-alive, or on finishing within the TTL.
    pub renew_every: Option<Duration>,
    /// Where the numbers come from and what else the recipe sets.
    pub source: &'static str,
    /// The backends whose users run these settings; empty: a lease recipe not tied
    /// to one service (client-go's Lease objects, Consul sessions), usable on any.
    pub backends: &'static [BackendKind],
}

impl LeasePreset {
    /// Whether a workload of `kind` may use this preset.
    pub fn fits(&self, kind: BackendKind) -> bool {
        self.backends.is_empty() || self.backends.contains(&kind)
    }

    /// The backends it fits, as workloads name them (`postgres-lease`), or "any".
    pub fn backend_names(&self) -> String {
        if self.backends.is_empty() {
            return "any backend".into();
        }
        self.backends
            .iter()
            .map(|&k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub const LEASE_PRESETS: &[LeasePreset] = &[
    LeasePreset {
        name: "client-go",
        ttl: Duration::from_secs(15),
        renew_every: Some(Duration::from_secs(2)),
        source: "Kubernetes client-go leader election: lease 15 s, renew deadline 10 s, retry period 2 s",
        backends: &[],
    },
    LeasePreset {
        name: "etcd-session",
        ttl: Duration::from_secs(60),
        renew_every: None,
        source: "etcd clientv3 concurrency session: TTL 60 s, kept alive by the session",
        backends: &[BackendKind::Etcd],
    },
    LeasePreset {
        name: "consul",
        ttl: Duration::from_secs(15),
        renew_every: None,
        source: "Consul lock: session TTL 15 s, lock-delay 15 s",
        backends: &[],
    },
    LeasePreset {
        name: "curator",
        ttl: Duration::from_secs(60),
        renew_every: None,
        source: "Apache Curator / ZooKeeper: session timeout 60 s",
        backends: &[BackendKind::Zookeeper],
    },
    LeasePreset {
        name: "redis-docs",
        ttl: Duration::from_secs(30),
        renew_every: None,
        source: "Redis documentation: SET key value NX PX 30000",
        backends: &[BackendKind::Redis, BackendKind::Redlock],
    },
    // cirello.io/pglock (github.com/cirello-io/pglock, client.go):
    // defaultLeaseDuration = 20 * time.Second, defaultHeartbeatFrequency =
    // 5 * time.Second; a lease row per lock, renewed by the heartbeat.
    LeasePreset {
        name: "pglock",
        ttl: Duration::from_secs(20),
        renew_every: Some(Duration::from_secs(5)),
        source: "cirello.io/pglock: lease row, lease 20 s, heartbeat every 5 s (its defaults)",
        backends: &[BackendKind::PostgresLease],
    },
    // An advisory lock lives as long as its session. PostgreSQL's defaults
    // (idle_session_timeout = 0, tcp_keepalives_* = 0: the system's) leave the
    // ending of a silent client's session to Linux's keepalive (tcp(7):
    // tcp_keepalive_time 7200 s, tcp_keepalive_intvl 75 s, tcp_keepalive_probes 9):
    // 7200 + 9 × 75 = 7875 s. lockcheck applies it as idle_session_timeout, which
    // also ends a paused client's session (keepalives alone end only a client whose
    // host stopped answering).
    LeasePreset {
        name: "postgres-keepalive",
        ttl: Duration::from_secs(7875),
        renew_every: None,
        source: "PostgreSQL defaults: a silent client's session (and its advisory locks) ends after Linux's TCP keepalive, 7200 s + 9 probes × 75 s",
        backends: &[BackendKind::PostgresAdvisory],
    },
    // Amazon RDS for PostgreSQL, "Dead connection handling in PostgreSQL"
    // (docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Appendix.PostgreSQL.
    // CommonDBATasks.DeadConnectionHandling.html): defaults tcp_keepalives_idle 300,
    // tcp_keepalives_interval 30, tcp_keepalives_count 2: 300 + 2 × 30 = 360 s.
    LeasePreset {
        name: "rds-postgres-keepalive",
        ttl: Duration::from_secs(360),
        renew_every: None,
        source: "Amazon RDS for PostgreSQL defaults: tcp_keepalives_idle 300 s, interval 30 s, count 2: a silent client's session ends after 360 s",
        backends: &[BackendKind::PostgresAdvisory],
    },
    // MariaDB server system variables, wait_timeout: default 28800 s (8 h)
    // (mariadb.com/docs/server/ref/mdb/system-variables/wait_timeout).
    LeasePreset {
        name: "mariadb-wait-timeout",
        ttl: Duration::from_secs(28800),
        renew_every: None,
        source: "MariaDB default wait_timeout 28800 s: an idle session (and its GET_LOCK locks) ends after 8 h",
        backends: &[BackendKind::Mariadb],
    },
    // The same page: SkySQL's Replicated Transactions services (10.4 to 10.6)
    // default wait_timeout to 600 s.
    LeasePreset {
        name: "skysql-wait-timeout",
        ttl: Duration::from_secs(600),
        renew_every: None,
        source: "MariaDB SkySQL Replicated Transactions service default wait_timeout 600 s",
        backends: &[BackendKind::Mariadb],
    },
    // github.com/sanketplus/go-mysql-lock (locker_client.go): GET_LOCK on a
    // dedicated connection, pinged every DefaultRefreshInterval = time.Second; it
    // leaves wait_timeout at the server's default (28800 s).
    LeasePreset {
        name: "go-mysql-lock",
        ttl: Duration::from_secs(28800),
        renew_every: Some(Duration::from_secs(1)),
        source: "sanketplus/go-mysql-lock: GET_LOCK session pinged every 1 s, server default wait_timeout 28800 s",
        backends: &[BackendKind::Mariadb],
    },
    // github.com/ripienaar/nats-kv-leader-elect (by a NATS maintainer): README
    // `nats kv add --ttl 5m ELECTIONS`; election.go: create the key to win,
    // Update() with the last sequence every 0.75 × the bucket TTL to stay leader.
    LeasePreset {
        name: "nats-kv-leader-elect",
        ttl: Duration::from_secs(300),
        renew_every: Some(Duration::from_secs(225)),
        source: "ripienaar/nats-kv-leader-elect: KV bucket TTL 5 min, leader updates its key every 75% of it (225 s)",
        backends: &[BackendKind::Nats],
    },
];

#[derive(Debug, Clone)]
pub struct Clients {
    pub count: usize,
    /// How long the controller waits for a worker's reply (beyond an acquire's own
    /// wait) before it records `info` and retires the process id.
    pub op_timeout: Duration,
    /// Self-fencing: before each write a worker checks, on its own clock, that its
    /// lease (less this margin) has not run out, and refuses to write if it has.
    pub self_fencing_margin: Option<Duration>,
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
            .map(|f| f.after.is_some() || f.interval.is_some())
            .collect();
        for (i, f) in raw.faults.into_iter().enumerate() {
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
        Workload {
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
        }
        .checked_for_runtime()
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

/// Why a runtime cannot apply a kind of fault, if it cannot. Under the external
/// runtime lockcheck owns the clients and the links to the servers (its proxy),
/// never the servers' processes or clocks.
fn runtime_refuses(runtime: Runtime, kind: FaultKind) -> Option<&'static str> {
    match (runtime, kind) {
        (Runtime::External, FaultKind::PauseNode) => Some("pausing a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Kill) => Some("killing and restarting a server needs its process; lockcheck did not start these servers"),
        (Runtime::External, FaultKind::Clock) => Some("a server's clock is skewed through the interposer lockcheck loads into the servers it starts; these it did not start"),
        (Runtime::Docker | Runtime::External, FaultKind::PartitionNodes | FaultKind::LatencyNodes) => Some("links between nodes are cut or slowed inside the network namespaces the local runtime puts its nodes in"),
        (Runtime::Local | Runtime::Docker | Runtime::External, _) => None,
    }
}

/// Why a runtime cannot pause nodes with the cgroup freezer, if it cannot.
fn freezer_refused(runtime: Runtime) -> Option<String> {
    match runtime {
        Runtime::Docker => None,
        Runtime::Local => crate::cluster::freezer::unavailable(),
        // pause-node itself is refused there.
        Runtime::External => Some("lockcheck did not start these servers".into()),
    }
}

impl FaultKind {
    /// The kind as a workload spells it.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::PauseNode => "pause-node",
            FaultKind::Kill => "kill",
            FaultKind::Clock => "clock",
            FaultKind::Partition => "partition",
            FaultKind::Latency => "latency",
            FaultKind::PartitionNodes => "partition-nodes",
            FaultKind::LatencyNodes => "latency-nodes",
        }
    }
}

/// The line (from 1) of a byte offset into the file's text.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Turns toml's error (with its span) into `FILE:LINE: KEY: what is expected`.
fn located(file: &dyn fmt::Display, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message().trim_end();
    match e.span() {
        // A missing key's span is the table that lacks it: from its header, or the
        // whole file for the top level.
        Some(span) if message.starts_with("missing field") => {
            let header = text[span.start.min(text.len())..]
                .lines()
                .next()
                .and_then(|l| l.trim().strip_prefix('['))
                .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim().to_string());
            match header {
                Some(table) => {
                    let line = line_of(text, span.start);
                    anyhow!("{file}:{line}: [{table}]: {message}")
                }
                None => anyhow!("{file}: {message} (at the top level)"),
            }
        }
        Some(span) => {
            let line = line_of(text, span.start);
            let source = text.lines().nth(line - 1).unwrap_or("").trim();
            // The key a value error is about is at the start of its line, inside the
            // table of the nearest header above it.
            let table = text
                .lines()
                .take(line - 1)
                .filter_map(|l| l.trim().strip_prefix('['))
                .last()
                .map(|h| h.trim_matches(|c| c == '[' || c == ']').trim());
            let key = source
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| !k.is_empty() && !k.starts_with('['));
            let key = match (table, key) {
                (Some(t), Some(k)) => format!("{t}.{k}"),
                (None, Some(k)) => k.to_string(),
                (Some(t), None) => t.to_string(),
                (None, None) => String::new(),
            };
            if key.is_empty() {
                anyhow!("{file}:{line}: {message}\n    {source}")
            } else {
                anyhow!("{file}:{line}: {key}: {message}\n    {source}")
            }
        }
        None => anyhow!("{file}: {message}"),
    }
}

/// What a `kind = "clock"` entry does: `rate`, `period` (strobe between
/// `offset` and `offset2`) or `offset` (a jump); other kinds take none of them.
fn clock_change(
    f: &raw::Fault,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<ClockChange>> {
    let given = [
        ("offset", f.offset.is_some()),
        ("offset2", f.offset2.is_some()),
        ("period", f.period.is_some()),
        ("rate", f.rate.is_some()),
    ];
    if f.kind != FaultKind::Clock {
        return match given.iter().find(|(_, g)| *g) {
            Some((k, _)) => Err(bad(k, "only a clock fault takes it".into())),
            None => Ok(None),
        };
    }
    let change = match (f.rate, f.period, f.offset, f.offset2) {
        (Some(rate), None, None, None) if rate.is_finite() && rate > 0.0 => {
            ClockChange::Rate { rate }
        }
        (Some(rate), None, None, None) => {
            return Err(bad(
                "rate",
                format!("expected a positive number, found {rate}"),
            ))
        }
        (None, Some(period), a, Some(b)) if !period.0.is_zero() => ClockChange::Strobe {
            offset_ns: a.map_or(0, |a| a.0),
            offset2_ns: b.0,
            period: period.0,
        },
        (None, None, Some(a), None) => ClockChange::Jump { offset_ns: a.0 },
        _ => {
            return Err(bad(
                "kind",
                "a clock fault takes `offset` (a jump), or `rate`, or `period` + `offset2` \
                 (+ `offset`) for a strobe"
                    .into(),
            ))
        }
    };
    Ok(Some(change))
}

/// What a partition or latency entry does to its links; other kinds take none
/// of `cut`, `delay`, `jitter`.
fn link_mode(
    f: &raw::Fault,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<LinkMode>> {
    let only = |k: &str, kind: &str| Err(bad(k, format!("only a {kind} fault takes it")));
    match f.kind {
        // Its cut is read with its shape (`node_shape`).
        FaultKind::PartitionNodes => match (f.delay.is_some(), f.jitter.is_some()) {
            (true, _) => only("delay", "latency"),
            (_, true) => only("jitter", "latency"),
            _ => Ok(None),
        },
        FaultKind::Partition => {
            if f.delay.is_some() {
                return only("delay", "latency");
            }
            if f.jitter.is_some() {
                return only("jitter", "latency");
            }
            Ok(Some(match f.cut.unwrap_or(CutKind::Blackhole) {
                CutKind::Blackhole => LinkMode::Blackhole,
                CutKind::Reset => LinkMode::Reset,
            }))
        }
        FaultKind::Latency | FaultKind::LatencyNodes => {
            if f.cut.is_some() {
                return only("cut", "partition");
            }
            let Some(delay) = f.delay else {
                return Err(bad(
                    "delay",
                    "a latency fault needs its delay, like \"50ms\"".into(),
                ));
            };
            Ok(Some(LinkMode::Latency {
                delay: delay.0,
                jitter: f.jitter.map_or(Duration::ZERO, |j| j.0),
            }))
        }
        _ => match [
            ("cut", f.cut.is_some()),
            ("delay", f.delay.is_some()),
            ("jitter", f.jitter.is_some()),
        ]
        .iter()
        .find(|(_, g)| *g)
        {
            Some((k, _)) => only(k, "partition or latency"),
            None => Ok(None),
        },
    }
}

/// Which node-to-node links a `partition-nodes` entry cuts or a `latency-nodes`
/// entry slows; other kinds take neither `shape` nor `links`. The shape is
/// checked against the cluster's `nodes` here, so that a run never starts with
/// a fault it cannot make. A partition isolates one node by default; a latency
/// slows every link.
fn node_shape(
    f: &raw::Fault,
    nodes: usize,
    network: NetworkKind,
    bad: &dyn Fn(&str, String) -> anyhow::Error,
) -> Result<Option<NodeShape>> {
    use raw::ShapeKind;
    if !matches!(f.kind, FaultKind::PartitionNodes | FaultKind::LatencyNodes) {
        return match [("shape", f.shape.is_some()), ("links", f.links.is_some())]
            .iter()
            .find(|(_, g)| *g)
        {
            Some((k, _)) => Err(bad(
                k,
                "only a partition-nodes or latency-nodes fault takes it".into(),
            )),
            None => Ok(None),
        };
    }
    if network != NetworkKind::Namespaces {
        return Err(bad(
            "kind",
            "links between nodes are cut or slowed inside their network namespaces: set [backend] network = \"namespaces\"".into(),
        ));
    }
    let default = match f.kind {
        FaultKind::LatencyNodes => ShapeKind::All,
        _ => ShapeKind::Isolate,
    };
    let kind = f.shape.unwrap_or(default);
    if f.links.is_some() != (kind == ShapeKind::Links) {
        return Err(bad(
            "links",
            "shape = \"links\" takes the pairs of nodes, like links = [[\"n1\", \"n3\"]], and no other shape takes them".into(),
        ));
    }
    let nodes_only_for_isolate = || {
        Err(bad(
            "nodes",
            "shape = \"isolate\" takes the node to cut off, like nodes = \"primary\", and no other shape takes it".into(),
        ))
    };
    let shape = match (kind, f.nodes.clone()) {
        (ShapeKind::Isolate, Some(t @ (NodeTarget::One | NodeTarget::Primary | NodeTarget::Node(_)))) => {
            NodeShape::Isolate(t)
        }
        (ShapeKind::Isolate, Some(other)) => {
            return Err(bad(
                "nodes",
                format!("isolate cuts one node off: expected \"primary\", \"one\" or a node like \"n2\", found \"{other}\" (shape = \"halves\" splits the cluster)"),
            ))
        }
        (ShapeKind::Isolate, None) | (_, Some(_)) => return nodes_only_for_isolate(),
        (ShapeKind::Halves, None) => NodeShape::Halves,
        (ShapeKind::MajoritiesRing, None) => NodeShape::MajoritiesRing,
        (ShapeKind::Bridge, None) => NodeShape::Bridge,
        (ShapeKind::All, None) => NodeShape::All,
        (ShapeKind::Links, None) => NodeShape::Links(f.links.clone().unwrap_or_default()),
    };
    shape
        .check(nodes)
        .map_err(|e| bad("shape", format!("{e:#}")))?;
    Ok(Some(shape))
}

/// A signed duration, in nanoseconds: `"+20s"`, `"-500ms"`, `"20s"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedDur(pub i64);

impl<'de> Deserialize<'de> for SignedDur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = s.trim();
        let (sign, rest) = match t.strip_prefix('-') {
            Some(r) => (-1, r),
            None => (1, t.strip_prefix('+').unwrap_or(t)),
        };
        let Dur(d) = rest.parse().map_err(serde::de::Error::custom)?;
        i64::try_from(d.as_nanos())
            .map(|n| SignedDur(sign * n))
            .map_err(|_| serde::de::Error::custom(format!("{s} is too long")))
    }
}

/// A duration written with its unit: `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dur(pub Duration);

const DURATION_EXPECTED: &str =
    "expected a duration with its unit, like \"500ms\", \"2s\" or \"1m\"";

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let scale = match unit.trim() {
            "ms" => 1e-3,
            "s" => 1.0,
            "m" | "min" => 60.0,
            _ => return Err(format!("{DURATION_EXPECTED}, found \"{s}\"")),
        };
        let n: f64 = number
            .parse()
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))?;
        Duration::try_from_secs_f64(n * scale)
            .map(Dur)
            .map_err(|_| format!("{DURATION_EXPECTED}, found \"{s}\""))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(DURATION_EXPECTED.trim_start_matches("expected "))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Dur, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// The file's shape, as serde reads it: every table denies unknown keys.
mod raw {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Workload {
        pub name: Option<String>,
        pub duration: Dur,
        pub seed: Option<u64>,
        #[serde(default)]
        pub allow: Vec<AnomalyKind>,
        pub backend: Backend,
        pub clients: Clients,
        pub critical_section: CriticalSection,
        pub resource: Option<ResourceSpec>,
        #[serde(default)]
        pub faults: Vec<Fault>,
        pub runtime: Option<Runtime>,
        pub schedule: Option<Schedule>,
    }

    /// `resource = "fenced"` / `"unfenced"` (lockcheck's own resource), or a
    /// `[resource]` table with its kind and fence.
    pub enum ResourceSpec {
        Mode(Mode),
        Table(ResourceTable),
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ResourceTable {
        pub kind: Option<resource::Kind>,
        pub fence: Fence,
    }

    impl<'de> Deserialize<'de> for ResourceSpec {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = ResourceSpec;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("\"fenced\", \"unfenced\" or a [resource] table")
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ResourceSpec, E> {
                    match s {
                        "fenced" => Ok(ResourceSpec::Mode(Mode::Fenced)),
                        "unfenced" => Ok(ResourceSpec::Mode(Mode::Unfenced)),
                        _ => Err(E::custom(format!(
                            "expected \"fenced\" or \"unfenced\" (or a [resource] table with kind and fence), found \"{s}\""
                        ))),
                    }
                }
                fn visit_map<M: serde::de::MapAccess<'de>>(
                    self,
                    map: M,
                ) -> Result<ResourceSpec, M::Error> {
                    ResourceTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                        .map(ResourceSpec::Table)
                }
            }
            d.deserialize_any(V)
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Schedule {
        pub mix: MixKind,
        pub gap: Dur,
        pub quiet: Option<Dur>,
        pub heal: Option<Dur>,
    }

    #[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
    #[serde(rename_all = "kebab-case")]
    pub enum ShapeKind {
        Isolate,
        Halves,
        MajoritiesRing,
        Bridge,
        Links,
        All,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum MixKind {
        Interval,
        Random,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Backend {
        pub kind: BackendKind,
        pub nodes: Option<usize>,
        pub lease: toml::Spanned<LeaseSpec>,
        pub renew_every: Option<Dur>,
        pub fencing_token: Option<bool>,
        pub acquire_timeout: Option<Dur>,
        pub endpoints: Option<Vec<String>>,
        pub image: Option<String>,
        pub network: Option<NetworkKind>,
        pub monotonic_offset: Option<MonotonicOffset>,
    }

    /// `monotonic_offset = "+600s"` (every node) or `{ n1 = "+600s" }`.
    #[derive(Deserialize)]
    #[serde(
        untagged,
        expecting = "a signed duration like \"+600s\", or a table of them by node like { n1 = \"+600s\" }"
    )]
    pub enum MonotonicOffset {
        All(SignedDur),
        PerNode(std::collections::BTreeMap<String, SignedDur>),
    }

    /// `lease = "2s"` or `lease = "client-go"`.
    pub enum LeaseSpec {
        Ttl(Dur),
        Preset(&'static LeasePreset),
    }

    impl<'de> Deserialize<'de> for LeaseSpec {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            if let Some(p) = LEASE_PRESETS.iter().find(|p| p.name == s) {
                return Ok(LeaseSpec::Preset(p));
            }
            s.parse().map(LeaseSpec::Ttl).map_err(|_| {
                let names: Vec<_> = LEASE_PRESETS.iter().map(|p| p.name).collect();
                serde::de::Error::custom(format!(
                    "{DURATION_EXPECTED}, or a preset ({}), found \"{s}\"",
                    names.join(", ")
                ))
            })
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Clients {
        pub count: usize,
        pub op_timeout: Option<Dur>,
        pub self_fencing_margin: Option<Dur>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct CriticalSection {
        pub hold: Dur,
        pub writes: u32,
        pub think: Option<Dur>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Fault {
        pub kind: FaultKind,
        pub target: Option<Target>,
        pub nodes: Option<NodeTarget>,
        pub wipe: Option<bool>,
        /// Pause-node: `"sigstop"` (the default) or `"freezer"`.
        pub method: Option<PauseMethod>,
        /// Clock: a jump (`"+20s"`, `"-5s"`), or strobe's first offset.
        pub offset: Option<SignedDur>,
        /// Clock, strobe: the other offset, and how often it flips.
        pub offset2: Option<SignedDur>,
        pub period: Option<Dur>,
        /// Clock: how fast it runs (2.0 = twice real speed).
        pub rate: Option<f64>,
        /// Partition: `"blackhole"` (the default) or `"reset"`.
        pub cut: Option<CutKind>,
        /// Partition-nodes: isolate (the default), halves, majorities-ring, bridge,
        /// links.
        pub shape: Option<ShapeKind>,
        /// Partition-nodes with shape = "links": the pairs of nodes cut.
        pub links: Option<Vec<(String, String)>>,
        /// Latency: added to each chunk each way, plus or minus `jitter`.
        pub delay: Option<Dur>,
        pub jitter: Option<Dur>,
        pub duration: Dur,
        pub after: Option<Dur>,
        pub interval: Option<Dur>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
duration = "10s"
seed = 7
allow = ["double-holder"]
resource = "fenced"

[backend]
kind = "redis"
lease = "1500ms"

[clients]
count = 3

[critical_section]
hold = "300ms"
writes = 3
think = "50ms"

[[faults]]
kind = "pause"
target = "holder"
duration = "3s"
interval = "2s"
"#;

    fn parse(text: &str) -> Result<Workload> {
        Workload::parse(text, Path::new("w/test.toml"))
    }

    #[test]
    fn a_clock_fault_skews_a_client_or_nodes_not_both() {
        let clock = |whose: &str| {
            parse(&GOOD.replace(
                "kind = \"pause\"\ntarget = \"holder\"",
                &format!("kind = \"clock\"\nrate = 0.5\n{whose}"),
            ))
        };
        let w = clock("target = \"holder\"").unwrap();
        assert!(w.faults[0].clock_of_client);
        assert_eq!(w.faults[0].target, Target::Holder);
        assert!(!clock("nodes = \"all\"").unwrap().faults[0].clock_of_client);
        let e = format!(
            "{:#}",
            clock("target = \"holder\"\nnodes = \"all\"").unwrap_err()
        );
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn a_node_latency_needs_namespaces_a_delay_and_slows_every_link_by_default() {
        let etcd = |network: &str, fault: &str| {
            parse(
                &GOOD
                    .replace("kind = \"redis\"", &format!("kind = \"etcd\"\n{network}"))
                    .replace("kind = \"pause\"\ntarget = \"holder\"", fault),
            )
        };
        let ns = "network = \"namespaces\"";
        let slow = "kind = \"latency-nodes\"\ndelay = \"100ms\"\njitter = \"30ms\"";
        let w = etcd(ns, slow).unwrap();
        assert_eq!(w.faults[0].node_latency, Some(NodeShape::All));
        assert_eq!(w.faults[0].node_partition, None);
        assert_eq!(
            w.faults[0].link,
            Some(LinkMode::Latency {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(30)
            })
        );
        let halves = format!("{slow}\nshape = \"halves\"");
        assert_eq!(
            etcd(ns, &halves).unwrap().faults[0].node_latency,
            Some(NodeShape::Halves)
        );
        let e = format!("{:#}", etcd("", slow).unwrap_err());
        assert!(
            e.contains("faults[0].kind") && e.contains("namespaces"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            etcd(ns, "kind = \"latency-nodes\"\nshape = \"all\"").unwrap_err()
        );
        assert!(e.contains("faults[0].delay"), "{e}");
        let e = format!(
            "{:#}",
            etcd(ns, &format!("{slow}\ncut = \"reset\"")).unwrap_err()
        );
        assert!(e.contains("faults[0].cut"), "{e}");
        let e = format!(
            "{:#}",
            etcd(ns, &format!("{slow}\nnodes = \"n1\"")).unwrap_err()
        );
        assert!(e.contains("faults[0].nodes"), "{e}");
        let e = format!(
            "{:#}",
            etcd(
                ns,
                "kind = \"latency\"\nnodes = \"all\"\ndelay = \"1ms\"\nshape = \"all\""
            )
            .unwrap_err()
        );
        assert!(e.contains("faults[0].shape: only a partition-nodes"), "{e}");
    }

    #[test]
    fn a_node_partition_needs_namespaces_and_a_shape_that_fits() {
        let etcd = |network: &str, fault: &str| {
            parse(
                &GOOD
                    .replace("kind = \"redis\"", &format!("kind = \"etcd\"\n{network}"))
                    .replace("kind = \"pause\"\ntarget = \"holder\"", fault),
            )
        };
        let ns = "network = \"namespaces\"";
        let isolate = "kind = \"partition-nodes\"\nnodes = \"leader\"";
        let w = etcd(ns, isolate).unwrap();
        assert_eq!(w.backend.network, NetworkKind::Namespaces);
        assert_eq!(
            w.faults[0].node_partition,
            Some((NodeShape::Isolate(NodeTarget::Primary), Cut::Blackhole))
        );
        let e = format!("{:#}", etcd("", isolate).unwrap_err());
        assert!(
            e.contains("faults[0].kind") && e.contains("namespaces"),
            "{e}"
        );
        let links = "kind = \"partition-nodes\"\nshape = \"links\"\nlinks = [[\"n1\", \"n3\"]]\ncut = \"reset\"";
        assert_eq!(
            etcd(ns, links).unwrap().faults[0].node_partition,
            Some((
                NodeShape::Links(vec![("n1".into(), "n3".into())]),
                Cut::Reset
            ))
        );
        let e = format!("{:#}", etcd(ns, &links.replace("n3", "n4")).unwrap_err());
        assert!(e.contains("faults[0].shape") && e.contains("n4"), "{e}");
        let e = format!(
            "{:#}",
            etcd(
                ns,
                "kind = \"partition-nodes\"\nshape = \"majorities-ring\""
            )
            .unwrap_err()
        );
        assert!(e.contains("at least 4 nodes"), "{e}");
        let e = format!(
            "{:#}",
            etcd(
                ns,
                "kind = \"partition-nodes\"\nshape = \"halves\"\nnodes = \"n1\""
            )
            .unwrap_err()
        );
        assert!(e.contains("faults[0].nodes"), "{e}");
        let e = format!(
            "{:#}",
            etcd(ns, "kind = \"partition-nodes\"\nnodes = \"minority\"").unwrap_err()
        );
        assert!(e.contains("halves"), "{e}");
        let e = format!(
            "{:#}",
            etcd(ns, "kind = \"kill\"\nshape = \"halves\"").unwrap_err()
        );
        assert!(e.contains("faults[0].shape: only a partition-nodes"), "{e}");
        // One node has no links to cut.
        let e = format!(
            "{:#}",
            parse(
                &GOOD
                    .replace("kind = \"redis\"", &format!("kind = \"redis\"\n{ns}"))
                    .replace("kind = \"pause\"\ntarget = \"holder\"", isolate)
            )
            .unwrap_err()
        );
        assert!(e.contains("at least 2 nodes"), "{e}");
        // An unknown key names file, line and key.
        let e = format!(
            "{:#}",
            etcd(ns, &format!("{isolate}\nshapes = \"x\"")).unwrap_err()
        );
        assert!(
            e.contains("w/test.toml:") && e.contains("faults.shapes"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            parse(&GOOD.replace(
                "kind = \"redis\"",
                &format!("kind = \"postgres-lease\"\n{ns}")
            ))
            .unwrap_err()
        );
        assert!(
            e.contains("backend.network") && e.contains("loopback only"),
            "{e}"
        );
        // Namespaces are the local runtime's.
        let e = format!(
            "{:#}",
            etcd(ns, isolate)
                .unwrap()
                .with_runtime(Runtime::Docker)
                .unwrap_err()
        );
        assert!(e.contains("backend.network"), "{e}");
    }

    #[test]
    fn a_monotonic_offset_names_every_node_or_some_of_this_backend() {
        let with = |offset: &str| {
            parse(&GOOD.replace(
                "kind = \"redis\"",
                &format!("kind = \"etcd\"\nmonotonic_offset = {offset}"),
            ))
        };
        let all = with("\"+10s\"").unwrap();
        let ten = 10_000_000_000;
        let expected: Vec<(String, i64)> = ["n1", "n2", "n3"].map(|n| (n.to_string(), ten)).into();
        assert_eq!(all.backend.monotonic_offsets, expected);
        let some = with("{ n3 = \"-1s\", n1 = \"+2s\" }").unwrap();
        assert_eq!(
            some.backend.monotonic_offsets,
            [("n1".to_string(), 2 * ten / 10), ("n3".into(), -ten / 10)]
        );
        let e = format!("{:#}", with("{ n4 = \"+1s\" }").unwrap_err());
        assert!(
            e.contains("backend.monotonic_offset.n4") && e.contains("n1 .. n3"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            with("\"+1s\"")
                .unwrap()
                .with_runtime(Runtime::Docker)
                .unwrap_err()
        );
        assert!(e.contains("only under the local runtime"), "{e}");
    }

    #[test]
    fn a_node_pause_says_its_method_and_only_a_node_pause_has_one() {
        let pause = |method: &str| {
            parse(&GOOD.replace(
                "kind = \"pause\"\ntarget = \"holder\"",
                &format!("kind = \"pause-node\"\nnodes = \"n1\"\n{method}"),
            ))
        };
        assert_eq!(
            pause("").unwrap().faults[0].pause_method,
            PauseMethod::Sigstop
        );
        let w = pause("method = \"freezer\"").unwrap();
        assert_eq!(w.faults[0].pause_method, PauseMethod::Freezer);
        // Docker pauses containers with the freezer whatever this machine allows.
        assert!(w.with_runtime(Runtime::Docker).is_ok());
        let e = format!("{:#}", pause("method = \"thaw\"").unwrap_err());
        assert!(
            e.contains("faults[0].method") || e.contains("method"),
            "{e}"
        );
        assert!(e.contains("freezer") && e.contains("sigstop"), "{e}");
        let e = parse(&GOOD.replace(
            "target = \"holder\"",
            "target = \"holder\"\nmethod = \"freezer\"",
        ))
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("only a pause-node fault"),
            "{e:#}"
        );
    }

    #[test]
    fn a_self_fencing_margin_must_leave_part_of_the_lease() {
        assert_eq!(parse(GOOD).unwrap().clients.self_fencing_margin_ms(), None);
        let with = |m: &str| {
            parse(&GOOD.replace(
                "count = 3",
                &format!("count = 3\nself_fencing_margin = \"{m}\""),
            ))
        };
        assert_eq!(
            with("200ms").unwrap().clients.self_fencing_margin_ms(),
            Some(200)
        );
        let e = format!("{:#}", with("1500ms").unwrap_err());
        assert!(e.contains("clients.self_fencing_margin"), "{e}");
    }

    #[test]
    fn a_full_workload_reads_with_defaults_filled_in() {
        let w = parse(GOOD).unwrap();
        assert_eq!(w.name, "test");
        assert_eq!(w.seed, 7);
        assert_eq!(w.backend.nodes, 1);
        assert!(w.backend.fencing_token);
        assert_eq!(w.backend.lease.ttl, Duration::from_millis(1500));
        assert_eq!(w.resource.fence, Fence::NotBelow);
        assert_eq!(w.resource.kind, resource::Kind::Lockcheck);
        assert_eq!(w.allow, vec![AnomalyKind::DoubleHolder]);
        assert_eq!(w.faults[0].target, Target::Holder);
        assert_eq!(w.faults[0].after, Duration::from_secs(1));
        assert_eq!(w.faults[0].interval, Some(Duration::from_secs(2)));
    }

    #[test]
    fn the_resource_is_a_word_or_a_table_with_its_kind_and_fence() {
        let table = |t: &str| {
            parse(&format!(
                "{}\n[resource]\n{t}\n",
                GOOD.replace("resource = \"fenced\"\n", "")
            ))
        };
        let w = table("kind = \"postgres\"\nfence = \"<\"").unwrap();
        assert_eq!(
            w.resource,
            resource::Spec {
                kind: resource::Kind::Postgres,
                fence: Fence::Above
            }
        );
        let w = table("fence = \"none\"").unwrap();
        assert_eq!(w.resource.kind, resource::Kind::Lockcheck);
        assert_eq!(w.resource.fence.mode(), Mode::Unfenced);
        let e = format!(
            "{:#}",
            table("kind = \"postgres\"\nfence = \"<<\"").unwrap_err()
        );
        assert!(e.contains("resource.fence") && e.contains("`<=`"), "{e}");
        let e = format!(
            "{:#}",
            table("kind = \"postgres\"\nfence = \"<\"\nfenced = true").unwrap_err()
        );
        assert!(e.contains("resource.fenced: unknown field"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"fenced\"", "\"fencing\"")).unwrap_err()
        );
        assert!(
            e.contains("resource:") && e.contains("[resource] table"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            table("kind = \"postgres\"\nfence = \"<=\"")
                .and_then(|_| parse(&format!(
                    "{}\n[resource]\nfence = \"<=\"\n",
                    GOOD.replace("resource = \"fenced\"\n", "").replace(
                        "lease = \"1500ms\"",
                        "lease = \"1500ms\"\nfencing_token = false"
                    )
                )))
                .unwrap_err()
        );
        assert!(e.contains("needs tokens"), "{e}");
    }

    #[test]
    fn presets_are_usable_by_name() {
        let w = parse(&GOOD.replace("\"1500ms\"", "\"client-go\"")).unwrap();
        assert_eq!(w.backend.lease.ttl, Duration::from_secs(15));
        assert_eq!(w.backend.lease.renew_every, Some(Duration::from_secs(2)));
        let w = parse(&GOOD.replace("\"1500ms\"", "\"redis-docs\"")).unwrap();
        assert_eq!(w.backend.lease.ttl, Duration::from_millis(30000));
        let e = parse(&GOOD.replace("\"1500ms\"", "\"k8s\"")).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("w/test.toml:9: backend.lease:") && e.contains("client-go"),
            "{e}"
        );
    }

    #[test]
    fn a_preset_fits_only_the_backends_its_users_run_it_on() {
        for preset in LEASE_PRESETS {
            for kind in BackendKind::ALL {
                // Only the lease is under test: one node, the backend's own token
                // setting, a resource that needs none.
                let backend = format!(
                    "[backend]\nnodes = 1\nfencing_token = {}\nkind = \"{}\"",
                    kind.token().is_some(),
                    kind.name()
                );
                let text = GOOD
                    .replace("[backend]\nkind = \"redis\"", &backend)
                    .replace("\"1500ms\"", &format!("\"{}\"", preset.name))
                    .replace("resource = \"fenced\"", "resource = \"unfenced\"");
                match parse(&text) {
                    Ok(w) => {
                        assert!(preset.fits(kind), "{} on {kind:?}", preset.name);
                        assert_eq!(w.backend.lease.ttl, preset.ttl);
                        assert_eq!(w.backend.lease.preset, Some(preset));
                    }
                    Err(e) => {
                        let e = format!("{e:#}");
                        assert!(!preset.fits(kind), "{} on {kind:?}: {e}", preset.name);
                        assert!(
                            e.contains("w/test.toml:11: backend.lease: the preset")
                                && e.contains(preset.name)
                                && e.contains(&format!("not {}", kind.name())),
                            "{e}"
                        );
                    }
                }
            }
        }
        // Every backend has a preset of its own users, beside the generic ones.
        for kind in BackendKind::ALL {
            assert!(
                LEASE_PRESETS.iter().any(|p| p.backends.contains(&kind)),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn an_unknown_key_names_file_line_key_and_the_expected_keys() {
        let e = parse(&GOOD.replace("writes = 3", "writes = 3\nhodl = \"1s\"")).unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("w/test.toml:17: critical_section.hodl: unknown field"),
            "{e}"
        );
        assert!(e.contains("hodl") && e.contains("hold"), "{e}");
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_expected() {
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"300ms\"", "300")).unwrap_err()
        );
        assert!(
            e.contains(":15: critical_section.hold:") && e.contains("\"500ms\""),
            "{e}"
        );
        assert!(!e.contains("expected expected"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"holder\"", "\"leader\"")).unwrap_err()
        );
        assert!(e.contains("target") && e.contains("client-0"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"holder\"", "\"client-5\"")).unwrap_err()
        );
        assert!(
            e.contains("faults[0].target") && e.contains("3 clients"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("kind = \"redis\"", "kind = \"redlock\"")).unwrap_err()
        );
        assert!(e.contains("backend.fencing_token"), "{e}");
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("\"double-holder\"", "\"two-holders\"")).unwrap_err()
        );
        assert!(
            e.contains("allow") && e.contains("stale-write-accepted"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_key_names_the_table_that_lacks_it() {
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("writes = 3\n", "")).unwrap_err()
        );
        assert!(
            e.contains("w/test.toml:14: [critical_section]: missing field `writes`"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            parse(&GOOD.replace("duration = \"10s\"\n", "")).unwrap_err()
        );
        assert!(
            e.contains("w/test.toml: missing field `duration` (at the top level)"),
            "{e}"
        );
    }

    #[test]
    fn the_documented_example_reads() {
        let example: String = include_str!("workload.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .skip_while(|l| !l.contains("```toml"))
            .skip(1)
            .take_while(|l| !l.contains("```"))
            .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
            .collect();
        let w = parse(&example).unwrap_or_else(|e| panic!("{e:#}\n{example}"));
        assert_eq!(w.name, "redis-pause");
        assert_eq!(
            w.backend.lease.renew_every,
            Some(Duration::from_millis(300))
        );
        assert_eq!(w.faults.len(), 1);
    }

    #[test]
    fn durations_need_their_unit() {
        assert_eq!(
            "250ms".parse::<Dur>().unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!(
            "1.5s".parse::<Dur>().unwrap().0,
            Duration::from_millis(1500)
        );
        assert_eq!("2m".parse::<Dur>().unwrap().0, Duration::from_secs(120));
        assert!("2".parse::<Dur>().is_err());
        assert!("s".parse::<Dur>().is_err());
        assert!("-1s".parse::<Dur>().is_err());
    }
}
