//! `lockcheck run` against a real 3-member etcd cluster: lease + lock key, the key's
//! create revision as the fencing token, keep-alive while held.

mod run_support;
use run_support::*;

#[test]
fn unfenced_etcd_with_the_holder_paused_past_its_lease_shows_two_holders_and_a_stale_write() {
    shows_the_break(
        "etcd-pause-unfenced.toml",
        &["double-holder", "stale-write-accepted"],
    );
}

#[test]
fn etcd_fenced_by_revision_is_safe() {
    fenced_is_safe("etcd-pause-fenced.toml");
}

#[test]
fn etcd_without_faults_is_valid() {
    valid_without_faults("etcd", true);
}
