//! The Redis lock as the Redis docs teach it: `SET key <holder> NX PX ttl` on one
//! server; renew and release only while the key still holds our value (a Lua script
//! compares and acts in one step, so we never extend or delete another holder's lock).
//!
//! **Token.** With `fencing_token`, the acquire script also runs `INCR` on a counter key
//! (`<name>:token`) in the same script as the `SET NX PX`, so tokens are handed out in
//! the order grants happen: a later grant always carries a greater token. Without it,
//! there is no token. A restart without persistence resets the counter (and the lock).
//!
//! **`persistence`** ([`Options`]): lockcheck's Redis keeps nothing by default (no
//! AOF, no RDB snapshots), as the Redlock debate assumes; `persistence =
//! "aof-always"` runs it with its append-only file fsynced at every write
//! (`appendfsync always`), so that a server killed and restarted with its data
//! replays every grant it acknowledged, the token counter with them.
//!
//! **Known break.** The lease is the key's TTL, counted by the server. A holder paused
//! (GC, SIGSTOP, a slow disk) past the TTL loses the key; another client acquires; the
//! first wakes up still believing it holds the lock and writes. Only a resource that
//! checks the token (rejects a lower one than it has seen) stops that write.
//!
//! `Instance` (one server, its scripts, error mapping) is shared with Redlock
//! and Sentinel, in instance.rs.

use super::instance::{ttl_ms, Instance, SetOutcome};
use super::sentinel::Sentinels;
use crate::backend::client::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, OwnOptions};
use crate::backend::preset::LeasePreset;
use crate::backend::service::{About, LockService};
use async_trait::async_trait;
use serde::Deserialize;
use std::time::{Duration, Instant};

/// redis's own `[backend]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// What the server keeps on disk, for a restart to replay.
    #[serde(default)]
    pub persistence: Persistence,
}

impl OwnOptions for Options {
    const KEYS: &'static [(&'static str, &'static str)] = &[(
        "persistence",
        "only redis runs with a persistence setting of lockcheck's",
    )];
}

/// `persistence`: what a Redis server writes to disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Nothing (`--save "" --appendonly no`): a killed server restarts empty, its
    /// lock keys and token counter gone.
    #[default]
    None,
    /// The append-only file, fsynced before each write is acknowledged
    /// (`--appendonly yes --appendfsync always`): a killed server restarted with
    /// its data replays every acknowledged write.
    AofAlways,
}

/// The lease Redis's documentation sets (also Sentinel's and Redlock's users').
pub const REDIS_DOCS: LeasePreset = LeasePreset {
    name: "redis-docs",
    ttl: Duration::from_secs(30),
    renew_every: None,
    source: "Redis documentation: SET key value NX PX 30000",
};

/// What this client holds (or may hold, after an acquire with no reply), and the
/// server that granted it: renew and release go there.
struct Hold {
    value: String,
    token: Option<u64>,
    server: Instance,
}

/// Where the lock is: the one server, or the primary the Sentinels name now.
enum Primary {
    One(Instance),
    Sentinel(Sentinels),
}

impl Primary {
    /// The server to acquire on now; why there is none.
    async fn server(&mut self) -> Result<Instance, String> {
        match self {
            Primary::One(server) => Ok(server.clone()),
            Primary::Sentinel(s) => s.primary().await,
        }
    }

    /// Whether what `server` just did counts (with Sentinel's `replica_acks`: once
    /// enough replicas acknowledged it).
    async fn acknowledged(&self, server: &Instance) -> Result<(), String> {
        match self {
            Primary::One(_) => Ok(()),
            Primary::Sentinel(s) => s.acknowledged(server).await,
        }
    }
}

/// A client of the Redis lock: on one server (`redis`), or on the primary of a
/// Sentinel-watched group (`redis-sentinel`).
pub struct RedisLock {
    primary: Primary,
    cfg: LockConfig,
    fence_key: Option<String>,
    held: Option<Hold>,
}

impl RedisLock {
    pub fn connect(endpoint: &str, cfg: &LockConfig) -> anyhow::Result<Self> {
        let server = Instance::new(endpoint, cfg.request_timeout())?;
        Ok(Self::on(Primary::One(server), cfg))
    }

    /// A client that asks the Sentinels for the primary (`endpoints`: the servers,
    /// then the Sentinels).
    pub fn through_sentinels(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let sentinels = Sentinels::new(
            endpoints,
            cfg.request_timeout(),
            super::sentinel::Options::of(&cfg.options).replica_acks,
        )?;
        Ok(Self::on(Primary::Sentinel(sentinels), cfg))
    }

    fn on(primary: Primary, cfg: &LockConfig) -> Self {
        RedisLock {
            primary,
            fence_key: cfg.fencing_token.then(|| format!("{}:token", cfg.name)),
            cfg: cfg.clone(),
            held: None,
        }
    }

