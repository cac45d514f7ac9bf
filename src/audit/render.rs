//! The scorecard as people and CI read it: a table for the terminal, JUnit XML (one
//! case per scenario) and audit.html, one self-contained page (inline CSS, no
//! script, no network) linking every run's report.html.

use super::scorecard::{ScenarioCard, Scorecard};
use crate::report::escape;
use std::fmt::Write;
use std::path::Path;

/// `10/10`, and the interval as percentages: `72-100%`.
fn rate(c: &ScenarioCard) -> (String, String) {
    let k_of_n = format!("{}/{}", c.flagged, c.counted);
    let interval = c.interval_95.map_or("-".into(), |i| {
        format!("{:.0}-{:.0}%", i.low * 100.0, i.high * 100.0)
    });
    (k_of_n, interval)
}

fn seconds(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{s:.2} s"))
}

/// Zombie window p50 / p99 in seconds.
fn zombie(c: &ScenarioCard) -> String {
    c.zombie_window_ms.map_or("-".into(), |p| {
        format!("{:.2} / {:.2} s", p.p50 / 1e3, p.p99 / 1e3)
    })
}

/// `14m05s`.
pub fn minutes(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// The scorecard for the terminal.
pub fn table(card: &Scorecard) -> String {
    let mut out = String::new();
    let client = card
        .client
        .as_ref()
        .map_or("its built-in client".to_string(), |c| c.join(" "));
    let _ = writeln!(
        out,
        "lockcheck audit: {} ({client}), {} runs per scenario, {} at once, {} of {}",
        card.backend,
        card.runs_per_scenario,
        card.jobs,
        minutes(card.elapsed_s),
        minutes(card.budget_s)
    );
    let head = [
        "scenario",
        "flagged",
        "95% interval",
        "1st anomaly",
        "zombie p50 / p99",
        "stale accepted",
        "fence rejected",
    ];
    let rows: Vec<[String; 7]> = card
        .scenarios
        .iter()
        .map(|c| {
            let (k, i) = rate(c);
            [
                c.scenario.clone(),
                k,
                i,
                seconds(c.median_first_anomaly_s),
                zombie(c),
                c.stale_writes_accepted.to_string(),
                c.writes_rejected_by_fence.to_string(),
            ]
        })
        .collect();
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..head.len()).map(width).collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let _ = writeln!(out, "{}", line(&head));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r));
    }
    for c in card.scenarios.iter().filter(|c| !c.not_counted.is_empty()) {
        for why in &c.not_counted {
            let _ = writeln!(out, "  {}: not counted: {why}", c.scenario);
        }
    }
    if !card.stale_writes.is_empty() {
        let _ = writeln!(out, "stale writes accepted, by fencing mode:");
        for s in &card.stale_writes {
            let by: Vec<String> = s
                .accepted
                .iter()
                .map(|(mode, n)| format!("{mode} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  {}: {}{}",
                s.recipe.name(),
                by.join(", "),
                if s.rejected_by_fence > 0 {
                    format!(" ({} rejected by the fence)", s.rejected_by_fence)
                } else {
                    String::new()
                }
            );
        }
    }
    if !card.not_applicable.is_empty() {
        let _ = writeln!(out, "not applicable:");
        for n in &card.not_applicable {
            let _ = writeln!(out, "  {}: {}", n.scenario, n.why);
        }
    }
    if !card.left_out.is_empty() {
        let why = card
            .interrupted
            .as_ref()
            .map_or("by the budget".to_string(), |s| format!("by {s}"));
        let _ = writeln!(out, "left out {why}:");
        for l in &card.left_out {
            let _ = writeln!(
                out,
                "  {}: {} of {} runs",
                l.scenario,
                l.runs.len(),
                card.runs_per_scenario
            );
        }
    }
    let _ = writeln!(
        out,
        "verdict: {} ({})",
        card.verdict.name(),
        card.verdict_sentence
    );
    for e in &card.evidence {
        let _ = writeln!(out, "  {e}");
    }
    out
}

