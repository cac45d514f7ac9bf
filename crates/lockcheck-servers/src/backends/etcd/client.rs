//! The etcd lease lock: a lease with TTL = the workload's lease, and the lock key
//! created only if absent, attached to that lease, in one transaction
//! (`create_revision(key) == 0` → `put(key, holder, lease)`); a contended acquire
//! tries again until its timeout. While the lock is held, a task in this client's
//! process sends a keep-alive every TTL/3; release deletes the key if it still holds
//! our value and revokes the lease. Clients talk to every member (or, with
//! `client_endpoint = "follower"`, to the first member not leading when they
//! connect); the history's node is the member that answered last (from the
//! response header).
//!
//! **Token.** The key's create revision: the cluster-wide revision of the
//! transaction that created it. Revisions only grow, so a later grant always carries
//! a greater token, across leaders and member restarts.
//!
//! **Known break.** The keep-alive lives in the holder's process: a holder paused
//! (SIGSTOP, a long GC) past the lease sends none, the lease expires, the key is
//! deleted and another client acquires; the first wakes up still believing it holds
//! the lock. Fencing by revision at the resource stops its stale writes.
//!
//! **Election.** [`EtcdLock::connect_election`] gives the same client on etcd's own
//! election API (the v3election service, which runs the `concurrency` package's
//! `Election` on the server): acquire is `Campaign` (our value under the election's
//! prefix, on our lease; it answers once every earlier candidate's key is gone),
//! renew is the lease keep-alive, release is `Resign`. The token is the leader key's
//! create revision, as with the lock. A campaign not won within the acquire timeout
//! revokes its lease, which deletes the candidate key.
//!
//! etcd rounds a lease up to whole seconds and to its minimum (1.5 × election
//! timeout); the grant reports the TTL the server actually gave.

use crate::backend::client::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{
    first_follower, reader, ClientEndpoint, EndpointOptions, OwnOptions,
};
use crate::backend::preset::LeasePreset;
use crate::backend::service::{About, LockService};
use anyhow::Context;
use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, LeaderKey, PutOptions, ResignOptions,
    ResponseHeader, Txn, TxnOp,
};
use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// etcd clientv3's concurrency session, as its users run it.
pub const SESSION: LeasePreset = LeasePreset {
    name: "etcd-session",
    ttl: Duration::from_secs(60),
    renew_every: None,
    source: "etcd clientv3 concurrency session: TTL 60 s, kept alive by the session",
};

/// etcd's own `[backend]` settings.
pub type Options = EndpointOptions;

/// What this client holds (or may hold, after a transaction with no reply).
struct Hold {
    value: String,
    lease: i64,
    token: Option<u64>,
    /// The leader key, when this client campaigned (election) rather than locked.
    leader: Option<LeaderKey>,
    /// The background keep-alive, while the lock is held.
    keeper: Option<JoinHandle<()>>,
}

impl Hold {
    fn stop_keeper(&mut self) {
        if let Some(k) = self.keeper.take() {
            k.abort();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.stop_keeper();
    }
}

/// A client of the members at `urls`.
async fn open(urls: &[String], timeout: Duration) -> anyhow::Result<Client> {
    // require_leader: a member cut off from the leader fails the request at once
    // instead of holding it (what etcd's own lock recipe asks for).
    let options = ConnectOptions::new()
        .with_timeout(timeout)
        .with_connect_timeout(timeout)
        .with_require_leader(true);
    tokio::time::timeout(timeout * 4, Client::connect(urls, Some(options)))
        .await
        .with_context(|| format!("connecting to etcd at {}: timed out", urls.join(",")))?
        .with_context(|| format!("connecting to etcd at {}", urls.join(",")))
}

/// The first of `urls` whose member is not the leader, as that member sees it now.
async fn follower(urls: &[String], timeout: Duration) -> anyhow::Result<String> {
    first_follower(urls, |url| async move {
        let status = async {
            open(std::slice::from_ref(&url), timeout)
                .await?
                .status()
                .await
                .map_err(anyhow::Error::from)
        };
        match tokio::time::timeout(timeout * 4, status).await {
            Ok(Ok(s))
                if s.leader() != 0 && s.header().is_some_and(|h| h.member_id() != s.leader()) =>
            {
                Ok(())
            }
            Ok(Ok(_)) => Err("the leader or without one".to_string()),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!("no status within {}ms", (timeout * 4).as_millis())),
        }
    })
    .await
}