    fn grant(&self, token: Option<u64>) -> Grant {
        Grant {
            token,
            lease_ms: Some(ttl_ms(self.cfg.lease)),
        }
    }
}

#[async_trait]
impl LockClient for RedisLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let value = holder_id();
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        loop {
            let why = match self.primary.server().await {
                Err(why) => why,
                Ok(server) => {
                    let outcome = server
                        .try_lock(
                            &self.cfg.name,
                            &value,
                            self.cfg.lease,
                            self.fence_key.as_deref(),
                        )
                        .await;
                    match outcome {
                        Ok(SetOutcome::Taken { token }) => {
                            match self.primary.acknowledged(&server).await {
                                Ok(()) => {
                                    self.held = Some(Hold {
                                        value,
                                        token,
                                        server,
                                    });
                                    return Ok(self.grant(token));
                                }
                                // Not counted: the key goes again (or runs out), unused.
                                Err(why) => {
                                    let _ = server.unlock(&self.cfg.name, &value).await;
                                    why
                                }
                            }
                        }
                        Ok(SetOutcome::HeldByOther) => "held by another client".to_string(),
                        // Unreachable: the server may be restarting; keep trying until
                        // the deadline.
                        Err(LockError::Denied(e)) => e,
                        Err(e @ LockError::Indeterminate(_)) => {
                            // The key may be ours: keep its value so that a release can
                            // clean up.
                            self.held = Some(Hold {
                                value,
                                token: None,
                                server,
                            });
                            return Err(e);
                        }
                    }
                }
            };
            if Instant::now() >= deadline {
                return Err(LockError::Denied(why));
            }
            retry_pause(deadline).await;
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        let hold = self
            .held
            .as_ref()
            .ok_or_else(|| LockError::Denied("not-held: nothing to renew".into()))?;
        if !hold
            .server
            .extend(&self.cfg.name, &hold.value, self.cfg.lease)
            .await?
        {
            self.held = None;
            return Err(LockError::Denied(
                "not-held: the lock is no longer ours".into(),
            ));
        }
        // Not counted: the holder goes by the lease it was last granted.
        self.primary
            .acknowledged(&hold.server)
            .await
            .map_err(|why| LockError::Denied(format!("the renewal does not count: {why}")))?;
        Ok(self.grant(hold.token))
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let hold = self
            .held
            .take()
            .ok_or_else(|| LockError::Denied("not-held: nothing to release".into()))?;
        match hold.server.unlock(&self.cfg.name, &hold.value).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(LockError::Denied(
                "not-held: the lock is no longer ours".into(),
            )),
            Err(e) => {
                // Not released (or not known to be): still ours to release or renew.
                self.held = Some(hold);
                Err(e)
            }
        }
    }

    fn node(&self) -> Option<String> {
        match &self.primary {
            Primary::One(_) => Some("n1".into()),
            Primary::Sentinel(s) => s.node(),
        }
    }
}

/// Redis on one server, as its clients see it.
pub struct RedisService;

#[async_trait]
impl LockService for RedisService {
    fn about(&self) -> About {
        About {
            name: "redis",
            token: Some("INCR of a counter key, in the same script as SET NX PX"),
            known_break: "a holder paused past its TTL: the key expires, another client sets it",
            shown_by: &["redis-pause-unfenced", "redis-kill-restart"],
            fenced_by: Some("redis-pause-fenced"),
            options: reader::<Options>(),
            presets: &[REDIS_DOCS],
            durable: Some("persistence = \"aof-always\""),
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        anyhow::ensure!(
            endpoints.len() == 1,
            "the redis backend is one server; got {} endpoints (use redlock for several)",
            endpoints.len()
        );
        Ok(Box::new(RedisLock::connect(&endpoints[0], cfg)?))
    }
}

/// Redis with Sentinel, as its clients see it.
pub struct RedisSentinelService;

#[async_trait]
impl LockService for RedisSentinelService {
    fn about(&self) -> About {
        About {
            name: "redis-sentinel",
            token: Some("INCR of a counter key on the primary, replicated asynchronously like the key"),
            known_break: "a primary cut off from its replicas and Sentinels goes on granting and renewing; \
                 the Sentinels promote a replica the renewals never reached, its copy of the key runs out, \
                 and another client acquires there (Redis's distributed-lock page)",
            shown_by: &["incidents/redis-sentinel-failover"],
            fenced_by: Some("incidents/redis-sentinel-failover-fenced"),
            options: reader::<super::sentinel::Options>(),
            presets: &[REDIS_DOCS],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(RedisLock::through_sentinels(endpoints, cfg)?))
    }
}
