//! The fault catalogue's workloads reproduce their known results end to end,
//! on real servers, and leave nothing behind.

mod run_support;
use run_support::*;

/// Kleppmann's objection: the clocks of a majority of the Redlock instances jump
/// forward while a lock is held; their keys expire and another client gets a quorum.
#[test]
fn redlock_clock_jump_on_a_majority_gives_two_holders() {
    let r = run(&workload("redlock-clock-jump.toml"), &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.json, r.stderr);
    assert!(
        !r.anomalies("double-holder").is_empty(),
        "{}",
        r.json["anomalies"]
    );
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    let skew = history
        .lines()
        .find(|l| l.contains("\"clock-skew\""))
        .expect("the jump is in the history");
    assert!(skew.contains("\"offset_ms\":20000"), "{skew}");
    // Every clock is back to real time.
    for f in std::fs::read_dir(r.run_dir().join("clocks")).unwrap() {
        let f = f.unwrap().path();
        assert!(
            lockcheck::fault::clock::read_file(&f).unwrap().is_none(),
            "{}",
            f.display()
        );
    }
    r.assert_nothing_left();
}

/// A Redis without persistence killed and restarted under a holder comes back
/// empty: the lock is handed out again, and its INCR fencing counter starts over.
#[test]
fn redis_kill_restart_hands_the_lock_out_again() {
    let r = run(&workload("redis-kill-restart.toml"), &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.json, r.stderr);
    assert!(
        !r.anomalies("double-holder").is_empty(),
        "{}",
        r.json["anomalies"]
    );
    assert!(
        !r.anomalies("duplicate-token").is_empty(),
        "the counter restarted: {}",
        r.json["anomalies"]
    );
    r.assert_nothing_left();
}

/// The holder cut off from every etcd member (a black hole) past its lease: etcd
/// revokes it and hands the lock on, while the cut-off holder keeps writing.
#[test]
fn etcd_holder_cut_off_past_its_lease_gives_two_holders_and_a_stale_write() {
    let r = run(&workload("etcd-partition-leader.toml"), &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.json, r.stderr);
    assert!(
        !r.anomalies("double-holder").is_empty(),
        "{}",
        r.json["anomalies"]
    );
    assert!(
        !r.anomalies("stale-write-accepted").is_empty(),
        "{}",
        r.json["anomalies"]
    );
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"f\":\"partition\""),
        "the cut is in the history"
    );
    r.assert_nothing_left();
}
