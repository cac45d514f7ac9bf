//! Lock clients lockcheck did not write (client.md): shipped adapters end to end
//! against real servers, and an adapter that misbehaves on purpose
//! (tests/clients/misbehave.py): whatever it does, the op completes `info`, the
//! process id is retired, a fresh adapter takes over, the run ends with its verdict,
//! and nothing is left running or stopped. One that cannot `init` stops the run with
//! exit 5 and its stderr tail, before any fault.

mod run_support;
use lockcheck::history::{read_jsonl, Op, OpType, Process};
use run_support::*;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn history(r: &Finished) -> Vec<Op> {
    read_jsonl(&r.run_dir().join("history.jsonl")).unwrap().ops
}

fn client(op: &Op) -> Option<u64> {
    match op.process {
        Process::Client(p) => Some(p),
        Process::Nemesis => None,
    }
}

/// A Redis workload without faults whose clients are `misbehave.py MODE`.
fn misbehaving(dir: &Path, mode: &str, fault: bool) -> PathBuf {
    let script = repo("tests/clients/misbehave.py");
    let pause = if fault {
        "[[faults]]\nkind = \"pause\"\ntarget = \"holder\"\nduration = \"500ms\"\nafter = \"10ms\"\n"
    } else {
        ""
    };
    let text = format!(
        r#"duration = "4s"
resource = "unfenced"

[backend]
kind = "redis"
lease = "2s"
fencing_token = false
acquire_timeout = "500ms"

[client]
command = ["/usr/bin/python3", "{}", "{mode}"]

[clients]
count = 2
op_timeout = "1500ms"

[critical_section]
hold = "100ms"
writes = 2
think = "20ms"
{pause}"#,
        script.display()
    );
    write_workload(dir, &format!("misbehave-{mode}.toml"), &text)
}

/// client-0's third acquire got no usable reply: it completed `info` with `why`,
/// its process id was retired, a fresh adapter went on under a new id, the other
/// client never stopped, and the run is valid with nothing left behind.
fn survives(mode: &str, why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let r = run(&misbehaving(dir.path(), mode, false), &[]);
    assert_eq!(r.code, 0, "{mode}: {}\n{}", r.json, r.stderr);
    let ops = history(&r);
    let infos: Vec<&Op> = ops.iter().filter(|o| o.kind == OpType::Info).collect();
    assert_eq!(infos.len(), 1, "{mode}: one op spoiled: {infos:?}");
    let spoiled = infos[0];
    assert_eq!(spoiled.f, "acquire");
    assert_eq!(client(spoiled), Some(0), "client-0 misbehaves");
    let error = spoiled.error.as_deref().unwrap_or("");
    assert!(error.contains(why), "{mode}: {error:?} should say {why:?}");
    assert!(error.contains("adapter retired"), "{error}");
    // Its acquire invoke is answered by that info, nothing of process 0 after it.
    assert!(
        !ops.iter()
            .any(|o| client(o) == Some(0) && o.index > spoiled.index),
        "process 0 acted after its info"
    );
    // A fresh adapter under a new, never-used id (2: two clients) took over and
    // completed critical sections.
    let fresh_acquires = ops
        .iter()
        .filter(|o| client(o) == Some(2) && o.f == "acquire" && o.kind == OpType::Ok)
        .count();
    assert!(fresh_acquires > 0, "the fresh adapter never acquired");
    let log = std::fs::read_to_string(r.run_dir().join("clients/client-0.log")).unwrap();
    assert_eq!(
        log.matches("starting (").count(),
        2,
        "client-0's log holds both adapters' stderr: {log}"
    );
    assert!(log.contains(&format!("misbehaving: {mode}")), "{log}");
    // The other client went on all along.
    assert!(ops
        .iter()
        .any(|o| client(o) == Some(1) && o.index > spoiled.index && o.kind == OpType::Ok));
    r.assert_nothing_left();
}

#[test]
fn a_line_that_is_not_json_retires_the_adapter() {
    survives("garbage", "is not a JSON object");
}

