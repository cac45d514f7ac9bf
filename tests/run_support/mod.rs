//! Shared by the `run_*` tests: run the real `lockcheck` binary on a workload with
//! its results in a temp dir, read its JSON, and look through /proc for anything the
//! run left behind (a process whose command line or open files point into the run's
//! directory: the servers and the workers).
#![allow(dead_code)] // each test binary uses its own part of this module

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

    pub fn run_dir(&self) -> PathBuf {
        PathBuf::from(
            self.json["run_dir"]
                .as_str()
                .expect("run_dir in the report"),
        )
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

/// `lockcheck run WORKLOAD --json --results TMP ARGS...`
pub fn run(workload: &Path, args: &[&str]) -> Finished {
    let results = tempfile::tempdir().unwrap();
    let Output {
        status,
        stdout,
        stderr,
    } = lockcheck()
        .arg("run")
        .arg(workload)
        .arg("--json")
        .arg("--results")
        .arg(results.path())
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let stdout = String::from_utf8_lossy(&stdout);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}\nstderr: {stderr}"));
    Finished {
        code: status.code().unwrap_or(-1),
        json,
        stderr,
        results,
    }
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
    let path = dir.join(format!("{kind}-no-fault.toml"));
    std::fs::write(&path, text).unwrap();
    path
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
