//! A run stopped by SIGTERM or Ctrl-C (SIGINT) while it holds a client paused
//! resumes and stops everything it started: no worker, no server, nothing stopped.

mod run_support;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use run_support::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn interrupt_while_a_client_is_paused(signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long-pause.toml");
    std::fs::write(
        &path,
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
    )
    .unwrap();
    let results = dir.path().join("results");
    let mut controller = lockcheck()
        .arg("run")
        .arg(&path)
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the pause to land: a process of this run in state T.
    let deadline = Instant::now() + Duration::from_secs(15);
    let started = loop {
        let procs = leftovers(&results);
        if procs.iter().any(|p| p.state == 'T') {
            break procs;
        }
        assert!(Instant::now() < deadline, "no client was paused: {procs:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(started.len() >= 3, "a server and two workers: {started:?}");
    kill(Pid::from_raw(controller.id() as i32), signal).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = controller.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the controller did not exit after {signal}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
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
    let mut controller = lockcheck()
        .arg("run")
        .arg(workload("redis-pause-unfenced.toml"))
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let history = results.join("latest/history.jsonl");
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::fs::read_to_string(&history).map_or(0, |h| h.lines().count()) < 30 {
        assert!(Instant::now() < deadline, "the run did not get going");
        std::thread::sleep(Duration::from_millis(20));
    }
    controller.kill().unwrap();
    controller.wait().unwrap();
    // Workers die with their controller (the kernel's parent-death signal).
    let deadline = Instant::now() + Duration::from_secs(5);
    let workers = || {
        leftovers(&results)
            .into_iter()
            .filter(|p| p.cmdline.contains(" worker "))
            .collect::<Vec<_>>()
    };
    while !workers().is_empty() {
        assert!(
            Instant::now() < deadline,
            "workers outlived the controller: {:?}",
            workers()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The servers are `lockcheck recover`'s to clean up; this test stops its own.
    for p in leftovers(&results) {
        let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGKILL);
    }
    // Every line written before the kill is whole: at most a final partial line.
    let h = lockcheck::history::read_jsonl(&history).unwrap();
    assert!(h.ops.len() >= 30);
}
