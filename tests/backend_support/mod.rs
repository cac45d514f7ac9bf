//! Shared by the backend tests (tests/backends*.rs): a backend's real servers
//! started by `cluster::local` in a temp dir, lock clients on them, and the checks
//! every lock service must pass (one holder at a time, increasing tokens).
// Each test file uses a different part of this module.
#![allow(dead_code)]

use lockcheck::backend::{connect, BackendKind, Grant, LockClient, LockConfig, LockError};
use lockcheck::cluster::{ClusterSpec, LocalCluster};
use std::time::{Duration, Instant};

/// A running cluster and the temp dir it lives in (the cluster drops first).
pub struct Running {
    pub cluster: LocalCluster,
    /// Where its data and logs are.
    pub dir: tempfile::TempDir,
}

pub async fn start(kind: BackendKind) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let cluster = LocalCluster::start(ClusterSpec::new(kind, dir.path()))
        .await
        .unwrap_or_else(|e| panic!("starting {kind:?}: {e:#}"));
    Running { cluster, dir }
}

/// A lock named "lock", with a fencing token where the backend hands one out.
pub fn config(kind: BackendKind, lease_ms: u64, acquire_timeout_ms: u64) -> LockConfig {
    LockConfig {
        name: "lock".into(),
        lease: Duration::from_millis(lease_ms),
        acquire_timeout: Duration::from_millis(acquire_timeout_ms),
        fencing_token: kind.token().is_some(),
        options: Default::default(),
    }
}

pub async fn client(r: &Running, cfg: &LockConfig) -> Box<dyn LockClient> {
    connect(r.cluster.kind(), &r.cluster.endpoints(), cfg)
        .await
        .unwrap()
}

/// The reason of a refusal; anything else fails the test.
pub fn denied<T: std::fmt::Debug>(r: Result<T, LockError>) -> String {
    match r {
        Err(LockError::Denied(why)) => why,
        other => panic!("expected Denied, got {other:?}"),
    }
}

/// A contender's acquire refused while another client holds the lock. An answer
/// later than the client's request timeout (etcd: a quarter of the lease) is an
/// unknown outcome on a loaded machine, not a refusal and not a grant: ask again
/// from a fresh client (an unknown attempt that won would lapse with its lease,
/// which the dropped client no longer keeps alive), at most three times. A grant
/// fails the test at once.
pub async fn denied_while_held(r: &Running, cfg: &LockConfig) -> String {
    let mut unknown = Vec::new();
    for _ in 0..3 {
        match client(r, cfg).await.acquire().await {
            Err(LockError::Denied(why)) => return why,
            Err(LockError::Indeterminate(why)) => unknown.push(why),
            other => panic!("expected Denied while the lock is held, got {other:?}"),
        }
    }
    panic!("three acquires while the lock is held, each unknown: {unknown:?}")
}

/// Acquire, a contender denied after its full wait, a release by a non-holder
/// refused (changing nothing), renew, release, and the lock passing to the other
/// client; a renew after release refused. Returns the first grant.
pub async fn one_holder_at_a_time(r: &Running, lease_ms: u64) -> Grant {
    let kind = r.cluster.kind();
    let cfg = config(kind, lease_ms, 300);
    let (mut a, mut b) = (client(r, &cfg).await, client(r, &cfg).await);
    let first = a.acquire().await.unwrap();
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
    first
}

/// Each acquire's token is greater than the last, and renew keeps it.
pub async fn tokens_strictly_increase(r: &Running) {
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

/// The known break of a lease, after the holder `a` (token `ta`) let it run out: `b`
/// takes the lock with a greater token, and `a`'s renew and release are refused
/// without disturbing `b`, which still renews and releases. Returns `b`'s token.
pub async fn next_holder_outranks_the_lapsed(
    a: &mut dyn LockClient,
    b: &mut dyn LockClient,
    ta: u64,
) -> u64 {
    let tb = b.acquire().await.unwrap().token.unwrap();
    assert!(tb > ta, "{tb} after {ta}");
    denied(a.renew().await);
    denied(a.release().await);
    b.renew().await.unwrap();
    b.release().await.unwrap();
    tb
}
