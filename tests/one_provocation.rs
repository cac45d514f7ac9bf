//! One run, one class: `lockcheck run` (its verdict's `provoked`), `analyze`,
//! `report` and the audit (which reads the run directory as `analyze` does)
//! classify a run's provocation through one function,
//! `check::provoked::of_run`, from the same inputs: the history and the
//! resource's log of applied writes. Here the log changes the class: a
//! deposed holder's write, unanswered before its successor's grant, landed
//! after the successor's own write. Read without the log (as `lockcheck run`
//! did), the holder was deposed and nothing of it reached the resource; with it,
//! its late write did.

mod run_support;
use lockcheck::check::provoked::{of_run, Provocation};
use lockcheck::history::{read_jsonl, read_resource};
use run_support::*;
use serde_json::Value;

/// Process 0 holds, writes `0:1` and is paused: the write goes unanswered
/// (`info`, the process retired). Process 1 is granted at 1004 ms and writes
/// `1:1`; the resource applied `1:1`, then `0:1`.
const HISTORY: &str = r#"{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "acquire", "value": {"lock": "l"}}
{"index": 1, "time": 1000000, "process": 0, "type": "ok", "f": "acquire", "value": {"token": null, "lease_ms": 1000}}
{"index": 2, "time": 2000000, "process": 0, "type": "invoke", "f": "write", "value": {"token": null, "data": "0:1"}}
{"index": 3, "time": 3000000, "process": "nemesis", "type": "info", "f": "pause", "value": {"targets": ["client-0"]}}
{"index": 4, "time": 502000000, "process": 0, "type": "info", "f": "write", "value": {"token": null, "data": "0:1"}, "error": "timed out"}
{"index": 5, "time": 1003000000, "process": 1, "type": "invoke", "f": "acquire", "value": {"lock": "l"}}
{"index": 6, "time": 1004000000, "process": 1, "type": "ok", "f": "acquire", "value": {"token": null, "lease_ms": 1000}}
{"index": 7, "time": 1005000000, "process": 1, "type": "invoke", "f": "write", "value": {"token": null, "data": "1:1"}}
{"index": 8, "time": 1006000000, "process": 1, "type": "ok", "f": "write", "value": {"token": null, "data": "1:1", "seq": 1}}
{"index": 9, "time": 1007000000, "process": 1, "type": "invoke", "f": "release", "value": {"token": null}}
{"index": 10, "time": 1008000000, "process": 1, "type": "ok", "f": "release", "value": null}
{"index": 11, "time": 1100000000, "process": "nemesis", "type": "info", "f": "resume", "value": {"targets": ["client-0"]}}
"#;

const RESOURCE: &str = r#"{"seq": 1, "process": 1, "token": null, "data": "1:1"}
{"seq": 2, "process": 0, "token": null, "data": "0:1"}
"#;

#[test]
fn run_analyze_report_and_audit_give_a_run_one_class_with_its_resource_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    std::fs::write(run.join("history.jsonl"), HISTORY).unwrap();
    std::fs::write(run.join("resource.jsonl"), RESOURCE).unwrap();
    let history = read_jsonl(&run.join("history.jsonl")).unwrap();
    let log = read_resource(&run.join("resource.jsonl")).unwrap();

    // The log changes the class: without it, nothing of the deposed holder
    // reached the resource.
    let without = of_run(&history, None);
    assert_eq!(
        without.class,
        Provocation::DeposedNotProvoked,
        "{without:?}"
    );
    // `lockcheck run` classifies with the log it kept (its judge calls this).
    let with = of_run(&history, Some(&log));
    assert_eq!(with.class, Provocation::Provoked, "{with:?}");
    assert_eq!((with.late_writes, with.late_writes_reached), (1, 1));

    // `analyze` (and the audit, which reads a run directory the same way).
    let out = lockcheck()
        .args(["analyze", "--json"])
        .arg(run)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(doc["analysis"]["provoked"]["class"], "provoked", "{doc}");
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(stored["analysis"]["provoked"]["class"], "provoked");

    // `report`, rebuilt from the run directory alone.
    lockcheck_ok([std::ffi::OsStr::new("report"), run.as_os_str()]);
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("id=\"lc-provoked\" data-class=\"provoked\""),
        "the report's class: {}",
        html.lines()
            .find(|l| l.contains("lc-provoked"))
            .unwrap_or("(no provocation paragraph)")
    );
}
