//! The ZooKeeper lock recipe (the one Curator's `InterProcessMutex` implements):
//! each contender creates an ephemeral sequential znode under the lock's node; the
//! lowest sequence holds the lock; every other contender watches only the znode
//! just before its own (no herd) and looks again when that one goes. Release
//! deletes our znode. The session timeout is the workload's lease.
//!
//! **Token.** The lock znode's czxid: the zxid of the transaction that created it.
//! Zxids grow with every write the ensemble commits, across leaders, so a later
//! holder's znode always carries a greater one.
//!
//! **Known break.** The session lives on the holder's heartbeats: a holder paused
//! past its session timeout sends none, the ensemble expires the session and deletes
//! its ephemeral znode, and the next contender in line holds the lock; the first
//! wakes up still believing it holds it (until its client learns that its session
//! expired). Fencing by czxid at the resource stops its stale writes.
//!
//! Clients connect to any server of the ensemble and move to another when theirs
//! stops serving, session and all; with `client_endpoint = "follower"`, each
//! connects to the first server that follows (`srvr` says `Mode: follower`) and
//! to no other, so that a fault on that server reaches the holder's session.
//!
//! A session that expired is gone for good: the next acquire opens a new one. A
//! request whose outcome is unknown closes the session, which deletes whatever
//! ephemeral znode it may have created.

use crate::backend::client::{Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{
    first_follower, reader, ClientEndpoint, EndpointOptions, OwnOptions,
};
use crate::backend::preset::LeasePreset;
use crate::backend::probe::whole_reply;
use crate::backend::service::{About, LockService};
use anyhow::Context;
use async_trait::async_trait;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, SessionState};

/// Apache Curator's session, as ZooKeeper's lock users run it.
pub const CURATOR: LeasePreset = LeasePreset {
    name: "curator",
    ttl: Duration::from_secs(60),
    renew_every: None,
    source: "Apache Curator / ZooKeeper: session timeout 60 s",
};

/// ZooKeeper's own `[backend]` settings.
pub type Options = EndpointOptions;

/// What the server at `addr` says it is (`srvr`'s `Mode:` line: `leader`,
/// `follower`, `standalone`); nothing from a server without a quorum, which is
/// "not currently serving", or one that does not answer within a second.
pub(crate) async fn mode(addr: SocketAddr) -> Option<String> {
    let reply = whole_reply(addr, b"srvr", Duration::from_secs(1)).await?;
    let mode = reply.lines().find_map(|l| l.strip_prefix("Mode: "))?;
    Some(mode.trim().to_string())
}

/// The first of `endpoints` whose server follows the ensemble's leader now.
async fn follower(endpoints: &[String]) -> anyhow::Result<String> {
    first_follower(endpoints, |endpoint| async move {
        let addr = tokio::net::lookup_host(endpoint.as_str())
            .await
            .ok()
            .and_then(|mut a| a.next());
        let said = match addr {
            Some(addr) => mode(addr).await,
            None => None,
        };
        match said.as_deref() {
            Some("follower") => Ok(()),
            Some(other) => Err(other.to_string()),
            None => Err("no answer to srvr".to_string()),
        }
    })
    .await
}

/// Where lock nodes live.
const ROOT: &str = "/lockcheck";

/// Our znode while we hold (or wait for) the lock.
struct Hold {
    path: String,
    token: u64,
}

/// A client of the ZooKeeper lock recipe.
pub struct ZkLock {
    cluster: String,
    cfg: LockConfig,
    timeout: Duration,
    dir: String,
    client: Option<Client>,
    held: Option<Hold>,
}

/// Whether a request failed with a definite answer from the ensemble (it did not
/// happen) rather than a lost connection or a timeout (it may have).
fn definite(e: &ZkError) -> bool {
    matches!(
        e,
        ZkError::NoNode
            | ZkError::NodeExists
            | ZkError::BadVersion
            | ZkError::NotEmpty
            | ZkError::NoAuth
            | ZkError::SessionExpired
            | ZkError::BadArguments(_)
            | ZkError::InvalidAcl
            | ZkError::NoChildrenForEphemerals
            | ZkError::ClientClosed
    )
}

