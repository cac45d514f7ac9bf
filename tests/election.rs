//! `mode = "election"` end to end on real servers: a leader paused past its lease
//! just before an act goes on acting after the next leader was elected (flagged, on
//! etcd's election API and on a Redis lease key), and the same election with
//! `on_lease_loss = "exit"` and a deadline checked before each act stays valid. The
//! report names leaderships and how long a deposed leader went on acting.

mod run_support;
use run_support::*;

/// The report (rebuilt from the run directory) speaks of leaderships, names the
/// design rule, and says how long the deposed leader went on acting.
fn reports_leaderships(r: &Finished) {
    assert_eq!(r.json["mode"], "election", "{}", r.json);
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    for words in [
        "id=\"lc-leaderships\"",
        "leaderships</span>",
        "A deposed leader must stop acting",
        "exits (or resigns) on lease loss",
    ] {
        assert!(html.contains(words), "report.html lacks {words:?}");
    }
}

#[test]
fn an_etcd_leader_paused_past_its_lease_keeps_acting_and_is_flagged() {
    let r = shows_the_break(
        "incidents/leader-keeps-acting.toml",
        &["double-holder", "stale-write-accepted"],
    );
    reports_leaderships(&r);
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(html.contains("went on acting for"), "no acting window");
    assert!(
        html.contains("This run replays catalogue entry 2"),
        "the guidance does not name the incident"
    );
    // The doubled leaders are the paused one and the one elected over it.
    let pause = r.first_op("pause");
    let paused: u64 = pause.value["targets"][0]
        .as_str()
        .and_then(|c| c.strip_prefix("client-"))
        .and_then(|i| i.parse().ok())
        .expect("a paused client");
    let double = &r.anomalies("double-holder")[0]["processes"];
    assert!(
        double.as_array().unwrap().iter().any(|p| p == paused),
        "client-{paused} was paused, the doubled leaders are {double}"
    );
}

#[test]
fn a_redis_leader_paused_past_its_key_ttl_keeps_acting_and_is_flagged() {
    let r = shows_the_break(
        "election-redis-pause.toml",
        &["double-holder", "stale-write-accepted"],
    );
    reports_leaderships(&r);
}

#[test]
fn a_leader_that_exits_on_lease_loss_and_checks_its_deadline_stays_valid() {
    let r = run(
        &workload("incidents/leader-keeps-acting-exit-on-loss.toml"),
        &[],
    );
    r.assert_valid();
    r.assert_nothing_left();
    reports_leaderships(&r);
    // Not valid for want of a deposition: a paused leader learned of its loss,
    // withheld its act and resigned saying so.
    let history = r.history();
    assert!(
        history.contains("\"lease_lost\":true"),
        "no leader resigned on a lost lease"
    );
    assert!(history.contains("self-fenced"), "no act was withheld");
    assert!(
        r.anomalies("double-holder").is_empty(),
        "{}",
        r.json["anomalies"]
    );
}
