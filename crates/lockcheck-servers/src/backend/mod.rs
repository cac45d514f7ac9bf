//! The lock clients' common ground: what every lock client is ([`LockClient`]),
//! what is said of each lock service and how a client of it connects
//! ([`LockService`]), a backend's own options ([`OwnOptions`]) and lease presets
//! ([`LeasePreset`]), the adapter that speaks the client protocol to a client of
//! another language ([`adapter`]), and the registry: [`BackendKind`], one line per
//! backend naming its service in its folder (`backends/<backend>/`). A backend's
//! client never reaches into `check`, `fault` or `report`.
//!
//! Every request carries a timeout ([`LockConfig::request_timeout`]), so a paused or
//! unreachable server gives [`LockError::Indeterminate`], never a hang.

pub mod adapter;
pub mod client;
pub mod options;
pub mod preset;
pub mod probe;
pub mod service;

pub use client::{Grant, LockClient, LockConfig, LockError};
pub use options::{NoOptions, OptionError, Options, OwnOptions, Why};
pub use preset::LeasePreset;
pub use service::{About, LockService};

#[cfg(feature = "etcd")]
use crate::backends::etcd::client::EtcdService;
#[cfg(feature = "mariadb")]
use crate::backends::mariadb::client::MariadbService;
#[cfg(feature = "nats")]
use crate::backends::nats::client::NatsService;
#[cfg(feature = "patroni")]
use crate::backends::patroni::client::PatroniService;
#[cfg(feature = "postgres")]
use crate::backends::postgres::client::{PostgresAdvisoryService, PostgresLeaseService};
#[cfg(feature = "redis")]
use crate::backends::redis::client::{RedisSentinelService, RedisService};
#[cfg(feature = "redis")]
use crate::backends::redis::redlock::RedlockService;
#[cfg(feature = "zookeeper")]
use crate::backends::zookeeper::client::ZookeeperService;

#[cfg(not(any(
    feature = "etcd",
    feature = "mariadb",
    feature = "nats",
    feature = "patroni",
    feature = "postgres",
    feature = "redis",
    feature = "zookeeper"
)))]
compile_error!("lockcheck is built with at least one backend's feature");

use serde::{Deserialize, Serialize};

/// Which lock service a workload tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum BackendKind {
    #[cfg(feature = "redis")]
    Redis,
    /// Redis with Sentinel: a primary, two replicas, three Sentinels; clients find
    /// the primary through Sentinel.
    #[cfg(feature = "redis")]
    RedisSentinel,
    #[cfg(feature = "redis")]
    Redlock,
    #[cfg(feature = "etcd")]
    Etcd,
    /// PostgreSQL session advisory lock (`pg_try_advisory_lock`).
    #[cfg(feature = "postgres")]
    PostgresAdvisory,
    /// PostgreSQL lease row (`locked_until` + token, one conditional `UPDATE`).
    #[cfg(feature = "postgres")]
    PostgresLease,
    /// NATS JetStream key-value lease (create if absent, the bucket's max age as TTL).
    #[cfg(feature = "nats")]
    Nats,
    /// ZooKeeper lock recipe: ephemeral sequential znodes, lowest holds.
    #[cfg(feature = "zookeeper")]
    Zookeeper,
    /// MariaDB `GET_LOCK` / `RELEASE_LOCK` (session-scoped).
    #[cfg(feature = "mariadb")]
    Mariadb,
    /// PostgreSQL nodes managed by Patroni: the primary role is the lock.
    #[cfg(feature = "patroni")]
    Patroni,
}

/// The backends this build has, in the registry's order: `BackendKind::ALL`.
const BUILT: &[BackendKind] = &[
    #[cfg(feature = "redis")]
    BackendKind::Redis,
    #[cfg(feature = "redis")]
    BackendKind::RedisSentinel,
    #[cfg(feature = "redis")]
    BackendKind::Redlock,
    #[cfg(feature = "etcd")]
    BackendKind::Etcd,
    #[cfg(feature = "postgres")]
    BackendKind::PostgresAdvisory,
    #[cfg(feature = "postgres")]
    BackendKind::PostgresLease,
    #[cfg(feature = "nats")]
    BackendKind::Nats,
    #[cfg(feature = "zookeeper")]
    BackendKind::Zookeeper,
    #[cfg(feature = "mariadb")]
    BackendKind::Mariadb,
    #[cfg(feature = "patroni")]
    BackendKind::Patroni,
];