/// A request that failed: in words, and whether etcd said the lease is gone (a
/// definite answer, unlike a timeout).
struct Failed {
    why: String,
    lease_gone: bool,
}

/// A client of the etcd lease lock.
pub struct EtcdLock {
    client: Client,
    cfg: LockConfig,
    timeout: Duration,
    /// Member id → name (n1, n2, ...), to name the node that answered.
    members: HashMap<u64, String>,
    last_member: Option<u64>,
    held: Option<Hold>,
    /// Campaign and resign through etcd's election API instead of the lock txn.
    election: bool,
}

impl EtcdLock {
    /// Connects to every member (`host:port`), or to one follower with
    /// `client_endpoint = "follower"`; the member names come from the cluster.
    pub async fn connect(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let timeout = cfg.request_timeout();
        let urls: Vec<String> = endpoints.iter().map(|e| format!("http://{e}")).collect();
        let urls = match Options::of(&cfg.options).client_endpoint {
            Some(ClientEndpoint::Follower) => vec![follower(&urls, timeout).await?],
            None => urls,
        };
        let mut client = open(&urls, timeout).await?;
        // Names are a nicety for the history: do without them if the cluster is slow.
        let members = match tokio::time::timeout(timeout, client.member_list()).await {
            Ok(Ok(list)) => list
                .members()
                .iter()
                .map(|m| (m.id(), m.name().to_string()))
                .collect(),
            _ => HashMap::new(),
        };
        Ok(EtcdLock {
            client,
            cfg: cfg.clone(),
            timeout,
            members,
            last_member: None,
            held: None,
            election: false,
        })
    }

    /// The same client, campaigning in etcd's election named after the lock.
    pub async fn connect_election(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let mut client = Self::connect(endpoints, cfg).await?;
        client.election = true;
        Ok(client)
    }

