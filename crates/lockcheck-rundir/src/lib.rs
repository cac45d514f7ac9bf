//! lockcheck's run directory, typed: what `verdict.json` holds, written by the
//! runner and read by the report, `analyze`, `shrink`, `replay` and `audit`
//! through the same types. It sits beside the checker, below the runner: it
//! depends only on [`lockcheck_check`] (the verdict) and serde, so the report
//! reads a run knowing nothing of servers or faults.
//!
//! - [`RunReport`]: `lockcheck run`'s record, the verdict and the run's figures.
//! - [`VerdictFile`]: verdict.json whoever wrote it: a run's record or a verdict
//!   alone (`lockcheck analyze` over a history no run recorded), with the analyses
//!   `analyze` adds and any key this version does not know, kept as it was.
//! - [`read`], [`read_run`]: a run directory's verdict.json, with an error that
//!   names the file and the field. Verdicts of older versions read: fields added
//!   since are optional or default.
//! - [`field_to_blame`]: the field an object does not read at, for the audit's
//!   scorecard, which names its fields the same way.

mod faults;
mod figures;
mod record;
pub mod resource;

pub use faults::{FaultAccount, MissedFault};
pub use figures::{Figures, Percentiles};
pub use record::{ClientInfo, Incident, OnLeaseLoss, RunReport, ELECTION};

use lockcheck_check::Verdict;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The files of a run directory.
pub const HISTORY_FILE: &str = "history.jsonl";
pub const RESOURCE_FILE: &str = "resource.jsonl";
pub const VERDICT_FILE: &str = "verdict.json";
pub const WORKLOAD_FILE: &str = "workload.toml";
pub const REPORT_FILE: &str = "report.html";

/// The key every run's record has and a verdict alone has not.
const RUN_KEY: &str = "workload";
/// The key `lockcheck analyze` writes its analyses under.
const ANALYSIS_KEY: &str = "analysis";

/// verdict.json, whoever wrote it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictFile {
    #[serde(flatten)]
    pub recorded: Recorded,
    /// The analyses `lockcheck analyze` adds (zombie windows, fencing replay,
    /// guidance): the report's, which recomputes them, so kept here as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Value>,
    /// Keys this version does not know (a newer lockcheck's, or an old one's
    /// nested `run`), written back as they were when `analyze` rewrites the file.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// What verdict.json records besides the analyses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Recorded {
    /// `lockcheck run`'s record.
    Run(Box<RunReport>),
    /// A verdict alone: `lockcheck analyze` over a history that no run recorded,
    /// or an old lockcheck's file without the run's record at the top.
    Verdict(Verdict),
}

impl VerdictFile {
    /// The file `lockcheck run` writes: its record alone.
    pub fn of_run(report: RunReport) -> VerdictFile {
        VerdictFile {
            recorded: Recorded::Run(Box::new(report)),
            analysis: None,
            other: Map::new(),
        }
    }

    pub fn verdict(&self) -> &Verdict {
        match &self.recorded {
            Recorded::Run(r) => &r.verdict,
            Recorded::Verdict(v) => v,
        }
    }

    /// The run's record, if a run wrote the file.
    pub fn run(&self) -> Option<&RunReport> {
        match &self.recorded {
            Recorded::Run(r) => Some(r),
            Recorded::Verdict(_) => None,
        }
    }

    /// Puts `verdict` in place of the recorded one, the run's record kept.
    pub fn set_verdict(&mut self, verdict: Verdict) {
        match &mut self.recorded {
            Recorded::Run(r) => r.verdict = verdict,
            Recorded::Verdict(v) => *v = verdict,
        }
    }

    /// Reads verdict.json's text. A file with `workload` is a run's record, read
    /// whole (a field missing that every version wrote is an error); else the
    /// verdict alone. Verdicts written before the resource's fence was recorded
    /// get the fence their `resource` meant (`fenced`: `<=`, `unfenced`: none).
    pub fn parse(text: &str) -> Result<VerdictFile, FieldError> {
        let mut map: Map<String, Value> = serde_json::from_str(text).map_err(|e| FieldError {
            field: None,
            message: e.to_string(),
        })?;
        let analysis = map.remove(ANALYSIS_KEY);
        let (recorded, other) = if map.contains_key(RUN_KEY) {
            if !map.contains_key("fence") {
                let fence = match map.get("resource").and_then(Value::as_str) {
                    Some("fenced") => resource::Fence::NotBelow,
                    _ => resource::Fence::Off,
                };
                map.insert("fence".into(), Value::from(fence.name()));
            }
            let (run, other) = typed::<RunReport>(map)?;
            (Recorded::Run(Box::new(run)), other)
        } else {
            let (verdict, other) = typed::<Verdict>(map)?;
            (Recorded::Verdict(verdict), other)
        };
        Ok(VerdictFile {
            recorded,
            analysis,
            other,
        })
    }

