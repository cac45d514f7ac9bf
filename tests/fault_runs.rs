//! The fault catalogue's workloads reproduce their known results end to end,
//! on real servers, and leave nothing behind.

mod run_support;
use lockcheck::fault::journal::{self, Effect};
use run_support::*;
use std::time::Duration;

/// Kleppmann's objection: the clocks of a majority of the Redlock instances jump
/// forward while a lock is held; their keys expire and another client gets a quorum.
#[test]
fn redlock_clock_jump_on_a_majority_gives_two_holders() {
    let r = run(&workload("redlock-clock-jump.toml"), &[]);
    r.assert_flagged(&["double-holder"]);
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
    r.assert_flagged(&["double-holder", "duplicate-token"]);
    r.assert_nothing_left();
}

/// The holder cut off from every etcd member (a black hole) past its lease: etcd
/// revokes it and hands the lock on, while the cut-off holder keeps writing.
#[test]
fn etcd_holder_cut_off_past_its_lease_gives_two_holders_and_a_stale_write() {
    let r = run(&workload("etcd-partition-leader.toml"), &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    assert!(
        history.contains("\"f\":\"partition\""),
        "the cut is in the history"
    );
    r.assert_nothing_left();
}

/// A clock fault on etcd (Go, reading the vDSO) skews nothing, and the verdict says
/// so for each member instead of pretending.
#[test]
fn a_clock_fault_on_etcd_is_reported_as_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("etcd-clock.toml");
    std::fs::write(
        &path,
        r#"duration = "3s"
resource = "unfenced"
[backend]
kind = "etcd"
lease = "2s"
[clients]
count = 2
[critical_section]
hold = "100ms"
writes = 1
[[faults]]
kind = "clock"
nodes = "all"
offset = "+30s"
after = "500ms"
duration = "1s"
"#,
    )
    .unwrap();
    let r = run(&path, &[]);
    let missed = r.json["figures"]["unreachable"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(missed.len(), 3, "{}", r.json["figures"]);
    assert!(
        missed
            .iter()
            .all(|m| m.as_str().unwrap().contains("Go binary")),
        "{missed:?}"
    );
    r.assert_nothing_left();
}

/// etcd (Go: no interposer) with `backend.monotonic_offset`: each member starts in
/// a time namespace of its own, the offset shows in its /proc, the cluster serves
/// the run as usual, and the history and the verdict say which clock was shifted.
#[test]
fn etcd_members_started_with_a_monotonic_offset_serve_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_workload(
        dir.path(),
        "etcd-monotonic.toml",
        r#"duration = "3s"
resource = "fenced"
[backend]
kind = "etcd"
lease = "2s"
monotonic_offset = { n1 = "+600s", n2 = "-5s" }
[clients]
count = 2
[critical_section]
hold = "100ms"
writes = 1
"#,
    );
    let running = start_json(&path, &[]);
    // The members, as the run's journal names them, with their namespaces' offsets.
    let offsets = wait_for(
        "the run never journaled its etcd members",
        Duration::from_secs(20),
        || {
            let pending = journal::pending(&running.run_dir()?).ok()?;
            let members: Vec<(String, String)> = pending
                .effects
                .iter()
                .filter_map(|(_, e)| match e {
                    Effect::Process(p) if p.name.starts_with('n') => Some((
                        p.name.clone(),
                        std::fs::read_to_string(format!("/proc/{}/timens_offsets", p.pid)).ok()?,
                    )),
                    _ => None,
                })
                .collect();
            (members.len() == 3).then_some(members)
        },
    );
    let monotonic = |node: &str| {
        let text = &offsets.iter().find(|(n, _)| n == node).unwrap().1;
        let line = text.lines().find(|l| l.starts_with("monotonic")).unwrap();
        line.split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(monotonic("n1"), "600 0", "{offsets:?}");
    assert_eq!(monotonic("n2"), "-5 0", "{offsets:?}");
    assert_eq!(monotonic("n3"), "0 0", "n3 has no offset: {offsets:?}");

    let r = running.finish();
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert!(r.json["figures"]["critical_sections"].as_u64().unwrap() > 0);
    assert_eq!(
        r.json["figures"]["monotonic_offsets"],
        serde_json::json!([
            "n1: monotonic +600000 ms from start (time namespace)",
            "n2: monotonic -5000 ms from start (time namespace)"
        ]),
        "{}",
        r.json["figures"]
    );
    let history = std::fs::read_to_string(r.run_dir().join("history.jsonl")).unwrap();
    let shift = history
        .lines()
        .find(|l| l.contains("\"method\":\"time-namespace\""))
        .expect("the shift is in the history");
    assert!(shift.contains("\"f\":\"clock-skew\""), "{shift}");
    r.assert_nothing_left();
}