/// Every backend a build of lockcheck can have, by name, with the cargo feature
/// that brings it: a name this build lacks is told apart from a typo.
const FEATURES: [(&str, &str); 10] = [
    ("redis", "redis"),
    ("redis-sentinel", "redis"),
    ("redlock", "redis"),
    ("etcd", "etcd"),
    ("postgres-advisory", "postgres"),
    ("postgres-lease", "postgres"),
    ("nats", "nats"),
    ("zookeeper", "zookeeper"),
    ("mariadb", "mariadb"),
    ("patroni", "patroni"),
];

/// [`BackendKind::named`] in a build with the backends `built`.
fn named_among(name: &str, built: &[BackendKind]) -> Result<BackendKind, String> {
    if let Some(kind) = built.iter().find(|k| k.name() == name) {
        return Ok(*kind);
    }
    match FEATURES.iter().find(|(n, _)| *n == name) {
        Some((_, feature)) => Err(format!(
            "`{name}`: this lockcheck was built without its `{feature}` feature \
             (cargo build --features {feature})"
        )),
        None => {
            let names: Vec<&str> = built.iter().map(|k| k.name()).collect();
            Err(format!(
                "unknown backend `{name}`, expected one of {}",
                names.join(", ")
            ))
        }
    }
}

/// A backend's name as a workload, a scorecard or `--backend` gives it: one of
/// this build's, or why not (a backend built without, or no backend at all).
impl TryFrom<String> for BackendKind {
    type Error = String;

    fn try_from(name: String) -> Result<BackendKind, String> {
        BackendKind::named(&name)
    }
}

impl BackendKind {
    /// The backend called `name`; else, for a backend this build was made
    /// without, the feature to build it with, or the names there are.
    pub fn named(name: &str) -> Result<BackendKind, String> {
        named_among(name, &BackendKind::ALL)
    }

    /// Whether some build of lockcheck has a backend called `name`.
    pub fn buildable(name: &str) -> bool {
        FEATURES.iter().any(|(n, _)| *n == name)
    }

