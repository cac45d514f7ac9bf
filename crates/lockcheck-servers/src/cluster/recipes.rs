//! The registry: each backend's server recipe, one line per backend, and what
//! follows from it (the program behind each backend, its usual number of nodes,
//! whether this machine has it).

use super::recipe::{ClusterError, ServerBinary, ServerRecipe};
use crate::backend::BackendKind;
#[cfg(feature = "etcd")]
use crate::backends::etcd::server::Etcd;
#[cfg(feature = "mariadb")]
use crate::backends::mariadb::server::Mariadb;
#[cfg(feature = "nats")]
use crate::backends::nats::server::Nats;
#[cfg(feature = "patroni")]
use crate::backends::patroni::server::Patroni;
#[cfg(feature = "postgres")]
use crate::backends::postgres::server::Postgres;
#[cfg(feature = "redis")]
use crate::backends::redis::server::sentinel::RedisSentinel;
#[cfg(feature = "redis")]
use crate::backends::redis::server::{REDIS, REDLOCK};
#[cfg(feature = "zookeeper")]
use crate::backends::zookeeper::server::Zookeeper;
use std::path::PathBuf;

/// The registry: each backend's server recipe, one line per backend.
pub fn recipe(kind: BackendKind) -> &'static dyn ServerRecipe {
    match kind {
        #[cfg(feature = "redis")]
        BackendKind::Redis => &REDIS,
        #[cfg(feature = "redis")]
        BackendKind::RedisSentinel => &RedisSentinel,
        #[cfg(feature = "redis")]
        BackendKind::Redlock => &REDLOCK,
        #[cfg(feature = "etcd")]
        BackendKind::Etcd => &Etcd,
        #[cfg(feature = "postgres")]
        BackendKind::PostgresAdvisory | BackendKind::PostgresLease => &Postgres,
        #[cfg(feature = "nats")]
        BackendKind::Nats => &Nats,
        #[cfg(feature = "zookeeper")]
        BackendKind::Zookeeper => &Zookeeper,
        #[cfg(feature = "mariadb")]
        BackendKind::Mariadb => &Mariadb,
        #[cfg(feature = "patroni")]
        BackendKind::Patroni => &Patroni,
    }
}

/// The image `lockcheck image build` makes.
pub const HOST_IMAGE: &str = "lockcheck/host:latest";

/// The image a backend runs from under the docker runtime unless the workload
/// says otherwise: the image users pull (Redis, etcd), whose command lines are the
/// servers' own; the host image for the others, whose command lines name this
/// machine's files (the ZooKeeper jars, PostgreSQL's versioned directory,
/// `mariadb-install-db`).
pub fn default_image(kind: BackendKind) -> &'static str {
    recipe(kind).official_image().unwrap_or(HOST_IMAGE)
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
