//! The run in figures, and the verdict in words for a terminal.

use super::analysis::Analysis;
use super::sections::{CallKind, Calls, Outcome};
use super::timeline::FaultBand;
use crate::check::{secs, Validity, Verdict};
use crate::history::History;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub duration_ns: u64,
    pub ops: usize,
    pub processes: usize,
    pub critical_sections: usize,
    pub acquires_ok: usize,
    pub acquires_failed: usize,
    pub writes_ok: usize,
    /// Refused by the resource's fencing check (`stale-token`).
    pub writes_rejected: usize,
    pub writes_failed: usize,
    pub writes_unknown: usize,
    pub faults: usize,
}

pub fn summarize(history: &History, calls: &Calls, bands: &[FaultBand]) -> Summary {
    let count = |k: CallKind, o: &[Outcome]| {
        calls
            .calls
            .iter()
            .filter(|c| c.kind == k && o.contains(&c.outcome))
            .count()
    };
    let mut procs: Vec<u64> = calls.calls.iter().map(|c| c.process).collect();
    procs.sort_unstable();
    procs.dedup();
    Summary {
        duration_ns: calls.end,
        ops: history.ops.len(),
        processes: procs.len(),
        critical_sections: calls.sections.len(),
        acquires_ok: count(CallKind::Acquire, &[Outcome::Ok]),
        acquires_failed: count(CallKind::Acquire, &[Outcome::Fail, Outcome::Info]),
        writes_ok: count(CallKind::Write, &[Outcome::Ok]),
        writes_rejected: count(CallKind::Write, &[Outcome::StaleRejected]),
        writes_failed: count(CallKind::Write, &[Outcome::Fail]),
        writes_unknown: count(CallKind::Write, &[Outcome::Info]),
        faults: bands.len(),
    }
}

pub fn validity_word(v: Validity) -> &'static str {
    match v {
        Validity::Valid => "VALID",
        Validity::Invalid => "INVALID",
        Validity::Unknown => "UNKNOWN",
    }
}

fn list(v: &[u64]) -> String {
    let s: Vec<String> = v.iter().map(u64::to_string).collect();
    s.join(", ")
}

/// The verdict for a person at a terminal: the answer, each anomaly with its
/// evidence, the notes, and (where given) the analyses' answer.
pub fn verdict_text(verdict: &Verdict, analysis: Option<&Analysis>) -> String {
    let allowed = verdict.anomalies.iter().filter(|a| a.allowed).count();
    let mut out = format!(
        "{} (model {}): {} anomalies{}\n",
        validity_word(verdict.valid),
        verdict.model,
        verdict.anomalies.len(),
        if allowed > 0 {
            format!(", {allowed} allowed")
        } else {
            String::new()
        }
    );
    for a in &verdict.anomalies {
        out += &format!(
            "  {}{}: {}\n",
            a.kind.name(),
            if a.allowed { " (allowed)" } else { "" },
            a.explanation
        );
        let mut ev = vec![format!("ops {}", list(&a.indexes))];
        if !a.processes.is_empty() {
            ev.push(format!("processes {}", list(&a.processes)));
        }
        if !a.tokens.is_empty() {
            ev.push(format!("tokens {}", list(&a.tokens)));
        }
        if let Some(t) = a.time {
            ev.push(format!("at {}", secs(t)));
        }
        out += &format!("    {}\n", ev.join("; "));
    }
    for n in &verdict.notes {
        out += &format!("  note: {n}\n");
    }
    if let Some(a) = analysis {
        let z = &a.zombies;
        out += &format!(
            "zombie window: {} deposed, p50 {}, p90 {}, max {}\n",
            super::analysis::count(z.deposed, "holder", "holders"),
            secs(z.p50_ns),
            secs(z.p90_ns),
            secs(z.max_ns)
        );
        out += &format!("fencing: {}\n", a.fencing.sentence);
        if let Some(s) = &a.self_fencing {
            out += &format!("self-fencing: {}\n", s.sentence);
        }
        out += &format!("guidance: {}. {}\n", a.guidance.title, a.guidance.sentence);
    }
    out
}