    /// Runs one request under the request timeout; any failure is `Err(words)`. A
    /// request refused at connect never left this process, so it is sent again (the
    /// channel then picks another member) until the timeout: a dead member must not
    /// fail a client that can reach a quorum.
    async fn ask<T, F, Fut>(&mut self, what: &str, request: F) -> Result<T, Failed>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.ask_waiting(what, false, request).await
    }

    /// [`EtcdLock::ask`]; with `for_a_leader`, a request refused by a member
    /// without a leader (require_leader: it did nothing) is sent again too, until
    /// the timeout: a keep-alive waits out an election, as etcd's own client does.
    async fn ask_waiting<T, F, Fut>(
        &mut self,
        what: &str,
        for_a_leader: bool,
        request: F,
    ) -> Result<T, Failed>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.timeout;
        let retried = async {
            loop {
                match request(self.client.clone()).await {
                    Err(e)
                        if (never_sent(&e) || (for_a_leader && no_leader(&e)))
                            && Instant::now() < deadline =>
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    other => return other,
                }
            }
        };
        match tokio::time::timeout_at(deadline.into(), retried).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Failed {
                lease_gone: lease_not_found(&e),
                why: format!("{what}: {e}"),
            }),
            Err(_) => Err(Failed {
                lease_gone: false,
                why: format!("{what}: no reply within {}ms", self.timeout.as_millis()),
            }),
        }
    }

    fn saw(&mut self, header: Option<&ResponseHeader>) {
        if let Some(h) = header {
            self.last_member = Some(h.member_id());
        }
    }

    fn ttl_secs(&self) -> i64 {
        self.cfg.lease.as_millis().div_ceil(1000).max(1) as i64
    }

    /// Grants a lease, retrying until `deadline`: no lock is taken without one, so a
    /// failure here is a clean `fail`.
    async fn grant_lease(&mut self, deadline: Instant) -> Result<(i64, i64), LockError> {
        loop {
            let ttl = self.ttl_secs();
            let granted = self
                .ask("lease grant", |mut c| async move {
                    c.lease_grant(ttl, None).await
                })
                .await;
            match granted {
                Ok(r) => {
                    self.saw(r.header());
                    return Ok((r.id(), r.ttl()));
                }
                Err(f) if Instant::now() >= deadline => return Err(LockError::Denied(f.why)),
                Err(_) => retry_pause(deadline).await,
            }
        }
    }

    /// Best effort: a lease we no longer need goes now rather than at its TTL.
    async fn revoke(&mut self, lease: i64) {
        let _ = self
            .ask("lease revoke", |mut c| async move {
                c.lease_revoke(lease).await
            })
            .await;
    }

    /// One keep-alive round trip: the lease's remaining TTL, 0 if it is gone.
    async fn keep_alive_once(&mut self, lease: i64) -> Result<i64, String> {
        let kept = self
            .ask_waiting("keep-alive", true, |mut c| async move {
                let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
                keeper.keep_alive().await?;
                Ok(stream
                    .message()
                    .await?
                    .map(|r| (r.ttl(), r.header().cloned())))
            })
            .await;
        match kept {
            Ok(Some((ttl, header))) => {
                self.saw(header.as_ref());
                Ok(ttl)
            }
            Ok(None) => Err("keep-alive: the stream closed".into()),
            Err(f) if f.lease_gone => Ok(0),
            Err(f) => Err(f.why),
        }
    }

    /// Campaigns with `hold`'s lease until elected or `deadline`. Dropping the
    /// campaign's call cancels it on the server, and the revoke deletes our candidate
    /// key for certain, so a campaign given up on never wins later unseen.
    async fn campaign(
        &mut self,
        mut hold: Hold,
        ttl: i64,
        deadline: Instant,
    ) -> Result<Grant, LockError> {
        let (name, value, lease) = (self.cfg.name.clone(), hold.value.clone(), hold.lease);
        // `None`: not elected within the acquire timeout, or the client's request
        // timeout ended the wait. Never campaign again with the same lease: the
        // server cleans up a cancelled campaign (deletes its key) when it gets to it,
        // and a new campaign that found the key still there would go on with a key
        // that is about to vanish, elected beside the next candidate. The lease is
        // revoked instead, and the next acquire campaigns with a fresh one.
        let mut c = self.client.clone();
        let won =
            match tokio::time::timeout_at(deadline.into(), c.campaign(name, value, lease)).await {
                Ok(Err(e)) if request_timed_out(&e) => None,
                Ok(answer) => Some(answer),
                Err(_) => None,
            };
        match won {
            Some(Ok(mut r)) => {
                self.saw(r.header());
                let leader = r.take_leader();
                hold.token = leader.as_ref().map(|l| l.rev() as u64);
                hold.leader = leader;
                let grant = Self::grant(hold.token, ttl);
                self.held = Some(hold);
                Ok(grant)
            }
            Some(Err(e)) if lease_not_found(&e) => Err(LockError::Denied(format!("campaign: {e}"))),
            Some(Err(e)) => {
                // We may have been elected: the lease, no longer kept alive, ends it
                // within its TTL; a release can still resign by our key.
                hold.stop_keeper();
                self.held = Some(hold);
                Err(LockError::Indeterminate(format!("campaign: {e}")))
            }
            None => {
                drop(hold);
                self.revoke(lease).await;
                Err(LockError::Denied(format!(
                    "campaign: not elected within {}ms; its lease revoked",
                    self.cfg.acquire_timeout.min(self.timeout).as_millis()
                )))
            }
        }
    }

    /// Resigns the leadership `leader` (deletes our key if it is still there) and
    /// revokes its lease. Denied when the key was already gone.
    async fn resign(&mut self, hold: Hold, leader: LeaderKey) -> Result<(), LockError> {
        let key = leader.key().to_vec();
        let still = self
            .ask("leader check", |mut c| {
                let key = key.clone();
                async move { c.get(key, None).await }
            })
            .await;
        let ours = match still {
            Ok(r) => {
                self.saw(r.header());
                !r.kvs().is_empty()
            }
            Err(f) => {
                self.held = Some(hold);
                return Err(LockError::Indeterminate(f.why));
            }
        };
        let resigned = self
            .ask("resign", |mut c| {
                let leader = leader.clone();
                async move {
                    c.resign(Some(ResignOptions::new().with_leader(leader)))
                        .await
                }
            })
            .await;
        match resigned {
            Ok(r) => {
                self.saw(r.header());
                self.revoke(hold.lease).await;
                match ours {
                    true => Ok(()),
                    false => Err(LockError::Denied(
                        "not-held: the leader key is no longer ours".into(),
                    )),
                }
            }
            Err(f) if f.lease_gone || !ours => {
                Err(LockError::Denied(format!("not-held: {}", f.why)))
            }
            Err(f) => {
                self.held = Some(hold);
                Err(LockError::Indeterminate(f.why))
            }
        }
    }

    fn grant(token: Option<u64>, ttl_secs: i64) -> Grant {
        Grant {
            token,
            lease_ms: Some(ttl_secs.max(0) as u64 * 1000),
        }
    }
}

