//! The incident catalogue (README, "Incident catalogue"; `workloads/incidents/`) on
//! real servers: each entry is flagged, its twin shows what its fix does, and the
//! report's guidance names the incident and its design rule. Entry 2 (a leader that
//! keeps acting) is in `election.rs`.

mod run_support;
use run_support::*;

/// The report, rebuilt from the run directory, says which incident the run replays.
fn names_the_incident(r: &Finished, entry: &str) {
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(
        html.contains(&format!("This run replays catalogue entry {entry}")),
        "the guidance does not name the incident"
    );
    assert!(html.contains("the design rule that prevents it"));
}

/// Whether some acquire completed as `outcome` (`ok`, `fail`) on a replica the
/// Sentinels promoted (n2 or n3): the clients followed the failover.
fn acquired_on_a_promoted_replica(r: &Finished, outcome: &str) -> bool {
    r.history().lines().any(|l| {
        l.contains(&format!("\"type\":\"{outcome}\",\"f\":\"acquire\""))
            && (l.contains("\"node\":\"n2\"") || l.contains("\"node\":\"n3\""))
    })
}

/// Entry 1: the primary cut off from its replicas and the Sentinels goes on
/// renewing the holder's key; the Sentinels promote a replica where the key runs
/// out, and a second client acquires there while the first still writes.
#[test]
fn a_sentinel_failover_loses_the_lock_and_two_clients_hold_it() {
    let r = shows_the_break(
        "incidents/redis-sentinel-failover.toml",
        &["double-holder", "stale-write-accepted"],
    );
    names_the_incident(&r, "1");
    assert!(
        acquired_on_a_promoted_replica(&r, "ok"),
        "no client acquired on a promoted replica: no failover happened"
    );
}

/// Entry 1's WAIT twin: a grant or renewal counts only once both replicas
/// acknowledged it, so the cut-off primary's renewals are refused, the holder
/// stops, and the promoted replica's key runs out only when its lease did. The
/// price: the promoted primary has one replica until Sentinel (which asks each
/// instance for INFO every 10 s) takes the old one back, and no grant counts.
#[test]
fn waiting_for_both_replicas_keeps_the_holders_apart_through_the_failover() {
    let r = run(
        &workload("incidents/redis-sentinel-failover-wait.toml"),
        &[],
    );
    r.assert_valid();
    r.assert_nothing_left();
    assert!(
        r.anomalies("double-holder").is_empty(),
        "{}",
        r.json["anomalies"]
    );
    names_the_incident(&r, "1");
    // Valid because WAIT refused what the cut-off primary did, not for want of a
    // failover.
    assert!(
        r.history().contains("replicas acknowledged within"),
        "no grant or renewal was refused for want of acknowledgements"
    );
    assert!(
        acquired_on_a_promoted_replica(&r, "fail"),
        "no client asked a promoted replica: no failover happened"
    );
}

/// Entry 1's fenced twin: the two holders still hold at once (allowed), but the
/// promoted replica had seen every INCR the old primary made before the cut, so
/// the new holder's token is greater and no stale write is applied.
#[test]
fn a_token_fence_keeps_the_data_safe_through_the_failover() {
    let r = run(
        &workload("incidents/redis-sentinel-failover-fenced.toml"),
        &[],
    );
    r.assert_valid();
    r.assert_nothing_left();
    // Valid with the lock broken: the double holder is there, allowed.
    assert!(
        !r.anomalies("double-holder").is_empty(),
        "the failover deposed no holder: {}",
        r.json["anomalies"]
    );
    assert!(acquired_on_a_promoted_replica(&r, "ok"));
    names_the_incident(&r, "1");
}

/// What entry 1's fence cannot stop: grants on the cut-off primary between the cut
/// and the failover take INCR numbers the promoted replica never saw, and it hands
/// them out again.
#[test]
fn a_failover_hands_the_same_token_out_twice_and_backwards() {
    shows_the_break(
        "incidents/redis-sentinel-failover-token-reuse.toml",
        &["duplicate-token", "token-not-monotonic"],
    );
}
