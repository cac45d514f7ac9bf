//! The other lock services against their real servers, started by `cluster`:
//! PostgreSQL (advisory lock, lease row), with one holder at a time, tokens, and
//! the way each loses a holder's lock behind its back. Every server runs on free
//! loopback ports in a temp dir and stops when its test ends (also on panic).

use lockcheck::backend::{connect, BackendKind, LockClient, LockConfig, LockError};
use lockcheck::cluster::{ClusterSpec, LocalCluster};
use std::time::{Duration, Instant};

/// A running cluster and the temp dir it lives in (the cluster drops first).
struct Running {
    cluster: LocalCluster,
    _dir: tempfile::TempDir,
}

async fn start(kind: BackendKind) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(ClusterSpec::new(kind, dir.path()))
        .await
        .unwrap_or_else(|e| panic!("starting {kind:?}: {e:#}"));
    Running { cluster, _dir: dir }
}

fn config(kind: BackendKind, lease_ms: u64, acquire_timeout_ms: u64) -> LockConfig {
    LockConfig {
        name: "lock".into(),
        lease: Duration::from_millis(lease_ms),
        acquire_timeout: Duration::from_millis(acquire_timeout_ms),
        fencing_token: kind.token().is_some(),
    }
}

async fn client(r: &Running, cfg: &LockConfig) -> Box<dyn LockClient> {
    connect(r.cluster.kind(), &r.cluster.endpoints(), cfg)
        .await
        .unwrap()
}

fn denied<T: std::fmt::Debug>(r: Result<T, LockError>) -> String {
    match r {
        Err(LockError::Denied(why)) => why,
        other => panic!("expected Denied, got {other:?}"),
    }
}

/// Acquire, a contender denied after its full wait, a release by a non-holder
/// refused, release, and the lock passing to the other client.
async fn one_holder_at_a_time(r: &Running, lease_ms: u64) {
    let kind = r.cluster.kind();
    let cfg = config(kind, lease_ms, 300);
    let (mut a, mut b) = (client(r, &cfg).await, client(r, &cfg).await);
    a.acquire().await.unwrap();
    let t = Instant::now();
    denied(b.acquire().await);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{kind:?}: b gave up before its acquire timeout"
    );
    denied(b.release().await);
    a.renew().await.unwrap();
    a.release().await.unwrap();
    b.acquire().await.unwrap();
    denied(a.acquire().await);
    b.release().await.unwrap();
    denied(b.renew().await);
}

/// Each acquire's token is greater than the last, and renew keeps it.
async fn tokens_strictly_increase(r: &Running) {
    let cfg = config(r.cluster.kind(), 5_000, 1_000);
    let (mut a, mut b) = (client(r, &cfg).await, client(r, &cfg).await);
    let mut last = 0;
    for round in 0..4 {
        let c = if round % 2 == 0 { &mut a } else { &mut b };
        let token = c.acquire().await.unwrap().token.expect("a fencing token");
        assert!(token > last, "token {token} after {last}");
        assert_eq!(c.renew().await.unwrap().token, Some(token));
        c.release().await.unwrap();
        last = token;
    }
}

// ---- PostgreSQL ----

#[tokio::test]
async fn postgres_advisory_one_holder_at_a_time_and_no_token() {
    let r = start(BackendKind::PostgresAdvisory).await;
    one_holder_at_a_time(&r, 5_000).await;
    let g = client(&r, &config(BackendKind::PostgresAdvisory, 5_000, 300))
        .await
        .acquire()
        .await
        .unwrap();
    assert_eq!(g.token, None);
}

#[tokio::test]
async fn postgres_lease_one_holder_at_a_time_and_tokens_increase() {
    let r = start(BackendKind::PostgresLease).await;
    one_holder_at_a_time(&r, 5_000).await;
    tokens_strictly_increase(&r).await;
}