#[test]
fn a_reply_with_another_id_retires_the_adapter() {
    survives("wrong-id", "answered id");
}

#[test]
fn silence_past_the_op_timeout_retires_the_adapter() {
    survives("silent", "no reply from the adapter");
}

#[test]
fn an_adapter_that_exits_mid_run_is_replaced() {
    survives("exit", "the adapter exited");
}

#[test]
fn a_line_over_one_mebibyte_retires_the_adapter() {
    survives("overlong", "longer than 1048576 bytes");
}

/// Whether process `pid` still runs (a zombie has exited: only its parent's wait is
/// missing).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()))
        .is_some_and(|state| state != 'Z')
}

/// An adapter's own children (a library's helper process) die with it when it is
/// retired, mid-run, not only with the process group at the end of the run.
#[test]
fn a_retired_adapters_children_die_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut running = start_json(&misbehaving(dir.path(), "orphan", false), &[]);
    let second = std::time::Duration::from_secs(1);
    let run_dir = wait_for("the run directory", 10 * second, || running.run_dir());
    let orphan: u32 = wait_for("the adapter's child", 10 * second, || {
        std::fs::read_to_string(run_dir.join("orphan.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    wait_for("the adapter's misbehaviour", 10 * second, || {
        run_dir.join("misbehaved-orphan").exists().then_some(())
    });
    wait_for("the retired adapter's child to die", 3 * second, || {
        (!alive(orphan)).then_some(())
    });
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the run was over before the adapter's child died"
    );
    let r = running.finish();
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    r.assert_nothing_left();
}

#[test]
fn an_adapter_that_cannot_init_stops_the_run_with_exit_5_before_any_fault() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_json(&misbehaving(dir.path(), "crash-init", true), &[]);
    let results = running.results;
    let out = running.child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("could not init"), "{stderr}");
    assert!(
        stderr.contains("No module named 'foolib'"),
        "the adapter's stderr tail: {stderr}"
    );
    // No fault fired and no op was recorded: the history was never begun.
    let run_dir = std::fs::canonicalize(results.path().join("latest")).unwrap();
    let history = run_dir.join("history.jsonl");
    assert!(
        !history.exists() || std::fs::read_to_string(&history).unwrap().is_empty(),
        "nothing ran"
    );
    assert!(!run_dir.join("verdict.json").exists());
    let left = leftovers(results.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}

/// A pause of the holder stops its worker and its adapter (one process group), and
/// a run that ends with an adapter stopped leaves nothing behind.
#[test]
fn a_pause_stops_the_adapter_with_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_json(&misbehaving(dir.path(), "none", true), &[]);
    let needle = running.results.path().to_path_buf();
    let stopped = wait_for(
        "a paused adapter",
        std::time::Duration::from_secs(20),
        || {
            let procs = leftovers(&needle);
            let adapter = procs
                .iter()
                .find(|p| p.cmdline.contains("misbehave.py") && p.state == 'T')?;
            let worker = procs
                .iter()
                .find(|p| p.cmdline.contains(" worker ") && p.state == 'T');
            Some((adapter.pid, worker.map(|w| w.pid)))
        },
    );
    assert!(stopped.1.is_some(), "the adapter stopped with its worker");
    let r = running.finish();
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["client"]["library"], "redis-py 4.3.4");
    r.assert_nothing_left();
}