    /// Every backend this build has (each is a cargo feature, all by default),
    /// in the registry's order.
    pub const ALL: [BackendKind; BUILT.len()] = {
        let mut all = [BUILT[0]; BUILT.len()];
        let mut i = 1;
        while i < BUILT.len() {
            all[i] = BUILT[i];
            i += 1;
        }
        all
    };

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
        self.service().has_lock()
    }

    /// Where the backend hands out no lock, how its clients lead instead.
    pub fn leads_instead(self) -> Option<&'static str> {
        (!self.has_lock()).then_some("its clients lead while their node is the primary")
    }

    /// Whether each client is one node's application (client `i` on node `i`, its
    /// own node first in its endpoints) rather than a client of the whole service.
    pub fn client_per_node(self) -> bool {
        self.service().client_per_node()
    }

    /// Reads the backend's own `[backend]` keys as the backend checks them. A key
    /// the backend does not read, but another does, is refused in that backend's
    /// words ("only redis runs with a persistence setting of lockcheck's; etcd has no
    /// such option"), or, one several backends read, naming them ("only etcd and
    /// zookeeper read it: ..."); one no backend reads stays `unknown`.
    pub fn read_options(self, options: &Options) -> Result<(), OptionError> {
        (self.about().options.read)(options).map_err(|e| {
            if e.why != Why::Unknown {
                return e;
            }
            let owners: Vec<(BackendKind, &str)> = BackendKind::ALL
                .into_iter()
                .flat_map(|k| k.about().options.keys.iter().map(move |o| (k, o)))
                .filter(|(_, (key, _))| *key == e.key)
                .map(|(k, (_, what))| (k, *what))
                .collect();
            let what = match owners.as_slice() {
                [] => return e,
                [(_, what)] => what.to_string(),
                [.., (_, what)] => {
                    let names: Vec<&str> = owners.iter().map(|(k, _)| k.name()).collect();
                    format!("only {} read it: {what}", names.join(" and "))
                }
            };
            OptionError::value(&e.key, format!("{what}; {self} has no such option"))
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
        self.service().pinned_option()
    }

    /// Whether its lock client keeps the lease alive by itself while the lock is
    /// held (ZooKeeper's session heartbeats, etcd's lease keep-alive), so that a
    /// holder that never renews still holds for as long as it runs: elsewhere the
    /// lease is a TTL (Redis, the lease row) or an idle session (advisory locks,
    /// `GET_LOCK`) that only the holder's own renewals extend.
    pub fn keeps_lease_alive(self) -> bool {
        self.service().keeps_lease_alive()
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

    /// What is said of the backend.
    fn about(self) -> About {
        self.service().about()
    }

    /// The registry: each backend's lock service, in its folder, one line per
    /// backend.
    pub fn service(self) -> &'static dyn LockService {
        match self {
            #[cfg(feature = "redis")]
            BackendKind::Redis => &RedisService,
            #[cfg(feature = "redis")]
            BackendKind::RedisSentinel => &RedisSentinelService,
            #[cfg(feature = "redis")]
            BackendKind::Redlock => &RedlockService,
            #[cfg(feature = "etcd")]
            BackendKind::Etcd => &EtcdService,
            #[cfg(feature = "postgres")]
            BackendKind::PostgresAdvisory => &PostgresAdvisoryService,
            #[cfg(feature = "postgres")]
            BackendKind::PostgresLease => &PostgresLeaseService,
            #[cfg(feature = "nats")]
            BackendKind::Nats => &NatsService,
            #[cfg(feature = "zookeeper")]
            BackendKind::Zookeeper => &ZookeeperService,
            #[cfg(feature = "mariadb")]
            BackendKind::Mariadb => &MariadbService,
            #[cfg(feature = "patroni")]
            BackendKind::Patroni => &PatroniService,
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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
    kind.service().connect(endpoints, cfg).await
}

/// The backends a workload with `mode = "election"` can campaign on, each with its
/// community's leader-election recipe.
pub const ELECTION_BACKENDS: &[BackendKind] = &[
    #[cfg(feature = "etcd")]
    BackendKind::Etcd,
    #[cfg(feature = "zookeeper")]
    BackendKind::Zookeeper,
    #[cfg(feature = "redis")]
    BackendKind::Redis,
    #[cfg(feature = "nats")]
    BackendKind::Nats,
    #[cfg(feature = "patroni")]
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
    anyhow::ensure!(
        ELECTION_BACKENDS.contains(&kind),
        "the {kind} backend has no leader-election recipe"
    );
    anyhow::ensure!(
        !endpoints.is_empty(),
        "no endpoints given for the {kind} backend"
    );
    kind.service().connect_election(endpoints, cfg).await
}

#[cfg(test)]
mod tests {
    /// A backend this build lacks is named with its feature; a typo gets the
    /// names there are; every built name reads back, and every name of the
    /// registry is one some build has.
    #[test]
    fn a_backend_is_named_or_told_apart_from_one_built_without() {
        let redis_only = [super::BackendKind::Redis];
        let e = super::named_among("etcd", &redis_only).unwrap_err();
        assert!(e.contains("built without its `etcd` feature"), "{e}");
        let e = super::named_among("etdc", &redis_only).unwrap_err();
        assert_eq!(e, "unknown backend `etdc`, expected one of redis");
        for kind in super::BackendKind::ALL {
            assert_eq!(super::BackendKind::named(kind.name()), Ok(kind));
            assert!(super::BackendKind::buildable(kind.name()), "{kind}");
        }
        #[derive(serde::Deserialize, Debug)]
        struct Backend {
            #[allow(dead_code)]
            kind: super::BackendKind,
        }
        let e = toml::from_str::<Backend>("kind = \"etdc\"").unwrap_err();
        assert!(e.to_string().contains("unknown backend `etdc`"), "{e}");
    }

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
            crate::backends::redis::sentinel::Options::of(&back.options).replica_acks,
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
