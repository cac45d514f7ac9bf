//! `lockcheck run` against a real 3-member etcd cluster: lease + lock key, the key's
//! create revision as the fencing token, keep-alive while held.

mod run_support;
use run_support::*;

#[test]
fn unfenced_etcd_with_the_holder_paused_past_its_lease_shows_two_holders_and_a_stale_write() {
    let r = run(&workload("etcd-pause-unfenced.toml"), &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    r.assert_nothing_left();
}

#[test]
fn etcd_fenced_by_revision_is_safe() {
    let r = run(&workload("etcd-pause-fenced.toml"), &[]);
    r.assert_valid();
    assert!(
        r.json["figures"]["writes_rejected_by_fence"]
            .as_u64()
            .unwrap()
            > 0
    );
    r.assert_nothing_left();
}

#[test]
fn etcd_without_faults_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&no_fault_workload(dir.path(), "etcd", true), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert!(r.json["anomalies"].as_array().unwrap().is_empty());
    r.assert_nothing_left();
}
