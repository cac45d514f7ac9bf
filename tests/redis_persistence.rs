//! redis's `persistence` option against a real redis-server: with its AOF fsynced
//! at every write (`persistence = "aof-always"`) a server killed (-9) and restarted
//! with its data keeps its token counter and its lock key, so tokens after the
//! restart go on above those before and the holder's lock is still its own. By
//! default (no AOF, no snapshots) the restarted server is empty: the counter starts
//! over, and the lock is free while its holder still believes it holds it: the
//! token durability break the redis audit found (docs/audits/redis.md).

mod run_support;

use lockcheck::backend::{connect, BackendKind, LockConfig, LockError, Options};
use lockcheck::cluster::{ClusterSpec, LocalCluster};
use std::time::Duration;

/// What one kill and restart did to the lock: the tokens granted before it, the
/// one granted after it, and whether a second client got the lock that the first
/// held across the restart.
struct AcrossAKill {
    before: Vec<u64>,
    after: u64,
    stolen: bool,
}

async fn across_a_kill(options: &str) -> AcrossAKill {
    let dir = tempfile::tempdir().unwrap();
    let options: Options = toml::from_str(options).unwrap();
    let mut spec = ClusterSpec::new(BackendKind::Redis, dir.path());
    spec.options = options.clone();
    let mut cluster = LocalCluster::start(spec).await.unwrap();
    let endpoints = cluster.endpoints();
    let cfg = LockConfig {
        name: "lock".into(),
        lease: Duration::from_secs(10),
        acquire_timeout: Duration::from_millis(300),
        fencing_token: true,
        options,
    };
    let kind = BackendKind::Redis;
    let mut holder = connect(kind, &endpoints, &cfg).await.unwrap();
    let mut before = Vec::new();
    for _ in 0..3 {
        before.push(holder.acquire().await.unwrap().token.unwrap());
        holder.release().await.unwrap();
    }
    // The holder keeps this one across the kill.
    before.push(holder.acquire().await.unwrap().token.unwrap());
    cluster.kill("n1").await.unwrap();
    cluster.restart("n1").await.unwrap();
    let mut other = connect(kind, &endpoints, &cfg).await.unwrap();
    let stolen = match other.acquire().await {
        Ok(_) => true,
        Err(LockError::Denied(_)) => false,
        Err(e) => panic!("the restarted server did not answer: {e}"),
    };
    if stolen {
        other.release().await.unwrap();
    } else {
        // The holder's connection died with the server: its first request says
        // so (a pooled client's would too), the next goes to the restarted one.
        if let Err(LockError::Indeterminate(_)) = holder.release().await {
            holder.release().await.unwrap();
        }
    }
    let after = other.acquire().await.unwrap().token.unwrap();
    other.release().await.unwrap();
    drop(cluster);
    AcrossAKill {
        before,
        after,
        stolen,
    }
}

#[tokio::test]
async fn with_aof_always_tokens_go_on_above_those_before_a_kill_and_the_lock_stays_held() {
    let r = across_a_kill("persistence = \"aof-always\"").await;
    assert_eq!(r.before, [1, 2, 3, 4]);
    assert!(!r.stolen, "the lock key came back with the restart");
    assert!(
        r.after > *r.before.iter().max().unwrap(),
        "after the restart {} > before {:?}",
        r.after,
        r.before
    );
}

#[tokio::test]
async fn without_persistence_tokens_start_over_after_a_kill_and_the_lock_is_free() {
    let r = across_a_kill("").await;
    assert_eq!(r.before, [1, 2, 3, 4]);
    assert!(r.stolen, "the restarted server is empty: the lock is free");
    // The second client's grant took 1, its release freed it, the next took 2.
    assert_eq!(r.after, 2, "the counter started over");
}

/// The shipped workload end to end: Redis with AOF always, killed and restarted
/// while a client holds the lock: no anomaly, every token after a restart above
/// every token before it.
#[test]
fn the_aof_always_workload_keeps_tokens_monotonic_across_kills() {
    use run_support::*;
    let r = run(&workload("redis-kill-restart-aof.toml"), &[]);
    r.assert_valid();
    let history = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let kill = r.first_op("kill").index;
    let granted = |after: bool| -> Vec<u64> {
        history
            .ops
            .iter()
            .filter(|o| o.f == "acquire" && (o.index > kill) == after)
            .filter_map(|o| o.token())
            .collect()
    };
    let (before, after) = (granted(false), granted(true));
    assert!(
        !before.is_empty() && !after.is_empty(),
        "{before:?} {after:?}"
    );
    assert!(
        after.iter().min() > before.iter().max(),
        "tokens after the first kill {after:?} above those before {before:?}"
    );
    r.assert_nothing_left();
}
