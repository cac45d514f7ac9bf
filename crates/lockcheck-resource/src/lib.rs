//! The protected resource: what the lock is for. Workers write to it directly, not
//! through the controller, so that a paused holder's write arrives when it wakes up,
//! after another client took the lock: the stale write.
//!
//! Two kinds, chosen by the workload (`[resource] kind`):
//!
//! - lockcheck's own small TCP server in the controller ([`own`], the default),
//!   which applies the fence itself;
//! - a real PostgreSQL (`postgres`), started privately for the run, that workers
//!   update with the conditional `UPDATE` users write; there the fence is the
//!   `WHERE` clause the client sends, as in production. It comes with the
//!   PostgreSQL backends (the cargo feature `postgres`), whose server recipe and
//!   connection string it takes.
//!
//! Either way the fence is a comparison of the write's token with the highest token
//! applied ([`Fence`]: `<=`, `<` or none), a write it rejects completes `fail` with
//! [`STALE_TOKEN`], and `resource.jsonl` holds the resource's own order of applied
//! writes (`seq` 1, 2, 3, ...): the history spec's optional file, which the checker
//! and the report read whatever the kind.

mod fence;
pub mod own;
#[cfg(feature = "postgres")]
pub mod postgres;

pub use fence::{Fence, Mode, Stats, StatsHandle, WriteOutcome};

use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;

/// Which resource the workers write to (recorded in verdict.json, hence the run
/// directory's type).
pub use lockcheck_rundir::resource::Kind;

/// A workload's resource: its kind and its fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub kind: Kind,
    pub fence: Fence,
}

/// The server program this machine must have for resource `kind`, where it runs
/// one (always here, whatever runs the lock service).
pub fn server(kind: Kind) -> Option<lockcheck_servers::cluster::ServerBinary> {
    match kind {
        Kind::Lockcheck => None,
        #[cfg(feature = "postgres")]
        Kind::Postgres => Some(postgres::server()),
        // A build without PostgreSQL refuses the resource when it starts it.
        #[cfg(not(feature = "postgres"))]
        Kind::Postgres => None,
    }
}

impl Spec {
    /// In words, for the run's first line and its result: `fenced`, `unfenced`,
    /// `postgres, token <= $2`, ...
    pub fn describe(&self) -> String {
        match (self.kind, self.fence) {
            (Kind::Lockcheck, Fence::NotBelow) => "fenced".into(),
            (Kind::Lockcheck, Fence::Off) => "unfenced".into(),
            (Kind::Lockcheck, Fence::Above) => "fenced (<)".into(),
            #[cfg(feature = "postgres")]
            (Kind::Postgres, Fence::Off) => "postgres, unfenced".into(),
            #[cfg(feature = "postgres")]
            (Kind::Postgres, f) => format!("postgres, token {} $2", f.name()),
            #[cfg(not(feature = "postgres"))]
            (Kind::Postgres, _) => "postgres (not in this build)".into(),
        }
    }
}

pub use lockcheck_history::error::{MISSING_TOKEN, STALE_TOKEN};

/// Where a worker finds the resource (in its config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Endpoint {
    /// lockcheck's own server, which applies the fence itself.
    Lockcheck { addr: SocketAddr },
    /// PostgreSQL: the fence goes into the worker's own `UPDATE`.
    #[cfg(feature = "postgres")]
    Postgres { addr: SocketAddr, fence: Fence },
}

impl Endpoint {
    /// Where the resource listens.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Endpoint::Lockcheck { addr } => *addr,
            #[cfg(feature = "postgres")]
            Endpoint::Postgres { addr, .. } => *addr,
        }
    }

    /// The same resource reached at `addr` instead (a port forwarded to it).
    pub fn at(&self, addr: SocketAddr) -> Endpoint {
        match self {
            Endpoint::Lockcheck { .. } => Endpoint::Lockcheck { addr },
            #[cfg(feature = "postgres")]
            Endpoint::Postgres { fence, .. } => Endpoint::Postgres {
                addr,
                fence: *fence,
            },
        }
    }
}

/// The running resource, in the controller.
pub enum Running {
    Own(own::Server),
    /// Boxed: the server's guard and its log's state are much larger than a handle.
    #[cfg(feature = "postgres")]
    Postgres(Box<postgres::Resource>),
}

impl Running {
    /// Starts the resource of `spec`; `run_dir` holds `resource.jsonl` (and, for
    /// PostgreSQL, the server's files under `resource/`).
    pub async fn start(spec: Spec, run_dir: &Path) -> Result<Running> {
        let log = run_dir.join("resource.jsonl");
        Ok(match spec.kind {
            Kind::Lockcheck => Running::Own(own::Server::start(spec.fence, &log).await?),
            #[cfg(feature = "postgres")]
            Kind::Postgres => Running::Postgres(Box::new(
                postgres::Resource::start(spec.fence, run_dir).await?,
            )),
            #[cfg(not(feature = "postgres"))]
            Kind::Postgres => anyhow::bail!(
                "resource kind \"postgres\": this lockcheck was built without its `postgres` feature"
            ),
        })
    }

    pub fn endpoint(&self) -> Endpoint {
        match self {
            Running::Own(s) => Endpoint::Lockcheck { addr: s.addr() },
            #[cfg(feature = "postgres")]
            Running::Postgres(p) => Endpoint::Postgres {
                addr: p.addr(),
                fence: p.fence(),
            },
        }
    }

    pub fn stats_handle(&self) -> StatsHandle {
        match self {
            Running::Own(s) => s.stats_handle(),
            #[cfg(feature = "postgres")]
            Running::Postgres(p) => p.stats_handle(),
        }
    }

    /// Completes `resource.jsonl` and stops the resource, once the workers are gone.
    /// Dropping it instead (an interrupted run) does the same, on a best-effort basis.
    pub async fn finish(self) -> Result<()> {
        match self {
            Running::Own(_) => Ok(()),
            #[cfg(feature = "postgres")]
            Running::Postgres(p) => (*p).finish().await,
        }
    }
}

/// A worker's connection to the resource.
pub enum Client {
    Own(own::Client),
    #[cfg(feature = "postgres")]
    Postgres(postgres::Client),
}

impl Client {
    pub async fn connect(endpoint: &Endpoint) -> Result<Client> {
        Ok(match endpoint {
            Endpoint::Lockcheck { addr } => Client::Own(own::Client::connect(*addr).await?),
            #[cfg(feature = "postgres")]
            Endpoint::Postgres { addr, fence } => {
                Client::Postgres(postgres::Client::connect(*addr, *fence).await?)
            }
        })
    }

    /// Writes `data` with `token` as `process`. `Err`: the write may or may not have
    /// been applied.
    pub async fn write(
        &mut self,
        process: u64,
        token: Option<u64>,
        data: &str,
    ) -> Result<WriteOutcome> {
        match self {
            Client::Own(c) => c.write(process, token, data).await,
            #[cfg(feature = "postgres")]
            Client::Postgres(c) => c.write(process, token, data).await,
        }
    }

    /// The last applied write: its `seq` (0 before any) and data.
    pub async fn read(&mut self) -> Result<(u64, Option<String>)> {
        match self {
            Client::Own(c) => c.read().await,
            #[cfg(feature = "postgres")]
            Client::Postgres(c) => c.read().await,
        }
    }
}
