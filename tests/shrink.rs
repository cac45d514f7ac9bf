//! `lockcheck shrink` and `replay` against real Redis: a noisy many-client run
//! that broke the lock is cut down to the fault that broke it, and what comes out
//! is an ordinary workload that breaks the lock again; a valid run is refused.

mod run_support;

use run_support::{lockcheck, run, write_workload};
use std::path::Path;

/// Four clients, a holder paused past its lease (the break), and a random
/// client paused briefly three times (noise the break does not need).
const NOISY: &str = r#"
duration = "5s"
seed = 3
resource = "unfenced"

[backend]
kind = "redis"
lease = "1s"
acquire_timeout = "500ms"

[clients]
count = 4

[critical_section]
hold = "300ms"
writes = 3
think = "50ms"

[[faults]]
kind = "pause"
target = "random"
duration = "200ms"
after = "500ms"
interval = "1500ms"

[[faults]]
kind = "pause"
target = "holder"
duration = "2500ms"
after = "1500ms"
"#;

fn faults_in(path: &Path) -> Vec<toml::Table> {
    let t: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    t.get("faults")
        .and_then(|f| f.as_array())
        .map(|a| a.iter().map(|v| v.as_table().unwrap().clone()).collect())
        .unwrap_or_default()
}

#[test]
fn a_noisy_redis_run_shrinks_to_the_holder_pause_and_breaks_again() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(dir.path(), "noisy.toml", NOISY);
    let first = run(&w, &[]);
    first.assert_flagged(&["double-holder"]);
    let run_dir = first.run_dir();
    let history = first.history();
    let started = history.matches("\"f\":\"pause\"").count();
    assert!(
        started >= 3,
        "the noisy run paused {started} times:\n{history}"
    );
    assert!(
        history.contains("\"fault\":1"),
        "the history names each fault's [[faults]] entry"
    );

    let out = lockcheck()
        .args([
            "shrink",
            "--needed",
            "1",
            "--reruns",
            "2",
            "--confirm",
            "3",
            "--jobs",
            "2",
        ])
        .args(["--budget", "6m"])
        .arg(&run_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    let shrunk = run_dir.join("shrunk.toml");
    assert_eq!(
        stdout.lines().last(),
        Some(shrunk.to_str().unwrap()),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&shrunk).unwrap();
    assert!(
        text.starts_with("# lockcheck shrink: reproduces double-holder in "),
        "{text}"
    );
    assert!(stderr.contains("shrink [1/7 fault events] try"), "{stderr}");

    // The holder pause alone, held by its role; the noise gone; fewer clients
    // (the confirmation may walk back past the last cut, not past these).
    let faults = faults_in(&shrunk);
    assert_eq!(faults.len(), 1, "{text}\n{stderr}");
    assert_eq!(faults[0]["target"].as_str(), Some("holder"), "{text}");
    assert!(faults[0].get("interval").is_none(), "{text}");
    let w: toml::Table = toml::from_str(&text).unwrap();
    let clients = w["clients"]["count"].as_integer().unwrap();
    assert!(clients <= 3, "{text}\n{stderr}");
    assert!(
        stderr.contains("shrink [confirm] kept candidate"),
        "{stderr}"
    );

    // What it hands over is the very workload of a rerun that broke the lock
    // again: an ordinary run, its verdict and report in their own directory.
    let report = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("a flagged rerun: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let rerun = Path::new(report).parent().unwrap();
    let verdict = std::fs::read_to_string(rerun.join("verdict.json")).unwrap();
    assert!(verdict.contains("\"double-holder\""), "{verdict}");
    let ran = std::fs::read_to_string(rerun.join("workload.toml")).unwrap();
    let body = text.split_once("\n\n").unwrap().1;
    assert_eq!(ran, body);
    assert!(rerun.join("report.html").exists());
    let left = run_support::leftovers(&run_dir);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

#[test]
fn replay_reruns_the_schedule_as_it_happened_and_a_valid_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(dir.path(), "noisy.toml", NOISY);
    let first = run(&w, &[]);
    first.assert_flagged(&["double-holder"]);
    let (stdout, _) = first.replayed_twice();
    assert!(
        stdout.starts_with("REPRODUCED: double-holder came back in "),
        "{stdout}"
    );
    // Each pause that happened is an event of its own at the time it happened.
    let replayed = faults_in(&first.run_dir().join("replay").join("replay.toml"));
    let started = first.history().matches("\"f\":\"pause\"").count();
    assert_eq!(replayed.len(), started);
    assert!(replayed.iter().all(|f| f.get("interval").is_none()));
    assert!(replayed
        .iter()
        .any(|f| f["target"].as_str() == Some("holder")));
    assert!(replayed
        .iter()
        .filter(|f| f["target"].as_str() != Some("holder"))
        .all(|f| f["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("client-"))));

    // A run that broke nothing has nothing to shrink: a usage error, said why.
    let valid = run_support::valid_without_faults("redis", true);
    let out = lockcheck()
        .arg("shrink")
        .arg(valid.run_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the run was valid"), "{stderr}");
}

/// Replays `name` (a shipped workload that breaks every time): the realised
/// workload keeps what the run was (`check` it), and a replay brings the break back.
fn replayed(name: &str, check: impl Fn(&toml::Table)) {
    let first = run(&run_support::workload(name), &[]);
    first.assert_flagged(&["double-holder"]);
    let (stdout, plan) = first.replayed_twice();
    assert!(stdout.starts_with("REPRODUCED: "), "{name}: {stdout}");
    check(&plan);
    first.assert_nothing_left();
}

#[test]
fn an_adapter_run_and_an_election_are_replayed() {
    // The adapter runs in the workload's folder, not the replay's.
    replayed("clients/redis-py-pause-unfenced.toml", |plan| {
        let dir = Path::new(plan["client"]["dir"].as_str().unwrap());
        let script = plan["client"]["command"][1].as_str().unwrap();
        assert!(dir.is_absolute() && dir.join(script).exists(), "{plan}");
    });
    replayed("incidents/leader-keeps-acting.toml", |plan| {
        assert_eq!(plan["mode"].as_str(), Some("election"), "{plan}");
    });
}