/// The sequence number ZooKeeper appended to a sequential znode's name.
fn sequence(name: &str) -> Option<i64> {
    let digits = name.len().checked_sub(10)?;
    name.get(digits..)?.parse().ok()
}

impl ZkLock {
    /// Connects to the ensemble (every member's `host:port`), or to one follower
    /// with `client_endpoint = "follower"`.
    pub async fn connect(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let name = cfg.name.replace('/', "_");
        let cluster = match Options::of(&cfg.options).client_endpoint {
            Some(ClientEndpoint::Follower) => follower(endpoints).await?,
            None => endpoints.join(","),
        };
        let mut lock = ZkLock {
            cluster,
            cfg: cfg.clone(),
            timeout: cfg.request_timeout(),
            dir: format!("{ROOT}/{name}"),
            client: None,
            held: None,
        };
        lock.session()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("connecting to zookeeper at {}", lock.cluster))?;
        Ok(lock)
    }

    /// The live session, opening a new one if there is none or it expired; the lock
    /// node's parents are created on the way (they are persistent).
    async fn session(&mut self) -> Result<Client, LockError> {
        if let Some(c) = &self.client {
            if !matches!(
                c.state(),
                SessionState::Expired | SessionState::Closed | SessionState::AuthFailed
            ) {
                return Ok(c.clone());
            }
        }
        self.client = None;
        let connect_timeout = self.timeout * 4;
        let open = Client::connector()
            .with_session_timeout(self.cfg.lease)
            .with_connection_timeout(connect_timeout)
            .connect(&self.cluster);
        let client = match tokio::time::timeout(connect_timeout, open).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(LockError::Denied(format!("connecting: {e}"))),
            Err(_) => return Err(LockError::Denied("connecting: timed out".into())),
        };
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        match self.within(client.mkdir(&self.dir, &persistent)).await {
            Ok(()) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(LockError::Denied(format!("creating {}: {e}", self.dir))),
        }
        self.client = Some(client.clone());
        Ok(client)
    }

    /// Runs one request under the request timeout (a timeout is `ZkError::Timeout`).
    async fn within<T>(
        &self,
        request: impl Future<Output = Result<T, ZkError>>,
    ) -> Result<T, ZkError> {
        tokio::time::timeout(self.timeout, request)
            .await
            .unwrap_or(Err(ZkError::Timeout))
    }

    /// A request's error in the history's words; one whose outcome is unknown also
    /// closes the session, so that the ensemble deletes any znode it made.
    fn failed(&mut self, what: &str, e: ZkError) -> LockError {
        if definite(&e) {
            LockError::Denied(format!("{what}: {e}"))
        } else {
            self.client = None;
            self.held = None;
            LockError::Indeterminate(format!("{what}: {e}"))
        }
    }

    /// Our znode is gone or our session expired: the lock is no longer ours.
    fn lost(&mut self, e: Option<ZkError>) -> LockError {
        self.held = None;
        LockError::Denied(match e {
            Some(e) => format!("not-held: {e}"),
            None => "not-held: our znode is gone (the session expired)".into(),
        })
    }

    /// Waits until our znode is the lowest, or the deadline passes (`Ok(false)`).
    async fn wait_turn(
        &mut self,
        client: &Client,
        ours: &str,
        deadline: Instant,
    ) -> Result<bool, LockError> {
        let our_seq = sequence(ours).unwrap_or(i64::MAX);
        loop {
            let mut children = match self.within(client.list_children(&self.dir)).await {
                Ok(c) => c,
                Err(e) => return Err(self.failed("list children", e)),
            };
            children.retain(|c| sequence(c).is_some());
            children.sort_by_key(|c| sequence(c));
            if !children.iter().any(|c| c == ours) {
                // Our znode went: our session expired while we waited.
                return Err(LockError::Denied("our znode is gone while waiting".into()));
            }
            let Some(before) = children
                .iter()
                .rfind(|c| sequence(c).is_some_and(|s| s < our_seq))
            else {
                return Ok(true);
            };
            let path = format!("{}/{before}", self.dir);
            let watched = self.within(client.check_and_watch_stat(&path)).await;
            match watched {
                // Gone between the listing and the watch: look again.
                Ok((None, _)) => continue,
                Ok((Some(_), watcher)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if tokio::time::timeout(left, watcher.changed()).await.is_err() {
                        return Ok(false);
                    }
                }
                Err(e) => return Err(self.failed("watching the predecessor", e)),
            }
        }
    }
}

