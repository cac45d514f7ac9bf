//! The fault catalogue's workloads reproduce their known results end to end,
//! on real servers, and leave nothing behind.

mod run_support;
use lockcheck::journal::{self, Effect};
use run_support::*;
use std::time::Duration;

/// Kleppmann's objection: the clocks of a majority of the Redlock instances jump
/// forward while a lock is held; their keys expire and another client gets a quorum.
#[test]
fn redlock_clock_jump_on_a_majority_gives_two_holders() {
    let r = shows_the_break("redlock-clock-jump.toml", &["double-holder"]);
    let skew = r.first_op("clock-skew");
    assert_eq!(skew.value["offset_ms"], 20000, "{skew:?}");
    // Every clock is back to real time.
    for f in std::fs::read_dir(r.run_dir().join("clocks")).unwrap() {
        let f = f.unwrap().path();
        assert!(
            lockcheck::fault::clock::read_file(&f).unwrap().is_none(),
            "{}",
            f.display()
        );
    }
}

/// A Redis without persistence killed and restarted under a holder comes back
/// empty: the lock is handed out again, and its INCR fencing counter starts over.
#[test]
fn redis_kill_restart_hands_the_lock_out_again() {
    shows_the_break(
        "redis-kill-restart.toml",
        &["double-holder", "duplicate-token"],
    );
}

/// The holder cut off from every etcd member (a black hole) past its lease: etcd
/// revokes it and hands the lock on, while the cut-off holder keeps writing.
#[test]
fn etcd_holder_cut_off_past_its_lease_gives_two_holders_and_a_stale_write() {
    let r = shows_the_break(
        "etcd-partition-leader.toml",
        &["double-holder", "stale-write-accepted"],
    );
    assert!(
        r.history().contains("\"f\":\"partition\""),
        "the cut is in the history"
    );
}

/// The member the holder's client is pinned to, killed past the lease: etcd lets
/// the lease expire and hands the lock on once the member is back, while the
/// holder writes on; the member killed is the one the holder was connected to.
#[test]
fn etcd_holders_member_killed_past_its_lease_gives_two_holders_and_a_stale_write() {
    let r = shows_the_break(
        "etcd-holder-node-killed.toml",
        &["double-holder", "stale-write-accepted"],
    );
    let kill = r.first_op("kill");
    let killed = kill.value["targets"]
        .as_array()
        .expect("the kill names its node");
    assert_eq!(killed.len(), 1, "one member, the holder's: {kill:?}");
    assert_eq!(r.json["provoked"]["class"], "provoked", "{}", r.json);
}

/// A clock fault on etcd (Go, reading the vDSO) skews nothing, and the verdict says
/// so for each member instead of pretending.
#[test]
fn a_clock_fault_on_etcd_is_reported_as_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let fault = "[[faults]]\nkind = \"clock\"\nnodes = \"all\"\noffset = \"+30s\"\nafter = \"500ms\"\nduration = \"1s\"";
    let path = short_etcd(dir.path(), "etcd-clock", "", fault);
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
    // It changed nothing: the run did not test what the workload claims.
    assert_eq!(r.code, 3, "{}", r.json);
    assert_eq!(r.json["faults"]["started"], 0, "{}", r.json["faults"]);
    let why = r.json["faults"]["missed"][0]["why"].as_str().unwrap();
    assert!(
        why.contains("reached none of its targets (n1: unreachable: etcd is a Go binary"),
        "{why}"
    );
    r.assert_nothing_left();
}

/// etcd (Go: no interposer) with `backend.monotonic_offset`: each member starts in
/// a time namespace of its own, the offset shows in its /proc, the cluster serves
/// the run as usual, and the history and the verdict say which clock was shifted.
#[test]
fn etcd_members_started_with_a_monotonic_offset_serve_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = "monotonic_offset = { n1 = \"+600s\", n2 = \"-5s\" }";
    let path = short_etcd(dir.path(), "etcd-monotonic", offsets, "");
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
    r.assert_valid();
    assert!(r.json["figures"]["critical_sections"].as_u64().unwrap() > 0);
    assert_eq!(
        r.json["figures"]["faults"], 0,
        "a start-time shift is no fault"
    );
    assert_eq!(
        r.json["figures"]["monotonic_offsets"],
        serde_json::json!([
            "n1: monotonic +600000 ms from start (time namespace)",
            "n2: monotonic -5000 ms from start (time namespace)"
        ]),
        "{}",
        r.json["figures"]
    );
    // In the history: shifted from the start, until the servers stop.
    let shift = r.first_op("clock-skew");
    assert_eq!(
        shift.value,
        serde_json::json!({"targets": ["n1"], "monotonic_offset_ms": 600000, "method": "time-namespace"})
    );
    assert_eq!(r.first_op("clock-reset").value["method"], "time-namespace");
    r.assert_nothing_left();
}

/// A 3 s run of 2 clients on etcd (2 s lease), its `[backend]` with `backend`
/// added, followed by `faults`.
fn short_etcd(
    dir: &std::path::Path,
    name: &str,
    backend: &str,
    faults: &str,
) -> std::path::PathBuf {
    let text = format!(
        "duration = \"3s\"\nresource = \"fenced\"\n\
         [backend]\nkind = \"etcd\"\nlease = \"2s\"\n{backend}\n\
         [clients]\ncount = 2\n[critical_section]\nhold = \"100ms\"\nwrites = 1\n{faults}\n"
    );
    write_workload(dir, &format!("{name}.toml"), &text)
}
