//! `kind = "disk-full"` against real servers: what a server does when its data
//! disk has no byte left (each node's data on a tmpfs lockcheck mounts, filled by
//! the fault to ENOSPC and freed at its end).
//!
//! - Redis with `appendfsync always` writes on into the page its AOF already
//!   holds, then exits at the first write that needs a new one; restarted once
//!   the space is back, it replays its AOF: tokens go on above every one before.
//! - Redis without persistence never writes its disk: nothing changes.
//! - etcd's leader exits at the first commit its database file cannot grow for
//!   ("cannot commit tx ... no space left on device"); the others elect a leader
//!   and go on granting.
//!
//! None grants a lock twice. Every run leaves no mount, no filler, no process.

mod run_support;

use lockcheck::history::{read_jsonl, Op};
use run_support::{run, workload, write_workload, Finished};
use serde_json::Value;

/// The run's nemesis records of the disk: its `disk-full` and `disk-free`.
fn disk_ops(r: &Finished) -> (Op, Op) {
    (r.first_op("disk-full"), r.first_op("disk-free"))
}

/// The tokens granted before `at` (a history index) and after it.
fn tokens_around(r: &Finished, at: u64) -> (Vec<u64>, Vec<u64>) {
    let history = read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let granted = |after: bool| -> Vec<u64> {
        history
            .ops
            .iter()
            .filter(|o| o.f == "acquire" && (o.index > at) == after)
            .filter_map(|o| o.token())
            .collect()
    };
    (granted(false), granted(true))
}

/// No tmpfs of the run left mounted, no filler left in its data.
fn assert_no_disk_left(r: &Finished) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = r.results.path().to_string_lossy().into_owned();
    assert!(
        !mounts.lines().any(|l| l.contains(&dir)),
        "a mount of the run is left: {mounts}"
    );
    r.assert_nothing_left();
}

/// The log of node `node`, as the run kept it.
fn log(r: &Finished, node: &str) -> String {
    std::fs::read_to_string(r.run_dir().join("nodes").join(format!("{node}.log"))).unwrap()
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect()
}

#[test]
fn redis_with_aof_always_exits_on_a_full_disk_and_restarts_with_every_token() {
    let r = run(&workload("redis-disk-full-aof.toml"), &[]);
    r.assert_valid();
    let (full, free) = disk_ops(&r);
    assert!(
        full.value["filled_bytes"]["n1"].as_u64().unwrap() > 0,
        "{full:?}"
    );
    // It wrote into its AOF's last page until that was full, then exited: how
    // long that takes depends on the load (4.4 s in one measured run); the fault
    // lasts 8 s.
    assert_eq!(
        names(&free.value["exited"]),
        ["n1"],
        "redis outlived its full disk: {free:?}\n{}",
        log(&r, "n1")
    );
    assert_eq!(names(&free.value["restarted"]), ["n1"], "{free:?}");
    assert!(
        log(&r, "n1").contains("Can't recover from AOF write error"),
        "{}",
        log(&r, "n1")
    );
    let (before, after) = tokens_around(&r, free.index);
    assert!(
        !before.is_empty() && !after.is_empty(),
        "{before:?} {after:?}"
    );
    assert!(
        after.iter().min() > before.iter().max(),
        "tokens after the restart {after:?} above those before {before:?}"
    );
    assert_no_disk_left(&r);
}

#[test]
fn redis_without_persistence_never_notices_a_full_disk() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(workload("redis-disk-full-aof.toml"))
        .unwrap()
        .replace("persistence = \"aof-always\"\n", "");
    let path = write_workload(dir.path(), "plain.toml", &text);
    let r = run(&path, &[]);
    r.assert_valid();
    let (full, free) = disk_ops(&r);
    assert_eq!(names(&free.value["exited"]), Vec::<&str>::new(), "{free:?}");
    let history = read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let during = history
        .ops
        .iter()
        .filter(|o| o.f == "acquire" && o.token().is_some())
        .filter(|o| o.index > full.index && o.index < free.index)
        .count();
    assert!(during > 0, "no grant while the disk was full");
    assert_no_disk_left(&r);
}

#[test]
fn the_etcd_leader_exits_on_a_full_disk_and_the_others_grant_on() {
    let dir = tempfile::tempdir().unwrap();
    let text = "duration = \"16s\"\nseed = 1\nresource = \"fenced\"\n\
                [backend]\nkind = \"etcd\"\nlease = \"2s\"\nacquire_timeout = \"1s\"\n\
                [clients]\ncount = 3\n\
                [critical_section]\nhold = \"100ms\"\nwrites = 1\nthink = \"10ms\"\n\
                [[faults]]\nkind = \"disk-full\"\nnodes = \"primary\"\nsize_mb = 128\n\
                after = \"2s\"\nduration = \"8s\"\n";
    let path = write_workload(dir.path(), "etcd-disk-full.toml", text);
    let r = run(&path, &[]);
    r.assert_valid_faults_started();
    let (full, free) = disk_ops(&r);
    let leader = names(&full.value["targets"])[0].to_string();
    assert_eq!(
        names(&free.value["exited"]),
        [leader.as_str()],
        "the leader outlived its full disk: {free:?}\n{}",
        log(&r, &leader)
    );
    assert!(
        log(&r, &leader).contains("no space left on device"),
        "{}",
        log(&r, &leader)
    );
    let (before, after) = tokens_around(&r, full.index);
    assert!(!before.is_empty(), "no grant before the fault");
    assert!(
        after.iter().min() > before.iter().max(),
        "tokens after {after:?} above those before {before:?}"
    );
    assert_no_disk_left(&r);
}

/// A node wiped by a kill keeps its disk: the wipe empties the data directory,
/// the tmpfs mounted on it stays (removing the directory itself failed with
/// EBUSY, and the run ended an environment error).
#[test]
fn a_wiped_restart_empties_the_disk_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let text = "duration = \"8s\"\nseed = 1\nresource = \"unfenced\"\n\
                [backend]\nkind = \"redis\"\nlease = \"2s\"\nacquire_timeout = \"500ms\"\n\
                [clients]\ncount = 2\n\
                [critical_section]\nhold = \"100ms\"\nwrites = 1\n\
                [[faults]]\nkind = \"disk-full\"\nnodes = \"n1\"\nsize_mb = 16\n\
                after = \"1s\"\nduration = \"1s\"\n\
                [[faults]]\nkind = \"kill\"\nnodes = \"n1\"\nwipe = true\n\
                after = \"3s\"\nduration = \"300ms\"\n";
    let path = write_workload(dir.path(), "wiped.toml", text);
    let r = run(&path, &[]);
    // A wiped Redis starts its token counter over: flagged, as redis-kill-restart is.
    assert!(
        r.code == 0 || r.code == 1,
        "exit {}: {}\n{}",
        r.code,
        r.json,
        r.stderr
    );
    assert_eq!(r.first_op("kill").value["wipe"], true);
    assert!(r.first_op("start").index > r.first_op("kill").index);
    assert_no_disk_left(&r);
}
