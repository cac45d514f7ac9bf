//! A lease in NATS JetStream key-value, as its users build one: the bucket's max age
//! is the TTL; acquire creates the key only if it is absent (an update expecting
//! last revision 0, or the revision of a delete marker); renew rewrites it
//! expecting the revision this client last wrote, which restarts its age; release
//! deletes it expecting that revision. So no client ever renews or deletes a key
//! that another client wrote since.
//!
//! **Token.** The key's revision when this client created it: the stream sequence of
//! that message. Sequences only grow, so a later grant always carries a greater
//! token (renewals write later revisions, but the hold keeps its first).
//!
//! **Known break.** Nothing keeps the key alive but the holder's own renewals: a
//! holder paused past the max age lets the key age out; another client creates it;
//! the first wakes up still believing it holds the lock (its renew and release are
//! then refused: the revision is no longer its own). Fencing by revision at the
//! resource stops its stale writes.
//!
//! The bucket's stream is created with `create_stream` and opened with
//! `get_key_value`: async-nats's `create_key_value` cannot read Debian's
//! nats-server 2.9 reply; the stream is the one `create_key_value` would make.

use super::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use anyhow::Context;
use async_nats::jetstream::{
    self,
    kv::{CreateErrorKind, Store, UpdateErrorKind},
    stream::{Config, DiscardPolicy, StorageType},
};
use async_trait::async_trait;
use std::future::Future;
use std::time::{Duration, Instant};

/// The key that holds the lock inside the lock's bucket.
const KEY: &str = "holder";

/// What this client holds (or may hold, after a write with no reply).
struct Hold {
    /// The revision this client wrote last: renew and release expect it.
    revision: Option<u64>,
    token: Option<u64>,
}

/// A client of the JetStream KV lease.
pub struct KvLease {
    kv: Store,
    cfg: LockConfig,
    timeout: Duration,
    held: Option<Hold>,
}

/// The bucket of a lock: `LOCK_<name>`, with what bucket names may not hold as `_`.
fn bucket(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("LOCK_{safe}")
}

impl KvLease {
    pub async fn connect(endpoint: &str, cfg: &LockConfig) -> anyhow::Result<Self> {
        let timeout = cfg.request_timeout();
        let url = format!("nats://{endpoint}");
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(timeout)
            .request_timeout(Some(timeout))
            .connect(&url)
            .await
            .with_context(|| format!("connecting to nats at {url}"))?;
        let js = jetstream::new(client);
        let bucket = bucket(&cfg.name);
        // Every client creates the stream: creating one that exists with the same
        // settings is no error, so it does not matter who comes first.
        js.create_stream(Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age: cfg.lease,
            storage: StorageType::Memory,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: 1,
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating the stream of bucket {bucket}"))?;
        let kv = js
            .get_key_value(&bucket)
            .await
            .with_context(|| format!("opening bucket {bucket}"))?;
        Ok(KvLease {
            kv,
            cfg: cfg.clone(),
            timeout,
            held: None,
        })
    }

    /// Runs one request under the request timeout; `None` when no reply came.
    async fn ask<T, E>(&self, request: impl Future<Output = Result<T, E>>) -> Option<Result<T, E>> {
        tokio::time::timeout(self.timeout, request).await.ok()
    }

    fn grant(&self, token: Option<u64>) -> Grant {
        Grant {
            token: self.cfg.fencing_token.then_some(token).flatten(),
            lease_ms: Some(self.cfg.lease.as_millis() as u64),
        }
    }

    fn no_reply(&self, what: &str) -> LockError {
        LockError::Indeterminate(format!(
            "{what}: no reply within {}ms",
            self.timeout.as_millis()
        ))
    }
}

#[async_trait]
impl LockClient for KvLease {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        loop {
            let created = self
                .ask(self.kv.create(KEY, holder_id().into_bytes().into()))
                .await;
            let why = match created {
                Some(Ok(revision)) => {
                    self.held = Some(Hold {
                        revision: Some(revision),
                        token: Some(revision),
                    });
                    return Ok(self.grant(Some(revision)));
                }
                Some(Err(e)) if e.kind() == CreateErrorKind::AlreadyExists => {
                    "held by another client".to_string()
                }
                Some(Err(e)) if e.kind() == CreateErrorKind::InvalidKey => {
                    return Err(LockError::Denied(format!("create: {e}")))
                }
                // The publish may have reached the stream: the key may be ours, and
                // ages out by itself if it is.
                Some(Err(e)) => {
                    self.held = Some(Hold {
                        revision: None,
                        token: None,
                    });
                    return Err(LockError::Indeterminate(format!("create: {e}")));
                }
                None => {
                    self.held = Some(Hold {
                        revision: None,
                        token: None,
                    });
                    return Err(self.no_reply("create"));
                }
            };
            if Instant::now() >= deadline {
                return Err(LockError::Denied(why));
            }
            retry_pause(deadline).await;
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        let (revision, token) = match &self.held {
            Some(Hold {
                revision: Some(r),
                token,
            }) => (*r, *token),
            Some(_) => {
                return Err(LockError::Denied(
                    "not-held: the acquire's outcome is unknown".into(),
                ))
            }
            None => return Err(LockError::Denied("not-held: nothing to renew".into())),
        };
        let value = holder_id().into_bytes().into();
        match self.ask(self.kv.update(KEY, value, revision)).await {
            Some(Ok(new)) => {
                self.held = Some(Hold {
                    revision: Some(new),
                    token,
                });
                Ok(self.grant(token))
            }
            Some(Err(e)) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                self.held = None;
                Err(LockError::Denied(
                    "not-held: the key aged out or another client wrote it".into(),
                ))
            }
            Some(Err(e)) => Err(LockError::Indeterminate(format!("renew: {e}"))),
            None => Err(self.no_reply("renew")),
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let Some(hold) = self.held.take() else {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        };
        let Some(revision) = hold.revision else {
            // We cannot know the revision we may have written: the key ages out.
            return Err(LockError::Denied(
                "not-held: the acquire's outcome is unknown; the key ages out".into(),
            ));
        };
        match self
            .ask(self.kv.delete_expect_revision(KEY, Some(revision)))
            .await
        {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) if e.kind() == UpdateErrorKind::WrongLastRevision => Err(
                LockError::Denied("not-held: the key aged out or another client wrote it".into()),
            ),
            Some(Err(e)) => {
                self.held = Some(hold);
                Err(LockError::Indeterminate(format!("release: {e}")))
            }
            None => {
                self.held = Some(hold);
                Err(self.no_reply("release"))
            }
        }
    }

    fn node(&self) -> Option<String> {
        Some("n1".into())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_names_keep_to_the_allowed_characters() {
        assert_eq!(super::bucket("lockcheck"), "LOCK_lockcheck");
        assert_eq!(super::bucket("a.b c"), "LOCK_a_b_c");
    }
}
