//! Lock services, one file each. A backend knows the lock recipe its own community
//! uses and where its fencing token comes from; it never reaches into `check`,
//! `fault` or `report`. (Owned by the backends work: redis.rs, redlock.rs, etcd.rs.)
//!
//! | backend | recipe | token | known break |
//! |---|---|---|---|
//! | [`redis`] | `SET key holder NX PX ttl` on one server | `INCR` of a counter in the same script, or none | a holder paused past its TTL wakes up still "holding" while another holds |
//! | [`redis_sentinel`] | the same on the primary Sentinel names (asked at each acquire), optionally `WAIT` for replicas | the same `INCR`, on the primary | a primary cut off from its replicas and Sentinels goes on renewing while a promoted replica's copy of the key runs out |
//! | [`redlock`] | the same on 5 independent servers, quorum 3, validity = TTL − elapsed − drift | none (Redlock has none) | the same pause; also a clock jump on a majority of servers |
//! | [`etcd`] | lease + key created only if absent, kept alive while held | the key's create revision | a holder paused past its lease: the lease expires, the key goes |
//! | [`postgres`] advisory | `pg_try_advisory_lock` in one session, retried | none | a holder paused past `idle_session_timeout`: its session ends, the lock with it |
//! | [`postgres`] lease | one conditional `UPDATE` of a lease row (`locked_until`, token + 1) | the row's token | a holder paused past `locked_until` |
//! | [`zookeeper`] | ephemeral sequential znode under the lock node; the lowest holds; the others watch their predecessor | the znode's czxid | a holder paused past its session timeout: its znode goes with the session |
//! | [`mariadb`] | `GET_LOCK(name, timeout)` in one session, `RELEASE_LOCK` | none | a holder paused past `wait_timeout`: its session ends, the lock with it |
//! | [`patroni`] | no lock: the primary role Patroni's agents hand out through a leader key with a TTL in etcd; a client leads while its own node accepts writes | the node's PostgreSQL timeline | the primary's Patroni paused past the leader key's TTL: a replica is promoted while the old primary still commits writes |
//! | [`nats`] | JetStream KV: create the key only if absent (expected last sequence 0), TTL = the bucket's max age, renew/release by expected revision; the bucket on every node of a cluster | the key's revision at create | a holder paused past the max age; on a cluster before nats-server 2.9.21, two concurrent creates both win |
//!
//! Every request carries a timeout ([`LockConfig::request_timeout`]), so a paused or
//! unreachable server gives [`LockError::Indeterminate`], never a hang.

pub mod adapter;
mod client;
pub mod etcd;
pub mod mariadb;
pub mod nats;
mod options;
pub mod patroni;
pub mod postgres;
pub mod preset;
pub mod redis;
pub mod redis_instance;
pub mod redis_sentinel;
pub mod redlock;
pub mod zookeeper;

pub use client::{Grant, LockClient, LockConfig, LockError};
use options::{reader, Reader};
pub use options::{NoOptions, OptionError, Options, OwnOptions, Why};
pub use preset::LeasePreset;

use serde::{Deserialize, Serialize};

/// Which lock service a workload tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    Redis,
    /// Redis with Sentinel: a primary, two replicas, three Sentinels; clients find
    /// the primary through Sentinel.
    RedisSentinel,
    Redlock,
    Etcd,
    /// PostgreSQL session advisory lock (`pg_try_advisory_lock`).
    PostgresAdvisory,
    /// PostgreSQL lease row (`locked_until` + token, one conditional `UPDATE`).
    PostgresLease,
    /// NATS JetStream key-value lease (create if absent, the bucket's max age as TTL).
    Nats,
    /// ZooKeeper lock recipe: ephemeral sequential znodes, lowest holds.
    Zookeeper,
    /// MariaDB `GET_LOCK` / `RELEASE_LOCK` (session-scoped).
    Mariadb,
    /// PostgreSQL nodes managed by Patroni: the primary role is the lock.
    Patroni,
}

