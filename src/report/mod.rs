//! What people and CI read: the HTML report, JUnit XML, and the analyses behind the
//! summary. Depends on `history` and `check` only; everything is rebuilt from a run
//! directory alone (history.jsonl, and where present resource.jsonl, verdict.json,
//! workload.toml).

pub mod analysis;
pub mod browser;
pub mod election;
pub mod html;
pub mod junit;
pub mod library;
pub mod summary;
pub mod timeline;

use crate::check::{lock, AnomalyKind, Limits, Verdict};
use crate::history::{read_jsonl, AppliedWrite, History};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub const HISTORY_FILE: &str = "history.jsonl";
pub const RESOURCE_FILE: &str = "resource.jsonl";
pub const VERDICT_FILE: &str = "verdict.json";
pub const WORKLOAD_FILE: &str = "workload.toml";
pub const REPORT_FILE: &str = "report.html";

/// What a report is made of. `run` holds verdict.json's keys besides the verdict's
/// own (the runner's figures), `workload` the workload file's text; both optional (a
/// bare history has neither).
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub title: &'a str,
    pub history: &'a History,
    pub resource: Option<&'a [AppliedWrite]>,
    pub verdict: &'a Verdict,
    pub run: Option<&'a Map<String, Value>>,
    pub workload: Option<&'a str>,
}

impl Input<'_> {
    /// The runner's note that workers fenced themselves: `self_fencing_margin_ms` in
    /// verdict.json, else a `self_fencing_margin_ms` key anywhere in the workload.
    pub fn self_fencing_margin_ms(&self) -> Option<u64> {
        self.run
            .and_then(|r| r.get("self_fencing_margin_ms"))
            .and_then(Value::as_u64)
            .or_else(|| {
                let w: toml::Table = self.workload?.parse().ok()?;
                find_key(&toml::Value::Table(w), "self_fencing_margin_ms")?
                    .as_integer()
                    .and_then(|i| u64::try_from(i).ok())
            })
    }

    /// The planned faults the run missed, from verdict.json's `faults` (written by
    /// `lockcheck run`); `None` where nothing was missed or the verdict has no run.
    pub fn missed_faults(&self) -> Option<MissedFaults> {
        MissedFaults::of(self.run?)
    }

    /// Whether the run was a leader election: `mode` in verdict.json, else the
    /// workload's own top-level `mode`.
    pub fn election(&self) -> bool {
        let recorded = self.run.and_then(|r| r.get("mode")).and_then(Value::as_str);
        let mode = match recorded {
            Some(m) => Some(m.to_string()),
            None => self
                .workload
                .and_then(|w| w.parse::<toml::Table>().ok())
                .and_then(|w| w.get("mode")?.as_str().map(String::from)),
        };
        mode.as_deref() == Some("election")
    }

    /// The incident the run replays: `incident` in verdict.json, else the
    /// workload's own `[incident]` table.
    pub fn incident(&self) -> Option<Incident> {
        if let Some(i) = self.run.and_then(|r| r.get("incident")) {
            return serde_json::from_value(i.clone()).ok();
        }
        let w: toml::Table = self.workload?.parse().ok()?;
        w.get("incident")?.clone().try_into().ok()
    }

    /// An election's `on_lease_loss`, as verdict.json records it.
    fn on_lease_loss(&self) -> Option<String> {
        self.run?.get("on_lease_loss")?.as_str().map(String::from)
    }

    /// Runs the analyses (zombie windows, fencing replay, guidance).
    pub fn analyze(&self) -> analysis::Analysis {
        self.analyze_calls(&crate::check::calls::Calls::of_run(
            self.history,
            self.resource,
        ))
    }

    /// The analyses over calls already read off the history; an election's in its
    /// own words (leaderships, deposed leaders acting).
    pub fn analyze_calls(&self, calls: &crate::check::calls::Calls) -> analysis::Analysis {
        let mut a = analysis::analyze(
            self.history,
            calls,
            self.resource,
            self.self_fencing_margin_ms(),
        );
        if self.election() {
            election::apply(&mut a, calls, self.on_lease_loss());
        }
        if let Some(i) = self.incident() {
            a.guidance.sentence = format!("{} {}", i.sentence(), a.guidance.sentence);
        }
        a
    }
}

/// A workload's `[incident]`: the published failure it replays (catalogue entries,
/// `workloads/incidents/`) and the design rule that prevents it; the guidance
/// names both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    /// Where the failure was published: an issue, a vendor's page.
    pub source: String,
    /// The design rule that prevents it.
    pub rule: String,
}

