//! Pausing a node with the cgroup freezer (`pause-node` with `method = "freezer"`)
//! in either runtime: it stops all of a node's processes (`docker pause` for a
//! container; a cgroup of its own for a local node), which SIGSTOP to a
//! PostgreSQL's postmaster does not; a frozen node can be killed and restarted;
//! `lockcheck recover` thaws what a killed controller left frozen; and nothing of
//! a run is left: no container, network, volume, cgroup or process.

mod docker_support;
mod run_support;
use docker_support::*;
use lockcheck::history::{read_jsonl, Op};
use run_support::*;
use std::path::Path;

/// A PostgreSQL lease whose one server is paused for 2 s with `method`: the
/// run, its history, and the lock ops (acquire, renew, release) the server
/// answered `ok` while the pause lasted (well inside it: replies on their way
/// when it began, or the instant it ended, are not counted). Also how many lock
/// ops were asked for in it, so that none answered means something.
fn postgres_paused(method: &str, runtime: &str) -> (Finished, Vec<Op>, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join(format!("postgres-pause-{method}.toml"));
    std::fs::write(
        &w,
        format!(
            r#"
duration = "4s"
resource = "fenced"
allow = ["double-holder"]
[backend]
kind = "postgres-lease"
lease = "3s"
acquire_timeout = "300ms"
[clients]
count = 2
[critical_section]
hold = "200ms"
writes = 2
[[faults]]
kind = "pause-node"
nodes = "n1"
method = "{method}"
duration = "2s"
after = "1s"
"#
        ),
    )
    .unwrap();
    let r = if runtime == "docker" {
        docker_run_file(&w)
    } else {
        run(&w, &[])
    };
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    let history = read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let at = |f: &str| history.ops.iter().find(|o| o.f == f).map(|o| o.time);
    let (paused, resumed) = (at("pause").expect("paused"), at("resume").expect("resumed"));
    // Wide: on a loaded machine a reply can reach the controller late.
    const MARGIN: u64 = 300_000_000;
    let inside = |o: &&Op| o.time > paused + MARGIN && o.time + MARGIN < resumed;
    let lock_op = |o: &&Op| ["acquire", "renew", "release"].contains(&o.f.as_str());
    let answered = history
        .ops
        .iter()
        .filter(lock_op)
        .filter(inside)
        .filter(|o| o.kind == lockcheck::history::OpType::Ok)
        .count();
    let asked = history
        .ops
        .iter()
        .filter(lock_op)
        .filter(inside)
        .filter(|o| o.kind == lockcheck::history::OpType::Invoke)
        .count();
    (r, history.ops, answered, asked)
}

