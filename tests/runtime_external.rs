//! The external runtime: servers lockcheck did not start. The test starts a
//! redis-server itself (a free loopback port, a temp dir, stopped on drop) and points
//! a workload at it: the paused holder is flagged as with lockcheck's own servers,
//! the server outlives the run untouched, and a fault that needs the server's
//! process is refused at validation, naming the fault and why.

mod run_support;
use run_support::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server this test owns, not lockcheck.
struct Redis {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis {
            child,
            addr,
            _dir: dir,
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `workloads/<name>` with `runtime = "external"` and the endpoints added.
fn external(dir: &Path, name: &str, endpoints: &str, extra: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(workload(name)).unwrap();
    let text = format!("runtime = \"external\"\n{text}").replace(
        "[backend]\n",
        &format!("[backend]\nendpoints = [{endpoints}]\n"),
    ) + extra;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_paused_holder_against_a_redis_lockcheck_did_not_start_is_flagged() {
    let mut redis = Redis::start();
    let tmp = tempfile::tempdir().unwrap();
    let w = external(
        tmp.path(),
        "redis-pause-unfenced.toml",
        &format!("\"{}\"", redis.addr),
        "",
    );
    let r = run(&w, &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    // Not ours: it serves on after the run, and it wrote no node log of the run.
    assert!(redis.alive(), "lockcheck stopped a server it did not start");
    assert!(!r.run_dir().join("nodes/n1.log").exists());
    r.assert_nothing_left();
}

#[test]
fn the_fenced_workload_against_an_external_redis_is_safe() {
    let redis = Redis::start();
    let tmp = tempfile::tempdir().unwrap();
    let w = external(
        tmp.path(),
        "redis-pause-fenced.toml",
        &format!("\"{}\"", redis.addr),
        "",
    );
    let r = run(&w, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    r.assert_nothing_left();
}

#[test]
fn faults_that_need_the_servers_are_refused_naming_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let kill = "\n[[faults]]\nkind = \"kill\"\nnodes = \"one\"\nduration = \"1s\"\n";
    let w = external(
        tmp.path(),
        "redis-pause-unfenced.toml",
        "\"127.0.0.1:1\"",
        kill,
    );
    let out = lockcheck().arg("run").arg(&w).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("faults[1].kind: kill is unavailable under the external runtime")
            && stderr.contains("did not start these servers"),
        "{stderr}"
    );
    // --runtime external on a workload without endpoints says what is missing.
    let out = lockcheck()
        .arg("run")
        .arg(workload("redis-pause-unfenced.toml"))
        .args(["--runtime", "external"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("backend.endpoints"), "{stderr}");
}