/// Whether a request failed before it left this process (the connection was refused).
fn never_sent(e: &etcd_client::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = match e {
        etcd_client::Error::GRpcStatus(s) => Some(s),
        etcd_client::Error::TransportError(t) => Some(t),
        etcd_client::Error::IoError(io) => Some(io),
        _ => None,
    };
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Whether a member without a leader refused the request (require_leader), which
/// it then did not carry out.
fn no_leader(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message() == "etcdserver: no leader")
}

/// Whether the client's own request timeout ended the request (tonic's transport
/// timeout): nothing the server answered.
fn request_timed_out(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.message() == "Timeout expired")
}

/// Whether etcd said the lease does not exist (expired or revoked): a definite answer.
pub fn lease_not_found(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) => s.message().contains("lease not found"),
        etcd_client::Error::LeaseKeepAliveError(msg) => msg.contains("lease not found"),
        _ => false,
    }
}

/// Keeps a lease alive while the lock is held: a keep-alive every TTL/3 from this
/// process. It stops when the lease is gone or the lock released; a paused process
/// sends nothing, which is the point.
pub async fn keep_alive(client: Client, lease: i64, ttl: Duration, timeout: Duration) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    loop {
        let mut c = client.clone();
        let (mut keeper, mut stream) =
            match tokio::time::timeout(timeout, c.lease_keep_alive(lease)).await {
                Ok(Ok(kept)) => kept,
                Ok(Err(e)) if lease_not_found(&e) => return,
                _ => {
                    tokio::time::sleep(every).await;
                    continue;
                }
            };
        loop {
            tokio::time::sleep(every).await;
            if keeper.keep_alive().await.is_err() {
                break; // open a new stream
            }
            match tokio::time::timeout(timeout, stream.message()).await {
                Ok(Ok(Some(r))) if r.ttl() > 0 => {}
                Ok(Ok(Some(_))) => return, // the lease has expired: nothing left to keep
                _ => break,
            }
        }
    }
}

