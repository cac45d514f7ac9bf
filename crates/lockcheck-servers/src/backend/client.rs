//! What every lock client is: the [`LockClient`] trait, its grant and its two
//! errors, and the lock's settings a client is opened with. The base of `backend`:
//! it imports no sibling but the options' base, and every backend's file imports it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use super::options::Options;

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
    /// The backend's own `[backend]` settings, as the workload gave them; the
    /// backend reads them into its typed options ([`super::options::OwnOptions`]).
    #[serde(default, skip_serializing_if = "Options::is_empty")]
    pub options: Options,
}

impl LockConfig {
    /// How long one request to one server may take before the client stops waiting
    /// (and reports the op as indeterminate). A quarter of the lease: a grant that
    /// arrives later than that leaves the holder too little of its lease to use, and a
    /// paused server must not hold a client past its own lease.
    pub fn request_timeout(&self) -> Duration {
        (self.lease / 4).clamp(Duration::from_millis(100), Duration::from_secs(2))
    }
}

/// A value that names one acquisition by one client, unlike any other in any process:
/// the lock key holds it, and renew and release act only while it is still there.
pub fn holder_id() -> String {
    format!("{}-{:032x}", std::process::id(), rand::random::<u128>())
}

/// A short random pause between two tries of a contended acquire, so that clients
/// waiting for the same lock do not retry in lockstep; never past `deadline`.
pub async fn retry_pause(deadline: std::time::Instant) {
    use rand::Rng;
    let pause = Duration::from_millis(rand::thread_rng().gen_range(10..50));
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    tokio::time::sleep(pause.min(left)).await;
}

/// One client's connection to a lock service. A worker process holds exactly one,
/// with its own connections and its own keep-alive, so that a signal to one worker
/// stops exactly that client.
#[async_trait]
pub trait LockClient: Send {
    async fn acquire(&mut self) -> Result<Grant, LockError>;
    async fn renew(&mut self) -> Result<Grant, LockError>;
    async fn release(&mut self) -> Result<(), LockError>;
    /// Whether the library still believes it holds the lock (an adapter's `held`);
    /// `None`: this client cannot tell, without asking the lock service afresh.
    async fn held(&mut self) -> Option<Result<bool, LockError>> {
        None
    }
    /// Where a leadership acts on the lock service itself (a Patroni node's
    /// application commits on its own node), performs one act: `None` where acts
    /// go to the protected resource instead.
    async fn act(&mut self, token: Option<u64>, data: &str) -> Option<Result<(), LockError>> {
        let _ = (token, data);
        None
    }
    /// The node this client last talked to, for the history's `node` field.
    fn node(&self) -> Option<String> {
        None
    }
}