/// JUnit XML: a suite for the audit, a case per scenario; a flagged scenario fails
/// with its figures, one with no run that counts is an error, and what did not
/// apply is skipped with why.
pub fn junit(card: &Scorecard) -> String {
    let mut cases = String::new();
    let (mut failures, mut errors, mut skipped) = (0, 0, 0);
    let class = format!("lockcheck.audit.{}", escape(&card.backend));
    for c in &card.scenarios {
        let time: f64 = c.runs.iter().map(|r| r.wall_s).sum();
        let _ = writeln!(
            cases,
            "    <testcase classname=\"{class}\" name=\"{}\" time=\"{time:.3}\">",
            escape(&c.scenario)
        );
        if c.flagged > 0 {
            failures += 1;
            let _ = writeln!(
                cases,
                "      <failure type=\"flagged\" message=\"{}\">{}</failure>",
                escape(&c.evidence()),
                escape(&c.description)
            );
        } else if c.counted == 0 {
            errors += 1;
            let why = card
                .untested()
                .into_iter()
                .find(|u| u.starts_with(&c.scenario));
            let _ = writeln!(
                cases,
                "      <error type=\"untested\" message=\"{}\"/>",
                escape(why.as_deref().unwrap_or("no run counted"))
            );
        }
        cases += "    </testcase>\n";
    }
    for n in &card.not_applicable {
        skipped += 1;
        let _ = writeln!(
            cases,
            "    <testcase classname=\"{class}\" name=\"{}\">\n      <skipped message=\"not applicable: {}\"/>\n    </testcase>",
            escape(&n.scenario),
            escape(&n.why)
        );
    }
    let tests = card.scenarios.len() + card.not_applicable.len();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"lockcheck audit {} ({})\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">\n{cases}  </testsuite>\n</testsuites>\n",
        escape(&card.backend),
        card.verdict.name(),
        card.elapsed_s
    )
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}.flagged{background:#fde2e1}\
.clean{background:#e3f6e5}.untested{background:#fff5d6}.verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;background:#eef}\
.runs a{margin-right:.4em}.bad{color:#b00020;font-weight:bold}.ok{color:#1b7a2c}code{background:#f5f5f5;padding:0 .2em}";

/// audit.html: the verdict and its evidence, the table, the stale writes by fencing
/// mode, what did not apply or run, and a link to each run's report (relative to
/// the audit's directory, so the directory can be moved whole).
pub fn html(card: &Scorecard) -> String {
    let mut h = String::new();
    let title = format!("lockcheck audit: {}", card.backend);
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
        escape(&title)
    );
    let _ = write!(
        h,
        "<h1>{}</h1><p>{} runs per scenario, {} at once, {} of a {} budget{}.</p>",
        escape(&title),
        card.runs_per_scenario,
        card.jobs,
        minutes(card.elapsed_s),
        minutes(card.budget_s),
        card.client
            .as_ref()
            .map(|c| format!("; client <code>{}</code>", escape(&c.join(" "))))
            .unwrap_or_default()
    );
    let _ = write!(
        h,
        "<p class=\"verdict\"><b>{}</b>: {}</p><ul>",
        card.verdict.name(),
        escape(&card.verdict_sentence)
    );
    for e in &card.evidence {
        let _ = write!(h, "<li>{}</li>", escape(e));
    }
    h += "</ul><h2>Scenarios</h2><table><tr><th>scenario</th><th>what</th><th>flagged</th><th>95% interval</th><th>median 1st anomaly</th><th>zombie window p50 / p99</th><th>stale writes accepted</th><th>rejected by the fence</th><th>runs</th></tr>";
    for c in &card.scenarios {
        let (k, i) = rate(c);
        let class = match (c.counted, c.flagged) {
            (0, _) => "untested",
            (_, 0) => "clean",
            _ => "flagged",
        };
        let links: Vec<String> = c
            .runs
            .iter()
            .map(|r| {
                let mark = match r.outcome {
                    super::execute::Outcome::Flagged => "✗",
                    super::execute::Outcome::Valid => "✓",
                    _ => "?",
                };
                match &r.run_dir {
                    Some(d) => format!(
                        "<a href=\"{}\" title=\"seed {}: {}\">{}{mark}</a>",
                        escape(&relative(&card.dir, &d.join(crate::report::REPORT_FILE))),
                        r.seed,
                        escape(&r.anomalies.join(", ")),
                        r.run
                    ),
                    None => format!(
                        "<span title=\"{}\">{}{mark}</span>",
                        escape(r.error.as_deref().unwrap_or("")),
                        r.run
                    ),
                }
            })
            .collect();
        let _ = write!(
            h,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{k}</td><td>{i}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"runs\">{}</td></tr>",
            escape(&c.scenario),
            escape(&c.description),
            seconds(c.median_first_anomaly_s),
            zombie(c),
            c.stale_writes_accepted,
            c.writes_rejected_by_fence,
            links.join("")
        );
    }
    h += "</table>";
    let untested: Vec<String> = card
        .scenarios
        .iter()
        .flat_map(|c| {
            c.not_counted
                .iter()
                .map(move |w| format!("{}: {w}", c.scenario))
        })
        .collect();
    list(&mut h, "Runs that did not count", &untested);
    let stale: Vec<String> = card
        .stale_writes
        .iter()
        .map(|s| {
            let by: Vec<String> = s.accepted.iter().map(|(m, n)| format!("{m} {n}")).collect();
            format!("{}: {}", s.recipe.name(), by.join(", "))
        })
        .collect();
    list(&mut h, "Stale writes accepted, by fencing mode", &stale);
    let na: Vec<String> = card
        .not_applicable
        .iter()
        .map(|n| format!("{}: {}", n.scenario, n.why))
        .collect();
    list(&mut h, "Not applicable", &na);
    let left: Vec<String> = card
        .left_out
        .iter()
        .map(|l| {
            format!(
                "{}: {} of {} runs",
                l.scenario,
                l.runs.len(),
                card.runs_per_scenario
            )
        })
        .collect();
    list(&mut h, "Left out", &left);
    h += "<p>Each scenario's workload is in <code>scenarios/</code>; <code>audit.json</code> has every figure.</p></body></html>\n";
    h
}

fn list(h: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = write!(h, "<h2>{}</h2><ul>", escape(title));
    for i in items {
        let _ = write!(h, "<li>{}</li>", escape(i));
    }
    h.push_str("</ul>");
}

/// `path` relative to `base` where it lies under it, else as given.
fn relative(base: &Path, path: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}
