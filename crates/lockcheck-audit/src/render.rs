//! The scorecard as people and CI read it: a table for the terminal, JUnit XML (one
//! case per scenario) and audit.html, one self-contained page (inline CSS, no
//! script, no network) linking every run's report.html.

use super::card::{ScenarioCard, Stopped};
use super::scorecard::Scorecard;
use super::shard::PartPhase;
pub use super::stats::minutes;
use lockcheck_report::escape;
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

/// `20 / 24 / 24`: provoked, fired, ran.
fn exercised(c: &ScenarioCard) -> String {
    format!("{} / {} / {}", c.provoked, c.fired, c.ran)
}

/// A twin's exact bound (`≤ 13.9%`), its floor where it has one, `not tested`
/// for a twin too few of whose runs were provoked for any bound; a "can it
/// break?" scenario that ran out with no break, its break rate's (`no break
/// ≤ 25.9%`); else `-`.
fn bound(c: &ScenarioCard) -> String {
    if c.untested() {
        return format!("not tested ({} of {} provoked)", c.provoked, c.ran);
    }
    if c.question == super::battery::Question::CanItBreak {
        return match super::stats::upper_95(0, c.counted) {
            Some(u) if c.flagged == 0 && c.stopped == Stopped::RanOut => {
                let nobody = c.deposed_nobody().map_or("", |_| " (nobody deposed)");
                format!("no break ≤ {:.1}%{nobody}", u * 100.0)
            }
            _ => "-".into(),
        };
    }
    match (c.upper_95, c.floor) {
        (Some(u), Some(f)) => format!("≤ {:.1}% (floor {f})", u * 100.0),
        (Some(u), None) => format!("≤ {:.1}%", u * 100.0),
        (None, Some(f)) => format!("- (floor {f})"),
        (None, None) => "-".into(),
    }
}

fn stopped(c: &ScenarioCard) -> &'static str {
    match c.stopped {
        Stopped::Broke => "broke",
        Stopped::BrokeUnprovoked => "broke, unprovoked",
        Stopped::RanOut => "ran its runs",
        Stopped::Floor => "floor reached",
        Stopped::Cap if c.floor.is_none() => "ran its runs",
        Stopped::Cap => "below floor",
        Stopped::NotAsked => "not asked",
        Stopped::NoLateWrite => "not asked: no late write",
        Stopped::OutOfReach => "not applicable (measured)",
        Stopped::CutShort => "cut short",
        Stopped::OtherPhase => "other phase",
    }
}

/// ` (exploratory: below the default floor of 20)` after a floor below the default.
fn exploratory(card: &Scorecard) -> String {
    let default = super::plan::DEFAULT_FLOOR;
    match card.provoked_floor < default {
        true => format!(" (exploratory: below the default floor of {default})"),
        false => String::new(),
    }
}

/// `a 15m00s budget`, or `no budget` for a `--bound` audit given no
/// `--budget` (a year).
fn budget(card: &Scorecard) -> String {
    match card.budget_s > 180.0 * 24.0 * 3600.0 {
        true => "no budget".into(),
        false => format!("a {} budget", minutes(card.budget_s)),
    }
}

/// How long the audit took: its wall time, or for a merge of shards, the slowest
/// part of each phase (what it would take on as many machines as shards, the
/// phases one after the other), never a sum the table would pass off as one
/// machine's.
pub fn wall(c: &Scorecard) -> String {
    let Some(shards) = c.shards.as_ref().filter(|s| !s.parts.is_empty()) else {
        return minutes(c.elapsed_s);
    };
    let slowest = |phase: PartPhase| {
        shards
            .parts
            .iter()
            .filter(|p| p.phase == phase)
            .map(|p| p.elapsed_s)
            .reduce(f64::max)
    };
    let phases: Vec<String> = [PartPhase::Breaks, PartPhase::Twins]
        .into_iter()
        .filter_map(slowest)
        .map(minutes)
        .collect();
    format!(
        "{} parts of {} shards, the slowest part of each phase {}",
        shards.parts.len(),
        shards.of,
        phases.join(" + ")
    )
}

/// `2`, or `2 → 4` where the audit paced itself up.
fn at_once(card: &Scorecard) -> String {
    match card.levels.iter().map(|l| l.jobs).max() {
        Some(most) if most != card.jobs => format!("{} → {most}", card.jobs),
        _ => card.jobs.to_string(),
    }
}

