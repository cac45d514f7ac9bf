//! The scorecard: each scenario's runs added up (`card`), what did not apply or
//! was cut short, and the verdict with its evidence and what it lacks, with
//! where it came from (`provenance`); and its reader, which refuses a file of
//! another format or with a field missing rather than fill it in.

use super::battery::{Battery, Facts, NotApplicable, Question, Recipe, ScenarioWorkload};
use super::card::{ScenarioCard, Stopped};
use super::decide::{decide, Asked, AuditVerdict, Failure};
use super::execute::Executed;
use super::pace::Level;
use super::provenance::{present, Provenance, FORMAT};
use super::shard::{PartPhase, Shards};
use anyhow::Result;
use lockcheck_exit::{self as exit, Exit};
use lockcheck_rundir::field_to_blame;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// One recipe's stale writes accepted under each fencing mode it ran in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StaleWrites {
    pub recipe: Recipe,
    /// Fencing mode name -> stale writes accepted over its counted runs.
    pub accepted: Vec<(String, usize)>,
    pub rejected_by_fence: u64,
}

/// What `lockcheck audit` found: audit.json, and what the terminal, JUnit and
/// audit.html show. Every field is written, null or empty included, and
/// [`read`] refuses a file that lacks one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scorecard {
    /// [`FORMAT`]: [`read`] refuses any other.
    pub format: u32,
    pub provenance: Provenance,
    pub backend: String,
    /// The adapter's command line; null for the built-in client.
    #[serde(deserialize_with = "present")]
    pub client: Option<Vec<String>>,
    pub verdict: AuditVerdict,
    pub verdict_sentence: String,
    /// What failed, for `unsafe-even-with-fencing`.
    pub failures: Vec<Failure>,
    pub evidence: Vec<String>,
    /// What a complete verdict lacks, each with why: empty only when complete.
    pub missing: Vec<String>,
    /// Fence claims below their floor that the verdict does not rest on: an
    /// `unsafe-even-with-fencing` verdict stands on its counterexample, and
    /// these twins could only have added a "holds" claim. Each with why.
    pub unsettled: Vec<String>,
    /// Runs of a "can it break?" scenario at most (it stops at its first break).
    pub runs_per_scenario: u32,
    /// Provoked runs each fenced twin the verdict rests on needs.
    pub provoked_floor: u32,
    /// Runs of a fenced twin at most (`--twin-runs`): one that stops here, or
    /// sooner because its provoked share could not reach the floor within it,
    /// is below its floor.
    pub twin_runs: u32,
    /// `--bound`: the failure rate every claim was asked to bound, one-sided 95 %.
    #[serde(deserialize_with = "present")]
    pub bound: Option<f64>,
    /// The weakest claim's exact one-sided 95 % bound among the claims the
    /// verdict could rest on (each fenced twin's "holds", each "can it break?"
    /// scenario's "no break"); null where none was tested.
    #[serde(deserialize_with = "present")]
    pub bound_reached: Option<f64>,
    /// Runs at once to begin with.
    pub jobs: usize,
    /// Runs at once, level by level, each with the timer lateness seen while it
    /// held (an audit left to choose goes above one run a core only while that
    /// stays within its limit: `pace`).
    pub levels: Vec<Level>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// The whole battery ran to a verdict: no `--scenarios` subset, no budget
    /// cut or signal, nothing missing. Only then does the audit exit 0.
    pub complete: bool,
    #[serde(deserialize_with = "present")]
    pub interrupted: Option<String>,
    pub scenarios: Vec<ScenarioCard>,
    pub not_applicable: Vec<NotApplicable>,
    pub stale_writes: Vec<StaleWrites>,
    /// A part of a sharded audit, or their merge (`shard`); null for an audit
    /// run whole.
    #[serde(deserialize_with = "present")]
    pub shards: Option<Shards>,
    /// The audit's directory: scenarios/, runs/, audit.json, audit.xml, audit.html.
    pub dir: PathBuf,
}

/// What the scorecard is made of besides the runs.
pub struct Setting<'a> {
    pub facts: &'a Facts,
    pub battery: &'a Battery,
    pub workloads: &'a [ScenarioWorkload],
    pub questions: &'a [Question],
    /// `--scenarios` narrowed the battery.
    pub subset: bool,
    pub runs: u32,
    pub floor: u32,
    /// Runs of a fenced twin at most.
    pub twin_runs: u32,
    pub jobs: usize,
    pub budget_s: f64,
    pub dir: PathBuf,
    pub provenance: &'a Provenance,
    pub bound: Option<f64>,
    pub shards: Option<Shards>,
    /// What the runs wait on instead of a budget, when a merge is missing parts.
    pub pending: Option<String>,
}

