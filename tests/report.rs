//! `lockcheck report` and `lockcheck analyze` on stored run directories: the demo
//! fixtures (a holder paused past its lease, unfenced and fenced) and generated
//! histories with planted overlaps.

use lockcheck::check::calls::Calls;
use lockcheck::check::{lock, Limits};
use lockcheck::history::synth::{generate, SynthConfig};
use lockcheck::report::analysis;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/report")
        .join(name)
}

/// A private copy of a fixture run directory (commands rewrite files in it).
fn copy_run(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

fn lockcheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Tags open and close in order, attributes are quoted, no stray `<` or `&`: enough
/// of XML's well-formedness to catch broken escaping.
fn assert_well_formed_xml(x: &str) {
    let body = x
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        .unwrap();
    let mut stack: Vec<String> = Vec::new();
    let mut rest = body;
    while let Some(lt) = rest.find('<') {
        let text = &rest[..lt];
        for (i, _) in text.match_indices('&') {
            let ent = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "bare & in {text:?}"
            );
        }
        let gt = rest[lt..].find('>').expect("unclosed tag") + lt;
        let tag = &rest[lt + 1..gt];
        assert!(!tag.contains('<'), "< inside a tag: {tag}");
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(closing.trim()),
                "mismatched </{name}>"
            );
        } else if !tag.ends_with('/') {
            stack.push(name);
        }
        rest = &rest[gt + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[test]
fn report_rebuilds_a_self_contained_page_and_junit_from_the_run_dir() {
    let run = copy_run("unfenced-pause");
    let junit = run.path().join("junit.xml");
    let out = lockcheck(&["report", s(run.path()), "--junit", s(&junit)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(run.path().join("report.html")).unwrap();
    // Self-contained: nothing is fetched.
    for needle in [
        "src=\"http",
        "href=\"http",
        "<link",
        "src=\"//",
        "@import",
        "fetch(",
    ] {
        assert!(!html.contains(needle), "report fetches something: {needle}");
    }
    let verdict: Value =
        serde_json::from_str(&std::fs::read_to_string(run.path().join("verdict.json")).unwrap())
            .unwrap();
    let anomalies = verdict["anomalies"].as_array().unwrap();
    assert_eq!(
        html.matches("class=\"card anomaly").count(),
        anomalies.len()
    );
    // Every explanation is on a card, escaped.
    for a in anomalies {
        let text = a["explanation"]
            .as_str()
            .unwrap()
            .replace('\'', "&apos;")
            .replace('"', "&quot;");
        assert!(html.contains(&text), "missing card for {}", a["kind"]);
    }
    assert_eq!(html.matches("<tr class=\"fault-band").count(), 3);
    assert!(html.contains("pause client-0"));
    assert!(html.contains("Guidance: Fencing tokens are needed"));

    let x = std::fs::read_to_string(&junit).unwrap();
    assert_well_formed_xml(&x);
    assert_eq!(x.matches("<testcase ").count(), 6);
    let failing: std::collections::BTreeSet<&str> = anomalies
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(x.matches("<failure ").count(), failing.len());
    for k in failing {
        assert!(x.contains(&format!("<failure type=\"{k}\"")));
    }
}

#[test]
fn report_out_goes_where_asked_and_a_run_without_verdict_is_checked() {
    let run = copy_run("fenced-pause");
    std::fs::remove_file(run.path().join("verdict.json")).unwrap();
    let out_file = run.path().join("elsewhere.html");
    let out = lockcheck(&["report", s(run.path()), "--out", s(&out_file), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The workload allows double-holder: the fresh check is valid.
    assert_eq!(doc["valid"], Value::Bool(true));
    assert!(!run.path().join("report.html").exists());
    let html = std::fs::read_to_string(&out_file).unwrap();
    assert!(html.contains("badge allowed"));
    assert!(html.contains("id=\"lc-verdict\">VALID<"));
}

#[test]
fn analyze_rechecks_with_other_allow_and_keeps_the_runners_figures() {
    let run = copy_run("fenced-pause");
    // The workload allows double-holder: valid.
    let out = lockcheck(&["analyze", s(run.path()), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["valid"], Value::Bool(true));
    assert_eq!(
        doc["run"]["backend"], "redis",
        "the runner's figures are kept"
    );
    assert_eq!(doc["analysis"]["guidance"]["answer"], "fencing-tokens");
    assert_eq!(doc["analysis"]["fencing"]["rejected_in_run"], 1);
    // Another --allow replaces the workload's: the double holders now count.
    let junit = run.path().join("j.xml");
    let out = lockcheck(&[
        "analyze",
        s(run.path()),
        "--allow",
        "stale-write-accepted",
        "--junit",
        s(&junit),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("INVALID: not consistent with lock"),
        "{text}"
    );
    assert!(text.contains("guidance: Fencing tokens are needed"));
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(run.path().join("verdict.json")).unwrap())
            .unwrap();
    assert_eq!(stored["valid"], Value::Bool(false));
    assert_eq!(stored["run"]["backend"], "redis");
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("<failure type=\"double-holder\""));
}

#[test]
fn analyze_reports_malformed_input_with_exit_4() {
    let run = copy_run("unfenced-pause");
    std::fs::write(run.path().join("history.jsonl"), "{\"index\": 5}\n").unwrap();
    let out = lockcheck(&["analyze", s(run.path())]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("history.jsonl:1"));
    let run = copy_run("unfenced-pause");
    std::fs::write(run.path().join("resource.jsonl"), "{\"seq\": \"x\"}\n").unwrap();
    let out = lockcheck(&["report", s(run.path())]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("resource.jsonl:1"));
}

/// Planted paused holders, counted independently by the lock checker and by the
/// report's analyses: each plant is one deposed holder with one late write, and an
/// unfenced resource applied it, which a fence would have rejected.
#[test]
fn analyses_agree_with_the_checker_on_generated_overlaps() {
    for (seed, fenced) in [(3, false), (4, true)] {
        let syn = generate(&SynthConfig {
            seed,
            clients: 4,
            lines: 6_000,
            overlaps: 3,
            fenced,
            info_rate: 0.0,
            ..Default::default()
        });
        let verdict = lock::check(
            &syn.history,
            &lock::LockInput {
                resource: Some(&syn.resource),
            },
            &Limits::default(),
        );
        let double = verdict
            .anomalies
            .iter()
            .filter(|a| a.kind.name() == "double-holder")
            .count();
        let calls = Calls::of(&syn.history);
        let a = analysis::analyze(&syn.history, &calls, Some(&syn.resource), None);
        assert_eq!(a.zombies.deposed, double, "seed {seed}");
        assert_eq!(a.zombies.deposed, 3, "seed {seed}");
        assert!(a.zombies.writes_after >= 3, "seed {seed}");
        if fenced {
            assert!(a.fencing.would_reject.is_empty());
            assert_eq!(a.fencing.rejected_in_run, a.zombies.writes_rejected_after);
        } else {
            // Each applied late write is either one a fence rejects, or one that came
            // before the new holder's first write and slips past any fence.
            assert_eq!(
                a.fencing.would_reject.len() + a.fencing.slipped,
                a.zombies.writes_accepted_after,
                "seed {seed}"
            );
        }
        assert_eq!(a.guidance.answer, analysis::Answer::FencingTokens);
    }
}

/// Text from the run (explanations, notes, workload, fault targets) can never
/// break out of the page: it is escaped in HTML, and `<` never reaches the
/// embedded data as such.
#[test]
fn run_text_is_escaped_in_the_page() {
    let run = copy_run("unfenced-pause");
    let evil = "</script><script>alert(1)</script>";
    let path = run.path().join("verdict.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["anomalies"][0]["explanation"] = Value::from(format!("two holders {evil}"));
    v["notes"] = serde_json::json!([evil]);
    std::fs::write(&path, v.to_string()).unwrap();
    let hist = run.path().join("history.jsonl");
    let text = std::fs::read_to_string(&hist)
        .unwrap()
        .replace("client-0", "client-0</script><b>");
    std::fs::write(&hist, text).unwrap();
    let workload = run.path().join("workload.toml");
    let w = std::fs::read_to_string(&workload).unwrap() + "# <img src=x onerror=alert(1)>\n";
    std::fs::write(&workload, w).unwrap();

    let out = lockcheck(&["report", s(run.path())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(run.path().join("report.html")).unwrap();
    assert!(!html.contains("<script>alert"));
    assert!(!html.contains("<img src=x"));
    assert!(!html.contains("client-0</script>"));
    assert!(html.contains("two holders &lt;/script&gt;"));
    assert!(html.contains("pause client-0&lt;/script&gt;&lt;b&gt;"));
    // Exactly the page's own two scripts.
    assert_eq!(html.matches("<script").count(), 2);
}

/// Every lock fixture (fixtures/expected.tsv): the report renders it, with one card
/// per anomaly and well-formed JUnit; and the zombie analysis, which measures
/// overlaps its own way, finds a deposed holder exactly where the checker finds a
/// double holder (the traps, valid histories that look suspicious, have none).
#[test]
fn lock_fixtures_render_and_zombies_match_double_holders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let expected = std::fs::read_to_string(root.join("expected.tsv")).unwrap();
    let mut seen = 0;
    for row in expected.lines().skip(1) {
        let cols: Vec<&str> = row.split('\t').collect();
        let (file, model, kinds) = (cols[0], cols[1], cols[3]);
        // Malformed rows have no verdict to draw (tests/input_cli.rs).
        if model != "lock" || cols[2] == "malformed" {
            continue;
        }
        let history = lockcheck::history::read_jsonl(&root.join(file)).unwrap();
        let res_path = root.join(file.replace(".jsonl", ".resource.jsonl"));
        let resource = res_path
            .exists()
            .then(|| lockcheck::history::read_resource(&res_path).unwrap());
        let verdict = lock::check(
            &history,
            &lock::LockInput {
                resource: resource.as_deref(),
            },
            &Limits::default(),
        );
        let input = lockcheck::report::Input {
            title: file,
            history: &history,
            resource: resource.as_deref(),
            verdict: &verdict,
            run: None,
            workload: None,
        };
        let html = lockcheck::report::html::render(&input);
        assert_eq!(
            html.matches("class=\"card anomaly").count(),
            verdict.anomalies.len(),
            "{file}"
        );
        assert_well_formed_xml(&lockcheck::report::junit::render(file, &verdict, 0));
        let a = input.analyze();
        assert_eq!(
            a.zombies.deposed > 0,
            kinds.contains("double-holder"),
            "{file}: {} deposed, checker: {kinds}",
            a.zombies.deposed
        );
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} fixtures");
}

/// Appends an `[incident]` to the workload of run directory `dir`.
fn add_incident(dir: &Path, source: &str, rule: &str) {
    let workload = dir.join("workload.toml");
    let text = std::fs::read_to_string(&workload).unwrap();
    let table = format!("[incident]\nsource = \"{source}\"\nrule = \"{rule}\"\n");
    std::fs::write(&workload, format!("{text}\n{table}")).unwrap();
}

#[test]
fn the_guidance_names_the_incident_a_run_replays_from_the_run_dir_alone() {
    // A verdict.json without a run's record (an old version's, the run nested
    // under `run`): the workload's own [incident] says it.
    let run = copy_run("unfenced-pause");
    add_incident(run.path(), "a vendor page", "fence by token");
    let out = lockcheck(&["report", s(run.path())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(run.path().join("report.html")).unwrap();
    assert!(
        html.contains(
            "This run replays a vendor page; the design rule that prevents it: fence by token."
        ),
        "the workload's [incident] is not in the guidance"
    );
    // A run's record (what `lockcheck run` writes) says it itself.
    let run = copy_run("redis-self-fencing-run");
    add_incident(run.path(), "a vendor page", "fence by token");
    let path = run.path().join("verdict.json");
    let mut verdict: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    verdict["incident"] = serde_json::json!({"source": "the runner", "rule": "its rule"});
    std::fs::write(&path, verdict.to_string()).unwrap();
    let out = lockcheck(&["analyze", s(run.path()), "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sentence = doc["analysis"]["guidance"]["sentence"].as_str().unwrap();
    assert!(
        sentence.starts_with(
            "This run replays the runner; the design rule that prevents it: its rule. "
        ),
        "{sentence}"
    );
}

/// A run directory written by `lockcheck run` before verdict.json had a type of
/// its own (a Redis run whose workers fenced themselves): it reads as it did,
/// the record written back is the file byte for byte, and `report` and
/// `analyze` on it say what they said then (their output of that version,
/// stored beside it).
#[test]
fn a_run_directory_from_before_the_typed_record_reads_and_reports_as_before() {
    let name = "redis-self-fencing-run";
    let stored = std::fs::read_to_string(fixture(name).join("verdict.json")).unwrap();
    let file = lockcheck::rundir::read(&fixture(name)).unwrap().unwrap();
    let record = file.run().expect("a run's record");
    assert_eq!(record.self_fencing_margin_ms, Some(200));
    assert_eq!(record.faults.planned, 1);
    let again = tempfile::tempdir().unwrap();
    file.write(again.path()).unwrap();
    let written = std::fs::read_to_string(again.path().join("verdict.json")).unwrap();
    assert_eq!(written, stored, "the record is not written as it was");

    let run = copy_run(name);
    let junit = run.path().join("junit.xml");
    let out = lockcheck(&["report", s(run.path()), "--junit", s(&junit)]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("INVALID: wrote "));
    // The stored JUnit was written from a directory named `run`.
    let dir = run.path().canonicalize().unwrap();
    let title = format!(
        "lockcheck run {}",
        dir.file_name().unwrap().to_str().unwrap()
    );
    let junit = std::fs::read_to_string(junit)
        .unwrap()
        .replace(&title, "lockcheck run run");
    let before = fixture(name).with_extension("junit.xml");
    assert_eq!(junit, std::fs::read_to_string(before).unwrap());
    let html = std::fs::read_to_string(run.path().join("report.html")).unwrap();
    assert!(
        html.contains("200 ms margin"),
        "the recorded self-fencing margin"
    );

    let out = lockcheck(&["analyze", s(run.path()), "--json"]);
    assert_eq!(out.status.code(), Some(1), "the run is invalid");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let before = fixture(name).with_extension("analyze.json");
    let before: Value = serde_json::from_str(&std::fs::read_to_string(before).unwrap()).unwrap();
    assert_eq!(doc, before);
}
