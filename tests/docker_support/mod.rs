//! Shared by the docker runtime's tests: the host image (built once per test
//! binary), a run under `--runtime docker`, and the check that nothing of a run
//! is left on the Docker Engine (asked through the docker CLI, as a user would).
#![allow(dead_code)] // each test binary uses its own part of this module

use crate::run_support::{run, workload, Finished};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

pub const IMAGE: &str = "lockcheck/host:latest";

/// `lockcheck image build`, once per test binary (it is idempotent anyway).
pub fn image() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = crate::run_support::lockcheck()
            .args(["image", "build"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "image build: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// A workload of workloads/ run with its servers in containers of the host image.
pub fn docker_run(workload_name: &str) -> Finished {
    docker_run_file(&workload(workload_name))
}

pub fn docker_run_file(workload: &Path) -> Finished {
    image();
    run(workload, &["--runtime", "docker", "--image", IMAGE])
}

/// The run id the journal names for the run's Docker objects.
pub fn run_id(dir: &Path) -> String {
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| Some(v["do"]["run"].as_str()?.to_string()))
        .expect("the journal names the run's docker objects")
}

/// What `docker <what> ls` lists with the run's label.
pub fn labelled(what: &str, run: &str) -> Vec<String> {
    let mut cmd = Command::new("docker");
    cmd.arg(what).arg("ls").arg("-q");
    if what == "container" {
        cmd.arg("-a");
    }
    let out = cmd
        .args(["--filter", &format!("label=lockcheck.run={run}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// No container (one-off setups included), network or volume of the run, and no
/// process of it.
pub fn assert_nothing_of_the_run(r: &Finished) {
    let run = run_id(&r.run_dir());
    for what in ["container", "network", "volume"] {
        assert_eq!(
            labelled(what, &run),
            Vec::<String>::new(),
            "{what}s of {run}"
        );
    }
    r.assert_nothing_left();
}

/// The known break (two holders, and `stale`: the stale write applied, or the
/// writes of two holders interleaved where there are no tokens), from servers
/// that did run in containers (their logs were collected), and nothing left.
pub fn assert_flagged(r: &Finished, stale: &str) {
    assert_eq!(r.code, 1, "anomalies exit 1: {}\n{}", r.json, r.stderr);
    for kind in ["double-holder", stale] {
        assert!(
            !r.anomalies(kind).is_empty(),
            "no {kind} in {}",
            r.json["anomalies"]
        );
    }
    let log = std::fs::read_to_string(r.run_dir().join("nodes/n1.log")).unwrap();
    assert!(!log.is_empty());
    assert_nothing_of_the_run(r);
}

/// Fenced by the backend's token: valid, the fence turned stale writes away.
pub fn assert_safe(r: &Finished) {
    assert_eq!(r.code, 0, "valid exits 0: {}\n{}", r.json, r.stderr);
    assert!(r.anomalies("stale-write-accepted").is_empty());
    assert!(
        r.json["figures"]["writes_rejected_by_fence"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "the pause never produced a stale write: {}",
        r.json["figures"]
    );
    assert_nothing_of_the_run(r);
}
