//! Lease presets: the TTLs and renewal periods the industry actually runs, by name.

use crate::backend::BackendKind;
use std::time::Duration;

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
        backends: &[
            BackendKind::Redis,
            BackendKind::RedisSentinel,
            BackendKind::Redlock,
        ],
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
    // Patroni's documentation, "Dynamic Configuration Settings": ttl 30 (the
    // leader key's TTL), loop_wait 10 (how often the leader renews it); Patroni
    // 3.0's config.py defaults the same.
    LeasePreset {
        name: "patroni",
        ttl: Duration::from_secs(30),
        renew_every: Some(Duration::from_secs(10)),
        source: "Patroni defaults: leader key ttl 30 s, loop_wait 10 s",
        backends: &[BackendKind::Patroni],
    },
];
