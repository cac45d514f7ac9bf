//! `lockcheck run` against Redlock over five real Redis instances.

mod run_support;
use run_support::*;

#[test]
fn redlock_with_the_holder_paused_past_its_validity_shows_two_holders() {
    let r = run(&workload("redlock-pause-unfenced.toml"), &[]);
    r.assert_flagged(&[]);
    let doubles = r.anomalies("double-holder");
    assert!(!doubles.is_empty(), "{}", r.json["anomalies"]);
    assert!(doubles[0]["processes"].as_array().unwrap().len() >= 2);
    for n in 1..=5 {
        assert!(r.run_dir().join(format!("nodes/n{n}.log")).is_file());
    }
    r.assert_nothing_left();
}

#[test]
fn redlock_without_faults_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&no_fault_workload(dir.path(), "redlock", false), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert!(r.json["anomalies"].as_array().unwrap().is_empty());
    r.assert_nothing_left();
}