/// redis-py's Lock with its holder paused past the lease: two holders, and the
/// history shows what redis-py believed (`owned()` said no) before the deposed
/// holder wrote anyway. With `self_fencing = "library"` the deposed holder heeds it.
#[test]
fn redis_py_knows_it_lost_the_lock_and_self_fencing_through_it_stops_the_writes() {
    let r = run(&workload("clients/redis-py-pause-unfenced.toml"), &[]);
    r.assert_flagged(&["double-holder"]);
    assert_eq!(r.json["client"]["library"], "redis-py 4.3.4");
    let ops = history(&r);
    let said_no = ops
        .iter()
        .filter(|o| o.f == "held" && o.kind == OpType::Ok && o.value["held"] == false)
        .count();
    assert!(said_no > 0, "owned() never said no");
    // The report names the library and what it believed.
    let html = std::fs::read_to_string(r.run_dir().join("report.html")).unwrap();
    assert!(
        html.contains("The lock library: redis-py 4.3.4"),
        "no library panel"
    );
    assert!(
        html.contains("said it had lost the lock before the next write for"),
        "no belief sentence"
    );
    r.assert_nothing_left();

    let r = run(&workload("clients/redis-py-pause-self-fencing.toml"), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["client"]["self_fencing"], "library");
    let ops = history(&r);
    // Every write comes right after its process's `held` said yes.
    for (i, w) in ops.iter().enumerate() {
        if w.f != "write" || w.kind != OpType::Invoke {
            continue;
        }
        let asked = ops[..i]
            .iter()
            .rev()
            .find(|o| o.process == w.process && o.kind != OpType::Invoke)
            .expect("an op before the write");
        assert_eq!(asked.f, "held", "write {} not preceded by held", w.index);
        assert_eq!(asked.value["held"], true, "wrote after held said no");
    }
    r.assert_nothing_left();
}

