//! The other lock services against their real servers, started by `cluster`:
//! PostgreSQL (advisory lock, lease row), with one holder at a time, tokens, and
//! the way each loses a holder's lock behind its back. Every server runs on free
//! loopback ports in a temp dir and stops when its test ends (also on panic).

mod backend_support;

use backend_support::*;
use lockcheck::backend::BackendKind;
use std::time::{Duration, Instant};

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

// ---- MariaDB ----

#[tokio::test]
async fn mariadb_one_holder_at_a_time_and_no_token() {
    let r = start(BackendKind::Mariadb).await;
    one_holder_at_a_time(&r, 5_000).await;
    let g = client(&r, &config(BackendKind::Mariadb, 5_000, 300))
        .await
        .acquire()
        .await
        .unwrap();
    assert_eq!(g.token, None);
}

/// The known break of `GET_LOCK`: the holder goes quiet past `wait_timeout`; the
/// server ends its session, which frees the lock; another session takes it; the
/// first holder's renew is refused.
#[tokio::test]
async fn mariadb_lock_goes_with_an_idle_holders_session() {
    let r = start(BackendKind::Mariadb).await;
    let cfg = config(BackendKind::Mariadb, 1_000, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    b.acquire().await.unwrap();
    let why = denied(a.renew().await);
    assert!(why.starts_with("not-held"), "{why}");
    b.release().await.unwrap();
}