impl Scorecard {
    pub fn of(setting: Setting<'_>, executed: Executed) -> Scorecard {
        let Executed {
            records,
            endings,
            elapsed,
            interrupted,
            levels,
        } = executed;
        let facts = setting.facts;
        let scenarios: Vec<ScenarioCard> = setting
            .workloads
            .iter()
            .zip(records)
            .enumerate()
            .map(|(i, (s, runs))| {
                ScenarioCard::of(
                    s,
                    setting.questions[i],
                    s.scenario.recipe.describe_for(facts),
                    setting.floor as usize,
                    endings[i],
                    runs,
                )
            })
            .collect();
        let cut_short = scenarios.iter().any(|c| c.stopped == Stopped::CutShort);
        let cut = match interrupted {
            Some(what) => Some(format!("interrupted: {what}")),
            None if cut_short && setting.pending.is_some() => setting.pending.clone(),
            None if cut_short => Some(format!(
                "the budget ({}) ran out",
                super::stats::minutes(setting.budget_s)
            )),
            None => None,
        };
        let backend = facts.kind.name().to_string();
        let decision = decide(
            &Asked {
                backend: &backend,
                token: facts.token,
                subset: setting.subset,
                cut: cut.clone(),
                floor: setting.floor as usize,
                runs: setting.runs as usize,
                unavailable: setting
                    .battery
                    .not_applicable
                    .iter()
                    .filter(|n| n.environment)
                    .map(|n| format!("{}: not run here: {}", n.scenario, n.why))
                    .collect(),
            },
            &scenarios,
        );
        let part = setting
            .shards
            .as_ref()
            .filter(|s| s.phase != PartPhase::Merged)
            .map(Shards::describe);
        let (verdict, sentence, missing) = match part {
            // A part's runs are a share: only their merge has a verdict.
            Some(part) => (
                AuditVerdict::Partial,
                format!("{part} of a sharded audit: `lockcheck audit merge` adds the parts up into the verdict"),
                std::iter::once(format!("{part}: the other parts, merged"))
                    .chain(cut.clone())
                    .collect(),
            ),
            None => (decision.verdict, decision.sentence, decision.missing),
        };
        Scorecard {
            format: FORMAT,
            provenance: setting.provenance.as_of_now(),
            complete: missing.is_empty() && cut.is_none() && !setting.subset,
            bound: setting.bound,
            bound_reached: bound_reached(&scenarios),
            shards: setting.shards,
            stale_writes: stale_writes(&scenarios),
            backend,
            client: facts.client.clone(),
            verdict,
            verdict_sentence: sentence,
            failures: decision.failures,
            evidence: decision.evidence,
            missing,
            unsettled: decision.unsettled,
            runs_per_scenario: setting.runs,
            provoked_floor: setting.floor,
            twin_runs: setting.twin_runs,
            jobs: setting.jobs,
            levels,
            budget_s: setting.budget_s,
            elapsed_s: elapsed.as_secs_f64(),
            interrupted: interrupted.map(str::to_string),
            scenarios,
            not_applicable: setting.battery.not_applicable.clone(),
            dir: setting.dir,
        }
    }

    /// The exit code the audit gave for this scorecard: 130 interrupted, 3 not
    /// complete, 1 complete but not the verdict `expect`ed, else 0.
    /// A part of a sharded audit is never complete (its merge has the
    /// verdict): it exits 0 when it ran its share to the end.
    pub fn exit(&self, expect: Option<AuditVerdict>) -> u8 {
        let part_ran_its_share = self.is_part()
            && self
                .scenarios
                .iter()
                .all(|c| c.stopped != super::card::Stopped::CutShort);
        match () {
            _ if self.interrupted.is_some() => exit::INTERRUPTED,
            _ if part_ran_its_share => exit::VALID,
            _ if !self.complete => exit::UNKNOWN,
            _ if expect.is_some_and(|want| want != self.verdict) => exit::ANOMALIES,
            _ => exit::VALID,
        }
    }
}

impl Scorecard {
    /// Whether it is one part of a sharded audit (not their merge).
    pub fn is_part(&self) -> bool {
        self.shards
            .as_ref()
            .is_some_and(|s| s.phase != PartPhase::Merged)
    }
}

