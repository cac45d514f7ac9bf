//! What people and CI read: the HTML report, JUnit XML, and the analyses behind the
//! summary. Depends on `history` and `check` only; everything is rebuilt from a run
//! directory alone (history.jsonl, and where present resource.jsonl, verdict.json,
//! workload.toml).

pub mod analysis;
mod answer;
pub mod browser;
pub mod election;
pub mod html;
mod input;
pub mod junit;
pub mod library;
pub mod summary;
mod text;
pub mod timeline;
mod zombies;

pub use answer::{Answer, Guidance};
use input::find_key;
pub use input::{Incident, Input, MissedFaults};
pub use text::escape;
pub use zombies::{Zombie, ZombieWindows};

use crate::check::{lock, AnomalyKind, Limits, Verdict};
use crate::history::{read_jsonl, AppliedWrite, History};
use anyhow::{Context, Result};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

pub const HISTORY_FILE: &str = "history.jsonl";
pub const RESOURCE_FILE: &str = "resource.jsonl";
pub const VERDICT_FILE: &str = "verdict.json";
pub const WORKLOAD_FILE: &str = "workload.toml";
pub const REPORT_FILE: &str = "report.html";

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

fn optional<T>(path: &Path, read: impl FnOnce(&Path) -> Result<T>) -> Result<Option<T>> {
    if path.exists() {
        read(path)
            .with_context(|| format!("reading {}", path.display()))
            .map(Some)
    } else {
        Ok(None)
    }
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
