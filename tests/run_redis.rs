//! `lockcheck run` against a real Redis: the paused holder finds the hole in the
//! unfenced design, fencing closes it, and a run without faults is valid. After
//! every run nothing the run started is left running or stopped.

mod run_support;
use lockcheck::history::OpType;
use run_support::*;

#[test]
fn unfenced_redis_with_the_holder_paused_past_its_ttl_shows_two_holders_and_a_stale_write() {
    let r = run(&workload("redis-pause-unfenced.toml"), &[]);
    assert_eq!(r.code, 1, "anomalies exit 1; stderr: {}", r.stderr);
    assert_eq!(r.json["valid"], false);
    for kind in ["double-holder", "stale-write-accepted"] {
        let found = r.anomalies(kind);
        assert!(!found.is_empty(), "no {kind} in {}", r.json["anomalies"]);
        let a = found[0];
        assert!(
            a["indexes"].as_array().is_some_and(|i| i.len() >= 2),
            "evidence: {a}"
        );
        assert!(!a["explanation"].as_str().unwrap_or("").is_empty(), "{a}");
        assert_eq!(a["allowed"], false);
    }
    // The stale write is one the resource applied: resource.jsonl has its seq.
    let dir = r.run_dir();
    let applied = lockcheck::history::read_resource(&dir.join("resource.jsonl")).unwrap();
    let stale = r.anomalies("stale-write-accepted")[0];
    let tokens: Vec<u64> = stale["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_u64())
        .collect();
    let low = *tokens.iter().min().unwrap();
    let high = *tokens.iter().max().unwrap();
    let first_high = applied.iter().position(|w| w.token == Some(high)).unwrap();
    assert!(
        applied[first_high..].iter().any(|w| w.token == Some(low)),
        "token {low} applied after {high}"
    );
    // A deposed holder's write reached the resource: the run provoked the danger.
    assert_eq!(
        r.json["provoked"]["class"], "provoked",
        "{}",
        r.json["provoked"]
    );
    assert!(r.json["provoked"]["late_writes_reached"].as_u64() >= Some(1));
    // The pause is in the history as nemesis ops.
    let history = lockcheck::history::read_jsonl(&dir.join("history.jsonl")).unwrap();
    assert!(history
        .ops
        .iter()
        .any(|o| o.f == "pause" && o.value["targets"].as_array().is_some_and(|t| !t.is_empty())));
    assert!(history.ops.iter().any(|o| o.f == "resume"));
    let f = &r.json["figures"];
    assert!(f["critical_sections"].as_u64().unwrap() > 0, "{f}");
    assert!(f["first_anomaly_s"].as_f64().unwrap() > 0.0, "{f}");
    assert!(f["acquire_latency_ms"]["p99"].as_f64().is_some(), "{f}");
    r.assert_nothing_left();
}

#[test]
fn fenced_redis_rejects_every_stale_write_and_is_valid() {
    let r = run(&workload("redis-pause-fenced.toml"), &[]);
    assert_eq!(r.code, 0, "valid exits 0: {}\n{}", r.json, r.stderr);
    assert_eq!(r.json["valid"], true);
    assert!(r.anomalies("stale-write-accepted").is_empty());
    // The lease still expired under the pause: two holders, tolerated by design.
    let doubles = r.anomalies("double-holder");
    assert!(
        !doubles.is_empty(),
        "the pause should still make two holders"
    );
    assert!(doubles.iter().all(|a| a["allowed"] == true));
    assert!(
        r.json["figures"]["writes_rejected_by_fence"]
            .as_u64()
            .unwrap()
            > 0
    );
    let applied = lockcheck::history::read_resource(&r.run_dir().join("resource.jsonl")).unwrap();
    assert!(
        applied.windows(2).all(|w| w[0].token <= w[1].token),
        "a fenced resource applies tokens in order"
    );
    r.assert_nothing_left();
}

#[test]
fn redis_without_faults_is_valid_and_the_run_directory_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        &no_fault_workload(dir.path(), "redis", true),
        &["--seed", "9"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["valid"], true);
    assert!(r.json["anomalies"].as_array().unwrap().is_empty());
    assert_eq!(r.json["seed"], 9);
    let run_dir = r.run_dir();
    for file in [
        "history.jsonl",
        "resource.jsonl",
        "verdict.json",
        "workload.toml",
        "nodes/n1.log",
    ] {
        assert!(
            run_dir.join(file).is_file(),
            "{file} missing in {}",
            run_dir.display()
        );
    }
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("verdict.json")).unwrap())
            .unwrap();
    assert_eq!(verdict, r.json);
    let latest = std::fs::canonicalize(r.results.path().join("latest")).unwrap();
    assert_eq!(latest, std::fs::canonicalize(&run_dir).unwrap());
    assert!(r.json["figures"]["ops"]["write"]["ok"].as_u64().unwrap() > 0);
    // The servers' data went with them; `--keep-data` keeps it.
    assert!(!run_dir.join("data").exists(), "{}", run_dir.display());
    r.assert_nothing_left();
    let kept = run(
        &no_fault_workload(dir.path(), "redis", true),
        &["--seed", "9", "--keep-data", "--time-limit", "1"],
    );
    assert_eq!(kept.code, 0, "{}", kept.stderr);
    assert!(
        kept.run_dir().join("data/n1").is_dir(),
        "{}",
        kept.run_dir().display()
    );
}

