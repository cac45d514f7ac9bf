//! The Redis lock as the Redis docs teach it: `SET key <holder> NX PX ttl` on one
//! server; renew and release only while the key still holds our value (a Lua script
//! compares and acts in one step, so we never extend or delete another holder's lock).
//!
//! **Token.** With `fencing_token`, the acquire script also runs `INCR` on a counter key
//! (`<name>:token`) in the same script as the `SET NX PX`, so tokens are handed out in
//! the order grants happen: a later grant always carries a greater token. Without it,
//! there is no token. A restart without persistence resets the counter (and the lock).
//!
//! **Known break.** The lease is the key's TTL, counted by the server. A holder paused
//! (GC, SIGSTOP, a slow disk) past the TTL loses the key; another client acquires; the
//! first wakes up still believing it holds the lock and writes. Only a resource that
//! checks the token (rejects a lower one than it has seen) stops that write.
//!
//! `Instance` (one server, its scripts, error mapping) is shared with Redlock.

use super::redis_sentinel::Sentinels;
use super::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{FromRedisValue, RedisError, Script, ScriptInvocation};
use anyhow::Context;
use async_trait::async_trait;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// SET NX PX, then (ARGV[3] = "1") INCR the fence counter, atomically: returns -1 when
/// another value holds the key, else the new token (0 when no token is asked for).
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
            if ARGV[3] == '1' then return redis.call('INCR', KEYS[2]) end
            return 0
          end
          return -1",
    )
});

/// PEXPIRE the key only while it holds our value: 1 extended, 0 not ours.
static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('PEXPIRE', KEYS[1], ARGV[2])
          end
          return 0",
    )
});

/// DEL the key only while it holds our value: 1 deleted, 0 not ours.
static UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('DEL', KEYS[1])
          end
          return 0",
    )
});

/// What one `SET NX PX` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetOutcome {
    /// The key is ours now, with the fencing token if one was asked for.
    Taken { token: Option<u64> },
    /// Another holder's value is there.
    HeldByOther,
}

/// One Redis server and the lock's three scripts. Cheap to clone (the connection is
/// shared); it reconnects by itself after the server restarts.
#[derive(Clone)]
pub(crate) struct Instance {
    addr: String,
    conn: ConnectionManager,
    timeout: Duration,
}

impl Instance {
    /// A lazy connection to `addr` (`host:port`): nothing is dialled until the first
    /// request, so a server that is down now does not stop the client from starting.
    pub(crate) fn new(addr: &str, timeout: Duration) -> anyhow::Result<Self> {
        let client = ::redis::Client::open(format!("redis://{addr}/"))
            .with_context(|| format!("bad redis address {addr:?}"))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(timeout);
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .with_context(|| format!("connecting to redis at {addr}"))?;
        Ok(Instance {
            addr: addr.to_string(),
            conn,
            timeout,
        })
    }

    /// The server's address, as the client dials it.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    pub(crate) async fn try_lock(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
        fence_key: Option<&str>,
    ) -> Result<SetOutcome, LockError> {
        let mut inv = ACQUIRE.prepare_invoke();
        inv.key(key)
            .key(fence_key.unwrap_or(key))
            .arg(value)
            .arg(ttl_ms(ttl))
            .arg(if fence_key.is_some() { "1" } else { "0" });
        let n: i64 = self.call(inv).await?;
        Ok(match n {
            -1 => SetOutcome::HeldByOther,
            _ if fence_key.is_none() => SetOutcome::Taken { token: None },
            n => SetOutcome::Taken {
                token: Some(u64::try_from(n).map_err(|_| {
                    LockError::Indeterminate(format!("{}: bad token {n}", self.addr))
                })?),
            },
        })
    }

    /// Extends the key's TTL if it still holds `value`; false if it does not.
    pub(crate) async fn extend(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, LockError> {
        let mut inv = EXTEND.prepare_invoke();
        inv.key(key).arg(value).arg(ttl_ms(ttl));
        Ok(self.call::<i64>(inv).await? == 1)
    }

    /// Deletes the key if it still holds `value`; false if it does not.
    pub(crate) async fn unlock(&self, key: &str, value: &str) -> Result<bool, LockError> {
        let mut inv = UNLOCK.prepare_invoke();
        inv.key(key).arg(value);
        Ok(self.call::<i64>(inv).await? == 1)
    }

    /// Runs a script with the request timeout around everything (reconnecting too).
    async fn call<T: FromRedisValue>(&self, inv: ScriptInvocation<'_>) -> Result<T, LockError> {
        let mut conn = self.conn.clone();
        self.timed(inv.invoke_async(&mut conn)).await
    }

    /// Sends one command (`WAIT`, `SENTINEL ...`) with the request timeout around it.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        cmd: &::redis::Cmd,
    ) -> Result<T, LockError> {
        let mut conn = self.conn.clone();
        self.timed(cmd.query_async(&mut conn)).await
    }

    /// The reply of `request`, or why there is none, in the history's words.
    async fn timed<T>(
        &self,
        request: impl std::future::Future<Output = ::redis::RedisResult<T>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(classify(&self.addr, e)),
            Err(_) => Err(LockError::Indeterminate(format!(
                "{}: no reply within {}ms",
                self.addr,
                self.timeout.as_millis()
            ))),
        }
    }
}

/// A refused connection or an error reply means the script did not run (`fail`);
/// anything else (a timeout, a connection lost mid-request) may have run (`info`).
fn classify(addr: &str, e: RedisError) -> LockError {
    if e.is_connection_refusal() {
        LockError::Denied(format!("{addr}: unreachable: {e}"))
    } else if matches!(e.kind(), ::redis::ErrorKind::Server(_)) {
        LockError::Denied(format!("{addr}: {e}"))
    } else {
        LockError::Indeterminate(format!("{addr}: {e}"))
    }
}

/// A TTL in whole milliseconds, at least 1 (PX 0 is an error in Redis).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

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
        let sentinels = Sentinels::new(endpoints, cfg.request_timeout(), cfg.replica_acks)?;
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
