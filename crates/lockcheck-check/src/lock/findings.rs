//! The anomalies a check has found so far, capped per kind, and the verdict they
//! make. The base of the lock checker's passes: each reports into it.

use crate::{Anomaly, AnomalyKind, Validity, Verdict};

/// At most this many anomalies of one kind are listed; the rest are counted.
pub(super) const LISTED_PER_KIND: usize = 50;

/// The anomalies found so far, capped per kind so that a badly broken history of a
/// million lines still gives a verdict of readable size.
#[derive(Default)]
pub(crate) struct Findings {
    anomalies: Vec<Anomaly>,
    counts: rustc_hash::FxHashMap<AnomalyKind, usize>,
    /// Findings the second opinion could not confirm: the verdict is then unknown.
    disputes: Vec<String>,
}

impl Findings {
    /// Counts one anomaly; builds and lists it only while its kind is under the cap.
    /// True when it was listed.
    pub fn report(&mut self, kind: AnomalyKind, make: impl FnOnce() -> Anomaly) -> bool {
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        if *n <= LISTED_PER_KIND {
            self.anomalies.push(make());
        }
        *n <= LISTED_PER_KIND
    }

    /// Counts `n` more anomalies of `kind` without listing them.
    pub fn count(&mut self, kind: AnomalyKind, n: usize) {
        if n > 0 {
            *self.counts.entry(kind).or_default() += n;
        }
    }

    pub fn dispute(&mut self, note: String) {
        self.disputes.push(note);
    }

    pub(super) fn into_verdict(mut self, model: &str, mut notes: Vec<String>) -> Verdict {
        let mut counts: Vec<_> = self.counts.into_iter().collect();
        counts.sort();
        for (kind, n) in counts {
            if n > LISTED_PER_KIND {
                notes.push(format!(
                    "{n} {} anomalies found; the first {LISTED_PER_KIND} are listed",
                    kind.name()
                ));
            }
        }
        self.anomalies
            .sort_by_key(|a| (a.time.unwrap_or(0), a.kind, a.indexes.first().copied()));
        let valid = if !self.disputes.is_empty() {
            Validity::Unknown
        } else if self.anomalies.is_empty() {
            Validity::Valid
        } else {
            Validity::Invalid
        };
        notes.append(&mut self.disputes);
        Verdict {
            valid,
            model: model.into(),
            anomalies: self.anomalies,
            notes,
        }
    }
}