/// A line a level the audit measured (see `pace::Level::line`).
fn levels(card: &Scorecard) -> Vec<String> {
    card.levels
        .iter()
        .filter(|l| l.lateness.is_some())
        .map(|l| l.line())
        .collect()
}

/// Rows padded to their columns' widths, the first left-aligned.
fn aligned(rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let padded: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                let pad = " ".repeat(w - c.chars().count());
                if i == 0 {
                    format!("{c}{pad}")
                } else {
                    format!("{pad}{c}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    }
    out
}

/// The scorecard for the terminal.
pub fn table(card: &Scorecard) -> String {
    let mut out = String::new();
    let client = card
        .client
        .as_ref()
        .map_or("its built-in client".to_string(), |c| c.join(" "));
    for line in card.provenance.lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "lockcheck audit: {} ({client}), up to {} runs a \"can it break?\" scenario, floor {} provoked runs a fenced twin{} (in {} runs at most), {} at once, {}, {}",
        card.backend,
        card.runs_per_scenario,
        card.provoked_floor,
        exploratory(card),
        card.twin_runs,
        at_once(card),
        wall(card),
        budget(card)
    );
    let head = [
        "scenario",
        "flagged",
        "provoked / fired / ran",
        "holds: rate bound",
        "stopped",
        "1st anomaly",
        "zombie p50 / p99",
        "stale accepted",
        "fence rejected",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    rows.extend(card.scenarios.iter().map(|c| {
        vec![
            c.scenario.clone(),
            rate(c).0,
            exercised(c),
            bound(c),
            stopped(c).to_string(),
            seconds(c.median_first_anomaly_s),
            zombie(c),
            c.stale_writes_accepted.to_string(),
            c.writes_rejected_by_fence.to_string(),
        ]
    }));
    out += &aligned(&rows);
    for c in card.scenarios.iter().filter(|c| !c.not_counted.is_empty()) {
        for why in &c.not_counted {
            let _ = writeln!(out, "  {}: not counted: {why}", c.scenario);
        }
    }
    out += &footer(card);
    out
}

/// Below the table: stale writes by fencing mode, what did not apply, what is
/// missing, and the verdict with its evidence.
fn footer(card: &Scorecard) -> String {
    let mut out = String::new();
    if !card.stale_writes.is_empty() {
        let _ = writeln!(out, "stale writes accepted, by fencing mode:");
        for s in &card.stale_writes {
            let by: Vec<String> = s
                .accepted
                .iter()
                .map(|(mode, n)| format!("{mode} {n}"))
                .collect();
            let rejected = match s.rejected_by_fence {
                0 => String::new(),
                n => format!(" ({n} writes refused by the fence)"),
            };
            let _ = writeln!(out, "  {}: {}{rejected}", s.recipe.name(), by.join(", "));
        }
    }
    let mut section = |title: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            let _ = writeln!(out, "{title}:");
            for l in lines {
                let _ = writeln!(out, "  {l}");
            }
        }
    };
    section("not applicable", not_applicable(card));
    section("runs at once", levels(card));
    section("missing for a complete verdict", card.missing.clone());
    section(
        "unsettled, the verdict does not rest on them",
        card.unsettled.clone(),
    );
    section("shrunk counterexamples (--shrink)", shrunk(card));
    section("shards", shards(card));
    if let Some(line) = bound_line(card) {
        let _ = writeln!(out, "{line}");
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

/// `bound: asked ≤ 1.0%, reached ≤ 0.9% (the weakest claim; one-sided 95%,
/// exact)`: every scorecard says how strong its weakest claim is.
pub fn bound_line(card: &Scorecard) -> Option<String> {
    let asked = card
        .bound
        .map(|b| format!("asked ≤ {:.1}%, ", b * 100.0))
        .unwrap_or_default();
    let reached = match card.bound_reached {
        Some(r) => format!(
            "reached ≤ {:.1}% (the weakest claim the verdict could rest on; one-sided 95%, exact)",
            r * 100.0
        ),
        None if card.bound.is_some() => "reached: no claim tested".into(),
        None => return None,
    };
    Some(format!("bound: {asked}{reached}"))
}

/// A part: which; a merge: each part with its shard, phase, runs, wall time
/// and machine, and the twins a second phase must still run.
fn shards(card: &Scorecard) -> Vec<String> {
    let Some(s) = &card.shards else {
        return Vec::new();
    };
    let mut lines = vec![s.describe()];
    for p in &s.parts {
        lines.push(format!(
            "shard {} of {} ({}): {} run{} in {}, {} cores, started {} ({})",
            p.shard,
            s.of,
            p.phase.name(),
            p.runs,
            if p.runs == 1 { "" } else { "s" },
            minutes(p.elapsed_s),
            p.machine.cores.map_or("?".into(), |c| c.to_string()),
            p.started_utc.as_deref().unwrap_or("?"),
            p.dir
        ));
    }
    if !s.twins_pending.is_empty() {
        lines.push(format!(
            "second phase pending, the twins the first asks: {}; run every shard again with `--asked` this merge's audit.json, then merge the parts of both phases",
            s.twins_pending.join(", ")
        ));
    }
    lines
}

/// JUnit XML: a suite for the audit, a case per scenario; a flagged scenario fails
/// with its figures, one with no run that counts is an error, and what did not
/// apply is skipped with why.
pub fn junit(card: &Scorecard) -> String {
    use lockcheck_report::junit::{Case, Outcome, Suite};
    let class = format!("lockcheck.audit.{}", card.backend);
    let case = |name: &str, time_s: Option<f64>, outcome: Outcome| Case {
        class: class.clone(),
        name: name.into(),
        time_s,
        outcome,
        system_out: None,
    };
    let scenarios = card.scenarios.iter().map(|c| {
        let outcome = if c.flagged > 0 {
            Outcome::Failure("flagged".into(), c.evidence(), c.description.clone())
        } else if let Some(why) = about(&card.missing, c) {
            Outcome::Error("untested".into(), why.clone(), String::new())
        } else if let Some(why) = about(&card.unsettled, c)
            .map(|u| format!("unsettled: {u}"))
            .or_else(|| skipped_why(c))
        {
            Outcome::Skipped(why)
        } else {
            Outcome::Passed
        };
        let time: f64 = c.runs.iter().map(|r| r.wall_s).sum();
        case(&c.scenario, Some(time), outcome)
    });
    // One this machine stood in the way of is untested, not skipped.
    let left_out = card.not_applicable.iter().map(|n| {
        let outcome = match n.environment {
            true => Outcome::Error(
                "untested".into(),
                format!("not run here: {}", n.why),
                String::new(),
            ),
            false => Outcome::Skipped(format!("not applicable: {}", n.why)),
        };
        case(&n.scenario, None, outcome)
    });
    let extra = [
        bound_line(card).map(|l| ("bound".to_string(), l)),
        card.shards
            .as_ref()
            .map(|s| ("shards".to_string(), s.describe())),
    ];
    let properties = card
        .provenance
        .properties()
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .chain(extra.into_iter().flatten())
        .collect();
    Suite {
        name: format!("lockcheck audit {} ({})", card.backend, card.verdict.name()),
        time_s: card.elapsed_s,
        properties,
        cases: scenarios.chain(left_out).collect(),
    }
    .to_xml()
}

/// The line of `lines` about scenario `c` (`scenario: why`), if there is one.
fn about<'a>(lines: &'a [String], c: &ScenarioCard) -> Option<&'a String> {
    let prefix = format!("{}: ", c.scenario);
    lines.iter().find(|m| m.starts_with(&prefix))
}