fn pause_method(ops: &[Op]) -> String {
    let pause = ops.iter().find(|o| o.f == "pause").unwrap();
    assert_eq!(pause.value["targets"][0], "n1", "{}", pause.value);
    pause.value["method"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_freezer_pauses_every_process_of_a_postgres_container() {
    let (r, ops, answered, asked) = postgres_paused("freezer", "docker");
    assert_eq!(pause_method(&ops), "freezer");
    assert!(asked > 0, "no lock op asked for during the pause");
    assert_eq!(answered, 0, "the paused server answered");
    assert_nothing_of_the_run(&r);
}

/// The freezer journals its cgroup; after the run it is gone.
fn assert_no_cgroup_left(dir: &Path) {
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let cgroups: Vec<String> = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["do"]["effect"] == "frozen")
        .map(|v| v["do"]["cgroup"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cgroups.len(), 1, "{journal}");
    assert!(!Path::new(&cgroups[0]).exists(), "{} left", cgroups[0]);
}

#[test]
fn the_freezer_pauses_a_local_postgres_where_sigstop_leaves_its_backends_serving() {
    if let Some(why) = lockcheck::cluster::freezer::unavailable() {
        panic!("this machine cannot freeze local nodes: {why}");
    }
    let (r, ops, answered, asked) = postgres_paused("freezer", "local");
    assert_eq!(pause_method(&ops), "freezer");
    assert!(asked > 0, "no lock op asked for during the pause");
    assert_eq!(answered, 0, "the frozen server answered");
    assert_no_cgroup_left(&r.run_dir());
    r.assert_nothing_left();
    // SIGSTOP stops the postmaster only: the sessions' backends answer on.
    let (r, ops, answered, _) = postgres_paused("sigstop", "local");
    assert_eq!(pause_method(&ops), "sigstop");
    assert!(
        answered > 0,
        "no lock op answered while the postmaster was stopped"
    );
    r.assert_nothing_left();
}

/// The cgroups of freezes a run's journal says are still in effect.
fn frozen_now(dir: &Path) -> Vec<String> {
    lockcheck::journal::pending(dir)
        .map(|p| p.effects)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(_, e)| match e {
            lockcheck::journal::Effect::Frozen { cgroup, .. } => Some(cgroup.display().to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn recover_thaws_a_local_node_frozen_by_a_controller_killed_with_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("redis-freeze-long.toml");
    std::fs::write(
        &w,
        r#"
duration = "30s"
[backend]
kind = "redis"
lease = "1s"
[clients]
count = 1
[critical_section]
hold = "100ms"
writes = 1
[[faults]]
kind = "pause-node"
nodes = "n1"
method = "freezer"
duration = "25s"
after = "300ms"
"#,
    )
    .unwrap();
    let results = tmp.path().join("results");
    let (mut controller, (dir, cgroup)) = run_until(
        &w,
        &results,
        &[],
        "never frozen",
        std::time::Duration::from_secs(20),
        // The journal names the cgroup before the server is moved into it (written
        // before the change is made): wait until the server is in it.
        |dir| {
            frozen_now(dir)
                .pop()
                .filter(|c| {
                    std::fs::read_to_string(Path::new(c).join("cgroup.procs"))
                        .is_ok_and(|p| !p.trim().is_empty())
                })
                .map(|c| (dir.to_path_buf(), c))
        },
    );
    end(&mut controller, nix::sys::signal::Signal::SIGKILL);
    let procs = std::fs::read_to_string(Path::new(&cgroup).join("cgroup.procs")).unwrap();
    assert!(!procs.trim().is_empty(), "the server stays frozen after -9");
    let out = lockcheck().arg("recover").arg(&dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("thawed"), "{said}");
    assert!(!Path::new(&cgroup).exists(), "{cgroup} left");
    assert!(frozen_now(&dir).is_empty());
    let left = leftovers(&results);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// A Redis node frozen, then killed and restarted while frozen, then the pause
/// ends: the run goes on, and nothing is left frozen.
fn frozen_then_killed(runtime: &str) -> Finished {
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("redis-freeze-kill.toml");
    std::fs::write(
        &w,
        r#"
duration = "3s"
[backend]
kind = "redis"
lease = "1s"
acquire_timeout = "300ms"
[clients]
count = 1
[critical_section]
hold = "100ms"
writes = 1
[[faults]]
kind = "pause-node"
nodes = "n1"
method = "freezer"
duration = "1500ms"
after = "500ms"
[[faults]]
kind = "kill"
nodes = "n1"
duration = "300ms"
after = "1s"
"#,
    )
    .unwrap();
    let r = if runtime == "docker" {
        docker_run_file(&w)
    } else {
        run(&w, &[])
    };
    assert!(r.code == 0 || r.code == 1, "{}\n{}", r.json, r.stderr);
    let history = read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    let order: Vec<&str> = history
        .ops
        .iter()
        .filter(|o| ["pause", "kill", "start", "resume"].contains(&o.f.as_str()))
        .map(|o| o.f.as_str())
        .collect();
    assert_eq!(order, ["pause", "kill", "start", "resume"], "{order:?}");
    r
}

#[test]
fn a_frozen_node_is_killed_and_restarted_in_either_runtime() {
    let r = frozen_then_killed("local");
    assert_no_cgroup_left(&r.run_dir());
    r.assert_nothing_left();
    assert_nothing_of_the_run(&frozen_then_killed("docker"));
}
