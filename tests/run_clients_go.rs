//! The Go adapters of clients/go (etcd 3.4's `concurrency.Mutex` and `Election`, a
//! redigo lock) end to end against real servers, built once by `clients/go/build`
//! from Debian's packages only. A machine without them fails here, naming the
//! package to install: a lock library that was never run is never "passed".
//! The protocol's misbehaviour cases (an adapter that dies, goes silent, prints
//! garbage) are the adapter's language's business nowhere: tests/run_clients.rs
//! runs them once, for every adapter, through the worker's side of the pipe.

mod run_support;
use lockcheck::history::{read_jsonl, Op, OpType};
use run_support::*;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// Builds the Go adapters (once per test process; the script itself is quick when
/// nothing changed, and takes a lock against parallel tests), or fails the test with
/// what the build said (it names the missing Debian package).
fn go_adapters() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/go/build");
        let out = Command::new(&script)
            .output()
            .map_err(|e| format!("running {}: {e}", script.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} failed ({}):\n{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = built {
        panic!("the Go adapters did not build: {e}");
    }
}

/// The Go adapters' launcher, by absolute path (a workload written elsewhere).
fn go_run() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/go/run")
}

fn history(r: &Finished) -> Vec<Op> {
    read_jsonl(&r.run_dir().join("history.jsonl")).unwrap().ops
}

/// How many times the library said it still held, and how many it said it did not.
fn held_answers(ops: &[Op]) -> (usize, usize) {
    let answers = ops.iter().filter(|o| o.f == "held" && o.kind == OpType::Ok);
    let no = answers.clone().filter(|o| o.value["held"] == false).count();
    (answers.count() - no, no)
}

fn assert_library(r: &Finished, prefix: &str) {
    let library = r.json["client"]["library"].as_str().unwrap_or("");
    assert!(
        library.starts_with(prefix),
        "library {library:?}, not {prefix}"
    );
}

/// Every grant carries a token, and successive grants' tokens only grow.
fn assert_tokens_grow(ops: &[Op]) {
    let tokens: Vec<u64> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .map(|o| o.value["token"].as_u64().expect("a token with every grant"))
        .collect();
    assert!(tokens.len() >= 2, "{tokens:?}");
    assert!(tokens.windows(2).all(|t| t[0] < t[1]), "{tokens:?}");
}

/// The paused holder of `unfenced` is deposed and writes anyway (double-holder), its
/// library said no when asked after the pause, and `fenced` turns its stale writes
/// away with the adapter's token.
fn deposed_unfenced_and_fenced(unfenced: &str, fenced: &str, library: &str) {
    go_adapters();
    let r = shows_the_break(unfenced, &["double-holder"]);
    assert_library(&r, library);
    let (yes, no) = held_answers(&history(&r));
    assert!(yes > 0 && no > 0, "held said yes {yes}, no {no} times");
    let r = fenced_is_safe(fenced);
    assert_library(&r, library);
    assert_tokens_grow(&history(&r));
}

/// etcd's Go `concurrency.Mutex`: its session's keep-alive stops with the paused
/// holder, etcd expires the lease and the next waiter's `Lock` returns; the key's
/// create revision fences the woken holder's writes.
#[test]
fn etcd_go_mutex_is_deposed_by_a_pause_and_its_create_revision_fences() {
    deposed_unfenced_and_fenced(
        "clients/etcd-concurrency-mutex-pause-unfenced.toml",
        "clients/etcd-concurrency-mutex-pause-fenced.toml",
        "etcd clientv3/concurrency 3.4.23",
    );
}

/// A redigo lock (SET NX PX, an INCR'd token in the same script): the key expires
/// under the paused holder; the token fences it.
#[test]
fn redigo_lock_is_deposed_by_a_pause_and_its_incr_token_fences() {
    deposed_unfenced_and_fenced(
        "clients/redigo-lock-pause-unfenced.toml",
        "clients/redigo-lock-pause-fenced.toml",
        "redigo 1.8.3",
    );
}

/// etcd's Go `concurrency.Election` through an adapter in election mode: the paused
/// leader goes on acting after the next one's Campaign returned (two leaders acting),
/// and the leader key's create revision fences its acts.
#[test]
fn etcd_go_election_paused_leader_acts_with_another_and_its_key_revision_fences() {
    go_adapters();
    let r = shows_the_break(
        "clients/etcd-concurrency-election-pause-unfenced.toml",
        &["double-holder"],
    );
    assert_eq!(r.json["mode"], "election", "{}", r.json);
    assert_library(&r, "etcd clientv3/concurrency 3.4.23");
    assert!(r.json["client"]["ops"]
        .as_array()
        .is_some_and(|ops| ops.iter().any(|o| o == "campaign")));
    let ops = history(&r);
    let (yes, no) = held_answers(&ops);
    assert!(yes > 0 && no > 0, "Leader() said yes {yes}, no {no} times");
    let r = fenced_is_safe("clients/etcd-concurrency-election-pause-fenced.toml");
    assert_tokens_grow(&history(&r));
}

