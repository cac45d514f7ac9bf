//! The registry: each backend's server recipe, one line per backend, and what
//! follows from it (the program behind each backend, its usual number of nodes,
//! whether this machine has it).

use super::recipe::{ClusterError, ServerBinary, ServerRecipe};
use super::{etcd, mariadb, nats, patroni, postgres, redis, redis_sentinel, zookeeper};
use crate::backend::BackendKind;
use std::path::PathBuf;

/// The registry: each backend's server recipe, one line per backend.
pub fn recipe(kind: BackendKind) -> &'static dyn ServerRecipe {
    match kind {
        BackendKind::Redis => &redis::REDIS,
        BackendKind::RedisSentinel => &redis_sentinel::RedisSentinel,
        BackendKind::Redlock => &redis::REDLOCK,
        BackendKind::Etcd => &etcd::Etcd,
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => &postgres::Postgres,
        BackendKind::Nats => &nats::Nats,
        BackendKind::Zookeeper => &zookeeper::Zookeeper,
        BackendKind::Mariadb => &mariadb::Mariadb,
        BackendKind::Patroni => &patroni::Patroni,
    }
}

/// The server program behind each backend.
pub fn server_binary(kind: BackendKind) -> ServerBinary {
    recipe(kind).binary()
}

/// How many server nodes a backend runs unless the workload says otherwise.
pub fn default_nodes(kind: BackendKind) -> usize {
    recipe(kind).default_nodes()
}

/// Whether this machine can run one backend (for `lockcheck doctor`).
#[derive(Debug)]
pub struct Availability {
    pub kind: BackendKind,
    pub binary: ServerBinary,
    /// The program that would run, or why there is none.
    pub found: Result<PathBuf, ClusterError>,
}

/// Every backend lockcheck knows, and whether its server program is here.
pub fn available_backends() -> Vec<Availability> {
    BackendKind::ALL
        .into_iter()
        .map(|kind| {
            let binary = server_binary(kind);
            Availability {
                kind,
                binary,
                found: binary.resolve(None),
            }
        })
        .collect()
}
