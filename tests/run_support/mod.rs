//! Shared by the `run_*` tests: run the real `lockcheck` binary on a workload with
//! its results in a temp dir, read its JSON, and look through /proc for anything the
//! run left behind (a process whose command line or open files point into the run's
//! directory: the servers and the workers).
#![allow(dead_code)] // each test binary uses its own part of this module

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn workload(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join(name)
}

pub struct Finished {
    pub code: i32,
    pub json: Value,
    pub stderr: String,
    pub results: tempfile::TempDir,
}

impl Finished {
    /// The anomalies of one kind, as `verdict.json` lists them.
    pub fn anomalies(&self, kind: &str) -> Vec<&Value> {
        self.json["anomalies"]
            .as_array()
            .map(|a| a.iter().filter(|x| x["kind"] == kind).collect())
            .unwrap_or_default()
    }

    /// `lockcheck replay RUN_DIR --runs 2 --jobs 2`, which must bring the break
    /// back (exit 1): its stdout, and the workload it replayed (`replay/replay.toml`).
    pub fn replayed_twice(&self) -> (String, toml::Table) {
        self.replayed_twice_by(lockcheck())
    }

    /// [`Finished::replayed_twice`] by this `lockcheck` command (its environment).
    pub fn replayed_twice_by(&self, mut lockcheck: Command) -> (String, toml::Table) {
        let out = lockcheck
            .args(["replay", "--runs", "2", "--jobs", "2"])
            .arg(self.run_dir())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan = self.run_dir().join("replay").join("replay.toml");
        let plan = toml::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
        (stdout, plan)
    }

    pub fn run_dir(&self) -> PathBuf {
        PathBuf::from(
            self.json["run_dir"]
                .as_str()
                .expect("run_dir in the report"),
        )
    }

    /// The run's history.jsonl, as text.
    pub fn history(&self) -> String {
        std::fs::read_to_string(self.run_dir().join("history.jsonl")).unwrap()
    }

    /// The first op of the run's history whose `f` is `f` (a fault's start, say).
    pub fn first_op(&self, f: &str) -> lockcheck::history::Op {
        let history =
            lockcheck::history::read_jsonl(&self.run_dir().join("history.jsonl")).unwrap();
        history
            .ops
            .into_iter()
            .find(|o| o.f == f)
            .unwrap_or_else(|| panic!("no {f} in the history"))
    }

    /// Exited 1 (anomalies), with at least one anomaly of each of `kinds`.
    pub fn assert_flagged(&self, kinds: &[&str]) {
        assert_eq!(
            self.code, 1,
            "anomalies exit 1: {}\n{}",
            self.json, self.stderr
        );
        for kind in kinds {
            assert!(
                !self.anomalies(kind).is_empty(),
                "no {kind}: {}",
                self.json["anomalies"]
            );
        }
    }

    /// Exited 0 (valid), and the resource applied no stale write.
    pub fn assert_valid(&self) {
        assert_eq!(
            self.code, 0,
            "valid exits 0: {}\n{}",
            self.json, self.stderr
        );
        assert!(
            self.anomalies("stale-write-accepted").is_empty(),
            "{}",
            self.json["anomalies"]
        );
    }

    /// Valid, and the fence did turn writes away: a fenced run whose fence was
    /// never asked would pass `assert_valid` alone.
    pub fn assert_valid_and_fenced(&self) {
        self.assert_valid();
        assert!(
            self.json["figures"]["writes_rejected_by_fence"]
                .as_u64()
                .unwrap()
                > 0,
            "the fence turned no write away: {}",
            self.json["figures"]
        );
    }

    /// Valid and every planned fault started; exit 0, or 3 where the run saw no
    /// grant after its first fault (`faults.unseen`: an etcd acquire in doubt at a
    /// leader's pause or kill keeps its key while each new leader renews its
    /// lease). For tests of a fault's mechanics, not of the lock under it.
    pub fn assert_valid_faults_started(&self) {
        let unseen = self.json["faults"]["unseen"].is_string();
        assert!(
            self.code == 0 && !unseen || self.code == 3 && unseen,
            "valid exits 0 (3 if it saw nothing of its faults): {}\n{}",
            self.json,
            self.stderr
        );
        assert_eq!(self.json["valid"], true, "{}", self.json);
        assert_eq!(
            self.json["faults"]["missed"],
            serde_json::json!([]),
            "{}",
            self.json
        );
    }

    /// Nothing of this run may remain: no server, no worker, none stopped.
    pub fn assert_nothing_left(&self) {
        let left = leftovers(self.results.path());
        assert!(left.is_empty(), "processes left behind: {left:?}");
    }
}

pub fn lockcheck() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
}

