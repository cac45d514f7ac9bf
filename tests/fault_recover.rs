//! `lockcheck recover` after a controller killed with -9 in the middle of its
//! faults: nothing stopped, no clock skewed, no process of the run left.

mod fault_support;

use fault_support::free_port;
use lockcheck::fault::clock::{self, ClockControl};
use lockcheck::fault::journal::{self, Effect, Journal, Proc};
use lockcheck::fault::node;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The "controller" that gets killed: this test binary re-executed. It starts a
/// server and a worker as a run would, journals them, stops the worker, skews
/// the server's clock, says "ready" and waits for its end.
#[test]
#[ignore = "helper: run as a child process by the recover test"]
// Leaving its children behind, unwaited, is the point.
#[allow(clippy::zombie_processes)]
fn controller_killed_midway() {
    let Some(dir) = std::env::var_os("LOCKCHECK_RECOVER_DIR").map(PathBuf::from) else {
        return;
    };
    let journal = Journal::for_run(&dir).unwrap();
    let clock = ClockControl::create(&dir, "n1").unwrap();
    journal
        .record(Effect::ClockSkew {
            target: "n1".into(),
            file: clock.path().to_path_buf(),
        })
        .unwrap();
    let redis = Command::new("redis-server")
        .args([
            "--port",
            &free_port().to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .envs(clock.env())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    journal
        .record(Effect::Process(Proc::of("n1", redis.id() as i32).unwrap()))
        .unwrap();
    let worker = Command::new("sleep").arg("300").spawn().unwrap();
    journal
        .record(Effect::Process(
            Proc::of("client-0", worker.id() as i32).unwrap(),
        ))
        .unwrap();
    let stopped = node::stop(journal.clone(), &[("client-0".into(), worker.id() as i32)]).unwrap();
    clock.set_offset(20_000_000_000);
    println!(
        "ready {} {} {}",
        redis.id(),
        worker.id(),
        clock.path().display()
    );
    std::thread::sleep(Duration::from_secs(60));
    drop(stopped);
}

/// Gone, or a zombie waiting for init: either way no longer running.
fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !gone(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn recover(dir: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("recover")
        .arg(dir)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Should an assertion fail, the test still leaves nothing behind.
struct Cleanup<'a>(&'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let _ = journal::recover(self.0);
    }
}

#[test]
fn recover_undoes_what_a_killed_controller_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(dir.path());
    let mut controller = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "controller_killed_midway",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LOCKCHECK_RECOVER_DIR", dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(controller.stdout.take().unwrap());
    while !line.contains("ready ") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the controller ended before it was ready"
        );
    }
    let mut f = line.split_once("ready ").unwrap().1.split_whitespace();
    let redis: i32 = f.next().unwrap().parse().unwrap();
    let worker: i32 = f.next().unwrap().parse().unwrap();
    let clock_file = PathBuf::from(f.next().unwrap());

    controller.kill().unwrap(); // SIGKILL: no Drop runs
    controller.wait().unwrap();
    // What it left behind.
    assert!(journal::is_stopped(worker), "the worker is left stopped");
    assert!(
        !clock::read_file(&clock_file).unwrap().is_none(),
        "the clock is left skewed"
    );
    assert!(!gone(redis), "the server is left running");

    let report = recover(dir.path());
    let undone = report["undone"].as_array().unwrap();
    assert_eq!(undone.len(), 4, "{report}");
    assert!(
        report["warnings"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert!(
        clock::read_file(&clock_file).unwrap().is_none(),
        "clock reset"
    );
    assert!(wait_gone(redis), "server killed");
    assert!(wait_gone(worker), "worker killed");
    // The stopped worker was resumed before it was killed.
    let actions: Vec<&str> = undone
        .iter()
        .map(|u| u["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["resumed", "reset", "killed", "killed"],
        "{report}"
    );

    // A second recover has nothing to do.
    assert!(recover(dir.path())["undone"].as_array().unwrap().is_empty());
}

/// A real `lockcheck run` killed with -9 while a clock fault and a node pause are
/// in effect: `recover` resets the clocks and ends every server of the run
/// (workers die with their controller on their own).
#[test]
fn recover_after_a_run_killed_mid_fault() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.toml");
    std::fs::write(
        &path,
        r#"duration = "30s"
resource = "unfenced"

[backend]
kind = "redlock"
lease = "1s"

[clients]
count = 2

[critical_section]
hold = "100ms"
writes = 1

[[faults]]
kind = "clock"
nodes = "majority"
offset = "+20s"
after = "300ms"
duration = "20s"

[[faults]]
kind = "pause-node"
nodes = "n4"
after = "300ms"
duration = "20s"
"#,
    )
    .unwrap();
    let results = dir.path().join("results");
    let mut controller = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("run")
        .arg(&path)
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let run_dir = loop {
        let found = std::fs::read_dir(&results).ok().and_then(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.join("history.jsonl").exists() && !p.ends_with("latest"))
        });
        if let Some(d) = found {
            let h = std::fs::read_to_string(d.join("history.jsonl")).unwrap_or_default();
            if h.contains("\"clock-skew\"") && h.contains("\"pause\"") {
                break d;
            }
        }
        assert!(Instant::now() < deadline, "the faults never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _cleanup = Cleanup(&run_dir);
    controller.kill().unwrap();
    controller.wait().unwrap();

    let left = journal::pending(&run_dir).unwrap().effects;
    let servers: Vec<i32> = left
        .iter()
        .filter_map(|(_, e)| match e {
            Effect::Process(p) if p.name.starts_with('n') && p.alive() => Some(p.pid),
            _ => None,
        })
        .collect();
    assert_eq!(
        servers.len(),
        5,
        "the servers outlive a killed controller: {left:?}"
    );
    // The paused node is not left stopped: each server is a process group of its
    // own, orphaned when the controller dies, and the kernel sends a stopped
    // member of an orphaned group SIGHUP + SIGCONT (Redis ignores the SIGHUP).
    // The journal still lists the pause; recover's SIGCONT is then harmless.
    assert!(
        left.iter()
            .any(|(_, e)| matches!(e, Effect::Stopped(p) if p.name == "n4")),
        "{left:?}"
    );
    let skewed = |d: &Path| {
        std::fs::read_dir(d.join("clocks"))
            .unwrap()
            .filter(|f| {
                !clock::read_file(&f.as_ref().unwrap().path())
                    .unwrap()
                    .is_none()
            })
            .count()
    };
    assert_eq!(skewed(&run_dir), 3, "a majority of clocks left skewed");

    let report = recover(&run_dir);
    assert!(
        report["warnings"].as_array().unwrap().is_empty(),
        "{report}"
    );
    assert_eq!(skewed(&run_dir), 0, "no clock skewed: {report}");
    for pid in servers {
        assert!(wait_gone(pid), "server {pid} ended: {report}");
    }
}
