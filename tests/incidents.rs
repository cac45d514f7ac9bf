//! The incident catalogue (docs/incidents.md; `workloads/incidents/`) on
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
    // Valid, and untested as far as grants go: no grant counts once a replica is
    // out, so the run sees none after the cut (`faults.unseen`, exit 3 without
    // --allow-missed-faults). WAIT keeps the holders apart by refusing them all.
    let r = run(
        &workload("incidents/redis-sentinel-failover-wait.toml"),
        &["--allow-missed-faults"],
    );
    r.assert_valid();
    if let Some(unseen) = r.json["faults"]["unseen"].as_str() {
        assert!(unseen.contains("no client acquired the lock"), "{unseen}");
    }
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
/// them out again: backwards at once, and twice once its counter climbs back to a
/// number the cut-off primary handed out (a run whose grants after the failover
/// stayed below those shows them backwards only; which one it was, the history
/// says).
#[test]
fn a_failover_hands_the_same_token_out_twice_and_backwards() {
    let r = shows_the_break(
        "incidents/redis-sentinel-failover-token-reuse.toml",
        &["token-not-monotonic"],
    );
    let history = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let mut seen = std::collections::HashSet::new();
    let granted_twice = history
        .ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == lockcheck::history::OpType::Ok)
        .filter_map(|o| o.token())
        .any(|token| !seen.insert(token));
    assert!(
        !granted_twice || !r.anomalies("duplicate-token").is_empty(),
        "a token granted by two acquires is a duplicate-token: {}",
        r.json["anomalies"]
    );
}

/// Entry 4 (etcd issue 15247): the leader's disk syncs stall; the followers elect
/// another, through which the holder (pinned to a follower) goes on renewing its
/// lease; the stuck leader's lessor revokes the lease all the same, applied when
/// the stall ends, and a second client acquires while the first still holds, its
/// last renewal answered less than a lease before.
#[test]
fn a_stuck_etcd_leader_revokes_a_lease_its_holder_was_renewing() {
    let r = shows_the_break(
        "incidents/etcd-stuck-leader-revokes-leases.toml",
        &["double-holder"],
    );
    names_the_incident(&r, "4");
    // The bug's own signature, not a holder retired for want of answers: the
    // deposed holder had renewed during the stall, through the new leader, less
    // than a lease (5 s) before the second grant.
    let ops = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl"))
        .unwrap()
        .ops;
    let at = |i: &serde_json::Value| ops.iter().find(|o| Some(o.index) == i.as_u64()).unwrap();
    let both = &r.anomalies("double-holder")[0]["indexes"];
    let (first, second) = (at(&both[0]), at(&both[1]));
    let stall = r.first_op("pause").time;
    let renewed = ops
        .iter()
        .filter(|o| o.process == first.process && o.f == "renew")
        .filter(|o| o.kind == lockcheck::history::OpType::Ok && o.time < second.time)
        .map(|o| o.time)
        .max()
        .expect("the deposed holder never renewed");
    assert!(
        renewed > stall && second.time - renewed < 5_000_000_000,
        "the deposed holder's last renewal ({renewed} ns) was not during the stall \
         ({stall} ns on) and within a lease of the second grant ({} ns)",
        second.time
    );
}

/// Entry 4's fenced twin: the lease is still revoked behind its holder's back
/// (double holder, allowed), but the next grant's revision is greater, and the
/// resource turns the deposed holder's writes away.
#[test]
fn a_revision_fence_keeps_the_data_safe_from_a_stuck_leaders_revoke() {
    // The revoke hangs on timing (a renewal that reaches the new leader, a stall
    // that ends after the lease ran out in the stuck one's view): on a loaded
    // machine a run may see none, and then tests nothing of the fence. Up to
    // three seeds, each valid, until one shows the revoke and the fence at work.
    let w = workload("incidents/etcd-stuck-leader-revokes-leases-fenced.toml");
    let mut seen = Vec::new();
    for seed in ["1", "2", "3"] {
        let r = run(&w, &["--seed", seed]);
        r.assert_valid();
        r.assert_nothing_left();
        names_the_incident(&r, "4");
        let rejected = r.json["figures"]["writes_rejected_by_fence"]
            .as_u64()
            .unwrap();
        if !r.anomalies("double-holder").is_empty() && rejected > 0 {
            return;
        }
        seen.push(format!("seed {seed}: {}", r.json["figures"]));
    }
    panic!("the stuck leader revoked no lease the fence had to face: {seen:#?}");
}
