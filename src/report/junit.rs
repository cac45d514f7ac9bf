//! JUnit XML for CI: one test case per check, failing with the anomaly sentences.
//! Allowed anomalies are not failures; they are listed in the case's system-out.

use super::escape;
use crate::check::{secs, Anomaly, AnomalyKind, Validity, Verdict};

/// The checks a verdict answers, each with the anomaly kinds that fail it.
const CHECKS: [(&str, &[AnomalyKind]); 7] = [
    ("mutual exclusion", &[AnomalyKind::DoubleHolder]),
    ("fencing (stale writes)", &[AnomalyKind::StaleWriteAccepted]),
    (
        "tokens",
        &[AnomalyKind::TokenNotMonotonic, AnomalyKind::DuplicateToken],
    ),
    ("releases", &[AnomalyKind::ForeignRelease]),
    ("lost updates", &[AnomalyKind::LostUpdate]),
    ("interleaving", &[AnomalyKind::InterleavedWrites]),
    ("linearizability", &[AnomalyKind::NotLinearizable]),
];

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
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    // The linearizability case only for models that have it, or where it was found.
    let checks = CHECKS.iter().filter(|(_, kinds)| {
        kinds != &[AnomalyKind::NotLinearizable]
            || verdict.model != "lock"
            || verdict.anomalies.iter().any(|a| kinds.contains(&a.kind))
    });
    for (name, kinds) in checks {
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
