//! JUnit XML for CI: one test case per check of the anomaly kinds
//! ([`AnomalyKind::check`]), failing with the anomaly sentences.
//! Allowed anomalies are not failures; they are listed in the case's system-out.
//! A run adds one case for its faults: planned faults that never started fail it
//! (unless `--allow-missed-faults`), so CI never counts an untested run as a pass.

use super::input::MissedFaults;
use super::text::escape;
use crate::check::{secs, Anomaly, AnomalyKind, Validity, Verdict};

fn evidence(a: &Anomaly) -> String {
    let ix: Vec<String> = a.indexes.iter().map(u64::to_string).collect();
    let mut s = format!(
        "[{}] {} (ops {})",
        a.kind.name(),
        a.explanation,
        ix.join(", ")
    );
    if let Some(t) = a.time {
        s += &format!(" at {}", secs(t));
    }
    s
}

/// The JUnit document for one verdict. `suite` names the run; `duration_ns` is the
/// run's length (the suite's `time`).
pub fn render(suite: &str, verdict: &Verdict, duration_ns: u64) -> String {
    render_run(suite, verdict, None, duration_ns)
}

/// [`render`] for a run, with the case of its faults: `missed` is what
/// verdict.json says never started (`None`: every planned fault started).
pub fn render_run(
    suite: &str,
    verdict: &Verdict,
    missed: Option<&MissedFaults>,
    duration_ns: u64,
) -> String {
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    // One case per check of the one list of anomaly kinds: a kind that fails the
    // verdict fails its case, whichever kind it is.
    let found: Vec<AnomalyKind> = verdict.anomalies.iter().map(|a| a.kind).collect();
    for (name, kinds) in AnomalyKind::checks(&verdict.model, &found) {
        tests += 1;
        let of = |allowed: bool| -> Vec<&Anomaly> {
            verdict
                .anomalies
                .iter()
                .filter(|a| kinds.contains(&a.kind) && a.allowed == allowed)
                .collect()
        };
        let (failing, allowed) = (of(false), of(true));
        let kind_names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        cases += &format!(
            "    <testcase classname=\"lockcheck.{}\" name=\"{} ({})\">\n",
            escape(&verdict.model),
            escape(name),
            kind_names.join(", ")
        );
        if let Some(first) = failing.first() {
            failures += 1;
            let body: Vec<String> = failing.iter().map(|a| evidence(a)).collect();
            cases += &format!(
                "      <failure type=\"{}\" message=\"{} anomalies: {}\">{}</failure>\n",
                first.kind.name(),
                failing.len(),
                escape(&first.explanation),
                escape(&body.join("\n"))
            );
        }
        if !allowed.is_empty() {
            let body: Vec<String> = allowed.iter().map(|a| evidence(a)).collect();
            cases += &format!(
                "      <system-out>allowed by design, not failures:\n{}</system-out>\n",
                escape(&body.join("\n"))
            );
        }
        cases += "    </testcase>\n";
    }
    if verdict.valid == Validity::Unknown {
        tests += 1;
        errors += 1;
        cases += &format!(
            "    <testcase classname=\"lockcheck.{}\" name=\"check completed\">\n      <error type=\"unknown\" message=\"the checker gave up within its limits\">{}</error>\n    </testcase>\n",
            escape(&verdict.model),
            escape(&verdict.notes.join("\n"))
        );
    }
    if let Some(m) = missed {
        tests += 1;
        cases += &format!(
            "    <testcase classname=\"lockcheck.{}\" name=\"faults (every planned fault started)\">\n",
            escape(&verdict.model)
        );
        let body = escape(&m.lines.join("\n"));
        if m.allowed {
            cases += &format!(
                "      <system-out>{}:\n{body}</system-out>\n",
                escape(&m.headline())
            );
        } else {
            failures += 1;
            cases += &format!(
                "      <failure type=\"missed-faults\" message=\"{}\">{body}</failure>\n",
                escape(&m.headline())
            );
        }
        cases += "    </testcase>\n";
    }
    let time = format!("{:.3}", duration_ns as f64 / 1e9);
    let suite = escape(suite);
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"lockcheck\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{time}\">\n  <testsuite name=\"{suite}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{time}\">\n{cases}  </testsuite>\n</testsuites>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anomaly(kind: AnomalyKind, allowed: bool, text: &str) -> Anomaly {
        Anomaly {
            kind,
            indexes: vec![3, 7],
            processes: vec![0, 1],
            tokens: vec![1, 2],
            time: Some(1_201_000_000),
            explanation: text.into(),
            allowed,
        }
    }

    #[test]
    fn one_case_per_check_failures_carry_sentences_allowed_in_system_out() {
        let v = Verdict {
            valid: Validity::Invalid,
            model: "lock".into(),
            anomalies: vec![
                anomaly(AnomalyKind::DoubleHolder, true, "p0 & p1 <both> held"),
                anomaly(
                    AnomalyKind::StaleWriteAccepted,
                    false,
                    "token 1 after \"2\"",
                ),
            ],
            notes: vec![],
        };
        let x = render("run <a>", &v, 2_500_000_000);
        assert_eq!(x.matches("<testcase ").count(), 6);
        assert!(x.contains("tests=\"6\" failures=\"1\" errors=\"0\""));
        assert!(x.contains("<failure type=\"stale-write-accepted\" message=\"1 anomalies: token 1 after &quot;2&quot;\">"));
        assert!(x.contains("allowed by design, not failures:\n[double-holder] p0 &amp; p1 &lt;both&gt; held (ops 3, 7) at 1.201 s"));
        assert!(x.contains("name=\"run &lt;a&gt;\""));
        assert!(x.contains("time=\"2.500\""));
        assert!(!x.contains("linearizability"));
    }

    #[test]
    fn missed_faults_fail_a_case_of_their_own_unless_allowed() {
        let v = Verdict {
            valid: Validity::Valid,
            model: "lock".into(),
            anomalies: vec![],
            notes: vec![],
        };
        let mut m = MissedFaults {
            planned: 2,
            never: 1,
            lines: vec!["faults[1] (pause): 0 of 1 started; due at 5.0 s; the run ended at 3.0 s (--time-limit) before it".into()],
            allowed: false,
            unseen: None,
        };
        let x = render_run("r", &v, Some(&m), 0);
        assert!(x.contains("tests=\"7\" failures=\"1\" errors=\"0\""), "{x}");
        assert!(x.contains("<failure type=\"missed-faults\" message=\"1 of 2 planned faults never started: the run did not test what its workload claims\">faults[1] (pause): 0 of 1 started; due at 5.0 s"), "{x}");
        m.allowed = true;
        let x = render_run("r", &v, Some(&m), 0);
        assert!(x.contains("tests=\"7\" failures=\"0\""), "{x}");
        assert!(x.contains("<system-out>1 of 2 planned faults never started (allowed by --allow-missed-faults):\nfaults[1]"), "{x}");
        assert_eq!(render_run("r", &v, None, 0), render("r", &v, 0));
    }

    #[test]
    fn unknown_is_an_error_case_and_control_characters_are_dropped() {
        let v = Verdict {
            valid: Validity::Unknown,
            model: "cas-register".into(),
            anomalies: vec![],
            notes: vec!["gave up after 60 s\u{1}".into()],
        };
        let x = render("r", &v, 0);
        assert!(x.contains("linearizability (not-linearizable)"));
        assert!(x.contains("<error type=\"unknown\""));
        assert!(x.contains(">gave up after 60 s</error>"));
        assert!(x.contains("errors=\"1\""));
    }
}