/// The weakest exact bound among the claims a verdict could rest on: each
/// fenced twin that ran with no flagged run, each "can it break?" scenario
/// that ran out with no break.
pub fn bound_reached(scenarios: &[ScenarioCard]) -> Option<f64> {
    scenarios
        .iter()
        .filter(|c| c.flagged == 0)
        .filter_map(|c| match c.question {
            Question::CanItBreak if c.stopped == super::card::Stopped::RanOut => {
                super::stats::upper_95(0, c.counted)
            }
            Question::DoesItHold { .. } if c.floor.is_some() && c.ran > 0 => c.upper_95,
            _ => None,
        })
        .reduce(f64::max)
}

/// Reads a published scorecard (audit.json). Refuses, naming the file and the
/// field (exit 4, malformed input): JSON that does not parse (with its line and
/// column), a file of another format (1 had no `format` field), a field
/// missing, or a provenance that says the audit wrote it yet lacks a field.
pub fn read(path: &Path) -> Result<Scorecard> {
    let malformed = |why: String| {
        anyhow::Error::new(Exit {
            code: exit::MALFORMED,
            message: format!("{}: {why}", path.display()),
        })
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| malformed(format!("cannot read it: {e}")))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| malformed(format!("not JSON: {e}")))?;
    match value.get("format") {
        Some(v) if v.as_u64() == Some(u64::from(FORMAT)) => {}
        // Format 2 had no bound and no shards: an audit run whole, no bound asked.
        Some(v) if v.as_u64() == Some(2) => {
            if let Some(o) = value.as_object_mut() {
                for key in ["bound", "bound_reached", "shards"] {
                    o.entry(key).or_insert(serde_json::Value::Null);
                }
                o.insert("format".into(), FORMAT.into());
            }
        }
        Some(v) => {
            return Err(malformed(format!(
                "field format: {v}, this lockcheck reads scorecards of formats 2 and {FORMAT}; re-run the audit"
            )))
        }
        None => {
            return Err(malformed(format!(
                "no field format: a scorecard of format 1 (before scorecards said where they came from), or not a scorecard; this lockcheck reads formats 2 and {FORMAT}; re-run the audit"
            )))
        }
    }
    let card = Scorecard::deserialize(&value).map_err(|e| {
        malformed(match field_at_fault(&value) {
            Some(field) => format!("not a scorecard: field {field}: {e}"),
            None => format!("not a scorecard: {e}"),
        })
    })?;
    card.provenance
        .check()
        .map_err(|e| malformed(format!("{e:#}")))?;
    Ok(card)
}

/// The parts of a scorecard, each an object of its own type: where it does not
/// read, the field to blame is found part by part, from the top down.
#[derive(Debug, Clone, Copy)]
enum Part {
    Scorecard,
    Provenance,
    Machine,
    Load,
    Shards,
    Card,
    Run,
}

impl Part {
    /// The field of `value` that keeps it from reading as this part, if any.
    fn to_blame(self, value: &Value) -> Option<String> {
        fn blame<T: DeserializeOwned>(map: &Map<String, Value>) -> Option<String> {
            let error = serde_json::from_value::<T>(Value::Object(map.clone())).err()?;
            field_to_blame::<T>(map, &error)
        }
        let map = value.as_object()?;
        match self {
            Part::Scorecard => blame::<Scorecard>(map),
            Part::Provenance => blame::<Provenance>(map),
            Part::Machine => blame::<super::provenance::Machine>(map),
            Part::Load => blame::<super::provenance::Load>(map),
            Part::Shards => blame::<Shards>(map),
            Part::Card => blame::<ScenarioCard>(map),
            Part::Run => blame::<super::execute::RunRecord>(map),
        }
    }

    /// The part field `key` of this one holds, and whether as a list of them.
    fn within(self, key: &str) -> Option<(Part, bool)> {
        match (self, key) {
            (Part::Scorecard, "provenance") => Some((Part::Provenance, false)),
            (Part::Scorecard, "shards") => Some((Part::Shards, false)),
            (Part::Scorecard, "scenarios") => Some((Part::Card, true)),
            (Part::Provenance, "machine") => Some((Part::Machine, false)),
            (Part::Machine, "load_start" | "load_end") => Some((Part::Load, false)),
            (Part::Card, "runs") => Some((Part::Run, true)),
            _ => None,
        }
    }
}