impl Incident {
    /// How the guidance opens for a run that replays it.
    pub fn sentence(&self) -> String {
        format!(
            "This run replays {}; the design rule that prevents it: {}.",
            self.source.trim_end_matches('.'),
            self.rule.trim_end_matches('.')
        )
    }
}

/// verdict.json's `faults` as the report reads it: planned faults that never
/// started, each in words (`faults[0] (pause): 0 of 1 started; due at 5.0 s; ...`).
#[derive(Debug, Clone, PartialEq)]
pub struct MissedFaults {
    pub planned: u64,
    /// Occurrences planned that never started.
    pub never: u64,
    pub lines: Vec<String>,
    /// `--allow-missed-faults` was given: listed, not failing.
    pub allowed: bool,
    /// The faults started, but the run saw nothing of them (why).
    pub unseen: Option<String>,
}

impl MissedFaults {
    pub fn of(run: &Map<String, Value>) -> Option<MissedFaults> {
        let faults = run.get("faults")?;
        let missed = faults.get("missed")?.as_array()?;
        let unseen = faults
            .get("unseen")
            .and_then(Value::as_str)
            .map(String::from);
        if missed.is_empty() && unseen.is_none() {
            return None;
        }
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(MissedFaults {
            planned: n(faults, "planned"),
            never: missed
                .iter()
                .map(|m| n(m, "planned").saturating_sub(n(m, "started")))
                .sum(),
            lines: missed
                .iter()
                .map(|m| {
                    format!(
                        "faults[{}] ({}): {} of {} started; {}",
                        n(m, "fault"),
                        m.get("kind").and_then(Value::as_str).unwrap_or("?"),
                        n(m, "started"),
                        n(m, "planned"),
                        m.get("why").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .chain(unseen.clone())
                .collect(),
            allowed: faults.get("allowed").and_then(Value::as_bool) == Some(true),
            unseen,
        })
    }

    /// One line: how many planned faults never started.
    pub fn headline(&self) -> String {
        if self.never == 0 && self.unseen.is_some() {
            return format!(
                "the planned faults started, but the run saw nothing of them{}",
                if self.allowed {
                    " (allowed by --allow-missed-faults)"
                } else {
                    ": the run did not test what its workload claims"
                }
            );
        }
        format!(
            "{} of {} planned faults never started{}",
            self.never,
            self.planned,
            if self.allowed {
                " (allowed by --allow-missed-faults)"
            } else {
                ": the run did not test what its workload claims"
            }
        )
    }
}

/// A stored run directory, read back.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub dir: PathBuf,
    pub history: History,
    pub resource: Option<Vec<AppliedWrite>>,
    /// verdict.json as stored (None: the run has none yet).
    pub verdict: Option<Verdict>,
    /// verdict.json's other keys (the runner's figures, an earlier `analysis`), kept
    /// when rewriting.
    pub verdict_extra: Map<String, Value>,
    pub workload: Option<String>,
}

impl RunDir {
    pub fn load(dir: &Path) -> Result<RunDir> {
        let history = read_jsonl(&dir.join(HISTORY_FILE))?;
        let resource = optional(&dir.join(RESOURCE_FILE), |p| {
            Ok(crate::history::read_resource(p)?)
        })?;
        let stored = optional(&dir.join(VERDICT_FILE), |p| {
            let text = std::fs::read_to_string(p)?;
            let obj: Map<String, Value> = serde_json::from_str(&text)?;
            let verdict: Verdict = serde_json::from_value(Value::Object(obj.clone()))?;
            Ok((verdict, obj))
        })?;
        let (verdict, verdict_extra) = match stored {
            Some((v, mut obj)) => {
                for k in ["valid", "model", "anomalies", "notes"] {
                    obj.remove(k);
                }
                (Some(v), obj)
            }
            None => (None, Map::new()),
        };
        let workload = optional(&dir.join(WORKLOAD_FILE), |p| {
            Ok(std::fs::read_to_string(p)?)
        })?;
        Ok(RunDir {
            dir: dir.to_path_buf(),
            history,
            resource,
            verdict,
            verdict_extra,
            workload,
        })
    }

    /// The kinds the workload allows (`allow = [...]`, at the top or in any table).
    pub fn workload_allow(&self) -> Result<Vec<AnomalyKind>> {
        let Some(text) = &self.workload else {
            return Ok(Vec::new());
        };
        let w: toml::Table = text
            .parse()
            .with_context(|| format!("reading {}", self.dir.join(WORKLOAD_FILE).display()))?;
        let w = toml::Value::Table(w);
        let Some(toml::Value::Array(list)) = find_key(&w, "allow") else {
            return Ok(Vec::new());
        };
        list.iter()
            .map(|v| {
                v.as_str()
                    .unwrap_or_default()
                    .parse::<AnomalyKind>()
                    .map_err(anyhow::Error::msg)
                    .context("workload.toml: allow")
            })
            .collect()
    }

    /// Checks the stored history again with the lock checker (the `fenced-mutex`
    /// variant where the stored verdict used it), applying `allow`.
    pub fn recheck(&self, allow: &[AnomalyKind]) -> Verdict {
        let input = lock::LockInput {
            resource: self.resource.as_deref(),
        };
        let check = match self.verdict.as_ref().map(|v| v.model.as_str()) {
            Some("fenced-mutex") => lock::check_fenced,
            _ => lock::check,
        };
        let mut v = check(&self.history, &input, &Limits::default());
        v.notes.extend(self.history.warnings.iter().cloned());
        v.apply_allow(allow);
        v
    }

    /// The stored verdict, or a fresh check where the run has none.
    pub fn verdict_or_check(&self) -> Result<Verdict> {
        match &self.verdict {
            Some(v) => Ok(v.clone()),
            None => Ok(self.recheck(&self.workload_allow()?)),
        }
    }

    pub fn title(&self) -> String {
        let name = self
            .dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| self.dir.display().to_string());
        format!("lockcheck run {name}")
    }

    pub fn input<'a>(&'a self, title: &'a str, verdict: &'a Verdict) -> Input<'a> {
        Input {
            title,
            history: &self.history,
            resource: self.resource.as_deref(),
            verdict,
            run: Some(&self.verdict_extra),
            workload: self.workload.as_deref(),
        }
    }

    /// verdict.json's content: the verdict's fields, the analyses under `analysis`,
    /// and every other key the file had (the runner's `run`) untouched.
    pub fn verdict_document(
        &self,
        verdict: &Verdict,
        analysis: &analysis::Analysis,
    ) -> Result<Map<String, Value>> {
        let Value::Object(mut obj) = serde_json::to_value(verdict)? else {
            anyhow::bail!("a verdict serializes to an object");
        };
        for (k, v) in &self.verdict_extra {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
        obj.insert("analysis".into(), serde_json::to_value(analysis)?);
        Ok(obj)
    }

    /// Writes `doc` (see `verdict_document`) to the run's verdict.json.
    pub fn write_verdict(&self, doc: &Map<String, Value>) -> Result<()> {
        let path = self.dir.join(VERDICT_FILE);
        let text = serde_json::to_string_pretty(doc)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// Rebuilds the report of a run directory into `out` (the stored verdict, or a fresh
/// check where there is none). This is what `run` and `lockcheck report` call.
pub fn write_html(run_dir: &Path, out: &Path) -> Result<()> {
    let run = RunDir::load(run_dir)?;
    let verdict = run.verdict_or_check()?;
    let title = run.title();
    write_html_for(&run.input(&title, &verdict), out)
}

/// Writes the report of one history (what `check --report FILE` calls).
pub fn write_html_for(input: &Input<'_>, out: &Path) -> Result<()> {
    let page = html::render(input);
    std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))
}

