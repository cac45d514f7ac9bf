//! `lockcheck audit`: one short audit end to end against real Redis (the known
//! break flagged, its fenced twin clean, the scorecard files linking each run's
//! report), Ctrl-C stopping every run in flight, the battery this machine's
//! binaries give (etcd's Go server takes no live clock fault), and the budget and
//! usage exits, which start no server.

mod run_support;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use run_support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

fn audit(results: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = lockcheck()
        .arg("audit")
        .args(args)
        .arg("--json")
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), json, stderr)
}

fn scenario<'a>(card: &'a Value, name: &str) -> &'a Value {
    card["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scenario"] == name)
        .unwrap_or_else(|| panic!("no scenario {name} in {card}"))
}

#[test]
fn a_short_redis_audit_flags_the_pause_and_clears_its_fenced_twin() {
    let dir = tempfile::tempdir().unwrap();
    let (code, card, stderr) = audit(
        dir.path(),
        &[
            "--backend",
            "redis",
            "--scenarios",
            "holder-pause",
            "--runs",
            "1",
            "--jobs",
            "3",
            "--expect",
            "safe-with-fencing",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}\n{card:#}");
    assert_eq!(card["verdict"], "safe-with-fencing");
    let unfenced = scenario(&card, "holder-pause-unfenced");
    assert_eq!(
        (unfenced["flagged"].as_u64(), unfenced["counted"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        unfenced["zombie_window_ms"]["p50"].as_f64().unwrap() > 0.0,
        "{unfenced:#}"
    );
    assert!(unfenced["median_first_anomaly_s"].as_f64().is_some());
    // 1 of 1: the interval is Wilson's [0.21, 1].
    assert!((unfenced["interval_95"]["low"].as_f64().unwrap() - 0.2065).abs() < 1e-3);
    let fenced = scenario(&card, "holder-pause-fenced");
    assert_eq!(
        (fenced["flagged"].as_u64(), fenced["counted"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(fenced["stale_writes_accepted"], 0);
    assert!(
        fenced["writes_rejected_by_fence"].as_u64().unwrap() > 0,
        "{fenced:#}"
    );
    // Progress: each run's end, with the scenario, run k/N, flagged so far, time left.
    assert!(
        stderr.contains("holder-pause-unfenced run 1/1: flagged"),
        "{stderr}"
    );
    assert!(
        stderr.contains("flagged so far 1/1") && stderr.contains(" left"),
        "{stderr}"
    );
    // The files: JSON, JUnit (the flagged scenario fails), and the page linking
    // every run's report by a path relative to the audit's directory.
    let audit_dir = Path::new(card["dir"].as_str().unwrap());
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(audit_dir.join("audit.json")).unwrap())
            .unwrap();
    assert_eq!(json["verdict"], "safe-with-fencing");
    let junit = std::fs::read_to_string(audit_dir.join("audit.xml")).unwrap();
    let failures = junit.matches("<failure ").count();
    assert!(
        junit.contains(&format!("failures=\"{failures}\"")),
        "{junit}"
    );
    assert!(
        junit.contains("message=\"holder-pause-unfenced: flagged 1/1"),
        "{junit}"
    );
    assert!(!junit.contains("message=\"holder-pause-fenced:"), "{junit}");
    let html = std::fs::read_to_string(audit_dir.join("audit.html")).unwrap();
    let links: Vec<&str> = html
        .split("href=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert_eq!(links.len(), 3, "{html}");
    for link in links {
        assert!(
            link.starts_with("runs/") && link.ends_with("/report.html"),
            "{link}"
        );
        assert!(audit_dir.join(link).is_file(), "{link}");
        // The servers' data goes once the run is read back; its logs stay.
        let run_dir = audit_dir.join(link).parent().unwrap().to_path_buf();
        assert!(!run_dir.join("data").exists(), "{}", run_dir.display());
        assert!(run_dir.join("nodes").is_dir(), "{}", run_dir.display());
    }
    assert!(leftovers(audit_dir).is_empty());
}

#[test]
fn ctrl_c_stops_every_run_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let mut child = lockcheck()
        .args([
            "audit",
            "--backend",
            "redis",
            "--scenarios",
            "holder-pause",
            "--jobs",
            "2",
        ])
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until both first runs have a paused client.
    wait_for(
        "two runs with a paused client",
        Duration::from_secs(20),
        || {
            let paused = leftovers(&results)
                .iter()
                .filter(|p| p.state == 'T')
                .count();
            (paused >= 2).then_some(())
        },
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    let left = leftovers(&results);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_budget_too_small_for_any_run_exits_3_and_says_what_was_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (code, card, stderr) = audit(dir.path(), &["--backend", "etcd", "--budget", "1s"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("never ran to a verdict"), "{stderr}");
    assert_eq!(card["complete"], false);
    // Not one run checked: nothing is known, and the verdict says so rather than
    // "no break found".
    assert_eq!(card["verdict"], "inconclusive", "{card}");
    let left = card["left_out"].as_array().unwrap();
    assert_eq!(left.len(), card["scenarios"].as_array().unwrap().len());
    assert_eq!(left[0]["runs"].as_array().unwrap().len(), 10);
    // What this machine's etcd binary allows: no live clock fault on a Go server.
    let na = card["not_applicable"].as_array().unwrap();
    let clock = na
        .iter()
        .find(|n| n["scenario"] == "clock-jump-majority")
        .unwrap();
    assert!(
        clock["why"].as_str().unwrap().contains("Go binary"),
        "{clock}"
    );
    assert!(card["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["scenario"] == "leader-isolated-fenced"));
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--backend", "nope"][..],
        &["--backend", "redis", "--runs", "0"],
        &["--backend", "redis", "--budget", "0s"],
        &["--backend", "redis", "--jobs", "0"],
        &["--backend", "redis", "--scenarios", "holder-pause,nope"],
        &["--backend", "redis", "--expect", "maybe"],
        &["--backend", "redis", "--scenarios", "leader-isolated"],
    ] {
        let (code, _, stderr) = audit(dir.path(), args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
    }
}