#[async_trait]
impl LockClient for ZkLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        if self.held.is_some() {
            return Err(LockError::Denied("already held by this client".into()));
        }
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        let client = self.session().await?;
        let mode = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{}/lock-", self.dir);
        let (stat, seq) = match self.within(client.create(&prefix, b"", &mode)).await {
            Ok(created) => created,
            Err(e) => return Err(self.failed("create", e)),
        };
        // ZooKeeper appends the sequence as 10 digits (its Display here).
        let ours = format!("lock-{seq}");
        let path = format!("{prefix}{seq}");
        match self.wait_turn(&client, &ours, deadline).await {
            Ok(true) => {
                let token = stat.czxid as u64;
                self.held = Some(Hold { path, token });
                Ok(Grant {
                    token: self.cfg.fencing_token.then_some(token),
                    lease_ms: Some(self.cfg.lease.as_millis() as u64),
                })
            }
            Ok(false) => {
                // Out of time: leave the line, so as not to hold up those behind.
                if let Err(e) = self.within(client.delete(&path, None)).await {
                    if !matches!(e, ZkError::NoNode) {
                        return Err(self.failed("leaving the line", e));
                    }
                }
                Err(LockError::Denied("held by another client".into()))
            }
            Err(e) => Err(e),
        }
    }

    /// The session keeps itself alive; renew asks the ensemble whether our znode is
    /// still there.
    async fn renew(&mut self) -> Result<Grant, LockError> {
        let Some((path, token)) = self.held.as_ref().map(|h| (h.path.clone(), h.token)) else {
            return Err(LockError::Denied("not-held: nothing to renew".into()));
        };
        let client = match &self.client {
            Some(c) => c.clone(),
            None => return Err(self.lost(None)),
        };
        match self.within(client.check_stat(&path)).await {
            Ok(Some(_)) => Ok(Grant {
                token: self.cfg.fencing_token.then_some(token),
                lease_ms: Some(self.cfg.lease.as_millis() as u64),
            }),
            Ok(None) => Err(self.lost(None)),
            Err(e @ ZkError::SessionExpired) => Err(self.lost(Some(e))),
            Err(e) => Err(self.failed("renew", e)),
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let Some(path) = self.held.as_ref().map(|h| h.path.clone()) else {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        };
        let client = match &self.client {
            Some(c) => c.clone(),
            None => return Err(self.lost(None)),
        };
        match self.within(client.delete(&path, None)).await {
            Ok(()) => {
                self.held = None;
                Ok(())
            }
            Err(ZkError::NoNode) => Err(self.lost(None)),
            Err(e @ ZkError::SessionExpired) => Err(self.lost(Some(e))),
            Err(e) => Err(self.failed("release", e)),
        }
    }
}

/// ZooKeeper, as its clients see it.
pub struct ZookeeperService;

#[async_trait]
impl LockService for ZookeeperService {
    fn about(&self) -> About {
        About {
            name: "zookeeper",
            token: Some("the lock znode's czxid (the zxid that created it)"),
            known_break:
                "a holder paused past its session timeout: the session expires, its ephemeral \
                 znode goes, the next in line holds",
            shown_by: &["zookeeper-pause-unfenced"],
            fenced_by: Some("zookeeper-pause-fenced"),
            options: reader::<Options>(),
            presets: &[CURATOR],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(ZkLock::connect(endpoints, cfg).await?))
    }

    /// One server for every client: a fault on it is a fault on the holder's session.
    fn pinned_option(&self) -> Option<&'static str> {
        Some("client_endpoint = \"follower\"")
    }

    /// The session's heartbeats, sent by the client while it runs.
    fn keeps_lease_alive(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sequence_is_the_last_ten_digits() {
        assert_eq!(super::sequence("lock-0000000042"), Some(42));
        assert_eq!(super::sequence("lock-"), None);
        assert_eq!(super::sequence("x"), None);
    }
}
