//! What people and CI read: the HTML report, JUnit XML, and the analyses behind the
//! summary. Depends on the history, the checker and the run directory's records
//! (`lockcheck-history`, `lockcheck-check`, `lockcheck-rundir`) only: no server, no
//! fault, no runner; everything is rebuilt from a run directory alone
//! (history.jsonl, and where present resource.jsonl, verdict.json, workload.toml).

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
pub use input::{Input, MissedFaults, WorkloadNotes};
pub use text::escape;
pub use zombies::{Zombie, ZombieWindows};

// The names of a run directory's files are the run directory's.
pub use lockcheck_rundir::{HISTORY_FILE, REPORT_FILE, RESOURCE_FILE, VERDICT_FILE, WORKLOAD_FILE};

use anyhow::{Context, Result};
use lockcheck_check::{lock, AnomalyKind, Limits, Verdict};
use lockcheck_history::{read_jsonl, AppliedWrite, History};
use lockcheck_rundir::{Recorded, RunReport, VerdictFile};
use std::path::{Path, PathBuf};

/// A stored run directory, read back.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub dir: PathBuf,
    pub history: History,
    pub resource: Option<Vec<AppliedWrite>>,
    /// verdict.json as stored (None: the run has none yet).
    pub stored: Option<VerdictFile>,
    pub workload: Option<String>,
}

impl RunDir {
    pub fn load(dir: &Path) -> Result<RunDir> {
        let history = read_jsonl(&dir.join(HISTORY_FILE))?;
        let resource = optional(&dir.join(RESOURCE_FILE), |p| {
            Ok(lockcheck_history::read_resource(p)?)
        })?;
        let stored = lockcheck_rundir::read(dir)?;
        let workload = optional(&dir.join(WORKLOAD_FILE), |p| {
            Ok(std::fs::read_to_string(p)?)
        })?;
        Ok(RunDir {
            dir: dir.to_path_buf(),
            history,
            resource,
            stored,
            workload,
        })
    }

    /// The stored verdict (None: the run has none yet).
    pub fn verdict(&self) -> Option<&Verdict> {
        self.stored.as_ref().map(VerdictFile::verdict)
    }

    /// The runner's record, where `lockcheck run` wrote verdict.json.
    pub fn run(&self) -> Option<&RunReport> {
        self.stored.as_ref()?.run()
    }

    /// The planned faults the run missed (see [`Input::missed_faults`]).
    pub fn missed_faults(&self) -> Option<MissedFaults> {
        MissedFaults::of(&self.run()?.faults)
    }

    /// The kinds the workload allows (its top-level `allow = [...]`).
    pub fn workload_allow(&self) -> Result<Vec<AnomalyKind>> {
        let Some(text) = &self.workload else {
            return Ok(Vec::new());
        };
        let notes = WorkloadNotes::parse(text)
            .with_context(|| format!("reading {}", self.dir.join(WORKLOAD_FILE).display()))?;
        Ok(notes.allow)
    }

    /// Checks the stored history again with the lock checker (the `fenced-mutex`
    /// variant where the stored verdict used it), applying `allow`.
    pub fn recheck(&self, allow: &[AnomalyKind]) -> Verdict {
        let input = lock::LockInput {
            resource: self.resource.as_deref(),
        };
        let check = match self.verdict().map(|v| v.model.as_str()) {
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
        match self.verdict() {
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
            run: self.run(),
            workload: self.workload.as_deref(),
        }
    }

    /// verdict.json's content: `verdict` in place of the stored one, the analyses
    /// under `analysis`, and the rest of the file (the runner's record, keys of
    /// other versions) untouched.
    pub fn verdict_document(
        &self,
        verdict: &Verdict,
        analysis: &analysis::Analysis,
    ) -> Result<VerdictFile> {
        let mut doc = self.stored.clone().unwrap_or_else(|| VerdictFile {
            recorded: Recorded::Verdict(verdict.clone()),
            analysis: None,
            other: Default::default(),
        });
        doc.set_verdict(verdict.clone());
        doc.analysis = Some(serde_json::to_value(analysis)?);
        Ok(doc)
    }

    /// Writes `doc` (see `verdict_document`) to the run's verdict.json.
    pub fn write_verdict(&self, doc: &VerdictFile) -> Result<()> {
        Ok(doc.write(&self.dir)?)
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
    use lockcheck_check::Validity;

    #[test]
    fn the_report_reads_the_runs_record_and_only_its_incident_falls_back_to_the_workload() {
        let history = History::default();
        let verdict = Verdict {
            valid: Validity::Valid,
            model: "lock".into(),
            anomalies: vec![],
            notes: vec![],
        };
        let run: RunReport = serde_json::from_value(serde_json::json!({
            "valid": true, "model": "lock", "anomalies": [],
            "workload": "w", "seed": 1, "backend": "redis", "resource": "fenced",
            "fence": "<=", "run_dir": "results/w-1",
            "figures": {"run_time_s": 1.0, "ops": {}, "acquire_latency_ms": null,
                        "critical_sections": 0, "faults": 0,
                        "writes_rejected_by_fence": 0, "first_anomaly_s": null},
            "self_fencing_margin_ms": 200, "mode": "election",
        }))
        .unwrap();
        let workload = "[clients]\nself_fencing_margin_ms = 150\n\
                        [incident]\nsource = \"a page\"\nrule = \"a rule\"\n";
        let mut input = Input {
            title: "t",
            history: &history,
            resource: None,
            verdict: &verdict,
            run: Some(&run),
            workload: Some(workload),
        };
        assert_eq!(input.self_fencing_margin_ms(), Some(200));
        assert!(input.election());
        assert_eq!(input.incident(), None, "the run recorded none");
        input.run = None;
        assert_eq!(input.self_fencing_margin_ms(), None);
        assert!(!input.election());
        assert_eq!(input.incident().unwrap().source, "a page");
    }

    #[test]
    fn the_workload_is_read_for_its_top_level_allow_and_incident_only() {
        let notes = WorkloadNotes::parse(
            "allow = [\"double-holder\"]\n[clients]\ncount = 2\n\
             [incident]\nsource = \"a page\"\nrule = \"a rule\"\n",
        )
        .unwrap();
        assert_eq!(notes.allow, vec![AnomalyKind::DoubleHolder]);
        assert_eq!(notes.incident.unwrap().rule, "a rule");
        // An `allow` in another table is not the workload's.
        let nested = WorkloadNotes::parse("[clients]\nallow = [\"double-holder\"]\n").unwrap();
        assert!(nested.allow.is_empty());
        // A kind lockcheck does not know is an error that names the key.
        let e = WorkloadNotes::parse("allow = [\"double-holders\"]\n").unwrap_err();
        assert!(e.to_string().contains("allow"), "{e}");
    }
}
