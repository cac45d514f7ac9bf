//! The run in figures, and the analyses in words for a terminal.

use super::analysis::Analysis;
use super::timeline::FaultBand;
use lockcheck_check::calls::{CallKind, Calls, Outcome};
use lockcheck_check::{secs, Validity};
use lockcheck_history::History;

#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Withheld by self-fencing clients: never sent.
    pub writes_withheld: usize,
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
        writes_withheld: count(CallKind::Write, &[Outcome::Withheld]),
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

/// The analyses for a person at a terminal, one line each (the verdict itself is
/// printed as `check` prints it).
pub fn analysis_text(a: &Analysis) -> String {
    let z = &a.zombies;
    let mut out = format!(
        "zombie window: {} deposed, p50 {}, p90 {}, max {}\n",
        super::text::count(z.deposed, "holder", "holders"),
        secs(z.p50_ns),
        secs(z.p90_ns),
        secs(z.max_ns)
    );
    if let Some(l) = &a.election {
        out += &format!("leaderships: {}\n", l.sentence);
    }
    out += &format!("fencing: {}\n", a.fencing.sentence);
    if let Some(s) = &a.self_fencing {
        out += &format!("self-fencing: {}\n", s.sentence);
    }
    out + &format!("guidance: {}. {}\n", a.guidance.title, a.guidance.sentence)
}

#[cfg(test)]
mod tests {
    use super::super::analysis::analyze;
    use super::*;
    use lockcheck_history::error;
    use lockcheck_history::HistoryBuilder as H;
    use serde_json::json;

    #[test]
    fn a_self_fenced_write_is_not_a_write_after_deposition() {
        // Process 0 wakes past its lease deadline, withholds its write and releases:
        // the write never left the client, so it is no zombie write.
        let h = H::default()
            .acquire(0, 0, None)
            .write(10, 0, None, 1)
            .acquire(1200, 1, None)
            .write(1210, 1, None, 2)
            .inv(1300, 0, "write", json!({"token": null, "data": "late"}))
            .fail(1301, 0, "write", error::SELF_FENCED)
            .release(1400, 0, None)
            .history();
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, Some(200));
        assert_eq!(a.zombies.deposed, 1);
        assert_eq!(a.zombies.writes_after, 0);
        let sf = a.self_fencing.unwrap();
        assert_eq!(sf.writes_after, 0);
        assert!(
            sf.sentence.contains("(0 writes after deposition)"),
            "{}",
            sf.sentence
        );
        let s = summarize(&h, &c, &[]);
        assert_eq!((s.writes_withheld, s.writes_failed), (1, 0));
    }
}
