//! What a run's exit code claims, held to what happened: a run that ended before
//! its planned faults started is no pass (exit 3, said in words, verdict.json and
//! JUnit) unless `--allow-missed-faults`; clients the machine cannot hold are
//! refused before anything starts (exit 2 for a workload no machine sensibly runs,
//! 5 for one this machine cannot); the PostgreSQL resource runs under a 0700
//! `--results`, as `mktemp -d` makes in CI.

mod run_support;
use run_support::*;
use std::path::Path;
use std::process::Command;

/// One client that acquires at once and holds the lock for 3 s, in a 2.5 s run:
/// the pause aimed at the holder is armed at 1 s and waits for an acquire that never
/// comes before the end. Valid to the checker, it tested no pause.
const ONE_LONG_HOLDER: &str = r#"
duration = "2500ms"
seed = 1
resource = "fenced"
[backend]
kind = "redis"
lease = "5s"
fencing_token = true
acquire_timeout = "500ms"
[clients]
count = 1
[critical_section]
hold = "3s"
writes = 1
[[faults]]
kind = "pause"
target = "holder"
duration = "500ms"
after = "1s"
"#;

const NEVER_ACQUIRED: &str =
    "for the next client to acquire the lock; none did before the run ended at 2.5 s";

/// `lockcheck run` of [`ONE_LONG_HOLDER`] with `args`, and its workload's dir.
fn run_one_long_holder(args: &[&str]) -> (Finished, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(dir.path(), "one-long-holder.toml", ONE_LONG_HOLDER);
    (run(&w, args), dir)
}

fn junit_of(run_dir: &Path) -> String {
    let xml = run_dir.join("junit.xml");
    let out = lockcheck()
        .arg("report")
        .arg(run_dir)
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(xml).unwrap()
}

#[test]
fn a_run_whose_holder_fault_never_started_is_no_pass() {
    let (r, _w) = run_one_long_holder(&[]);
    assert_eq!(r.code, 3, "{}\n{}", r.json, r.stderr);
    assert_eq!(
        r.json["valid"], true,
        "the checker found nothing: {}",
        r.json
    );
    assert_eq!(r.json["missed_faults"], true);
    let faults = &r.json["faults"];
    assert_eq!(faults["planned"], 1, "{faults}");
    assert_eq!(faults["started"], 0, "{faults}");
    assert_eq!(faults["allowed"], false, "{faults}");
    let missed = &faults["missed"][0];
    assert_eq!(missed["fault"], 0);
    assert_eq!(missed["kind"], "pause");
    let why = missed["why"].as_str().unwrap();
    assert!(
        why.starts_with("armed at 1.") && why.ends_with(NEVER_ACQUIRED),
        "{why}"
    );
    assert!(
        !r.history().contains("\"f\":\"pause\""),
        "no pause in the history"
    );
    // The stored verdict.json says the same as the printed one.
    let stored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.run_dir().join("verdict.json")).unwrap()).unwrap();
    assert_eq!(stored["faults"], *faults);
    assert_eq!(stored["missed_faults"], true);
    // Nothing took effect, and the verdict says so in the history's words.
    assert_eq!(stored["provoked"]["class"], "fault-not-seen", "{stored}");
    // CI reads JUnit: the faults case fails.
    let xml = junit_of(&r.run_dir());
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(
        xml.contains("<failure type=\"missed-faults\" message=\"1 of 1 planned faults never started: the run did not test what its workload claims\">faults[0] (pause): 0 of 1 started; armed at 1."),
        "{xml}"
    );
    // The report's badge does not say VALID.
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(
        html.contains("<span class=\"badge unknown\" id=\"lc-verdict\">UNTESTED</span>"),
        "the badge"
    );
    r.assert_nothing_left();
}

#[test]
fn allow_missed_faults_passes_the_run_and_still_lists_them() {
    let (r, _w) = run_one_long_holder(&["--allow-missed-faults"]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["missed_faults"], false);
    assert_eq!(r.json["faults"]["allowed"], true);
    assert_eq!(r.json["faults"]["missed"][0]["started"], 0);
    let xml = junit_of(&r.run_dir());
    assert!(xml.contains("failures=\"0\""), "{xml}");
    assert!(
        xml.contains(
            "<system-out>1 of 1 planned faults never started (allowed by --allow-missed-faults):"
        ),
        "{xml}"
    );
    r.assert_nothing_left();
}

