//! Lock services, one file each. A backend knows the lock recipe its own community
//! uses and where its fencing token comes from; it never reaches into `check`,
//! `fault` or `report`. (Owned by the backends work: redis.rs, redlock.rs, etcd.rs.)

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Which lock service a workload tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    Redis,
    Redlock,
    Etcd,
}

/// What a successful acquire or renew hands back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The fencing token the backend handed out (etcd revision, Redis counter, ...),
    /// or none where the backend (or the workload) gives none.
    pub token: Option<u64>,
    /// The lease the holder may count on from the moment of the request, as the
    /// client computes it (Redlock: validity time = TTL - elapsed - drift).
    pub lease_ms: Option<u64>,
}

/// Why an operation did not succeed, in the history's two words for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LockError {
    /// Definitely did not happen (`fail`): the lock was held, the token was not ours.
    #[error("{0}")]
    Denied(String),
    /// May or may not have happened (`info`): timed out, connection lost mid-request.
    #[error("{0}")]
    Indeterminate(String),
}

/// How a client takes the lock: the same for every backend, read from the workload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LockConfig {
    /// Name of the lock (a key, a prefix, a znode).
    pub name: String,
    /// Lease / TTL / session timeout.
    pub lease: Duration,
    /// How long one acquire may wait for the lock before it fails.
    pub acquire_timeout: Duration,
    /// Whether acquire asks the backend for a fencing token.
    pub fencing_token: bool,
}

/// One client's connection to a lock service. A worker process holds exactly one,
/// with its own connections and its own keep-alive, so that a signal to one worker
/// stops exactly that client.
#[async_trait]
pub trait LockClient: Send {
    async fn acquire(&mut self) -> Result<Grant, LockError>;
    async fn renew(&mut self) -> Result<Grant, LockError>;
    async fn release(&mut self) -> Result<(), LockError>;
    /// The node this client last talked to, for the history's `node` field.
    fn node(&self) -> Option<String> {
        None
    }
}
