//! A run stopped by SIGTERM or Ctrl-C (SIGINT) while it holds a client paused
//! resumes and stops everything it started: no worker, no server, nothing stopped.

mod run_support;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use run_support::*;
use std::time::Duration;

fn interrupt_while_a_client_is_paused(signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_workload(
        dir.path(),
        "long-pause.toml",
        r#"duration = "30s"
resource = "unfenced"

[backend]
kind = "redis"
lease = "1s"

[clients]
count = 2

[critical_section]
hold = "100ms"
writes = 1

[[faults]]
kind = "pause"
target = "client-0"
after = "300ms"
duration = "20s"
"#,
    );
    let results = dir.path().join("results");
    // Until the pause lands: a process of this run in state T.
    let (mut controller, started) = run_until(
        &path,
        &results,
        &[],
        "no client was paused",
        Duration::from_secs(15),
        |_| {
            let procs = leftovers(&results);
            procs.iter().any(|p| p.state == 'T').then_some(procs)
        },
    );
    assert!(started.len() >= 3, "a server and two workers: {started:?}");
    let status = end(&mut controller, signal);
    let stderr = std::io::read_to_string(controller.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left = leftovers(&results);
    assert!(left.is_empty(), "left behind after {signal}: {left:?}");
    // The history so far is on disk and readable.
    let history = lockcheck::history::read_jsonl(&results.join("latest/history.jsonl")).unwrap();
    assert!(history.ops.iter().any(|o| o.f == "pause"));
}

#[test]
fn sigterm_mid_run_leaves_nothing_running_or_stopped() {
    interrupt_while_a_client_is_paused(Signal::SIGTERM);
}

#[test]
fn ctrl_c_mid_run_leaves_nothing_running_or_stopped() {
    interrupt_while_a_client_is_paused(Signal::SIGINT);
}

#[test]
fn a_controller_killed_with_sigkill_leaves_a_readable_history_and_no_worker() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let history = results.join("latest/history.jsonl");
    let (mut controller, ()) = run_until(
        &workload("redis-pause-unfenced.toml"),
        &results,
        &[],
        "the run did not get going",
        Duration::from_secs(15),
        |_| {
            let lines = std::fs::read_to_string(&history).map_or(0, |h| h.lines().count());
            (lines >= 30).then_some(())
        },
    );
    end(&mut controller, Signal::SIGKILL);
    // Workers die with their controller (the kernel's parent-death signal).
    wait_no_workers(&results);
    // The servers are `lockcheck recover`'s to clean up; this test stops its own.
    for p in leftovers(&results) {
        let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGKILL);
    }
    // Every line written before the kill is whole: at most a final partial line.
    let h = lockcheck::history::read_jsonl(&history).unwrap();
    assert!(h.ops.len() >= 30);
}
