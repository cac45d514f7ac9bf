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
//! **Known break of a cluster, before nats-server 2.9.21** (Debian's is 2.9.10): a
//! clustered stream's leader checks a publish's expected revision against what it
//! has applied, before proposing the publish to Raft, not as part of it; two
//! creates in flight at once both pass the check and both are granted, with no
//! fault at all (nats-server#4320, fixed by #4319). One node checks and writes
//! under one lock and never does this. Fencing by revision at the resource stops
//! the lower revision's writes once the higher one has written.
//!
//! **Cluster.** The client is given every node's address and connects to one of
//! them (another after a loss), never to one it was not given (servers do not
//! advertise their peers, so a proxy on each link is never bypassed). The bucket
//! is replicated on as many nodes as there are, up to JetStream's 5 (R3 on three):
//! each write is decided by the stream's Raft leader once a majority of replicas
//! has it, so it survives the loss of a minority.
//!
//! The bucket's stream is created with `create_stream` and opened with
//! `get_key_value`: async-nats's `create_key_value` cannot read Debian's
//! nats-server 2.9 reply; the stream is the one `create_key_value` would make
//! (file storage, as `nats kv add` and the client libraries default to).

use crate::backend::client::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, NoOptions};
use crate::backend::preset::LeasePreset;
use crate::backend::service::{About, LockService};
use anyhow::Context;
use async_nats::jetstream::{
    self,
    kv::{Operation, Store, UpdateErrorKind},
    stream::{Config, DiscardPolicy, StorageType},
};
use async_trait::async_trait;
use std::future::Future;
use std::time::{Duration, Instant};

// github.com/ripienaar/nats-kv-leader-elect (by a NATS maintainer): README
// `nats kv add --ttl 5m ELECTIONS`; election.go: create the key to win,
// Update() with the last sequence every 0.75 × the bucket TTL to stay leader.
/// ripienaar/nats-kv-leader-elect's bucket.
pub const KV_LEADER_ELECT: LeasePreset = LeasePreset {
    name: "nats-kv-leader-elect",
    ttl: Duration::from_secs(300),
    renew_every: Some(Duration::from_secs(225)),
    source: "ripienaar/nats-kv-leader-elect: KV bucket TTL 5 min, leader updates its key every 75% of it (225 s)",
};

/// The key that holds the lock inside the lock's bucket.
const KEY: &str = "holder";

/// How a lock's stream is named: `KV_` and the bucket, `LOCK_<name>`. The cluster
/// finds the stream's leader by it.
pub const STREAM_PREFIX: &str = "KV_LOCK_";

/// How long creating and opening the bucket may take (a replicated stream's Raft
/// group forms first); within the 20 s a worker has to start.
const SETUP_TIMEOUT: Duration = Duration::from_secs(15);

/// How long one request of that setup may take before it is asked again.
const SETUP_TRY: Duration = Duration::from_secs(2);

/// JetStream replicates a stream on at most 5 servers.
const MAX_REPLICAS: usize = 5;

