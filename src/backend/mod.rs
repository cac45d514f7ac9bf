//! Lock services, one file each. A backend knows the lock recipe its own community
//! uses and where its fencing token comes from; it never reaches into `check`,
//! `fault` or `report`. (Owned by the backends work: redis.rs, redlock.rs, etcd.rs.)
//!
//! | backend | recipe | token | known break |
//! |---|---|---|---|
//! | [`redis`] | `SET key holder NX PX ttl` on one server | `INCR` of a counter in the same script, or none | a holder paused past its TTL wakes up still "holding" while another holds |
//! | [`redlock`] | the same on 5 independent servers, quorum 3, validity = TTL − elapsed − drift | none (Redlock has none) | the same pause; also a clock jump on a majority of servers |
//! | [`etcd`] | lease + key created only if absent, kept alive while held | the key's create revision | a holder paused past its lease: the lease expires, the key goes |
//!
//! Every request carries a timeout ([`LockConfig::request_timeout`]), so a paused or
//! unreachable server gives [`LockError::Indeterminate`], never a hang.

pub mod etcd;
pub mod redis;
pub mod redlock;

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

impl LockConfig {
    /// How long one request to one server may take before the client stops waiting
    /// (and reports the op as indeterminate). A quarter of the lease: a grant that
    /// arrives later than that leaves the holder too little of its lease to use, and a
    /// paused server must not hold a client past its own lease.
    pub fn request_timeout(&self) -> Duration {
        (self.lease / 4).clamp(Duration::from_millis(100), Duration::from_secs(2))
    }
}

/// Opens one client of a lock service. `endpoints` are the servers' client addresses
/// (`host:port`) in node order, n1 first, as [`crate::cluster::LocalCluster::endpoints`]
/// lists them: one for `redis`, every instance for `redlock`, every member for `etcd`.
pub async fn connect(
    kind: BackendKind,
    endpoints: &[String],
    cfg: &LockConfig,
) -> anyhow::Result<Box<dyn LockClient>> {
    anyhow::ensure!(
        !endpoints.is_empty(),
        "no endpoints given for the {kind:?} backend"
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
        BackendKind::Redlock => Box::new(self::redlock::Redlock::connect(endpoints, cfg)?),
        BackendKind::Etcd => Box::new(self::etcd::EtcdLock::connect(endpoints, cfg).await?),
    })
}

/// A value that names one acquisition by one client, unlike any other in any process:
/// the lock key holds it, and renew and release act only while it is still there.
fn holder_id() -> String {
    format!("{}-{:032x}", std::process::id(), rand::random::<u128>())
}

/// A short random pause between two tries of a contended acquire, so that clients
/// waiting for the same lock do not retry in lockstep; never past `deadline`.
async fn retry_pause(deadline: std::time::Instant) {
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
    /// The node this client last talked to, for the history's `node` field.
    fn node(&self) -> Option<String> {
        None
    }
}
