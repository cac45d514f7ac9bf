//! Stopping a real server node: it stops answering, and serves again once resumed
//! (also when the guard is dropped without a resume, as on a panic).

mod fault_support;

use fault_support::Redis;
use lockcheck::fault::node;
use lockcheck::journal::{self, is_stopped, Journal};
use std::time::{Duration, Instant};

#[test]
fn a_stopped_redis_times_out_and_serves_again_when_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path(), &[]);
    let journal = Journal::for_run(dir.path()).unwrap();
    let stopped = node::stop(journal.clone(), &[("n1".into(), redis.pid())]).unwrap();
    assert!(is_stopped(redis.pid()));
    assert_eq!(
        journal::pending(dir.path()).unwrap().effects.len(),
        1,
        "journaled"
    );
    let t = Instant::now();
    let err = redis.cmd(&["PING"]).unwrap_err();
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "timed out, not refused: {err}"
    );
    stopped.resume().unwrap();
    assert_eq!(redis.cmd(&["PING"]).unwrap(), "PONG");
    assert!(
        journal::pending(dir.path()).unwrap().effects.is_empty(),
        "undo journaled"
    );

    // Dropped while stopped: resumed all the same.
    let stopped = node::stop(journal.clone(), &[("n1".into(), redis.pid())]).unwrap();
    drop(stopped);

    assert_eq!(redis.cmd(&["PING"]).unwrap(), "PONG");
}