/// HTML and XML text and attribute escaping; characters XML 1.0 cannot carry are dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn optional<T>(path: &Path, read: impl FnOnce(&Path) -> Result<T>) -> Result<Option<T>> {
    if path.exists() {
        read(path)
            .with_context(|| format!("reading {}", path.display()))
            .map(Some)
    } else {
        Ok(None)
    }
}

/// The first value under `key`, at the top of a TOML document or in any table below.
fn find_key<'a>(v: &'a toml::Value, key: &str) -> Option<&'a toml::Value> {
    let t = v.as_table()?;
    t.get(key)
        .or_else(|| t.values().find_map(|child| find_key(child, key)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Validity;

    #[test]
    fn self_fencing_margin_comes_from_the_verdict_or_the_workload() {
        let history = History::default();
        let verdict = Verdict {
            valid: Validity::Valid,
            model: "lock".into(),
            anomalies: vec![],
            notes: vec![],
        };
        let mut run = Map::new();
        run.insert("self_fencing_margin_ms".into(), Value::from(200));
        let mut input = Input {
            title: "t",
            history: &history,
            resource: None,
            verdict: &verdict,
            run: Some(&run),
            workload: Some("[clients]\nself_fencing_margin_ms = 150\n"),
        };
        assert_eq!(input.self_fencing_margin_ms(), Some(200));
        input.run = None;
        assert_eq!(input.self_fencing_margin_ms(), Some(150));
        input.workload = Some("[clients]\ncount = 3\n");
        assert_eq!(input.self_fencing_margin_ms(), None);
    }
}
