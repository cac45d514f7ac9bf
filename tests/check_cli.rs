//! `lockcheck check` as a user runs it: the built binary, its exit codes, its JSON
//! verdict and its errors on malformed input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lockcheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .expect("run lockcheck")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes `content` to a fresh file named `name` in a temp dir kept alive by the caller.
fn file(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A Porcupine etcd log: write 1 returns, then a read returns 0 (stale) or 1.
fn etcd_log(read: i64) -> String {
    format!(
        "INFO  jepsen.util - 0\t:invoke\t:write\t1\nINFO  jepsen.util - 0\t:ok\t:write\t1\nINFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\t{read}\n"
    )
}

#[test]
fn exit_codes_follow_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let good = file(&dir, "good.log", &etcd_log(1));
    let bad = file(&dir, "bad.log", &etcd_log(0));
    let o = lockcheck(&["check", s(&good)]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("VALID"), "{}", text(&o.stdout));
    let o = lockcheck(&["check", s(&bad)]);
    assert_eq!(code(&o), 1);
    let out = text(&o.stdout);
    assert!(out.starts_with("INVALID"), "{out}");
    assert!(
        out.contains("not-linearizable at indexes 0, 1, 2, 3"),
        "{out}"
    );
    assert!(out.contains("read 0 by process 1"), "{out}");
    // Allowed: still listed, no longer invalid.
    let o = lockcheck(&["check", s(&bad), "--allow", "not-linearizable"]);
    assert_eq!(code(&o), 0);
    assert!(text(&o.stdout).contains("(allowed)"));
}

#[test]
fn json_verdict_has_the_spec_shape() {
    let dir = tempfile::tempdir().unwrap();
    let bad = file(&dir, "bad.log", &etcd_log(0));
    let o = lockcheck(&["check", "--json", s(&bad)]);
    assert_eq!(code(&o), 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["valid"], serde_json::json!(false));
    assert_eq!(v["model"], "cas-register");
    assert_eq!(v["anomalies"][0]["kind"], "not-linearizable");
    assert_eq!(
        v["anomalies"][0]["indexes"],
        serde_json::json!([0, 1, 2, 3])
    );
    let good = file(&dir, "good.log", &etcd_log(1));
    let o = lockcheck(&["check", "--json", s(&good)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], serde_json::json!(true));
    assert_eq!(v["anomalies"], serde_json::json!([]));
}

#[test]
fn the_model_and_format_can_be_named() {
    let dir = tempfile::tempdir().unwrap();
    // Read nil from the start: empty for Porcupine's etcd model (valid), a real
    // read of nil against a register that starts at 0 is not.
    let log = file(
        &dir,
        "h.txt",
        "INFO  jepsen.util - 0 :invoke :read nil\nINFO  jepsen.util - 0 :ok :read nil\n",
    );
    assert_eq!(
        code(&lockcheck(&[
            "check",
            s(&log),
            "--format",
            "porcupine-etcd"
        ])),
        0
    );
    let o = lockcheck(&["check", s(&log), "--initial", "0"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let o = lockcheck(&["check", s(&log), "--model", "mutex"]);
    assert_eq!(code(&o), 4);
    assert!(
        text(&o.stderr).contains("is not an op of the mutex model"),
        "{}",
        text(&o.stderr)
    );
    let o = lockcheck(&["check", s(&log), "--model", "queue"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stderr).contains("unknown model"));
}

#[test]
fn malformed_input_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let edn = file(
        &dir,
        "h.edn",
        "[{:process 0, :type :invoke, :f :read}\n {:process 0, :type :ok, :f :read :value}\n]\n",
    );
    let o = lockcheck(&["check", s(&edn)]);
    assert_eq!(code(&o), 4);
    let err = text(&o.stderr);
    assert!(err.contains(&format!("{}:2:", edn.display())), "{err}");
    let etcd = file(&dir, "h.log", "INFO  jepsen.util - 0 :invoke :cas [1]\n");
    let o = lockcheck(&["check", s(&etcd)]);
    assert_eq!(code(&o), 4);
    assert!(
        text(&o.stderr).contains(&format!("{}:1: value:", etcd.display())),
        "{}",
        text(&o.stderr)
    );
    let jsonl = file(&dir, "h.jsonl", "{\"index\":0,\"time\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"value\":null}\n{\"index\":5,\"time\":1,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"value\":null}\n");
    let o = lockcheck(&["check", s(&jsonl)]);
    assert_eq!(code(&o), 4);
    assert!(
        text(&o.stderr).contains(&format!("{}:2: index:", jsonl.display())),
        "{}",
        text(&o.stderr)
    );
    let missing = dir.path().join("nope.jsonl");
    assert_eq!(code(&lockcheck(&["check", s(&missing)])), 4);
}

#[test]
fn a_search_past_its_time_limit_is_unknown() {
    // 22 overlapping writes and a read of a value none wrote: refuting it means
    // trying every subset of the writes, far more than a millisecond allows.
    let dir = tempfile::tempdir().unwrap();
    let mut h = String::from("[");
    for p in 0..22 {
        h += &format!("{{:process {p}, :type :invoke, :f :write, :value {p}}}\n");
    }
    for p in 0..22 {
        h += &format!("{{:process {p}, :type :ok, :f :write, :value {p}}}\n");
    }
    h += "{:process 99, :type :invoke, :f :read, :value nil}\n{:process 99, :type :ok, :f :read, :value 77}]\n";
    let f = file(&dir, "slow.edn", &h);
    let o = lockcheck(&["check", "--json", "--time-limit", "0.05", s(&f)]);
    assert_eq!(code(&o), 3, "{}", text(&o.stdout));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["valid"], "unknown");
    assert!(
        v["notes"][0].as_str().unwrap().contains("time limit"),
        "{v}"
    );
}

#[test]
fn check_writes_the_html_report_and_junit_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let history = root.join("fixtures/double-holder-paused-holder.jsonl");
    let html = dir.path().join("r.html");
    let junit = dir.path().join("j.xml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .arg("check")
        .arg(&history)
        .arg("--report")
        .arg(&html)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("double-holder"),
        "the report shows the anomaly"
    );
    assert!(!page.contains("src=\"http"), "the report is self-contained");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<failure"),
        "the double holder fails a JUnit case: {xml}"
    );
}
