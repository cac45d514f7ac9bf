//! One Redis server and the lock's scripts on it (`SET NX PX`, compare-and-extend,
//! compare-and-delete), with the mapping of its errors to the history's two words:
//! what the single-instance lock, Redlock and the Sentinel client share.

use crate::backend::client::LockError;
use ::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use ::redis::{FromRedisValue, RedisError, Script, ScriptInvocation};
use anyhow::Context;
use std::sync::LazyLock;
use std::time::Duration;

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