#[test]
fn a_missing_server_program_is_an_environment_problem_naming_its_package() {
    let results = tempfile::tempdir().unwrap();
    let out = lockcheck()
        .args(["run", "--results"])
        .arg(results.path())
        .arg(workload("redis-pause-unfenced.toml"))
        .env("LOCKCHECK_REDIS_SERVER", "/nonexistent/redis-server")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install redis-server"), "{stderr}");
}

#[test]
fn a_client_that_does_not_answer_in_time_is_info_and_goes_on_under_a_new_process_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow-client.toml");
    std::fs::write(
        &path,
        r#"duration = "3s"
resource = "fenced"
allow = ["double-holder"]

[backend]
kind = "redis"
lease = "500ms"
acquire_timeout = "200ms"

[clients]
count = 2
op_timeout = "300ms"

[critical_section]
hold = "100ms"
writes = 2

[[faults]]
kind = "pause"
target = "client-0"
after = "500ms"
duration = "1500ms"
"#,
    )
    .unwrap();
    let r = run(&path, &[]);
    assert!(r.code == 0 || r.code == 1, "{}\n{}", r.json, r.stderr);
    let history = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
    use lockcheck::history::{OpType, Process};
    let retired = history
        .ops
        .iter()
        .position(|o| o.process == Process::Client(0) && o.kind == OpType::Info)
        .expect("the paused client's op timed out as info");
    assert!(
        history.ops[retired]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("no reply"),
        "{:?}",
        history.ops[retired]
    );
    assert!(
        history.ops[retired + 1..]
            .iter()
            .all(|o| o.process != Process::Client(0)),
        "process 0 never acts again after its info"
    );
    assert!(
        history.ops[retired + 1..]
            .iter()
            .any(|o| matches!(o.process, Process::Client(p) if p >= 2) && o.kind == OpType::Invoke),
        "the worker goes on under a new id (2 or above)"
    );
    r.assert_nothing_left();
}

#[test]
fn a_holder_renews_its_lease_during_a_hold_longer_than_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("renew.toml");
    std::fs::write(
        &path,
        r#"duration = "3s"
resource = "fenced"

[backend]
kind = "redis"
lease = "600ms"
renew_every = "200ms"

[clients]
count = 2

[critical_section]
hold = "1200ms"
writes = 6
"#,
    )
    .unwrap();
    let r = run(&path, &[]);
    // Renewed in time, the lease never lapses: one holder at a time, no fence needed.
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    let ops = &r.json["figures"]["ops"];
    assert!(ops["renew"]["ok"].as_u64().unwrap_or(0) >= 3, "{ops}");
    assert!(
        r.json["anomalies"].as_array().unwrap().is_empty(),
        "{}",
        r.json
    );
    r.assert_nothing_left();
}