/// Where scorecard `value` does not read: `scenarios[2].runs[0].outcome`, or
/// `provenance.machine` for a field missing there. serde's message alone names
/// a field missing but not where, and a value of the wrong type not at all.
fn field_at_fault(value: &Value) -> Option<String> {
    let (mut part, mut at) = (Part::Scorecard, value);
    let mut path: Vec<String> = Vec::new();
    while let Some(key) = part.to_blame(at) {
        let inner = at.as_object().and_then(|o| o.get(&key));
        path.push(key.clone());
        let (Some(inner), Some((next, listed))) = (inner, part.within(&key)) else {
            break;
        };
        at = inner;
        if listed {
            let Some((i, item)) = inner.as_array().and_then(|items| {
                items
                    .iter()
                    .enumerate()
                    .find(|(_, x)| next.to_blame(x).is_some())
            }) else {
                break;
            };
            path.last_mut()
                .expect("just pushed")
                .push_str(&format!("[{i}]"));
            at = item;
        }
        part = next;
    }
    (!path.is_empty()).then(|| path.join("."))
}

/// Each recipe's stale writes accepted, by fencing mode, over its counted runs.
fn stale_writes(scenarios: &[ScenarioCard]) -> Vec<StaleWrites> {
    let mut out: Vec<StaleWrites> = Vec::new();
    for c in scenarios.iter().filter(|c| c.counted > 0) {
        let entry = match out.iter_mut().position(|s| s.recipe == c.recipe) {
            Some(i) => &mut out[i],
            None => {
                out.push(StaleWrites {
                    recipe: c.recipe,
                    accepted: Vec::new(),
                    rejected_by_fence: 0,
                });
                out.last_mut().expect("just pushed")
            }
        };
        entry
            .accepted
            .push((c.fencing.name().to_string(), c.stale_writes_accepted));
        entry.rejected_by_fence += c.writes_rejected_by_fence;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scorecard as published at bebe35f (docs/audits/etcd.json until the
    /// audit ran again): format 2, its provenance recorded after the run. Kept
    /// as a fixture, since a published one is replaced when its audit runs again.
    fn etcd() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scorecards/etcd-format-2.json")
    }

    fn value() -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(etcd()).unwrap()).unwrap()
    }

    /// `text` written to a file of its own, and what reading it says.
    fn refusal(text: &str) -> (String, u8) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.json");
        std::fs::write(&path, text).unwrap();
        let e = read(&path).expect_err("a bad scorecard was read");
        let code = e.downcast_ref::<Exit>().map(|x| x.code).unwrap_or(0);
        let message = format!("{e:#}");
        assert!(message.contains(&path.display().to_string()), "{message}");
        (message, code)
    }

    fn without(mut v: serde_json::Value, pointer: &str, key: &str) -> String {
        v.pointer_mut(pointer)
            .and_then(|o| o.as_object_mut())
            .unwrap()
            .remove(key)
            .expect("the key is there to remove");
        v.to_string()
    }

    #[test]
    fn a_published_scorecard_reads_and_round_trips() {
        let card = read(&etcd()).unwrap();
        assert_eq!(card.format, FORMAT);
        assert_eq!(card.backend, "etcd");
        assert_eq!(card.exit(None), exit::VALID);
        let dir = tempfile::tempdir().unwrap();
        let again = dir.path().join("audit.json");
        std::fs::write(&again, serde_json::to_string_pretty(&card).unwrap()).unwrap();
        let back = read(&again).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&card).unwrap()
        );
        // Format 2 had no bound and no shards: read as an audit run whole.
        assert_eq!(value()["format"], 2);
        assert_eq!(
            (card.bound, card.bound_reached, card.shards),
            (None, None, None)
        );
    }

    #[test]
    fn a_scorecard_of_format_1_is_refused() {
        // Format 1 had no `format` field.
        let (m, code) = refusal(&without(value(), "", "format"));
        assert_eq!(code, exit::MALFORMED);
        assert!(
            m.contains("no field format") && m.contains("format 1"),
            "{m}"
        );
        let mut v = value();
        v["format"] = 4.into();
        let (m, code) = refusal(&v.to_string());
        assert_eq!(code, exit::MALFORMED);
        assert!(m.contains("field format: 4"), "{m}");
    }

    #[test]
    fn a_missing_field_is_refused_by_name_never_filled_in() {
        for (pointer, key) in [
            ("", "verdict"),
            ("", "complete"),
            ("", "client"),
            ("", "failures"),
            ("", "interrupted"),
            ("/provenance", "commit"),
            ("/provenance/machine", "load_end"),
        ] {
            let (m, code) = refusal(&without(value(), pointer, key));
            assert_eq!(code, exit::MALFORMED, "{key}: {m}");
            assert!(m.contains(&format!("missing field `{key}`")), "{key}: {m}");
            let field = format!("{pointer}/{key}").replace('/', ".");
            assert!(
                m.contains(&format!("field {}: ", &field[1..])),
                "{key}: {m}"
            );
        }
        // In a scenario's card, and in one of its runs.
        let (m, _) = refusal(&without(value(), "/scenarios/2", "stopped"));
        assert!(
            m.contains("field scenarios[2].stopped: missing field `stopped`"),
            "{m}"
        );
        let (m, _) = refusal(&without(value(), "/scenarios/1/runs/0", "seed"));
        assert!(
            m.contains("field scenarios[1].runs[0].seed: missing"),
            "{m}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_by_where_it_is() {
        for (pointer, wrong, field) in [
            ("/jobs", "many", "jobs"),
            (
                "/provenance/machine/cores",
                "eight",
                "provenance.machine.cores",
            ),
            ("/scenarios/3/fencing", "sometimes", "scenarios[3].fencing"),
            (
                "/scenarios/0/runs/0/outcome",
                "fine",
                "scenarios[0].runs[0].outcome",
            ),
        ] {
            let mut v = value();
            *v.pointer_mut(pointer).expect("the field is there") = wrong.into();
            let (m, code) = refusal(&v.to_string());
            assert_eq!(code, exit::MALFORMED, "{m}");
            assert!(m.contains(&format!("field {field}: ")), "{field}: {m}");
        }
    }

    #[test]
    fn json_cut_short_is_refused_with_its_line_and_column() {
        let text = std::fs::read_to_string(etcd()).unwrap();
        let (m, code) = refusal(&text[..text.len() / 2]);
        assert_eq!(code, exit::MALFORMED);
        assert!(
            m.contains("not JSON") && m.contains("line") && m.contains("column"),
            "{m}"
        );
    }

    #[test]
    fn a_field_the_audit_must_know_may_be_null_only_when_recorded_after_the_run() {
        // A scorecard migrated by hand keeps null what nobody recorded...
        let mut v = value();
        v["provenance"]["recorded"] = format!(
            "{}docs/audits/etcd.md",
            super::super::provenance::AFTER_THE_RUN
        )
        .into();
        v["provenance"]["tree"] = serde_json::Value::Null;
        v["provenance"]["battery_digest"] = serde_json::Value::Null;
        let dir = tempfile::tempdir().unwrap();
        let migrated = dir.path().join("migrated.json");
        std::fs::write(&migrated, v.to_string()).unwrap();
        read(&migrated).unwrap();
        // ...and the same nulls in one the audit wrote are refused by name.
        v["provenance"]["recorded"] = super::super::provenance::BY_THE_AUDIT.into();
        let (m, _) = refusal(&v.to_string());
        assert!(m.contains("field provenance.tree is null"), "{m}");
        v["provenance"]["tree"] = "clean".into();
        let (m, _) = refusal(&v.to_string());
        assert!(m.contains("field provenance.battery_digest is null"), "{m}");
        v["provenance"]["battery_digest"] = "00".into();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.json");
        std::fs::write(&path, v.to_string()).unwrap();
        assert!(read(&path).is_ok(), "every field known");
        v["provenance"]["recorded"] = "from memory".into();
        let (m, _) = refusal(&v.to_string());
        assert!(m.contains("field provenance.recorded"), "{m}");
        let mut v = value();
        v["superseded_by"] = "etcd-2.json".into();
        let (m, _) = refusal(&v.to_string());
        assert!(m.contains("unknown field `superseded_by`"), "{m}");
    }

    #[test]
    fn the_exit_code_follows_complete_interrupted_and_expect() {
        let mut card = read(&etcd()).unwrap();
        assert_eq!(card.exit(Some(card.verdict)), exit::VALID);
        assert_eq!(card.exit(Some(AuditVerdict::Inconclusive)), exit::ANOMALIES);
        card.complete = false;
        assert_eq!(card.exit(None), exit::UNKNOWN);
        card.interrupted = Some("SIGINT".into());
        assert_eq!(card.exit(None), exit::INTERRUPTED);
    }
}