/// kazoo's Lock against a 3-node ZooKeeper: its holder paused past the session
/// timeout is deposed, and kazoo's own `is_acquired` still says it holds the lock
/// when it wakes (kazoo keeps that flag until release); the unfenced resource takes
/// its stale write. The znode sequence, as a token, lets a fencing resource stop it.
#[test]
fn kazoo_does_not_know_it_lost_the_lock_and_its_znode_sequence_fences() {
    let r = run(&workload("clients/kazoo-pause-unfenced.toml"), &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    assert!(r.json["client"]["library"]
        .as_str()
        .is_some_and(|l| l.starts_with("kazoo 2.8")));
    let ops = history(&r);
    assert!(ops.iter().any(|o| o.f == "held" && o.kind == OpType::Ok));
    assert!(
        !ops.iter()
            .any(|o| o.f == "held" && o.kind == OpType::Ok && o.value["held"] == false),
        "kazoo's is_acquired said no: docs/clients.md's finding no longer holds"
    );
    r.assert_nothing_left();
    fenced_is_safe("clients/kazoo-pause-fenced.toml");
}

/// Apache Curator's InterProcessMutex (Java, Debian's jars, compiled by scripts/setup)
/// against a 3-node ZooKeeper: deposed by a pause past its session timeout, its
/// `isAcquiredInThisProcess()` still says yes when it wakes, and the unfenced resource
/// takes its stale write; the znode sequence as a token lets a fencing resource stop it.
#[test]
fn curator_does_not_know_it_lost_the_lock_and_its_znode_sequence_fences() {
    let r = run(&workload("clients/curator-pause-unfenced.toml"), &[]);
    r.assert_flagged(&["double-holder", "stale-write-accepted"]);
    assert!(r.json["client"]["library"]
        .as_str()
        .is_some_and(|l| l.starts_with("Apache Curator 5.4")));
    let ops = history(&r);
    assert!(ops.iter().any(|o| o.f == "held" && o.kind == OpType::Ok));
    assert!(
        !ops.iter()
            .any(|o| o.f == "held" && o.kind == OpType::Ok && o.value["held"] == false),
        "Curator's isAcquiredInThisProcess said no: docs/clients.md's finding no longer holds"
    );
    r.assert_nothing_left();
    fenced_is_safe("clients/curator-pause-fenced.toml");
}

/// The `held` answers of a run's history: how many said yes, how many said no.
fn held_answers(ops: &[Op]) -> (usize, usize) {
    let answers = ops.iter().filter(|o| o.f == "held" && o.kind == OpType::Ok);
    let no = answers.clone().filter(|o| o.value["held"] == false).count();
    (answers.count() - no, no)
}

/// The library the run's adapter named, which must start with `prefix`.
fn assert_library(r: &Finished, prefix: &str) {
    let library = r.json["client"]["library"].as_str().unwrap_or("");
    assert!(
        library.starts_with(prefix),
        "library {library:?}, not {prefix}"
    );
}

/// etcd's own lock service (Lock/Unlock), through the Rust adapter of this crate
/// (src/bin/lockcheck-etcd-lock.rs): a holder paused past its lease is deposed, etcd
/// says so when asked (its lease is gone), and the create revision of the key Lock
/// returned, as a token, lets a fencing resource reject the woken holder's writes.
#[test]
fn etcd_lock_service_hands_out_its_create_revision_as_a_token_that_fences() {
    let r = fenced_is_safe("clients/etcd-lock-pause-fenced.toml");
    assert_library(&r, "etcd 3.");
    let ops = history(&r);
    let (_, no) = held_answers(&ops);
    assert!(no > 0, "etcd never said the lease was gone");
    // Every grant carries the key's create revision, and they only grow.
    let tokens: Vec<u64> = ops
        .iter()
        .filter(|o| o.f == "acquire" && o.kind == OpType::Ok)
        .map(|o| o.value["token"].as_u64().expect("a token with every grant"))
        .collect();
    assert!(tokens.len() > 2, "{tokens:?}");
    assert!(tokens.windows(2).all(|t| t[0] < t[1]), "{tokens:?}");
}

/// A PyPI library in the project's virtualenv, its holder paused past the lease
/// (unfenced): flagged, and its own answer to `held` said no at least once (each of
/// these asks the server, not a flag of its own).
fn pypi_library_is_deposed_and_knows(workload_name: &str, library: &str) {
    let r = run(&workload(workload_name), &[]);
    r.assert_flagged(&["double-holder"]);
    assert_library(&r, library);
    let (yes, no) = held_answers(&history(&r));
    assert!(yes > 0 && no > 0, "held said yes {yes}, no {no} times");
    r.assert_nothing_left();
}

#[test]
fn pottery_redlock_is_deposed_by_a_pause_and_knows() {
    pypi_library_is_deposed_and_knows("clients/pottery-pause-unfenced.toml", "pottery 3.0");
}

#[test]
fn python_redis_lock_is_deposed_by_a_pause_despite_its_renewal_thread_and_knows() {
    pypi_library_is_deposed_and_knows(
        "clients/python-redis-lock-pause-unfenced.toml",
        "python-redis-lock 4.0",
    );
}

#[test]
fn tooz_redis_driver_is_deposed_by_a_pause_despite_its_heart_and_knows() {
    pypi_library_is_deposed_and_knows("clients/tooz-redis-pause-unfenced.toml", "tooz 9.1");
}

/// pottery does not renew by itself: holds longer than the lease stay safe only
/// through `renew` (its `extend()`), which the adapter offers. No fault: every renew
/// succeeds, and no two holders ever overlap.
#[test]
fn pottery_renews_through_extend_and_holds_past_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"duration = "4s"
resource = "unfenced"

[backend]
kind = "redlock"
lease = "1s"
renew_every = "400ms"
acquire_timeout = "500ms"
fencing_token = false

[client]
command = ["{}", "{}"]

[clients]
count = 2
op_timeout = "3s"

[critical_section]
hold = "1500ms"
writes = 5
think = "20ms"
"#,
        repo("clients/.venv/bin/python").display(),
        repo("clients/pottery/pottery_lock.py").display()
    );
    let r = run(
        &write_workload(dir.path(), "pottery-renew.toml", &text),
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    let ops = history(&r);
    let renews: Vec<&Op> = ops
        .iter()
        .filter(|o| o.f == "renew" && o.kind != OpType::Invoke)
        .collect();
    assert!(renews.len() >= 2, "{renews:?}");
    assert!(
        renews.iter().all(|o| o.kind == OpType::Ok),
        "a renew failed without a fault: {renews:?}"
    );
    r.assert_nothing_left();
}