impl BackendKind {
    pub const ALL: [BackendKind; 10] = [
        BackendKind::Redis,
        BackendKind::RedisSentinel,
        BackendKind::Redlock,
        BackendKind::Etcd,
        BackendKind::PostgresAdvisory,
        BackendKind::PostgresLease,
        BackendKind::Nats,
        BackendKind::Zookeeper,
        BackendKind::Mariadb,
        BackendKind::Patroni,
    ];

    /// The backend as a workload's `backend.kind` names it (`postgres-lease`):
    /// what every message calls it.
    pub fn name(self) -> &'static str {
        self.about().name
    }

    /// Where the backend's fencing token comes from; `None`: it has none.
    pub fn token(self) -> Option<&'static str> {
        self.about().token
    }

    /// How a holder comes to believe it holds a lock that another client holds.
    pub fn known_break(self) -> &'static str {
        self.about().known_break
    }

    /// The shipped workloads (`workloads/<name>.toml`) that show the known break.
    pub fn shown_by(self) -> &'static [&'static str] {
        self.about().shown_by
    }

    /// The shipped workload where fencing by the backend's token keeps the
    /// resource safe (none without a token).
    pub fn fenced_by(self) -> Option<&'static str> {
        self.about().fenced_by
    }

    /// Whether clients take a lock of this service (a lock workload, an audit);
    /// patroni's only lead, while their node is the primary.
    pub fn has_lock(self) -> bool {
        self != BackendKind::Patroni
    }

    /// Where the backend hands out no lock, how its clients lead instead.
    pub fn leads_instead(self) -> Option<&'static str> {
        (!self.has_lock()).then_some("its clients lead while their node is the primary")
    }

    /// Whether each client is one node's application (client `i` on node `i`, its
    /// own node first in its endpoints) rather than a client of the whole service.
    pub fn client_per_node(self) -> bool {
        self == BackendKind::Patroni
    }

    /// Reads the backend's own `[backend]` keys as the backend checks them. A key
    /// the backend does not read, but another does, is refused in that backend's
    /// words ("only etcd's clients are pinned to one member; redis has no such
    /// option"); one no backend reads stays `unknown`.
    pub fn read_options(self, options: &Options) -> Result<(), OptionError> {
        (self.about().options.read)(options).map_err(|e| {
            let owner = BackendKind::ALL
                .into_iter()
                .flat_map(|k| k.about().options.keys)
                .find(|(key, _)| e.why == Why::Unknown && *key == e.key);
            match owner {
                Some((_, what)) => {
                    OptionError::value(&e.key, format!("{what}; {self} has no such option"))
                }
                None => e,
            }
        })
    }

    /// The keys of `[backend]` the backend reads itself.
    pub fn option_keys(self) -> impl Iterator<Item = &'static str> {
        self.about().options.keys.iter().map(|(k, _)| *k)
    }

    /// The `[backend]` line of its own options that has its servers keep every
    /// acknowledged write through a kill -9, where its default does not: the
    /// audit's `kill-restart-durable` runs with it.
    pub fn durable_option(self) -> Option<&'static str> {
        self.about().durable
    }

    /// The `[backend]` line of its own options that pins each client to one
    /// node, where its client otherwise talks to several at once (etcd's
    /// balances over every member, and its lease keep-alives ride any of
    /// them): the audit's `holder-node-isolated` runs with it, so that the
    /// holder has one node to cut off.
    pub fn pinned_option(self) -> Option<&'static str> {
        match self {
            BackendKind::Etcd => Some("client_endpoint = \"follower\""),
            _ => None,
        }
    }

    /// Whether its lock client keeps the lease alive by itself while the lock is
    /// held (ZooKeeper's session heartbeats, etcd's lease keep-alive), so that a
    /// holder that never renews still holds for as long as it runs: elsewhere the
    /// lease is a TTL (Redis, the lease row) or an idle session (advisory locks,
    /// `GET_LOCK`) that only the holder's own renewals extend.
    pub fn keeps_lease_alive(self) -> bool {
        matches!(self, BackendKind::Zookeeper | BackendKind::Etcd)
    }

    /// The lease presets its own users run (beside [`preset::ANY`]).
    pub fn lease_presets(self) -> &'static [LeasePreset] {
        self.about().presets
    }

    /// Whether a workload of this backend may use `preset`: one not tied to a
    /// service, or one its own users run.
    pub fn fits(self, preset: &LeasePreset) -> bool {
        preset::ANY
            .iter()
            .chain(self.lease_presets())
            .any(|p| p.name == preset.name)
    }

    /// What is said of each backend: one entry per backend.
    fn about(self) -> About {
        match self {
            BackendKind::Redis => About {
                name: "redis",
                token: Some("INCR of a counter key, in the same script as SET NX PX"),
                known_break: "a holder paused past its TTL: the key expires, another client sets it",
                shown_by: &["redis-pause-unfenced", "redis-kill-restart"],
                fenced_by: Some("redis-pause-fenced"),
                options: reader::<redis::Options>(),
                presets: &[redis::REDIS_DOCS],
                durable: Some("persistence = \"aof-always\""),
            },
            BackendKind::RedisSentinel => About {
                name: "redis-sentinel",
                token: Some("INCR of a counter key on the primary, replicated asynchronously like the key"),
                known_break: "a primary cut off from its replicas and Sentinels goes on granting and renewing; \
                     the Sentinels promote a replica the renewals never reached, its copy of the key runs out, \
                     and another client acquires there (Redis's distributed-lock page)",
                shown_by: &["incidents/redis-sentinel-failover"],
                fenced_by: Some("incidents/redis-sentinel-failover-fenced"),
                options: reader::<redis_sentinel::Options>(),
                presets: &[redis::REDIS_DOCS],
                durable: None,
            },
            BackendKind::Redlock => About {
                name: "redlock",
                token: None,
                known_break: "a holder paused past its TTL: the key expires, another client sets it",
                shown_by: &["redlock-pause-unfenced", "redlock-clock-jump"],
                fenced_by: None,
                options: reader::<NoOptions>(),
                presets: &[redis::REDIS_DOCS],
                durable: None,
            },
            BackendKind::Etcd => About {
                name: "etcd",
                token: Some("the lock key's create revision"),
                known_break: "a holder paused past its lease: no keep-alive, the lease and the key go",
                shown_by: &["etcd-pause-unfenced", "etcd-partition-leader"],
                fenced_by: Some("etcd-pause-fenced"),
                options: reader::<etcd::Options>(),
                presets: &[etcd::SESSION],
                durable: None,
            },
            BackendKind::PostgresAdvisory => About {
                name: "postgres-advisory",
                token: None,
                known_break: "a holder paused past idle_session_timeout: the server ends its session, \
                     which releases the lock",
                shown_by: &["postgres-advisory-pause"],
                fenced_by: None,
                options: reader::<NoOptions>(),
                presets: &[postgres::POSTGRES_KEEPALIVE, postgres::RDS_POSTGRES_KEEPALIVE],
                durable: None,
            },
            BackendKind::PostgresLease => About {
                name: "postgres-lease",
                token: Some("the lease row's token column, +1 on every acquire"),
                known_break: "a holder paused past locked_until: the next conditional UPDATE takes the row",
                shown_by: &["postgres-lease-pause-unfenced"],
                fenced_by: Some("postgres-lease-pause-fenced"),
                options: reader::<NoOptions>(),
                presets: &[postgres::PGLOCK],
                durable: None,
            },
            BackendKind::Nats => About {
                name: "nats",
                token: Some("the key's revision when created (the stream sequence)"),
                known_break: "a holder paused past the bucket's max age: the key ages out, another creates it; \
                     on a cluster before nats-server 2.9.21, two creates in flight at once both win \
                     (nats-server#4320)",
                shown_by: &["nats-pause-unfenced", "nats-cluster-create-race"],
                fenced_by: Some("nats-pause-fenced"),
                options: reader::<NoOptions>(),
                presets: &[nats::KV_LEADER_ELECT],
                durable: None,
            },
            BackendKind::Zookeeper => About {
                name: "zookeeper",
                token: Some("the lock znode's czxid (the zxid that created it)"),
                known_break: "a holder paused past its session timeout: the session expires, its ephemeral \
                     znode goes, the next in line holds",
                shown_by: &["zookeeper-pause-unfenced"],
                fenced_by: Some("zookeeper-pause-fenced"),
                options: reader::<NoOptions>(),
                presets: &[zookeeper::CURATOR],
                durable: None,
            },
            BackendKind::Mariadb => About {
                name: "mariadb",
                token: None,
                known_break: "a holder paused past wait_timeout: the server ends its session, which \
                     releases the lock",
                shown_by: &["mariadb-pause"],
                fenced_by: None,
                options: reader::<NoOptions>(),
                presets: &[mariadb::WAIT_TIMEOUT, mariadb::SKYSQL_WAIT_TIMEOUT, mariadb::GO_MYSQL_LOCK],
                durable: None,
            },
            BackendKind::Patroni => About {
                name: "patroni",
                token: Some("the node's PostgreSQL timeline, which every promotion increments"),
                known_break: "the primary's Patroni paused past the leader key's TTL: a replica is \
                     promoted while the old primary's PostgreSQL still commits writes",
                shown_by: &["incidents/patroni-split-brain"],
                fenced_by: None,
                options: reader::<patroni::Options>(),
                presets: &[patroni::DEFAULTS],
                durable: None,
            },
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend's name, its fencing token's source, its known break and the
/// shipped workloads that show it.
struct About {
    name: &'static str,
    token: Option<&'static str>,
    known_break: &'static str,
    shown_by: &'static [&'static str],
    fenced_by: Option<&'static str>,
    /// Its own `[backend]` keys, read by its typed options.
    options: Reader,
    /// The lease presets its users run.
    presets: &'static [LeasePreset],
    /// Its option line that keeps every acknowledged write through a kill.
    durable: Option<&'static str>,
}

/// Every lease preset, by name: those of no service, then each backend's.
pub fn lease_presets() -> Vec<&'static LeasePreset> {
    let mut all: Vec<&'static LeasePreset> = preset::ANY.iter().collect();
    for kind in BackendKind::ALL {
        for p in kind.lease_presets() {
            if !all.iter().any(|q| q.name == p.name) {
                all.push(p);
            }
        }
    }
    all
}

