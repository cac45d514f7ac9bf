//! The `[[faults]]` entries: when each happens (`duration`, `after`, `interval`,
//! the run's own keys) read here; what it breaks, by its kind's spec in the fault
//! catalogue (`fault::spec`), which reads and checks the kind's own keys.

use super::located::line_of;
use super::raw;
use anyhow::{anyhow, Result};
use lockcheck_fault::duration::Dur;
use lockcheck_fault::spec::{Setting, Spec};
use std::sync::Arc;
use std::time::Duration;

/// One `[[faults]]` entry: what to break (its kind's spec), and when.
#[derive(Debug, Clone)]
pub struct FaultEntry {
    pub spec: Arc<dyn Spec>,
    /// How long each occurrence lasts.
    pub duration: Duration,
    /// Quiet period from the start of the run to the first occurrence.
    pub after: Duration,
    /// Gap from the end of one occurrence to the start of the next; `None`: once.
    pub interval: Option<Duration>,
    /// Where the entry is in the workload's text, for errors that name a line.
    pub span: std::ops::Range<usize>,
}

impl FaultEntry {
    /// Its kind, as the workload spells it.
    pub fn name(&self) -> &'static str {
        self.spec.kind().name
    }
}

/// The keys of an entry the run reads itself: when it happens.
pub(super) const TIMING: &[&str] = &["duration", "after", "interval"];

/// Reads the entries, checked against `setting`; also says which gave `after`
/// or `interval` (which a `[schedule]` refuses).
pub(super) fn read(
    entries: Vec<toml::Spanned<raw::FaultTable>>,
    setting: &Setting,
    file: &dyn std::fmt::Display,
    text: &str,
) -> Result<(Vec<FaultEntry>, Vec<bool>)> {
    let mut faults = Vec::new();
    let mut timed = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let span = entry.span();
        let mut lines = std::collections::BTreeMap::new();
        let mut values = std::collections::BTreeMap::new();
        for (key, value) in entry.into_inner() {
            lines.insert(key.get_ref().clone(), line_of(text, key.span().start));
            values.insert(key.into_inner(), value);
        }
        // The key's own line, else the entry's header.
        let header = line_of(text, span.start);
        let bad = |key: &str, what: String| {
            let line = lines.get(key).copied().unwrap_or(header);
            anyhow!("{file}:{line}: faults[{i}].{key}: {what}")
        };
        let mut entry = lockcheck_fault::catalogue::entry(values, TIMING, &bad)?;
        let Some(Dur(duration)) = entry.take("duration")? else {
            return Err(entry.bad(
                "duration",
                "missing field `duration`: how long each occurrence lasts, like \"2s\"",
            ));
        };
        if duration.is_zero() {
            return Err(entry.bad("duration", "expected a duration longer than 0"));
        }
        let after = entry.take::<Dur>("after")?;
        let interval = entry.take::<Dur>("interval")?;
        timed.push(after.is_some() || interval.is_some());
        faults.push(FaultEntry {
            spec: entry.read(setting)?,
            duration,
            after: after.map_or(Duration::from_secs(1), |d| d.0),
            interval: interval.map(|d| d.0),
            span,
        });
    }
    Ok((faults, timed))
}

/// One occurrence of a fault the run is planned to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedFault {
    /// Its `[[faults]]` entry (an index into `Workload::faults`).
    pub fault: usize,
    /// When it is due, from the run's start. A fault aimed at the holder starts at
    /// the first acquire from then on, so later than this; its later occurrences
    /// follow its real end, and may slip past the run's end.
    pub at: Duration,
    pub duration: Duration,
}