/// Creates the lock's stream, or finds it made, and opens it as a bucket. Every
/// client creates it: creating one that exists with the same settings is no error,
/// so it does not matter who comes first. But clustered nats-server 2.9 may leave
/// concurrent creates of one stream, and the look-ups right after, unanswered for
/// a while (nats-server#3677): each step that gets no reply is asked again, until
/// the setup's time is up.
async fn open_bucket(
    js: &jetstream::Context,
    config: Config,
    bucket: &str,
) -> anyhow::Result<Store> {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    loop {
        let created = match tokio::time::timeout(SETUP_TRY, js.create_stream(config.clone())).await
        {
            Ok(Ok(_)) => "created".to_string(),
            Ok(Err(e)) => format!("creating it: {e}"),
            Err(_) => format!("creating it: no reply within {}ms", SETUP_TRY.as_millis()),
        };
        let why = match tokio::time::timeout(SETUP_TRY, js.get_key_value(bucket)).await {
            Ok(Ok(kv)) => return Ok(kv),
            Ok(Err(e)) => format!("{created}; opening it: {e}"),
            Err(_) => format!(
                "{created}; opening it: no reply within {}ms",
                SETUP_TRY.as_millis()
            ),
        };
        if Instant::now() >= deadline {
            anyhow::bail!("{why}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What one try to create the key came to.
enum Created {
    /// The key is ours, at this revision.
    Won(u64),
    /// Certainly not created: the key is another client's.
    Taken,
    /// Certainly not created: nothing could be written or read now.
    Refused(String),
    /// A key the server refuses to take at all.
    Invalid(String),
    /// A write that may or may not have been stored.
    Unknown(String),
}

/// Whether a write certainly reached no stream: nobody answered its subject (no
/// responders, which the client reports as "no stream found"), as while a
/// clustered stream has no leader.
fn not_stored(e: &async_nats::jetstream::kv::UpdateError) -> bool {
    use async_nats::jetstream::context::{PublishError, PublishErrorKind};
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<PublishError>())
        .is_some_and(|p| p.kind() == PublishErrorKind::StreamNotFound)
}

/// What this client holds (or may hold, after a write with no reply).
struct Hold {
    /// The revision this client wrote last: renew and release expect it.
    revision: Option<u64>,
    token: Option<u64>,
}

/// A client of the JetStream KV lease.
pub struct KvLease {
    kv: Store,
    client: async_nats::Client,
    /// The nodes' names (n1..nN), to name the server the client is on.
    nodes: Vec<String>,
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
    /// Connects to one of `endpoints` (every node's address, n1 first).
    pub async fn connect(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let timeout = cfg.request_timeout();
        let urls: Vec<String> = endpoints.iter().map(|e| format!("nats://{e}")).collect();
        let addrs = urls
            .iter()
            .map(|u| u.parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("bad nats address in {}", urls.join(",")))?;
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(timeout)
            .request_timeout(Some(timeout))
            .ignore_discovered_servers()
            .connect(addrs)
            .await
            .with_context(|| format!("connecting to nats at {}", urls.join(",")))?;
        // Creating a replicated stream waits for its Raft group to form: longer
        // than a lock request may take. The lock's own requests are bounded by
        // `ask`, whatever the context allows.
        let mut js = jetstream::new(client.clone());
        js.set_timeout(SETUP_TRY);
        let bucket = bucket(&cfg.name);
        let config = Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age: cfg.lease,
            storage: StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            num_replicas: endpoints.len().min(MAX_REPLICAS),
            ..Default::default()
        };
        let kv = open_bucket(&js, config, &bucket)
            .await
            .with_context(|| format!("creating and opening bucket {bucket}"))?;
        Ok(KvLease {
            kv,
            client,
            nodes: (1..=endpoints.len()).map(|i| format!("n{i}")).collect(),
            cfg: cfg.clone(),
            timeout,
            held: None,
        })
    }

    /// Runs one request under the request timeout; `None` when no reply came.
    async fn ask<T, E>(&self, request: impl Future<Output = Result<T, E>>) -> Option<Result<T, E>> {
        tokio::time::timeout(self.timeout, request).await.ok()
    }

    /// One try to create the key, as async-nats's `create` does it (write expecting
    /// no revision; if the key is there as a delete marker, write expecting the
    /// marker's revision), but telling apart what certainly wrote nothing: a
    /// refused expectation, a read that failed, a stream that nobody serves (while
    /// a cluster elects its leader) are retried within the acquire's wait; only a
    /// write with no answer is unknown. All within one request timeout.
    async fn try_create(&self) -> Created {
        let until = tokio::time::Instant::now() + self.timeout;
        let value: bytes::Bytes = holder_id().into_bytes().into();
        let write = |expected: u64| {
            let value = value.clone();
            async move {
                match tokio::time::timeout_at(until, self.kv.update(KEY, value, expected)).await {
                    Ok(Ok(revision)) => Created::Won(revision),
                    Ok(Err(e)) if e.kind() == UpdateErrorKind::WrongLastRevision => Created::Taken,
                    Ok(Err(e)) if e.kind() == UpdateErrorKind::InvalidKey => {
                        Created::Invalid(format!("create: {e}"))
                    }
                    Ok(Err(e)) if not_stored(&e) => {
                        Created::Refused(format!("create: {e}: the stream has no leader now"))
                    }
                    Ok(Err(e)) => Created::Unknown(format!("create: {e}")),
                    Err(_) => Created::Unknown(format!(
                        "create: no reply within {}ms",
                        self.timeout.as_millis()
                    )),
                }
            }
        };
        match write(0).await {
            Created::Taken => {}
            other => return other,
        }
        // The key is there: held, or a delete marker that may be replaced.
        match tokio::time::timeout_at(until, self.kv.entry(KEY)).await {
            Ok(Ok(Some(entry)))
                if matches!(entry.operation, Operation::Delete | Operation::Purge) =>
            {
                write(entry.revision).await
            }
            Ok(Ok(Some(_))) => Created::Taken,
            // Aged out between the write and the read: try again.
            Ok(Ok(None)) => Created::Refused("the key changed while creating it".into()),
            Ok(Err(e)) => Created::Refused(format!("reading the key: {e}")),
            Err(_) => Created::Refused(format!(
                "reading the key: no reply within {}ms",
                self.timeout.as_millis()
            )),
        }
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
            let why = match self.try_create().await {
                Created::Won(revision) => {
                    self.held = Some(Hold {
                        revision: Some(revision),
                        token: Some(revision),
                    });
                    return Ok(self.grant(Some(revision)));
                }
                Created::Taken => "held by another client".to_string(),
                Created::Refused(why) => why,
                Created::Invalid(why) => return Err(LockError::Denied(why)),
                // The publish may have reached the stream: the key may be ours, and
                // ages out by itself if it is.
                Created::Unknown(why) => {
                    self.held = Some(Hold {
                        revision: None,
                        token: None,
                    });
                    return Err(LockError::Indeterminate(why));
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

    /// The server this client is connected to: the only one, or in a cluster the
    /// one by the name it gives itself (the servers lockcheck starts are named
    /// after their nodes; others are not named).
    fn node(&self) -> Option<String> {
        if let [only] = self.nodes.as_slice() {
            return Some(only.clone());
        }
        let name = self.client.server_info().server_name;
        self.nodes.contains(&name).then_some(name)
    }
}

/// NATS JetStream key-value, as its clients see it.
pub struct NatsService;

#[async_trait]
impl LockService for NatsService {
    fn about(&self) -> About {
        About {
            name: "nats",
            token: Some("the key's revision when created (the stream sequence)"),
            known_break:
                "a holder paused past the bucket's max age: the key ages out, another creates it; \
                 on a cluster before nats-server 2.9.21, two creates in flight at once both win \
                 (nats-server#4320)",
            shown_by: &["nats-pause-unfenced", "nats-cluster-create-race"],
            fenced_by: Some("nats-pause-fenced"),
            options: reader::<NoOptions>(),
            presets: &[KV_LEADER_ELECT],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(KvLease::connect(endpoints, cfg).await?))
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