#[test]
fn the_words_say_untested_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_workload(dir.path(), "one-long-holder.toml", ONE_LONG_HOLDER);
    let out = lockcheck()
        .arg("run")
        .arg(&w)
        .arg("--results")
        .arg(dir.path().join("results"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.starts_with("UNTESTED (valid, but planned faults missed): one-long-holder"),
        "{stdout}"
    );
    assert!(
        stdout.contains("✗ missed faults: 1 of 1 planned never started: the run did not test what its workload claims (exit 3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("faults[0] (pause): 0 of 1 started; armed at 1.")
            && stdout.contains(NEVER_ACQUIRED),
        "{stdout}"
    );
}

#[test]
fn a_time_limit_that_ends_before_the_first_fault_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let w = workload("redis-pause-fenced.toml");
    let out = lockcheck()
        .arg("run")
        .arg(&w)
        .arg("--results")
        .arg(&results)
        .args(["--time-limit", "0.8"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("faults[0].after:") && stderr.contains("it would never start"),
        "{stderr}"
    );
    assert_nothing_started(&results);
}

#[test]
fn a_run_whose_faults_all_started_accounts_for_them_and_passes() {
    let r = run(&workload("redis-pause-fenced.toml"), &["--time-limit", "3"]);
    r.assert_valid();
    assert_eq!(r.json["missed_faults"], false);
    assert_eq!(r.json["faults"]["planned"], 1);
    assert!(
        r.json["faults"]["started"].as_u64().unwrap() >= 1,
        "{}",
        r.json
    );
    assert_eq!(r.json["faults"]["missed"], serde_json::json!([]));
    r.assert_nothing_left();
}

#[test]
fn several_runs_count_those_that_missed_faults_apart() {
    let (r, _w) = run_one_long_holder(&["--test-count", "2"]);
    assert_eq!(r.code, 3, "{}", r.json);
    assert_eq!(r.json["summary"]["runs"], 2);
    assert_eq!(r.json["summary"]["runs_with_missed_faults"], 2);
    assert_eq!(r.json["summary"]["runs_with_anomalies"], 0);
}

/// A workload of redis-pause-fenced with `count` clients, in `dir`.
fn with_clients(dir: &Path, count: usize) -> std::path::PathBuf {
    let text = std::fs::read_to_string(workload("redis-pause-fenced.toml")).unwrap();
    assert!(text.contains("\ncount = 3\n"));
    write_workload(
        dir,
        "many.toml",
        &text.replace("\ncount = 3\n", &format!("\ncount = {count}\n")),
    )
}

/// The line of `count = ` in a workload file.
fn count_line(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .position(|l| l.starts_with("count = "))
        .unwrap()
        + 1
}

/// Nothing was started: no run directory, no process.
fn assert_nothing_started(results: &Path) {
    let made: Vec<_> = std::fs::read_dir(results)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(made.is_empty(), "a run directory was made: {made:?}");
    let left = leftovers(results);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn ten_thousand_clients_are_a_workload_error_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = with_clients(dir.path(), 10_000);
    let results = dir.path().join("results");
    let started = std::time::Instant::now();
    let out = lockcheck()
        .arg("run")
        .arg(&w)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let at = format!(
        "{}:{}: clients.count: 10000 clients",
        w.display(),
        count_line(&w)
    );
    assert!(stderr.contains(&at), "{at} in {stderr}");
    assert!(stderr.contains("at most 1000"), "{stderr}");
    assert!(started.elapsed().as_secs() < 10, "refused at once");
    assert_nothing_started(&results);
}

/// A pids cgroup (v1 `pids` controller, or v2) of its own with `max` tasks; removed
/// on drop.
struct PidsCgroup(std::path::PathBuf);

impl PidsCgroup {
    fn new(max: u64) -> PidsCgroup {
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let v2 = Path::new("/sys/fs/cgroup");
        let root = if v1.join("cgroup.procs").exists() {
            v1
        } else {
            assert!(
                std::fs::read_to_string(v2.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.contains("pids")),
                "this test needs the pids cgroup controller (v1, or v2 enabled for children)"
            );
            v2
        };
        let dir = root.join(format!("lockcheck-test-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("creating {} (run as root): {e}", dir.display()));
        std::fs::write(dir.join("pids.max"), max.to_string()).unwrap();
        PidsCgroup(dir)
    }

    /// `cmd`, started inside the cgroup.
    fn enter(&self, cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        let procs = self.0.join("cgroup.procs");
        // SAFETY: between fork and exec the closure only opens and writes a file.
        unsafe {
            cmd.pre_exec(move || std::fs::write(&procs, std::process::id().to_string()));
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Its processes have exited (waited for): the cgroup is empty.
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn more_clients_than_this_machine_holds_are_an_environment_problem() {
    let dir = tempfile::tempdir().unwrap();
    let w = with_clients(dir.path(), 50);
    let results = dir.path().join("results");
    let cgroup = PidsCgroup::new(100);
    let mut cmd = lockcheck();
    cmd.arg("run").arg(&w).arg("--results").arg(&results);
    cgroup.enter(&mut cmd);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("this machine cannot run 50 clients (one worker process each): processes: they need up to 200 tasks (4 threads each),"),
        "{stderr}"
    );
    assert!(stderr.contains("pids.max 100)"), "{stderr}");
    assert_nothing_started(&results);
}

#[test]
fn the_postgres_resource_runs_under_a_private_results_directory() {
    let json = private_results_run("postgres-resource-fenced.toml", "resource");
    assert_eq!(json["resource_kind"], "postgres", "{json}");
}

#[test]
fn the_postgres_lock_service_runs_under_a_private_results_directory() {
    // The lock service's server this time: the resource is lockcheck's own.
    let json = private_results_run("postgres-lease-pause-fenced.toml", ".");
    assert_eq!(json["resource_kind"], "lockcheck", "{json}");
}

/// Runs `workload` (3 s of it) with `--results` a directory only its owner may
/// enter: it passes, lockcheck leaves the directory as it was, the PostgreSQL
/// server of `cluster` (a folder of the run directory) keeps its log there and
/// its data in a stand-in that goes with the run. Returns verdict.json.
fn private_results_run(workload_file: &str, cluster: &str) -> serde_json::Value {
    // What `mktemp -d` makes in a CI job: only its owner may enter.
    let results = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(results.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    // The server's files go to the temporary directory: one of the test's own,
    // to see that nothing stays there.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = lockcheck()
        .arg("run")
        .arg(workload(workload_file))
        .arg("--json")
        .arg("--results")
        .arg(results.path())
        .args(["--time-limit", "3"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(out.status.code(), Some(0), "{json}\n{stderr}");
    assert!(
        json["figures"]["ops"]["write"]["ok"].as_u64().unwrap() > 0,
        "{json}"
    );
    // Untouched: still the owner's alone.
    let after = std::fs::metadata(results.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        after & 0o777,
        0o700,
        "lockcheck opened the user's directory"
    );
    // The server's log is where a run keeps it; its data is gone with it.
    let run_dir = Path::new(json["run_dir"].as_str().unwrap());
    let cluster = run_dir.join(cluster);
    assert!(!cluster.join("data").exists(), "the stand-in link is gone");
    assert!(cluster.join("nodes/n1.log").is_file());
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let left = leftovers(results.path());
    assert!(left.is_empty(), "{left:?}");
    json
}

#[test]
fn a_valid_run_that_saw_nothing_of_its_fault_is_untested() {
    let dir = tempfile::tempdir().unwrap();
    // ONE_LONG_HOLDER with its Redis paused at 1 s instead of its holder: the fault
    // starts, and no client acquires after it.
    let paused_server = ONE_LONG_HOLDER.replace(
        "kind = \"pause\"\ntarget = \"holder\"\nduration = \"500ms\"",
        "kind = \"pause-node\"\nnodes = \"one\"\nduration = \"300ms\"",
    );
    assert_ne!(paused_server, ONE_LONG_HOLDER);
    let w = write_workload(dir.path(), "no-grant-after.toml", &paused_server);
    let r = run(&w, &[]);
    assert_eq!(r.code, 3, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["valid"], true);
    assert_eq!(r.json["missed_faults"], true);
    let unseen = r.json["faults"]["unseen"].as_str().unwrap();
    assert!(
        unseen.contains("no client acquired the lock after the first fault began (pause at 1.0 s)"),
        "{unseen}"
    );
    // The report and JUnit say it as they say a missed fault.
    let junit = junit_of(&r.run_dir());
    assert!(junit.contains("the run saw nothing of them"), "{junit}");
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(html.contains("UNTESTED") && html.contains("no client acquired the lock"));
    // Allowed like a missed fault.
    let allowed = run(&w, &["--allow-missed-faults"]);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
}
