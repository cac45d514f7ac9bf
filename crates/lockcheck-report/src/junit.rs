//! JUnit XML for CI, written by one piece of code for a run and an audit: a
//! [`Suite`] of [`Case`]s whose counts are derived from the cases, so a suite's
//! `failures` can never disagree with its failing cases.
//!
//! A run has one case per check of the anomaly kinds ([`AnomalyKind::check`]),
//! failing with the anomaly sentences; allowed anomalies are not failures and
//! are listed in the case's system-out. A run adds one case for its faults:
//! planned faults that never started fail it (unless `--allow-missed-faults`),
//! so CI never counts an untested run as a pass.

use super::input::MissedFaults;
use super::text::escape;
use lockcheck_check::{secs, Anomaly, AnomalyKind, Validity, Verdict};
use std::fmt::Write;

/// One test suite: a run or an audit.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    pub name: String,
    pub time_s: f64,
    /// `lockcheck.<name>` properties (where the audit came from).
    pub properties: Vec<(String, String)>,
    pub cases: Vec<Case>,
}

/// One test case and how it ended.
#[derive(Debug, Clone)]
pub struct Case {
    pub class: String,
    pub name: String,
    pub time_s: Option<f64>,
    pub outcome: Outcome,
    pub system_out: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Passed,
    /// What was tested went wrong (`type`, message, body).
    Failure(String, String, String),
    /// It could not be tested (`type`, message, body).
    Error(String, String, String),
    Skipped(String),
}

impl Suite {
    /// The suite as a JUnit XML document.
    pub fn to_xml(&self) -> String {
        let count = |f: fn(&Outcome) -> bool| self.cases.iter().filter(|c| f(&c.outcome)).count();
        let failures = count(|o| matches!(o, Outcome::Failure(..)));
        let errors = count(|o| matches!(o, Outcome::Error(..)));
        let skipped = count(|o| matches!(o, Outcome::Skipped(..)));
        let tests = self.cases.len();
        let (name, time) = (escape(&self.name), self.time_s);
        let counts = format!(
            "tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\""
        );
        let mut x = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"lockcheck\" {counts}>\n  <testsuite name=\"{name}\" {counts}>\n"
        );
        if !self.properties.is_empty() {
            x += "    <properties>\n";
            for (name, value) in &self.properties {
                let _ = writeln!(
                    x,
                    "      <property name=\"lockcheck.{}\" value=\"{}\"/>",
                    escape(name),
                    escape(value)
                );
            }
            x += "    </properties>\n";
        }
        for c in &self.cases {
            c.write(&mut x);
        }
        x + "  </testsuite>\n</testsuites>\n"
    }
}

impl Case {
    fn write(&self, x: &mut String) {
        let time = self
            .time_s
            .map(|t| format!(" time=\"{t:.3}\""))
            .unwrap_or_default();
        let _ = writeln!(
            x,
            "    <testcase classname=\"{}\" name=\"{}\"{time}>",
            escape(&self.class),
            escape(&self.name)
        );
        let element = |x: &mut String, tag: &str, kind: &str, message: &str, body: &str| {
            let open = format!(
                "{tag} type=\"{}\" message=\"{}\"",
                escape(kind),
                escape(message)
            );
            let _ = match body {
                "" => writeln!(x, "      <{open}/>"),
                _ => writeln!(x, "      <{open}>{}</{tag}>", escape(body)),
            };
        };
        match &self.outcome {
            Outcome::Passed => {}
            Outcome::Failure(kind, message, body) => element(x, "failure", kind, message, body),
            Outcome::Error(kind, message, body) => element(x, "error", kind, message, body),
            Outcome::Skipped(message) => {
                let _ = writeln!(x, "      <skipped message=\"{}\"/>", escape(message));
            }
        }
        if let Some(out) = &self.system_out {
            let _ = writeln!(x, "      <system-out>{}</system-out>", escape(out));
        }
        *x += "    </testcase>\n";
    }
}

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
    let class = format!("lockcheck.{}", verdict.model);
    let case = |name: String, outcome: Outcome, system_out: Option<String>| Case {
        class: class.clone(),
        name,
        time_s: None,
        outcome,
        system_out,
    };
    let mut cases = Vec::new();
    // One case per check of the one list of anomaly kinds: a kind that fails the
    // verdict fails its case, whichever kind it is.
    let found: Vec<AnomalyKind> = verdict.anomalies.iter().map(|a| a.kind).collect();
    for (name, kinds) in AnomalyKind::checks(&verdict.model, &found) {
        let of = |allowed: bool| -> Vec<&Anomaly> {
            verdict
                .anomalies
                .iter()
                .filter(|a| kinds.contains(&a.kind) && a.allowed == allowed)
                .collect()
        };
        let (failing, allowed) = (of(false), of(true));
        let kind_names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        let outcome = match failing.first() {
            Some(first) => Outcome::Failure(
                first.kind.name().into(),
                format!("{} anomalies: {}", failing.len(), first.explanation),
                failing
                    .iter()
                    .map(|a| evidence(a))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            None => Outcome::Passed,
        };
        let out = (!allowed.is_empty()).then(|| {
            let body: Vec<String> = allowed.iter().map(|a| evidence(a)).collect();
            format!("allowed by design, not failures:\n{}", body.join("\n"))
        });
        cases.push(case(
            format!("{name} ({})", kind_names.join(", ")),
            outcome,
            out,
        ));
    }
    if verdict.valid == Validity::Unknown {
        let outcome = Outcome::Error(
            "unknown".into(),
            "the checker gave up within its limits".into(),
            verdict.notes.join("\n"),
        );
        cases.push(case("check completed".into(), outcome, None));
    }
    if let Some(m) = missed {
        let body = m.lines.join("\n");
        let name = "faults (every planned fault started)".to_string();
        cases.push(match m.allowed {
            true => case(
                name,
                Outcome::Passed,
                Some(format!("{}:\n{body}", m.headline())),
            ),
            false => case(
                name,
                Outcome::Failure("missed-faults".into(), m.headline(), body),
                None,
            ),
        });
    }
    Suite {
        name: suite.into(),
        time_s: duration_ns as f64 / 1e9,
        properties: vec![],
        cases,
    }
    .to_xml()
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