/// `lockcheck ARGS...`, which must succeed (its stderr shown if not); its stdout.
pub fn lockcheck_ok<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Vec<u8> {
    let out = lockcheck().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `lockcheck run WORKLOAD ARGS...` through `lockcheck` (a command with what the
/// test adds to it), to its end: its exit code and stderr, for a run refused or
/// failed before it starts.
pub fn run_refused(
    mut lockcheck: Command,
    workload: &Path,
    args: &[&str],
) -> (Option<i32>, String) {
    let out = lockcheck
        .arg("run")
        .arg(workload)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `lockcheck run WORKLOAD --json --results TMP ARGS...`
pub fn run(workload: &Path, args: &[&str]) -> Finished {
    start_json(workload, args).finish()
}

/// A `lockcheck run --json` going on, for a test that looks at it mid-run.
pub struct Running {
    pub child: Child,
    pub results: tempfile::TempDir,
}

/// Starts `lockcheck run WORKLOAD --json --results TMP ARGS...`.
pub fn start_json(workload: &Path, args: &[&str]) -> Running {
    start_json_with(lockcheck(), workload, args)
}

/// [`start_json`] through `lockcheck`, a command with what the test adds to it
/// (the ssh tests' configuration in its environment).
pub fn start_json_with(mut lockcheck: Command, workload: &Path, args: &[&str]) -> Running {
    let results = tempfile::tempdir().unwrap();
    let child = lockcheck
        .arg("run")
        .arg(workload)
        .arg("--json")
        .arg("--results")
        .arg(results.path())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running { child, results }
}

impl Running {
    /// The run directory, once the run has made it.
    pub fn run_dir(&self) -> Option<PathBuf> {
        std::fs::canonicalize(self.results.path().join("latest")).ok()
    }

    /// Waits for the end of the run and reads its JSON.
    pub fn finish(self) -> Finished {
        let Output {
            status,
            stdout,
            stderr,
        } = self.child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        let stdout = String::from_utf8_lossy(&stdout);
        let json = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}\nstderr: {stderr}"));
        Finished {
            code: status.code().unwrap_or(-1),
            json,
            stderr,
            results: self.results,
        }
    }
}

/// Writes workload `text` into `dir` as `name`.
pub fn write_workload(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `lockcheck run WORKLOAD --results RESULTS ARGS...` in the background, for a
/// test that signals or kills it mid-run; its stderr piped for the test to read.
pub fn start_run(workload: &Path, results: &Path, args: &[&str]) -> Child {
    lockcheck()
        .arg("run")
        .arg(workload)
        .arg("--results")
        .arg(results)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// [`start_run`], then waits until `ready` finds what the test waits for in the
/// run directory (every 20 ms, up to `within`): the controller, and what `ready`
/// found. Should it never come, the controller is killed and the test fails
/// saying `what` never came.
// The controller is the caller's to end and wait for (with `end`).
#[allow(clippy::zombie_processes)]
pub fn run_until<T>(
    workload: &Path,
    results: &Path,
    args: &[&str],
    what: &str,
    within: Duration,
    mut ready: impl FnMut(&Path) -> Option<T>,
) -> (Child, T) {
    let mut controller = start_run(workload, results, args);
    let deadline = Instant::now() + within;
    loop {
        let run_dir = std::fs::canonicalize(results.join("latest")).ok();
        if let Some(found) = run_dir.as_deref().and_then(&mut ready) {
            return (controller, found);
        }
        if Instant::now() >= deadline {
            let _ = controller.kill();
            let _ = controller.wait();
            panic!("{what} (waited {within:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` to a controller and waits (up to 15 s) for its exit: after
/// SIGKILL nothing of it runs (no Drop, no cleanup), after SIGTERM or SIGINT it
/// has cleaned up.
pub fn end(controller: &mut Child, signal: nix::sys::signal::Signal) -> std::process::ExitStatus {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(controller.id() as i32), signal).unwrap();
    wait_for(
        &format!("the controller did not exit after {signal}"),
        Duration::from_secs(15),
        || controller.try_wait().unwrap(),
    )
}

/// Asks `check` every 20 ms until it gives a value; fails the test, saying what
/// never came, after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} (waited {timeout:?})");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no worker of the runs under `dir` is left: they die with their
/// controller (the kernel's parent-death SIGKILL, which ends a stopped one too).
pub fn wait_no_workers(dir: &Path) {
    wait_for(
        "workers outlived the controller",
        Duration::from_secs(5),
        || {
            let workers = leftovers(dir)
                .into_iter()
                .filter(|p| p.cmdline.contains(" worker "))
                .count();
            (workers == 0).then_some(())
        },
    );
}

/// Runs shipped workload `name`, which shows its backend's known break: exit 1
/// with at least one anomaly of each of `kinds`, and nothing left behind.
pub fn shows_the_break(name: &str, kinds: &[&str]) -> Finished {
    let r = run(&workload(name), &[]);
    r.assert_flagged(kinds);
    r.assert_nothing_left();
    r
}

/// Runs shipped workload `name`, fenced by the backend's token: valid, the fence
/// did turn stale writes away, and nothing is left behind.
pub fn fenced_is_safe(name: &str) -> Finished {
    let r = run(&workload(name), &[]);
    r.assert_valid_and_fenced();
    r.assert_nothing_left();
    r
}

/// A short run of `kind` without faults: valid, no anomaly at all (not even an
/// allowed one), critical sections completed, nothing left behind.
pub fn valid_without_faults(kind: &str, fenced: bool) -> Finished {
    valid_without_faults_on(kind, fenced, None)
}

/// [`valid_without_faults`] on `nodes` server nodes instead of the backend's default.
pub fn valid_without_faults_on(kind: &str, fenced: bool, nodes: Option<usize>) -> Finished {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&no_fault_workload_on(dir.path(), kind, fenced, nodes), &[]);
    assert_eq!(r.code, 0, "{kind}: {}\n{}", r.json, r.stderr);
    assert!(r.json["anomalies"].as_array().unwrap().is_empty());
    assert!(r.json["figures"]["critical_sections"].as_u64().unwrap() > 3);
    r.assert_nothing_left();
    r
}

/// Writes a short workload without faults for `kind` into `dir`; `fenced` where
/// the backend hands out a token (the resource then checks it).
pub fn no_fault_workload(dir: &Path, kind: &str, fenced: bool) -> PathBuf {
    no_fault_workload_on(dir, kind, fenced, None)
}

/// [`no_fault_workload`] on `nodes` server nodes instead of the backend's default.
pub fn no_fault_workload_on(dir: &Path, kind: &str, fenced: bool, nodes: Option<usize>) -> PathBuf {
    let nodes = nodes.map(|n| format!("nodes = {n}\n")).unwrap_or_default();
    let (fencing, resource) = if fenced {
        ("true", "fenced")
    } else {
        ("false", "unfenced")
    };
    let text = format!(
        r#"duration = "3s"
resource = "{resource}"

[backend]
kind = "{kind}"
{nodes}lease = "2s"
fencing_token = {fencing}
acquire_timeout = "1s"

[clients]
count = 3

[critical_section]
hold = "100ms"
writes = 2
think = "20ms"
"#
    );
    write_workload(dir, &format!("{kind}-no-fault.toml"), &text)
}

/// A process and its state letter (`T` = stopped) and command line.
#[derive(Debug)]
pub struct Proc {
    pub pid: u32,
    pub state: char,
    pub cmdline: String,
}

/// Every process whose command line or open files mention `dir`.
pub fn leftovers(dir: &Path) -> Vec<Proc> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let base = e.path();
        let cmdline = std::fs::read(base.join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let mut mentions = cmdline.contains(&needle);
        // An adapter program (`[client]`) has the run directory in its environment.
        if !mentions {
            mentions = std::fs::read(base.join("environ"))
                .map(|b| String::from_utf8_lossy(&b).contains(&needle))
                .unwrap_or(false);
        }
        if !mentions {
            if let Ok(fds) = std::fs::read_dir(base.join("fd")) {
                mentions = fds.flatten().any(|fd| {
                    std::fs::read_link(fd.path())
                        .map(|l| l.to_string_lossy().contains(&needle))
                        .unwrap_or(false)
                });
            }
        }
        if !mentions || pid == std::process::id() {
            continue;
        }
        let state = std::fs::read_to_string(base.join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()))
            .unwrap_or('?');
        // A zombie has exited; only its parent's wait is missing.
        if state != 'Z' {
            found.push(Proc {
                pid,
                state,
                cmdline,
            });
        }
    }
    found
}

/// A child process of a test that talks line by line: `lockcheck-test-helper
/// ROLE ...` (src/bin/lockcheck-test-helper.rs), or any command. Its stdout is
/// read on a thread of its own, so that a child that hangs fails the test with
/// what it waited for instead of hanging it; killed (resumed first, should it
/// be stopped) and waited for on drop.
pub struct Helper {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

/// How long a helper may take to answer, on a loaded machine: only a hang takes longer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(60);

impl Helper {
    /// `lockcheck-test-helper ROLE`, to add arguments and environment to.
    pub fn command(role: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lockcheck-test-helper"));
        cmd.arg(role);
        cmd
    }

    /// Starts `cmd` with its stdin and stdout piped to the test.
    pub fn spawn(mut cmd: Command) -> Helper {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Helper {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The rest of its next output line that starts with `prefix` (earlier lines
    /// skipped); fails the test if it ends, or says no such line `within`.
    pub fn expect(&mut self, prefix: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.to_string();
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no {prefix:?} line from the helper within {within:?}")
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the helper ended before a {prefix:?} line")
                }
            }
        }
    }

    /// Sends `line`, and returns its answer: the next line starting with `prefix`.
    pub fn ask(&mut self, line: &str, prefix: &str) -> String {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("the helper's stdin is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        self.expect(prefix, ANSWER_WITHIN)
    }

    /// SIGKILL, and its end waited for: nothing of the helper runs after this.
    pub fn kill(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGCONT,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.kill();
    }
}