#[async_trait]
impl LockClient for EtcdLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        let (lease, ttl) = self.grant_lease(deadline).await?;
        // Kept alive from now on, as etcd's own sessions are: a wait for the lock
        // longer than the TTL must not lose the lease it is waiting with.
        let mut hold = Hold {
            value: holder_id(),
            lease,
            token: None,
            leader: None,
            keeper: Some(tokio::spawn(keep_alive(
                self.client.clone(),
                lease,
                Duration::from_secs(ttl.max(1) as u64),
                self.timeout,
            ))),
        };
        if self.election {
            return self.campaign(hold, ttl, deadline).await;
        }
        let key = self.cfg.name.clone();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                hold.value.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )]);
        loop {
            let taken = self
                .ask("lock txn", |mut c| {
                    let txn = txn.clone();
                    async move { c.txn(txn).await }
                })
                .await;
            let why = match taken {
                Ok(r) if r.succeeded() => {
                    self.saw(r.header());
                    // The put's revision is the transaction's: the key's create revision.
                    hold.token = r.header().map(|h| h.revision() as u64);
                    let grant = Self::grant(hold.token, ttl);
                    self.held = Some(hold);
                    return Ok(grant);
                }
                Ok(r) => {
                    self.saw(r.header());
                    "held by another client".to_string()
                }
                // The lease expired under us (this client was paused while waiting):
                // the put was refused, so nothing was taken.
                Err(f) if f.lease_gone => f.why,
                Err(f) => {
                    // The key may be ours. Stop the keep-alive, so that if it is, the
                    // lease frees it within the TTL; keep what a release needs.
                    hold.stop_keeper();
                    self.held = Some(hold);
                    return Err(LockError::Indeterminate(f.why));
                }
            };
            if Instant::now() >= deadline {
                drop(hold);
                self.revoke(lease).await;
                return Err(LockError::Denied(why));
            }
            retry_pause(deadline).await;
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        let (lease, token) = match &self.held {
            Some(h) => (h.lease, h.token),
            None => return Err(LockError::Denied("not-held: nothing to renew".into())),
        };
        match self.keep_alive_once(lease).await {
            Ok(ttl) if ttl > 0 => Ok(Self::grant(token, ttl)),
            Ok(_) => {
                self.held = None;
                Err(LockError::Denied("not-held: the lease has expired".into()))
            }
            Err(why) => Err(LockError::Indeterminate(why)),
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let Some(mut hold) = self.held.take() else {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        };
        hold.stop_keeper();
        if self.election {
            return match hold.leader.clone() {
                Some(leader) => self.resign(hold, leader).await,
                // A campaign with no answer: revoking its lease deletes its key.
                None => {
                    self.revoke(hold.lease).await;
                    Err(LockError::Denied(
                        "not-held: a campaign without an answer; its lease revoked".into(),
                    ))
                }
            };
        }
        let key = self.cfg.name.clone();
        let txn = Txn::new()
            .when([Compare::value(
                key.clone(),
                CompareOp::Equal,
                hold.value.clone(),
            )])
            .and_then([TxnOp::delete(key, None)]);
        let released = self
            .ask("unlock txn", |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await;
        match released {
            Ok(r) => {
                self.saw(r.header());
                self.revoke(hold.lease).await;
                if r.succeeded() {
                    Ok(())
                } else {
                    Err(LockError::Denied(
                        "not-held: the lock is no longer ours".into(),
                    ))
                }
            }
            Err(f) => {
                self.held = Some(hold);
                Err(LockError::Indeterminate(f.why))
            }
        }
    }

    fn node(&self) -> Option<String> {
        let id = self.last_member?;
        Some(
            self.members
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("{id:x}")),
        )
    }
}

/// etcd, as its clients see it.
pub struct EtcdService;

#[async_trait]
impl LockService for EtcdService {
    fn about(&self) -> About {
        About {
            name: "etcd",
            token: Some("the lock key's create revision"),
            known_break: "a holder paused past its lease: no keep-alive, the lease and the key go",
            shown_by: &["etcd-pause-unfenced", "etcd-partition-leader"],
            fenced_by: Some("etcd-pause-fenced"),
            options: reader::<Options>(),
            presets: &[SESSION],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(EtcdLock::connect(endpoints, cfg).await?))
    }

    async fn connect_election(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(EtcdLock::connect_election(endpoints, cfg).await?))
    }

    /// Its client balances over every member, and its lease keep-alives ride any
    /// of them: pinned, the holder has one node to cut off.
    fn pinned_option(&self) -> Option<&'static str> {
        Some("client_endpoint = \"follower\"")
    }

    /// The lease keep-alive, sent by the client's own task while the lock is held.
    fn keeps_lease_alive(&self) -> bool {
        true
    }
}
