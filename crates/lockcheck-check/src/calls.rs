//! The history as its readers see it: client calls (an invoke and its completion as
//! one thing) and critical sections (acquire ok .. release invoke, as the spec defines
//! them), with who deposed whom. The report's timeline draws these, its analyses
//! measure them, and `provoked` classifies a run by them.

use super::lock::critical_sections;
use lockcheck_history::{error, AppliedWrite, History, OpType, Process};
use rustc_hash::FxHashMap;

/// What a call did, from the history's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Fail,
    /// A write the resource's fencing check refused (`fail` with error `stale-token`).
    StaleRejected,
    /// Unknown: completed `info`, or never completed.
    Info,
    /// Withheld by the client itself (`fail` with the self-fenced error): its lease
    /// deadline had passed, so the write was never sent.
    Withheld,
}

/// The `f` of a call, as the report tells them apart.
pub use lockcheck_history::Call as CallKind;

impl Outcome {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// One client op: its invoke and its completion.
#[derive(Debug, Clone)]
pub struct Call {
    pub process: u64,
    pub kind: CallKind,
    /// Positions in `History::ops`.
    pub invoke: usize,
    pub completion: Option<usize>,
    /// Run times (ns) of invoke and completion.
    pub t0: u64,
    pub t1: Option<u64>,
    pub outcome: Outcome,
    /// The fencing token: the completion's where it has one, else the invoke's.
    pub token: Option<u64>,
    /// The resource's order of an applied write.
    pub seq: Option<u64>,
    /// `value.lease_ms` of an acquire or renew ok.
    pub lease_ms: Option<u64>,
}

impl Call {
    /// The last moment the call was seen: its completion, or its invoke if it has none.
    pub fn last_seen(&self) -> u64 {
        self.t1.unwrap_or(self.t0)
    }

    pub fn is_write(&self) -> bool {
        self.kind == CallKind::Write
    }
}

/// A critical section: from the acquire's ok to the invoke of the process's next
/// release (a holder acquiring again does not end it), or to its last op if it never
/// released, or to the invoke that retired it.
#[derive(Debug, Clone)]
pub struct Section {
    pub process: u64,
    /// The lock's name (`value.lock` of the acquire), where the history gives one.
    pub lock: Option<String>,
    /// Index into `Calls::calls` of the acquire.
    pub acquire: usize,
    /// Index of the release call, if the holder released.
    pub release: Option<usize>,
    /// Calls of the holder inside the section (writes, reads, renews, acquires
    /// again), in order.
    pub inside: Vec<usize>,
    /// Acquire ok time (ns).
    pub start: u64,
    /// Release invoke time, the retiring op's invoke time, or the last op's last-seen
    /// time.
    pub end: u64,
    pub token: Option<u64>,
    /// When the lease ran out as last granted (acquire or renew ok + `lease_ms`), where known.
    pub lease_end: Option<u64>,
}

/// Calls and critical sections of one history.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    /// In invoke order (so in time order of their invokes).
    pub calls: Vec<Call>,
    /// In order of their start (the acquire oks' order in the history).
    pub sections: Vec<Section>,
    /// Time of the last op in the history (ns).
    pub end: u64,
}

impl Calls {
    pub fn of(history: &History) -> Calls {
        Calls::of_run(history, None)
    }

    /// With the resource's log of applied writes, which can show a retired holder's
    /// write landing after the lock changed hands (its section then lasts until then).
    pub fn of_run(history: &History, resource: Option<&[AppliedWrite]>) -> Calls {
        let mut calls = Vec::new();
        for (inv, comp) in history.pairs() {
            let i = &history.ops[inv];
            let Process::Client(process) = i.process else {
                continue;
            };
            let c = comp.map(|c| &history.ops[c]);
            let kind = CallKind::of(&i.f);
            let outcome = match c.map(|c| c.kind) {
                Some(OpType::Ok) => Outcome::Ok,
                Some(OpType::Fail) => match c.and_then(|c| c.error.as_deref()) {
                    Some(error::STALE_TOKEN) => Outcome::StaleRejected,
                    Some(e) if error::withheld(e) => Outcome::Withheld,
                    _ => Outcome::Fail,
                },
                _ => Outcome::Info,
            };
            calls.push(Call {
                process,
                kind,
                invoke: inv,
                completion: comp,
                t0: i.time,
                t1: c.map(|c| c.time),
                outcome,
                token: c.and_then(|c| c.token()).or_else(|| i.token()),
                seq: c.and_then(|c| c.seq()),
                lease_ms: c
                    .filter(|c| c.kind == OpType::Ok)
                    .and_then(|c| c.value.get("lease_ms"))
                    .and_then(serde_json::Value::as_u64),
            });
        }
        let sections = sections_of(&calls, history, resource);
        Calls {
            calls,
            sections,
            end: history.ops.last().map_or(0, |o| o.time),
        }
    }

