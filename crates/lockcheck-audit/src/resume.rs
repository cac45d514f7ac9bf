//! `--resume DIR`: an audit stopped midway (killed, its machine rebooted, a
//! signal) goes on in its own directory from the scorecard it wrote after its
//! last run that ended. Those runs count as made; the runs that were in flight
//! are lost and made again with the same run numbers and seeds, so the plan,
//! which is a pure function of the tallies, asks what it would have asked, and
//! the verdict is the one the audit would have reached.

use super::battery::ScenarioWorkload;
use super::execute::RunRecord;
use super::provenance::Provenance;
use super::scorecard::{self, Scorecard};
use anyhow::Result;
use lockcheck_exit::Exit;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An audit's directory and what its scorecard says it had done.
#[derive(Debug)]
pub struct Resumed {
    pub dir: PathBuf,
    card: Scorecard,
    /// Time its runs took before it stopped.
    pub elapsed: Duration,
}

/// Reads `dir`'s scorecard: refused when there is none (exit 2), when it is
/// not one (exit 4), or when the audit ended (nothing to resume, exit 2).
pub fn read(dir: &Path) -> Result<Resumed> {
    let path = dir.join(super::publish::JSON_FILE);
    if !path.is_file() {
        return Err(Exit::usage(format!(
            "--resume {}: no {} there: not an audit's directory, or one killed before its first run ended (start it again)",
            dir.display(),
            super::publish::JSON_FILE
        )));
    }
    let card = scorecard::read(&path)?;
    if card.interrupted.is_none() {
        return Err(Exit::usage(format!(
            "--resume {}: the audit ended ({}, {} runs): nothing to resume",
            dir.display(),
            card.verdict.name(),
            card.scenarios.iter().map(|c| c.ran).sum::<usize>()
        )));
    }
    Ok(Resumed {
        dir: dir.to_path_buf(),
        elapsed: Duration::from_secs_f64(card.elapsed_s.max(0.0)),
        card,
    })
}

impl Resumed {
    /// The audit's command line from `audit` on (global flags before it left
    /// out), as its scorecard recorded it.
    pub fn argv(&self) -> Option<Vec<String>> {
        let argv = self.card.provenance.argv.as_ref()?;
        let at = argv.iter().position(|w| w == "audit")?;
        Some(argv[at..].to_vec())
    }

    /// The audit's provenance, kept (when and how it started): refused unless
    /// this lockcheck is the one that started it and its battery is the same,
    /// since a verdict from runs of two programs is no one program's.
    pub fn provenance(&self, now: &Provenance) -> Result<Provenance> {
        let was = &self.card.provenance;
        for (field, then, here) in [
            ("provenance.commit", &was.commit, &now.commit),
            ("provenance.tree", &was.tree, &now.tree),
            (
                "provenance.battery_digest",
                &was.battery_digest,
                &now.battery_digest,
            ),
        ] {
            if then != here {
                return Err(Exit::malformed(format!(
                    "--resume {}: field {field} is {}, this lockcheck's is {}: resume with the lockcheck that started the audit",
                    self.dir.display(),
                    then.as_deref().unwrap_or("null"),
                    here.as_deref().unwrap_or("null")
                )));
            }
        }
        Ok(was.clone())
    }

    /// The runs made so far, by battery index, each run directory absolute
    /// again (the scorecard names them from the audit's directory).
    pub fn records(&self, workloads: &[ScenarioWorkload]) -> Result<Vec<Vec<RunRecord>>> {
        workloads
            .iter()
            .map(|w| {
                let name = w.scenario.name();
                let card = self
                    .card
                    .scenarios
                    .iter()
                    .find(|c| c.scenario == name)
                    .ok_or_else(|| {
                        Exit::malformed(format!(
                            "--resume {}: the scorecard has no scenario {name}",
                            self.dir.display()
                        ))
                    })?;
                Ok(card
                    .runs
                    .iter()
                    .cloned()
                    .map(|mut r| {
                        r.run_dir = r.run_dir.map(|d| self.dir.join(d));
                        r
                    })
                    .collect())
            })
            .collect()
    }
}
