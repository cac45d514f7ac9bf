//! `lockcheck run` against Redlock over five real Redis instances.

mod run_support;
use run_support::*;

#[test]
fn redlock_with_the_holder_paused_past_its_validity_shows_two_holders() {
    let r = shows_the_break("redlock-pause-unfenced.toml", &["double-holder"]);
    let doubles = r.anomalies("double-holder");
    assert!(doubles[0]["processes"].as_array().unwrap().len() >= 2);
    for n in 1..=5 {
        assert!(r.run_dir().join(format!("nodes/n{n}.log")).is_file());
    }
}

#[test]
fn redlock_without_faults_is_valid() {
    valid_without_faults("redlock", false);
}
