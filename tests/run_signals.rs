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
