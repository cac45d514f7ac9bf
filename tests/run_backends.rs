//! `lockcheck run` end to end on each lock service but Redis (tests/run_redis.rs,
//! which also covers the runner itself): Redlock over five Redis instances, a
//! 3-member etcd cluster (lease + lock key, the key's create revision as the
//! token), PostgreSQL, NATS, ZooKeeper and MariaDB. For each, the holder paused
//! past its lease or session shows the known break, fencing by the backend's token
//! (where it has one) keeps the resource safe, and a run without faults is valid.

mod run_support;
use run_support::*;

// ---- Redlock ----

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

// ---- etcd ----

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

// ---- PostgreSQL ----

#[test]
fn postgres_advisory_holder_paused_past_idle_session_timeout_shows_the_break() {
    shows_the_break(
        "postgres-advisory-pause.toml",
        &["double-holder", "interleaved-writes"],
    );
}

#[test]
fn postgres_lease_row_holder_paused_past_locked_until_shows_the_break() {
    shows_the_break(
        "postgres-lease-pause-unfenced.toml",
        &["double-holder", "stale-write-accepted"],
    );
}

#[test]
fn postgres_lease_row_fenced_by_its_token_is_safe() {
    fenced_is_safe("postgres-lease-pause-fenced.toml");
}

/// The row's token is only as durable as the server's data: a wiped restart
/// hands out tokens the fenced resource has already seen.
#[test]
fn postgres_lease_tokens_start_over_when_the_server_loses_its_data() {
    shows_the_break(
        "postgres-lease-wiped-fenced.toml",
        &["duplicate-token", "token-not-monotonic"],
    );
}

#[test]
fn postgres_without_faults_is_valid() {
    valid_without_faults("postgres-advisory", false);
    valid_without_faults("postgres-lease", true);
}

// ---- NATS ----

#[test]
fn nats_holder_paused_past_the_max_age_shows_the_break() {
    shows_the_break(
        "nats-pause-unfenced.toml",
        &["double-holder", "stale-write-accepted"],
    );
}

#[test]
fn nats_fenced_by_revision_is_safe() {
    fenced_is_safe("nats-pause-fenced.toml");
}

/// On one node: a cluster of Debian's nats-server 2.9.10 grants the lock twice with
/// no fault at all (its own known break, shown in tests/nats_cluster.rs).
#[test]
fn nats_without_faults_is_valid() {
    valid_without_faults_on("nats", true, Some(1));
}

// ---- ZooKeeper ----

#[test]
fn zookeeper_holder_paused_past_its_session_timeout_shows_the_break() {
    shows_the_break(
        "zookeeper-pause-unfenced.toml",
        &["double-holder", "stale-write-accepted"],
    );
}

#[test]
fn zookeeper_fenced_by_czxid_is_safe() {
    fenced_is_safe("zookeeper-pause-fenced.toml");
}

#[test]
fn zookeeper_without_faults_is_valid() {
    valid_without_faults("zookeeper", true);
}

// ---- MariaDB ----

#[test]
fn mariadb_holder_paused_past_wait_timeout_shows_the_break() {
    shows_the_break(
        "mariadb-pause.toml",
        &["double-holder", "interleaved-writes"],
    );
}

#[test]
fn mariadb_without_faults_is_valid() {
    valid_without_faults("mariadb", false);
}