/// Why a scenario was skipped, if it was: a twin not asked, or a scenario a
/// run showed not applicable.
fn skipped_why(c: &ScenarioCard) -> Option<String> {
    match c.stopped {
        Stopped::NotAsked => Some("not asked: its recipe never broke the lock unfenced".into()),
        Stopped::NoLateWrite => Some("not asked: its recipe broke the lock unfenced only unprovoked (no deposed holder's late write reached the resource), so no fence was asked".into()),
        Stopped::OutOfReach => Some(format!("not applicable: {}", c.out_of_reach()?)),
        Stopped::OtherPhase => Some("run in the other phase of this sharded audit: `lockcheck audit merge` adds it up".into()),
        _ if c.untested() => Some(c.untested_line()),
        _ => None,
    }
}

/// `scenario: why` for each scenario the battery left out for this backend
/// and each a run showed not applicable.
fn not_applicable(card: &Scorecard) -> Vec<String> {
    let measured = card
        .scenarios
        .iter()
        .filter_map(|c| Some(format!("{}: {}", c.scenario, c.out_of_reach()?)));
    card.not_applicable
        .iter()
        .map(|n| format!("{}: {}", n.scenario, n.why))
        .chain(measured)
        .collect()
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}.flagged{background:#fde2e1}\
.clean{background:#e3f6e5}.untested{background:#fff5d6}.verdict{font-size:1.3em;padding:.6em 1em;border-radius:6px;background:#eef}\
.runs a{margin-right:.4em}.bad{color:#b00020;font-weight:bold}.ok{color:#1b7a2c}code{background:#f5f5f5;padding:0 .2em}";

/// Where the scorecard came from, its bound and its shards, escaped.
fn origin(card: &Scorecard) -> Vec<String> {
    card.provenance
        .lines()
        .into_iter()
        .chain(bound_line(card))
        .chain(shards(card))
        .map(|l| escape(&l))
        .collect()
}

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
        "<h1>{}</h1><p>Up to {} runs a \"can it break?\" scenario, floor {} provoked runs a fenced twin{} (in {} runs at most), {} at once, {}, {}{}.</p>",
        escape(&title),
        card.runs_per_scenario,
        card.provoked_floor,
        exploratory(card),
        card.twin_runs,
        at_once(card),
        wall(card),
        budget(card),
        card.client
            .as_ref()
            .map(|c| format!("; client <code>{}</code>", escape(&c.join(" "))))
            .unwrap_or_default()
    );
    let _ = write!(
        h,
        "<p class=\"provenance\">{}</p>",
        origin(card).join("<br>")
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
    h += "</ul><h2>Scenarios</h2><table><tr><th>scenario</th><th>what</th><th>flagged</th><th>95% interval</th><th>provoked / fired / ran</th><th>holds: rate bound</th><th>stopped</th><th>median 1st anomaly</th><th>zombie window p50 / p99</th><th>stale writes accepted</th><th>rejected by the fence</th><th>runs</th></tr>";
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
                        "<a href=\"{}\" title=\"seed {}: {} {}\">{}{mark}</a>",
                        escape(&relative(&card.dir, &d.join(lockcheck_report::REPORT_FILE))),
                        r.seed,
                        r.provoked.map_or("", |p| p.name()),
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
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{k}</td><td>{i}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"runs\">{}</td></tr>",
            escape(&c.scenario),
            escape(&c.description),
            exercised(c),
            escape(&bound(c)),
            stopped(c),
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
    list(&mut h, "Not applicable", &not_applicable(card));
    list(&mut h, "Runs at once", &levels(card));
    list(&mut h, "Missing for a complete verdict", &card.missing);
    list(
        &mut h,
        "Unsettled, the verdict does not rest on them",
        &card.unsettled,
    );
    list(&mut h, "Shrunk counterexamples (--shrink)", &shrunk(card));
    h += "<p>Each scenario's workload is in <code>scenarios/</code>; <code>audit.json</code> has every figure.</p></body></html>\n";
    h
}

/// `scenario: kind shrunk from … to …: path (k/n reruns flagged)`, a line a break.
fn shrunk(card: &Scorecard) -> Vec<String> {
    card.scenarios
        .iter()
        .filter_map(|c| Some(format!("{}: {}", c.scenario, c.shrunk.as_ref()?.line())))
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every published scorecard's JUnit: a case per scenario and per one left
    /// out, a failure per flagged scenario, the suite's counts those of its cases.
    #[test]
    fn a_published_audit_gives_a_case_per_scenario_and_a_failure_per_flagged_one() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/audits");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let card = super::super::scorecard::read(&path).unwrap();
            let x = junit(&card);
            let tests = card.scenarios.len() + card.not_applicable.len();
            let flagged = card.scenarios.iter().filter(|c| c.flagged > 0).count();
            assert_eq!(x.matches("<testcase ").count(), tests, "{}", path.display());
            assert_eq!(
                x.matches("<failure ").count(),
                flagged,
                "{}",
                path.display()
            );
            let counts = format!("tests=\"{tests}\" failures=\"{flagged}\"");
            assert_eq!(x.matches(&counts).count(), 2, "{}: {x}", path.display());
            assert!(x.contains("<property name=\"lockcheck.commit\""), "{x}");
            read += 1;
        }
        assert!(read >= 10, "{read} scorecards in {}", dir.display());
    }
}