/// The known break of the advisory lock: the holder goes quiet (as a paused process
/// does) past `idle_session_timeout`; the server ends its session, which frees the
/// lock; another session takes it. The first holder learns it only when it next
/// speaks: its renew and release are refused.
#[tokio::test]
async fn postgres_advisory_lock_goes_with_an_idle_holders_session() {
    let r = start(BackendKind::PostgresAdvisory).await;
    let cfg = config(BackendKind::PostgresAdvisory, 800, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    b.acquire().await.unwrap();
    let why = denied(a.renew().await);
    assert!(why.starts_with("not-held"), "{why}");
    denied(a.release().await);
    // The deposed client takes the lock again once it is free: a new session.
    b.release().await.unwrap();
    a.acquire().await.unwrap();
}

/// The known break of the lease row: the holder's lease runs out while it is quiet;
/// the next acquire takes the row with a greater token; the old holder's renew and
/// release are refused and do not disturb the new holder.
#[tokio::test]
async fn postgres_lease_row_expires_and_the_next_token_is_greater() {
    let r = start(BackendKind::PostgresLease).await;
    let cfg = config(BackendKind::PostgresLease, 600, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    let ta = a.acquire().await.unwrap().token.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let tb = b.acquire().await.unwrap().token.unwrap();
    assert!(tb > ta, "{tb} after {ta}");
    denied(a.renew().await);
    denied(a.release().await);
    assert_eq!(b.renew().await.unwrap().token, Some(tb));
    b.release().await.unwrap();
}

// ---- NATS JetStream KV ----

#[tokio::test]
async fn nats_one_holder_at_a_time_and_revisions_increase() {
    let r = start(BackendKind::Nats).await;
    one_holder_at_a_time(&r, 5_000).await;
    tokens_strictly_increase(&r).await;
}

/// The known break of the KV lease: the holder stops renewing (as a paused process
/// does); the key ages out at the bucket's max age; another client creates it with
/// a greater revision; the first holder's renew and release are refused.
#[tokio::test]
async fn nats_key_ages_out_and_the_next_revision_is_greater() {
    let r = start(BackendKind::Nats).await;
    let cfg = config(BackendKind::Nats, 800, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    let ta = a.acquire().await.unwrap().token.unwrap();
    denied(b.acquire().await);
    // A renewing holder keeps the key past its first max age.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        a.renew().await.unwrap();
    }
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let tb = b.acquire().await.unwrap().token.unwrap();
    assert!(tb > ta, "{tb} after {ta}");
    denied(a.renew().await);
    denied(a.release().await);
    b.renew().await.unwrap();
    b.release().await.unwrap();
}

// ---- ZooKeeper ----

#[tokio::test]
async fn zookeeper_one_holder_at_a_time_and_czxids_increase() {
    let r = start(BackendKind::Zookeeper).await;
    one_holder_at_a_time(&r, 4_000).await;
    tokens_strictly_increase(&r).await;
}

/// Contenders queue behind the holder: each watches its predecessor and takes the
/// lock when the one before it releases, in the order they asked.
#[tokio::test]
async fn zookeeper_waiters_take_the_lock_in_turn() {
    let r = start(BackendKind::Zookeeper).await;
    let cfg = config(BackendKind::Zookeeper, 4_000, 5_000);
    let mut a = client(&r, &cfg).await;
    let ta = a.acquire().await.unwrap().token.unwrap();
    let mut b = client(&r, &cfg).await;
    let waiter = tokio::spawn(async move {
        let t = Instant::now();
        let g = b.acquire().await;
        (g, t.elapsed(), b)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.release().await.unwrap();
    let (g, waited, mut b) = waiter.await.unwrap();
    let tb = g.unwrap().token.unwrap();
    assert!(tb > ta, "{tb} after {ta}");
    assert!(
        waited >= Duration::from_millis(400),
        "granted after {waited:?}"
    );
    b.release().await.unwrap();
}