    /// Writes the file into run directory `dir`, as `lockcheck run` always has
    /// (pretty JSON, no newline at the end).
    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        let path = dir.join(VERDICT_FILE);
        let text = serde_json::to_vec_pretty(self).map_err(|e| Error::Io {
            path: path.clone(),
            error: e.into(),
        })?;
        std::fs::write(&path, text).map_err(|error| Error::Io { path, error })
    }
}

/// `T` read from the object `map`, with the keys `T` does not write back: those it
/// does not know (a field it skips when empty counts as unknown, and is written
/// back as it was).
fn typed<T: DeserializeOwned + Serialize>(
    map: Map<String, Value>,
) -> Result<(T, Map<String, Value>), FieldError> {
    let value: T = serde_json::from_value(Value::Object(map.clone())).map_err(|e| {
        let message = e.to_string();
        match missing_field(&message) {
            Some(field) => FieldError {
                field: Some(field.into()),
                message: "missing".into(),
            },
            None => FieldError {
                field: culprit::<T>(&map),
                message,
            },
        }
    })?;
    let written = match serde_json::to_value(&value) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let other = map
        .into_iter()
        .filter(|(k, _)| !written.contains_key(k))
        .collect();
    Ok((value, other))
}

/// The field serde's message says is missing.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.strip_suffix('`')
}

/// The top-level field of object `map` to blame for `error`, which reading it as
/// a `T` gave: the one missing here, or the one whose value does not read (a
/// field missing further in included). For files other than verdict.json (the
/// audit's scorecard) that name, level by level, where they do not read.
pub fn field_to_blame<T: DeserializeOwned>(
    map: &Map<String, Value>,
    error: &serde_json::Error,
) -> Option<String> {
    let message = error.to_string();
    if let Some(field) = missing_field(&message).filter(|f| !map.contains_key(*f)) {
        // serde names a field missing in a value within as it names one missing
        // here: it is here when giving it changes what reading says.
        let mut with = map.clone();
        with.insert(field.into(), Value::Null);
        let here = match serde_json::from_value::<T>(Value::Object(with)) {
            Ok(_) => true,
            Err(e) => {
                let again = e.to_string();
                again != message && !again.starts_with(&format!("unknown field `{field}`"))
            }
        };
        if here {
            return Some(field.into());
        }
    }
    culprit::<T>(map)
}

/// The top-level field whose value stops `map` reading as a `T`: the one without
/// which it reads, or fails only for that field's absence. serde's messages do
/// not name the field whose value has the wrong type (a value's errors come
/// before any field's absence, so removing a sound field changes nothing).
fn culprit<T: DeserializeOwned>(map: &Map<String, Value>) -> Option<String> {
    map.keys()
        .find(|key| {
            let mut without = map.clone();
            without.remove(*key);
            match serde_json::from_value::<T>(Value::Object(without)) {
                Ok(_) => true,
                Err(e) => missing_field(&e.to_string()) == Some(key.as_str()),
            }
        })
        .cloned()
}

/// What in verdict.json did not read: the field, where one is to blame, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", field.as_ref().map(|f| format!("`{f}`: ")).unwrap_or_default())]
pub struct FieldError {
    pub field: Option<String>,
    pub message: String,
}

/// A run directory's verdict.json could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {what} (written by another lockcheck version, or not by `lockcheck run`)", path.display())]
    Malformed { path: PathBuf, what: FieldError },
}

/// Run directory `dir`'s verdict.json; `None` where it has none (a history not
/// checked yet).
pub fn read(dir: &Path) -> Result<Option<VerdictFile>, Error> {
    let path = dir.join(VERDICT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::Io { path, error }),
    };
    VerdictFile::parse(&text)
        .map(Some)
        .map_err(|what| Error::Malformed { path, what })
}

/// The record of the `lockcheck run` that made `dir`: its verdict.json, which
/// must be a run's.
pub fn read_run(dir: &Path) -> Result<RunReport, Error> {
    let path = dir.join(VERDICT_FILE);
    match read(dir)? {
        Some(VerdictFile {
            recorded: Recorded::Run(r),
            ..
        }) => Ok(*r),
        Some(_) => Err(Error::Malformed {
            path,
            what: FieldError {
                field: Some(RUN_KEY.into()),
                message: "missing: a verdict without a run's record".into(),
            },
        }),
        None => Err(Error::Io {
            path,
            error: std::io::ErrorKind::NotFound.into(),
        }),
    }
}

#[cfg(test)]
mod tests;