    /// The section that deposed section `i`: the first of the same lock to start, in
    /// another process, after `i` started and before it ended (another client acquired
    /// while this holder still believed it held the lock). A holder that never released
    /// holds to the end of the history (the checker's rule, history.md v1.1), however
    /// long ago it was last seen.
    pub fn deposer(&self, i: usize) -> Option<&Section> {
        let s = &self.sections[i];
        let open_until = match s.release {
            Some(_) => s.end,
            None => u64::MAX,
        };
        // Sections are in start order: the first later start of another process is
        // the earliest deposition.
        self.sections[i + 1..]
            .iter()
            .take_while(|n| n.start < open_until)
            .find(|n| n.process != s.process && n.start > s.start && n.lock == s.lock)
    }
}

/// The checker's critical sections (`check::lock::critical_sections`: only a release
/// ends one, spec v1.1), tied to the calls: the report's windows follow the verdict's
/// rule, never a second reading of it.
fn sections_of(
    calls: &[Call],
    history: &History,
    resource: Option<&[AppliedWrite]>,
) -> Vec<Section> {
    let index = |pos: usize| history.ops[pos].index;
    let by_invoke: FxHashMap<u64, usize> = (0..calls.len())
        .map(|c| (index(calls[c].invoke), c))
        .collect();
    let mut of_process: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
    for (c, call) in calls.iter().enumerate() {
        of_process.entry(call.process).or_default().push(c);
    }
    let mut out = Vec::new();
    for cs in critical_sections(history, resource) {
        let (Some(&acquire), Some(mine)) =
            (by_invoke.get(&cs.acquire), of_process.get(&cs.process))
        else {
            continue;
        };
        let release = cs.release.and_then(|r| by_invoke.get(&r).copied());
        // The holder's calls invoked after the acquire's ok, up to the section's end.
        let from = mine.partition_point(|&c| index(calls[c].invoke) <= cs.begin);
        let inside: Vec<usize> = mine[from..]
            .iter()
            .copied()
            .take_while(|&c| index(calls[c].invoke) <= cs.end)
            .filter(|&c| Some(c) != release)
            .collect();
        // The lease as last granted: by the acquire, a renew, or the holder acquiring
        // again.
        let granted = |c: &Call| match (c.kind, c.outcome, c.lease_ms, c.t1) {
            (CallKind::Acquire | CallKind::Renew, Outcome::Ok, Some(l), Some(t1)) => {
                Some(t1 + l * 1_000_000)
            }
            _ => None,
        };
        let lease_end = std::iter::once(acquire)
            .chain(inside.iter().copied())
            .rev()
            .find_map(|c| granted(&calls[c]));
        out.push(Section {
            process: cs.process,
            lock: Some(cs.lock).filter(|l| !l.is_empty()),
            acquire,
            release,
            inside,
            start: cs.begin_time,
            end: cs.end_time,
            token: cs.token,
            lease_end,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_history::HistoryBuilder as H;

    #[test]
    fn sections_run_from_acquire_ok_to_release_invoke() {
        let h = H::default()
            .acquire(0, 0, Some(1))
            .write(10, 0, Some(1), 1)
            .release(20, 0, Some(1))
            .acquire(30, 1, Some(2))
            .write(40, 1, Some(2), 2)
            .history();
        let c = Calls::of(&h);
        assert_eq!(c.calls.len(), 5);
        assert_eq!(c.sections.len(), 2);
        let s0 = &c.sections[0];
        assert_eq!((s0.process, s0.start, s0.end), (0, 1_000_000, 20_000_000));
        assert_eq!(s0.inside.len(), 1);
        assert_eq!(s0.lease_end, Some(1_001_000_000));
        // Never released: the section ends with the holder's last op.
        let s1 = &c.sections[1];
        assert_eq!((s1.process, s1.end, s1.release), (1, 41_000_000, None));
    }
}