/// The backends whose users run `preset`, as workloads name them, or "any backend".
pub fn preset_backends(preset: &LeasePreset) -> String {
    if preset::ANY.iter().any(|p| p.name == preset.name) {
        return "any backend".into();
    }
    BackendKind::ALL
        .into_iter()
        .filter(|k| k.lease_presets().iter().any(|p| p.name == preset.name))
        .map(BackendKind::name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens one client of a lock service. `endpoints` are the servers' client addresses
/// (`host:port`) in node order, n1 first, as the cluster that started them lists
/// them: one for `redis`, every instance for `redlock`, every member for `etcd`,
/// every node for `zookeeper` and `nats`.
pub async fn connect(
    kind: BackendKind,
    endpoints: &[String],
    cfg: &LockConfig,
) -> anyhow::Result<Box<dyn LockClient>> {
    anyhow::ensure!(
        !endpoints.is_empty(),
        "no endpoints given for the {kind} backend"
    );
    Ok(match kind {
        BackendKind::Redis => {
            anyhow::ensure!(
                endpoints.len() == 1,
                "the redis backend is one server; got {} endpoints (use redlock for several)",
                endpoints.len()
            );
            Box::new(self::redis::RedisLock::connect(&endpoints[0], cfg)?)
        }
        BackendKind::RedisSentinel => {
            Box::new(self::redis::RedisLock::through_sentinels(endpoints, cfg)?)
        }
        BackendKind::Redlock => Box::new(self::redlock::Redlock::connect(endpoints, cfg)?),
        BackendKind::Etcd => Box::new(self::etcd::EtcdLock::connect(endpoints, cfg).await?),
        BackendKind::PostgresAdvisory => {
            Box::new(self::postgres::AdvisoryLock::connect(single(kind, endpoints)?, cfg).await?)
        }
        BackendKind::PostgresLease => {
            Box::new(self::postgres::LeaseRowLock::connect(single(kind, endpoints)?, cfg).await?)
        }
        BackendKind::Nats => Box::new(self::nats::KvLease::connect(endpoints, cfg).await?),
        BackendKind::Zookeeper => Box::new(self::zookeeper::ZkLock::connect(endpoints, cfg).await?),
        BackendKind::Mariadb => {
            Box::new(self::mariadb::GetLock::connect(single(kind, endpoints)?, cfg).await?)
        }
        BackendKind::Patroni => anyhow::bail!(
            "the patroni backend has no lock to take: its clients lead while their node is the primary (mode = \"election\")"
        ),
    })
}

/// The backends a workload with `mode = "election"` can campaign on, each with its
/// community's leader-election recipe.
pub const ELECTION_BACKENDS: [BackendKind; 5] = [
    BackendKind::Etcd,
    BackendKind::Zookeeper,
    BackendKind::Redis,
    BackendKind::Nats,
    BackendKind::Patroni,
];

/// Opens one candidate of a leader election on a lock service: acquire campaigns
/// (answers once elected, or fails at the acquire timeout), renew keeps the
/// leadership's lease, release resigns. The recipes:
/// - `etcd`: the election API (`Campaign` / `Resign`, as etcd's `concurrency`
///   package runs it), the leader key's create revision as the token;
/// - `zookeeper`: ZooKeeper's leader-election recipe, which is its lock recipe
///   (ephemeral sequential znodes, the lowest leads, each watches its predecessor);
/// - `redis`: a lease key set only if absent, renewed only while it holds our value;
/// - `nats`: a KV key created only if absent in a bucket whose max age is the lease,
///   updated by expected revision (ripienaar/nats-kv-leader-elect's recipe);
/// - `patroni`: Patroni's own election (a leader key with a TTL in etcd); each client
///   is its node's application and leads while its node accepts writes.
pub async fn connect_election(
    kind: BackendKind,
    endpoints: &[String],
    cfg: &LockConfig,
) -> anyhow::Result<Box<dyn LockClient>> {
    match kind {
        BackendKind::Etcd => Ok(Box::new(
            self::etcd::EtcdLock::connect_election(endpoints, cfg).await?,
        )),
        BackendKind::Zookeeper | BackendKind::Redis | BackendKind::Nats => {
            connect(kind, endpoints, cfg).await
        }
        BackendKind::Patroni => Ok(Box::new(
            self::patroni::NodeLeadership::connect(endpoints, cfg).await?,
        )),
        _ => anyhow::bail!("the {kind} backend has no leader-election recipe"),
    }
}

/// The one endpoint of a single-server backend.
fn single(kind: BackendKind, endpoints: &[String]) -> anyhow::Result<&str> {
    match endpoints {
        [one] => Ok(one),
        _ => anyhow::bail!(
            "the {kind} backend is one server; got {} endpoints",
            endpoints.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend's own keys reach its client as the workload wrote them, through
    /// the JSON a worker is configured with.
    #[test]
    fn options_reach_the_client_through_a_workers_config() {
        let cfg = LockConfig {
            name: "lock".into(),
            lease: std::time::Duration::from_secs(1),
            acquire_timeout: std::time::Duration::from_secs(1),
            fencing_token: true,
            options: toml::from_str("replica_acks = 2").unwrap(),
        };
        let json = serde_json::to_string(&cfg).unwrap();
        let back: LockConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(
            redis_sentinel::Options::of(&back.options).replica_acks,
            Some(2)
        );
        let none: LockConfig =
            serde_json::from_str(&json.replace(",\"options\":{\"replica_acks\":2}", "")).unwrap();
        assert!(none.options.is_empty(), "{json}");
        // Every key a backend reads is one its options take.
        for kind in BackendKind::ALL {
            for key in kind.option_keys() {
                let e = kind.read_options(&toml::Table::from_iter([(
                    key.to_string(),
                    toml::Value::Boolean(true),
                )]));
                assert!(e.is_err_and(|e| e.why != Why::Unknown), "{kind}: {key}");
            }
        }
    }

    /// Messages call a backend what a workload's `backend.kind` calls it.
    #[test]
    fn each_backend_is_named_as_workloads_name_it() {
        for kind in BackendKind::ALL {
            let serde = serde_json::to_value(kind).unwrap();
            assert_eq!(serde.as_str(), Some(kind.name()), "{kind:?}");
            assert_eq!(kind.to_string(), kind.name());
        }
    }
}