#[test]
fn test_count_runs_a_fresh_cluster_per_seed_and_reports_the_detection_rate() {
    let r = run(
        &workload("redis-pause-unfenced.toml"),
        &["--test-count", "2", "--seed", "5", "--time-limit", "3"],
    );
    r.assert_flagged(&[]);
    let runs = r.json["runs"].as_array().unwrap();
    let seeds: Vec<u64> = runs.iter().map(|x| x["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, vec![5, 6]);
    let dirs: std::collections::HashSet<&str> = runs
        .iter()
        .map(|x| x["run_dir"].as_str().unwrap())
        .collect();
    assert_eq!(dirs.len(), 2, "one run directory each");
    let s = &r.json["summary"];
    assert_eq!(s["runs"], 2);
    assert_eq!(s["runs_with_anomalies"], 2, "{s}");
    // The summary's provoked count is the runs' own classes, counted.
    let provoked = runs
        .iter()
        .filter(|x| x["provoked"]["class"] == "provoked")
        .count();
    assert_eq!(s["runs_provoked"], provoked, "{s}");
    let median = s["median_first_anomaly_s"].as_f64().unwrap();
    let worst = s["worst_first_anomaly_s"].as_f64().unwrap();
    let longest = runs
        .iter()
        .map(|x| x["figures"]["run_time_s"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(0.0 < median && median <= worst && worst <= longest, "{s}");
    r.assert_nothing_left();
}

/// Applied writes whose token is lower than one applied before them: what an
/// unfenced resource let through from deposed holders.
fn stale_applied(r: &Finished) -> usize {
    let applied = lockcheck::history::read_resource(&r.run_dir().join("resource.jsonl")).unwrap();
    let mut highest = None;
    applied
        .iter()
        .filter(|w| {
            let stale = w.token < highest;
            highest = highest.max(w.token);
            stale
        })
        .count()
}

#[test]
fn self_fencing_workers_refuse_to_write_past_their_own_lease_deadline() {
    // The same schedule with and without self-fencing, side by side.
    let without = std::thread::spawn(|| run(&workload("redis-pause-unfenced.toml"), &[]));
    let with = run(&workload("redis-pause-self-fencing.toml"), &[]);
    let without = without.join().unwrap();
    assert!(
        stale_applied(&without) > 0,
        "without self-fencing the woken holder writes: {}",
        without.json
    );
    assert!(!without.anomalies("stale-write-accepted").is_empty());

    assert_eq!(with.json["self_fencing_margin_ms"], 200, "{}", with.json);
    let history = lockcheck::history::read_jsonl(&with.run_dir().join("history.jsonl")).unwrap();
    let fenced: Vec<_> = history
        .ops
        .iter()
        .filter(|o| {
            o.f == "write" && o.error.as_deref() == Some(lockcheck::run::worker::SELF_FENCED)
        })
        .collect();
    assert!(!fenced.is_empty(), "no write was self-fenced");
    assert!(fenced
        .iter()
        .all(|o| o.kind == lockcheck::history::OpType::Fail));
    // A self-fenced holder stops writing and releases, as on a refused renew.
    for w in &fenced {
        let next = history
            .ops
            .iter()
            .find(|o| o.index > w.index && o.process == w.process)
            .expect("the holder goes on after refusing to write");
        assert_eq!(next.f, "release", "after {w:?}: {next:?}");
    }
    // The residual window (a pause between the check and the write) can still let
    // one through under a slow machine; the pauses here land before the check.
    assert!(
        stale_applied(&with) < stale_applied(&without),
        "self-fencing: {} stale writes applied, without: {}",
        stale_applied(&with),
        stale_applied(&without)
    );
    let report = std::fs::read_to_string(with.run_dir().join("report.html")).unwrap();
    assert!(
        report.contains("residual window"),
        "the report shows the residual window"
    );
    with.assert_nothing_left();
    without.assert_nothing_left();
}

#[test]
fn a_self_fencing_worker_whose_clock_runs_slow_misjudges_its_lease_and_writes_stale() {
    // The same workload without the clock fault: the worker's own clock is right.
    let skewed = workload("redis-self-fencing-slow-clock.toml");
    let text = std::fs::read_to_string(&skewed).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("redis-self-fencing-right-clock.toml");
    std::fs::write(&plain, &text[..text.find("[[faults]]").unwrap()]).unwrap();
    let right = std::thread::spawn(move || run(&plain, &[]));
    let slow = run(&skewed, &[]);
    let right = right.join().unwrap();

    // The skew reached the holder's worker, not a node.
    let skew = slow.first_op("clock-skew");
    assert_eq!(skew.value["rate"], 0.5);
    let target = skew.value["targets"][0].as_str().unwrap();
    assert!(target.starts_with("client-"), "{skew:?}");
    assert!(slow
        .run_dir()
        .join(format!("clocks/{target}.clock"))
        .exists());

    assert_eq!(
        stale_applied(&right),
        0,
        "a worker with a right clock fences itself in time: {}",
        right.json
    );
    assert!(
        stale_applied(&slow) > 0,
        "a worker whose clock runs at half speed writes past its lease: {}",
        slow.json
    );
    assert!(!slow.anomalies("stale-write-accepted").is_empty());
    slow.assert_nothing_left();
    right.assert_nothing_left();
}

/// Two pauses aimed at one client: the second waits until the first has ended.
/// (A second, shorter pause of a stopped process would resume it with its own
/// end, long before the first one's: the holder would wake inside its lease and
/// the history would claim a pause it never had.)
#[test]
fn a_client_another_pause_keeps_stopped_is_not_paused_again() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(
        dir.path(),
        "overlap.toml",
        r#"
duration = "3s"
resource = "fenced"

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
duration = "1500ms"
after = "300ms"

[[faults]]
kind = "pause"
target = "client-0"
duration = "200ms"
after = "600ms"
"#,
    );
    let r = run(&w, &[]);
    // (pause or resume, which [[faults]] entry, when in ns) for client-0.
    let events: Vec<(String, u64, u64)> = r
        .history()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|o| o["process"] == "nemesis" && o["value"]["targets"][0] == "client-0")
        .map(|o| {
            let f = o["f"].as_str().unwrap().to_string();
            (
                f,
                o["value"]["fault"].as_u64().unwrap(),
                o["time"].as_u64().unwrap(),
            )
        })
        .collect();
    let kinds: Vec<(&str, u64)> = events.iter().map(|(f, i, _)| (f.as_str(), *i)).collect();
    assert_eq!(
        kinds,
        [("pause", 0), ("resume", 0), ("pause", 1), ("resume", 1)],
        "{events:?}\n{}",
        r.stderr
    );
    // The long pause lasted its length: nothing woke client-0 early.
    let long = events[1].2 - events[0].2;
    assert!(long >= 1_500_000_000, "{events:?}");
    r.assert_nothing_left();
}

/// The audit's holder-cut-off-fenced scenario, as the battery writes it for Redis:
/// the holder's lock client renews in the background, the cut leaves its renewals
/// unanswered, and the holder writes on to the resource (which is not behind the
/// cut) after its successor's grant, so the fence has to decide. Provoked in 26 of
/// 26 runs on the loaded 2-core machine (load 4-7); up to 3 runs here, one provoked is enough.
/// Once the fence has decided on a late write sent after the successor's was
/// applied, and the cut is healed, the run has answered its question
/// (`end = "after-effect"`): it ends there, and the successor's 4 s section, of
/// which nothing more can be learnt, stops short of its 8 writes.
#[test]
fn the_cut_off_holder_writes_on_after_its_successor_is_granted_and_the_fence_decides() {
    use lockcheck::audit::battery::{workload_text, Facts, Fencing, Recipe, Scenario};
    use lockcheck::backend::BackendKind;
    let facts = Facts::registered(BackendKind::Redis, None, None);
    let scenario = Scenario {
        recipe: Recipe::HolderCutOff,
        fencing: Fencing::Fenced,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = write_workload(dir.path(), "cut-off.toml", &workload_text(scenario, &facts));
    let mut classes = Vec::new();
    for seed in ["1", "2", "3"] {
        let r = run(&path, &["--seed", seed, "-v"]);
        // The fence held: every late write it saw was rejected, none accepted.
        assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
        assert!(r.anomalies("stale-write-accepted").is_empty(), "{}", r.json);
        // The partition cut the holder off from the server, not from the resource.
        let cut = r.first_op("partition");
        assert!(
            cut.value["links"][0].as_str().unwrap().ends_with("->n1"),
            "{cut:?}"
        );
        r.assert_nothing_left();
        let history = lockcheck::history::read_jsonl(&r.run_dir().join("history.jsonl")).unwrap();
        let resource =
            lockcheck::history::read_resource(&r.run_dir().join("resource.jsonl")).unwrap();
        let p = lockcheck::check::provoked::of_run(&history, Some(&resource));
        classes.push(p.class.name());
        if p.class == lockcheck::check::provoked::Provocation::Provoked {
            assert!(p.late_writes_reached >= 1, "{p:?}");
            assert!(
                r.json["figures"]["writes_rejected_by_fence"]
                    .as_u64()
                    .unwrap()
                    >= 1,
                "{}",
                r.json["figures"]
            );
            assert!(
                r.stderr
                    .contains("the run ends early: its first deposition was answered"),
                "{}",
                r.stderr
            );
            // The last grant's section: its writes from the grant on.
            let grant = history
                .ops
                .iter()
                .rposition(|o| o.f == "acquire" && o.kind == OpType::Ok)
                .expect("a grant");
            let successor = history.ops[grant].process;
            let writes = history.ops[grant..]
                .iter()
                .filter(|o| o.process == successor && o.f == "write" && o.kind == OpType::Invoke)
                .count();
            assert!(
                writes < 8,
                "the successor's section ran out: {writes} writes"
            );
            return;
        }
    }
    panic!("not one of 3 runs provoked: {classes:?}");
}
