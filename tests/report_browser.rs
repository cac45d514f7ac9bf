//! The report in a real browser: headless Chromium loads report.html, the page's
//! script draws the timeline, and the DOM it leaves shows the canvas drawn, the
//! anomaly cards and the fault bands; a link to an anomaly highlights its ops; a
//! long generated history is aggregated when zoomed out and detailed when zoomed in.

mod run_support;

use lockcheck::check::{lock, Limits};
use lockcheck::history::synth::{generate, SynthConfig};
use lockcheck::report::{browser, write_html_for, Input};
use std::path::Path;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(90);

fn n(r: &browser::Rendered, key: &str) -> usize {
    r.body
        .get(key)
        .unwrap_or_else(|| panic!("no data-{key} on <body>: {:?}", r.body))
        .parse()
        .unwrap()
}

/// Writes a fixture's report with the CLI, loads it in Chromium, and checks what the
/// page drew and decoded against the run directory. Returns the page and its verdict.
fn render_fixture(
    name: &str,
    dir: &Path,
) -> (std::path::PathBuf, browser::Rendered, serde_json::Value) {
    let html = dir.join(format!("{name}.html"));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/report")
        .join(name);
    run_support::lockcheck_ok([
        "report".as_ref(),
        fixture.as_os_str(),
        "--out".as_ref(),
        html.as_os_str(),
    ]);

    let r = browser::render(&html, "", None, TIMEOUT).unwrap();
    assert_eq!(
        r.body.get("timeline").map(String::as_str),
        Some("drawn"),
        "{name}"
    );
    assert_eq!(r.body["mode"], "detail", "{name}");
    // The page decoded the embedded columns to what the history says.
    let history = lockcheck::history::read_jsonl(&fixture.join("history.jsonl")).unwrap();
    let calls = lockcheck::check::calls::Calls::of(&history);
    assert_eq!(n(&r, "calls"), calls.calls.len());
    assert_eq!(n(&r, "sections"), calls.sections.len());
    let last_invoke = history
        .ops
        .iter()
        .rfind(|o| o.kind == lockcheck::history::OpType::Invoke);
    assert_eq!(n(&r, "last-invoke") as u64, last_invoke.unwrap().index);
    let max_token = history.ops.iter().filter_map(|o| o.token()).max().unwrap();
    assert_eq!(n(&r, "max-token") as u64, max_token);
    // The whole run is in view: every fault period is drawn as a band, and listed.
    let faults = lockcheck::report::timeline::fault_bands(&history).len();
    assert!(faults > 0);
    assert_eq!(n(&r, "fault-bands"), faults, "{name}");
    assert_eq!(r.dom.matches("<tr class=\"fault-band").count(), faults);
    assert!(n(&r, "drawn") > 50, "{:?}", r.body);
    let verdict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("verdict.json")).unwrap())
            .unwrap();
    let cards = verdict["anomalies"].as_array().unwrap().len();
    assert!(cards > 0);
    assert_eq!(
        r.dom.matches("class=\"card anomaly").count(),
        cards,
        "{name}"
    );
    (html, r, verdict)
}

#[test]
fn reports_of_a_demo_and_a_real_run_draw_timeline_cards_and_fault_bands() {
    let dir = tempfile::tempdir().unwrap();
    render_fixture("redis-pause-unfenced-run", dir.path());
    let (html, _, verdict) = render_fixture("unfenced-pause", dir.path());

    // A link to the first card: its ops are highlighted, the timeline zooms to them,
    // and the card is marked active.
    let first = &verdict["anomalies"][0];
    let ix: Vec<String> = first["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    let r = browser::render(&html, &format!("#ix={}", ix.join(",")), None, TIMEOUT).unwrap();
    assert_eq!(n(&r, "highlighted"), ix.len());
    assert!(n(&r, "visible-calls") < 204 / 2, "zoomed in: {:?}", r.body);
    assert!(r.dom.contains("class=\"card anomaly active\""));
}

#[test]
fn long_history_is_aggregated_zoomed_out_and_detailed_zoomed_in() {
    let syn = generate(&SynthConfig {
        seed: 11,
        clients: 8,
        lines: 60_000,
        overlaps: 2,
        fenced: false,
        ..Default::default()
    });
    let verdict = lock::check(
        &syn.history,
        &lock::LockInput {
            resource: Some(&syn.resource),
        },
        &Limits::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let input = Input {
        title: "generated",
        history: &syn.history,
        resource: Some(&syn.resource),
        verdict: &verdict,
        run: None,
        workload: None,
    };
    write_html_for(&input, &html).unwrap();

    let r = browser::render(&html, "", None, TIMEOUT).unwrap();
    assert_eq!(r.body["timeline"], "drawn");
    assert_eq!(r.body["mode"], "aggregate");
    assert_eq!(
        r.body["source"], "pyramid",
        "zoomed out, drawn from the time bins"
    );
    assert!(n(&r, "visible-calls") > 25_000, "{:?}", r.body);
    assert!(n(&r, "drawn") > 0);
    assert_eq!(n(&r, "fault-bands"), 2, "the two planted pauses");

    let a = verdict
        .anomalies
        .iter()
        .find(|a| a.kind.name() == "double-holder")
        .expect("a planted double holder");
    let ix: Vec<String> = a.indexes.iter().map(u64::to_string).collect();
    let r = browser::render(&html, &format!("#ix={}", ix.join(",")), None, TIMEOUT).unwrap();
    assert_eq!(r.body["mode"], "detail", "{:?}", r.body);
    assert!(n(&r, "highlighted") >= 2);

    // The wheel zooms in around the pointer (deltaY -400 = span × e^-0.6); dragging
    // right moves the view to earlier times.
    let r = browser::render(&html, "#bench", None, TIMEOUT).unwrap();
    let span: f64 = r.body["wheel-span"].parse().unwrap();
    assert!((span - (-0.6f64).exp()).abs() < 0.01, "{:?}", r.body);
    assert_eq!(r.body["panned"], "left");
}
