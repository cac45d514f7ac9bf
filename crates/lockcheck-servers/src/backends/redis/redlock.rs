//! Redlock, as antirez specified it (redis.io/docs/manual/patterns/distributed-locks):
//! the Redis lock on N independent servers (5 by default). One acquire: a fresh
//! random value, `SET key value NX PX ttl` on every server with a small per-server
//! timeout; the lock is ours if a majority (N/2+1) said yes and time is left: validity
//! = TTL − elapsed − drift, with drift = TTL·1% + 2 ms for the servers' clocks. Else
//! release on every server and try again until the acquire timeout. Release deletes
//! the key by value on every server.
//!
//! **Token.** None: Redlock hands out no fencing token (its random value is not
//! ordered), so [`Grant::token`] is always `None` and a resource cannot fence its
//! holders. That is Kleppmann's main objection; lockcheck shows it.
//!
//! **Known break.** The validity time is counted on the client's clock from before
//! the request; a holder paused past it (or whose clock runs slow) still believes it
//! holds the lock while another client holds a majority. A clock jump forward on a
//! majority of servers expires the keys early, with the same result.

use super::client::REDIS_DOCS;
use super::instance::{ttl_ms, Instance, SetOutcome};
use crate::backend::client::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, NoOptions};
use crate::backend::service::{About, LockService};
use async_trait::async_trait;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// A client of Redlock over independent Redis servers.
pub struct Redlock {
    servers: Vec<Instance>,
    cfg: LockConfig,
    /// Our value while we hold (or may hold) the lock.
    held: Option<String>,
}

/// How many servers answered each way in one round.
#[derive(Debug, Default)]
struct Tally {
    yes: usize,
    no: usize,
    unknown: usize,
}

impl Redlock {
    pub fn connect(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        // Small against the TTL, as the algorithm asks: a server that does not answer
        // quickly must not eat the validity time of the others' grants.
        let per_server = cfg
            .request_timeout()
            .min((cfg.lease / 10).max(Duration::from_millis(20)));
        let servers = endpoints
            .iter()
            .map(|e| Instance::new(e, per_server))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Redlock {
            servers,
            cfg: cfg.clone(),
            held: None,
        })
    }

    fn quorum(&self) -> usize {
        self.servers.len() / 2 + 1
    }

    /// TTL − elapsed − drift, or none when nothing is left.
    fn validity(&self, started: Instant) -> Option<Duration> {
        let drift = self.cfg.lease / 100 + Duration::from_millis(2);
        self.cfg
            .lease
            .checked_sub(started.elapsed())?
            .checked_sub(drift)
            .filter(|v| !v.is_zero())
    }

    /// Runs `op` on every server at once and counts the answers.
    async fn on_all<F, Fut>(&self, op: F) -> Tally
    where
        F: Fn(Instance) -> Fut,
        Fut: Future<Output = Result<bool, LockError>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for s in &self.servers {
            set.spawn(op(s.clone()));
        }
        let mut tally = Tally::default();
        while let Some(done) = set.join_next().await {
            match done {
                Ok(Ok(true)) => tally.yes += 1,
                Ok(Ok(false)) | Ok(Err(LockError::Denied(_))) => tally.no += 1,
                Ok(Err(LockError::Indeterminate(_))) | Err(_) => tally.unknown += 1,
            }
        }
        tally
    }

    async fn unlock_all(&self, value: &str) -> Tally {
        let (key, value) = (self.cfg.name.clone(), value.to_string());
        self.on_all(move |s| {
            let (key, value) = (key.clone(), value.clone());
            async move { s.unlock(&key, &value).await }
        })
        .await
    }

    /// The outcome of a round that needed a majority: ours, definitely not, or unknown
    /// (a majority was possible only counting servers that did not answer).
    fn judge(&self, tally: &Tally, what: &str) -> Result<(), LockError> {
        let n = self.servers.len();
        if tally.yes >= self.quorum() {
            Ok(())
        } else if tally.yes + tally.unknown >= self.quorum() {
            Err(LockError::Indeterminate(format!(
                "{what}: {}/{n} servers agreed, {} did not answer",
                tally.yes, tally.unknown
            )))
        } else {
            Err(LockError::Denied(format!(
                "not-held: {what} on {}/{n} servers, quorum {}",
                tally.yes,
                self.quorum()
            )))
        }
    }
}

#[async_trait]
impl LockClient for Redlock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        let (key, ttl) = (self.cfg.name.clone(), self.cfg.lease);
        loop {
            let value = holder_id();
            let started = Instant::now();
            let tally = {
                let (key, value) = (key.clone(), value.clone());
                self.on_all(move |s| {
                    let (key, value) = (key.clone(), value.clone());
                    async move {
                        s.try_lock(&key, &value, ttl, None)
                            .await
                            .map(|o| matches!(o, SetOutcome::Taken { .. }))
                    }
                })
                .await
            };
            let validity = self.validity(started);
            if let (true, Some(validity)) = (tally.yes >= self.quorum(), validity) {
                self.held = Some(value);
                return Ok(Grant {
                    token: None,
                    lease_ms: Some(ttl_ms(validity)),
                });
            }
            // Not ours: undo the minority we got (and any grant we did not hear of),
            // so that the failed attempt holds nothing.
            self.unlock_all(&value).await;
            if Instant::now() >= deadline {
                return Err(LockError::Denied(format!(
                    "quorum not reached: {}/{} servers granted, {} did not answer{}",
                    tally.yes,
                    self.servers.len(),
                    tally.unknown,
                    if validity.is_none() {
                        ", no validity left"
                    } else {
                        ""
                    }
                )));
            }
            retry_pause(deadline).await;
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        let value = self
            .held
            .clone()
            .ok_or_else(|| LockError::Denied("not-held: nothing to renew".into()))?;
        let started = Instant::now();
        let (key, ttl) = (self.cfg.name.clone(), self.cfg.lease);
        let tally = self
            .on_all(move |s| {
                let (key, value) = (key.clone(), value.clone());
                async move { s.extend(&key, &value, ttl).await }
            })
            .await;
        let judged = self.judge(&tally, "extended");
        if let Err(LockError::Denied(_)) = judged {
            self.held = None;
        }
        judged?;
        let validity = self.validity(started).ok_or_else(|| {
            LockError::Denied("not-held: no validity left after extending".into())
        })?;
        Ok(Grant {
            token: None,
            lease_ms: Some(ttl_ms(validity)),
        })
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let value = self
            .held
            .take()
            .ok_or_else(|| LockError::Denied("not-held: nothing to release".into()))?;
        let tally = self.unlock_all(&value).await;
        let judged = self.judge(&tally, "released");
        if let Err(LockError::Indeterminate(_)) = judged {
            self.held = Some(value);
        }
        judged
    }
}

/// Redlock, as its clients see it.
pub struct RedlockService;

#[async_trait]
impl LockService for RedlockService {
    fn about(&self) -> About {
        About {
            name: "redlock",
            token: None,
            known_break: "a holder paused past its TTL: the key expires, another client sets it",
            shown_by: &["redlock-pause-unfenced", "redlock-clock-jump"],
            fenced_by: None,
            options: reader::<NoOptions>(),
            presets: &[REDIS_DOCS],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(Redlock::connect(endpoints, cfg)?))
    }
}