/// An adapter that does not say it campaigns (the redigo lock has no election) is
/// refused for `mode = "election"` before anything runs: exit 5, naming `campaign`,
/// rather than taking a lock where a leadership was asked for.
#[test]
fn an_adapter_that_does_not_campaign_is_refused_for_an_election() {
    go_adapters();
    let dir = tempfile::tempdir().unwrap();
    let adapter = go_run();
    let text = format!(
        r#"mode = "election"
duration = "3s"
resource = "unfenced"

[backend]
kind = "redis"
lease = "1s"
fencing_token = true
acquire_timeout = "500ms"

[client]
command = ["{}", "redigo-lock"]

[clients]
count = 2
"#,
        adapter.display()
    );
    let w = write_workload(dir.path(), "redigo-election.toml", &text);
    let running = start_json(&w, &[]);
    let results = running.results;
    let out = running.child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("\"campaign\""), "{stderr}");
    let left = leftovers(results.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// A clock fault on the holder moves the worker's clock, but a Go library reads
/// the vDSO: its own timers, and whatever its `held` answers, run on real time.
/// A holder that asks its library whether it holds (`self_fencing = "library"`)
/// was then never asked anything the fault touched: the run says so, names the
/// adapter's program, and is untested (exit 3), never valid.
#[test]
fn a_holder_clock_fault_that_misses_a_go_library_leaves_library_fencing_untested() {
    go_adapters();
    let dir = tempfile::tempdir().unwrap();
    let adapter = go_run();
    let text = format!(
        "duration = \"6s\"\nseed = 1\nresource = \"unfenced\"\nallow = [\"double-holder\"]\n\n\
         [backend]\nkind = \"etcd\"\nlease = \"2s\"\nacquire_timeout = \"1s\"\n\n\
         [client]\ncommand = [{:?}, \"etcd-concurrency\"]\n\n\
         [clients]\ncount = 2\nop_timeout = \"5s\"\nself_fencing = \"library\"\n\n\
         [critical_section]\nhold = \"300ms\"\nwrites = 2\nthink = \"50ms\"\n\n\
         [[faults]]\nkind = \"clock\"\ntarget = \"holder\"\noffset = \"-20s\"\nafter = \"500ms\"\nduration = \"2s\"\n",
        adapter.display().to_string()
    );
    let w = write_workload(dir.path(), "library-clock.toml", &text);
    let r = run(&w, &[]);
    let unreachable = r.json["figures"]["unreachable"].to_string();
    assert!(
        unreachable.contains("adapter") && unreachable.contains("Go binary"),
        "the adapter's program is named as out of the fault's reach: {unreachable}\n{}",
        r.stderr
    );
    assert_eq!(r.json["valid"], true, "{}", r.stderr);
    assert_eq!(r.code, 3, "valid, yet untested: {}", r.stderr);
    let unseen = r.json["faults"]["unseen"].as_str().unwrap_or("");
    assert!(
        unseen.contains("never reached the library"),
        "{unseen}\n{}",
        r.stderr
    );
    // Said as a property of the lock, which the audit reads as "not applicable".
    assert_eq!(
        r.json["faults"]["out_of_reach"], true,
        "{}",
        r.json["faults"]
    );
}

/// The audit reads that run as a property of the lock, not of its timing: the
/// library-fencing holder-clock scenario stops after its first run as not
/// applicable (measured), with why, and no verdict waits on it; before, it ran
/// its `--runs` untested and said "no run checked".
#[test]
fn the_audit_lists_a_library_out_of_the_clock_faults_reach_as_not_applicable() {
    go_adapters();
    let results = tempfile::tempdir().unwrap();
    let client = format!("{} etcd-concurrency", go_run().display());
    let out = lockcheck()
        .args(["audit", "--backend", "etcd", "--client", &client])
        .args(["--scenarios", "clock-jump-holder", "--runs", "3", "--json"])
        .arg("--results")
        .arg(results.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let card: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no scorecard ({e}):\n{stderr}"));
    assert_eq!(out.status.code(), Some(3), "a subset: {stderr}");
    let library = card["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scenario"] == "clock-jump-holder-library-fencing")
        .unwrap_or_else(|| panic!("no library-fencing scenario in {card}"));
    assert_eq!(library["stopped"], "out-of-reach", "{library}\n{stderr}");
    assert_eq!(library["ran"], 1, "one run showed it: {library}");
    assert_eq!(library["counted"], 0, "{library}");
    let missing = card["missing"].to_string();
    assert!(
        !missing.contains("library-fencing"),
        "nothing waits on it: {missing}"
    );
    let table = std::fs::read_to_string(Path::new(card["dir"].as_str().unwrap()).join("audit.xml"))
        .unwrap();
    assert!(
        table.contains("not applicable: measured in run 1")
            && table.contains("never reached the library"),
        "the JUnit case is skipped with why: {table}"
    );
    // Left to choose, the audit paced its runs by a probe it measured.
    let levels = card["levels"].as_array().expect("levels");
    assert!(
        levels[0]["lateness"]["samples"].as_u64().unwrap_or(0) > 0,
        "the probe's timer lateness is in the scorecard: {levels:?}"
    );
    let left = leftovers(results.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// The audit's holder-cut-off recipe through etcd's Go `concurrency.Mutex`: the
/// holder cut off from every etcd node while its lock client renews in the
/// background, `fenced` or not.
fn cut_off_holder_workload(dir: &Path, fenced: bool) -> std::path::PathBuf {
    let resource = if fenced {
        "resource = \"fenced\"\nallow = [\"double-holder\"]"
    } else {
        "resource = \"unfenced\""
    };
    let text = format!(
        "duration = \"8s\"\nend = \"after-effect\"\nseed = 1\n{resource}\n\n\
         [backend]\nkind = \"etcd\"\nlease = \"2s\"\nfencing_token = true\nacquire_timeout = \"1s\"\n\
         renew = \"background\"\nrenew_every = \"1s\"\n\n\
         [clients]\ncount = 3\n\n\
         [client]\ncommand = [{:?}, \"etcd-concurrency\"]\n\n\
         [critical_section]\nhold = \"4s\"\nwrites = 8\nthink = \"50ms\"\n\n\
         [[faults]]\nkind = \"partition\"\ntarget = \"holder\"\ncut = \"blackhole\"\n\
         duration = \"3500ms\"\nafter = \"1s\"\ninterval = \"1s\"\n",
        go_run().display().to_string()
    );
    write_workload(dir, "etcd-go-cut-off.toml", &text)
}

/// A holder cut off from etcd asks its library `held` before each write; the
/// adapter's key read times out, and it answers `info`. That was recorded as an
/// op of unknown effect: the holder was retired there, never wrote again, and,
/// never having released, was counted holding to the end of the run: a
/// double-holder with no late write in 10 of 10 of the audit's runs, which asked
/// no fence. A question changes nothing in the lock: it is now a `fail` (the
/// library could not tell), the holder writes on, told nothing, as the recipe
/// means, the successor's grant deposes it while it writes, and its late writes
/// reach the resource: unfenced they get in, fenced the create revision turns
/// them away.
#[test]
fn etcd_go_mutex_holder_cut_off_writes_on_and_its_create_revision_fences() {
    go_adapters();
    let dir = tempfile::tempdir().unwrap();
    let unanswered = |ops: &[Op]| -> (usize, usize) {
        let held = ops.iter().filter(|o| o.f == "held");
        let info = held.clone().filter(|o| o.kind == OpType::Info).count();
        let told = held
            .filter(|o| {
                o.kind == OpType::Fail
                    && o.error.as_deref().is_some_and(|e| {
                        e.starts_with(lockcheck::backend::adapter::UNANSWERED_HELD)
                    })
            })
            .count();
        (info, told)
    };
    for fenced in [false, true] {
        let r = run(&cut_off_holder_workload(dir.path(), fenced), &[]);
        let ops = history(&r);
        let (info, told) = unanswered(&ops);
        assert_eq!(info, 0, "no held retires its holder: {}", r.stderr);
        assert!(told > 0, "the cut reached the library's held: {}", r.stderr);
        assert_eq!(
            r.json["provoked"]["class"], "provoked",
            "the cut-off holder wrote after its successor's grant: {}",
            r.json["provoked"]
        );
        if fenced {
            r.assert_valid_and_fenced();
        } else {
            r.assert_flagged(&["double-holder", "stale-write-accepted"]);
        }
        r.assert_nothing_left();
    }
}
