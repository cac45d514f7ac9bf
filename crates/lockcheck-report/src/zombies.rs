//! The zombie window: for every critical section during which another process
//! acquired, how long the deposed holder went on believing it held the lock, and
//! what it did meanwhile. The base the analyses, the election's and the library's
//! panels read.

use lockcheck_check::calls::{Calls, Outcome};
use lockcheck_history::History;
use serde::{Deserialize, Serialize};

/// One deposed holder: another process acquired while it still believed it held the lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Zombie {
    pub process: u64,
    pub token: Option<u64>,
    /// When the other process's acquire completed (ns): the latest moment the lock
    /// can have changed hands, so the window below is a lower bound.
    pub deposed_at: u64,
    pub by_process: u64,
    pub by_token: Option<u64>,
    /// The end of the deposed holder's critical section (its release invoke or last op).
    pub until: u64,
    pub window_ns: u64,
    /// Ops of the deposed holder still in flight when it was deposed, or invoked
    /// after (release included).
    pub ops_after: usize,
    pub writes_after: usize,
    pub writes_accepted_after: usize,
    pub writes_rejected_after: usize,
    /// When its last write after the deposition was last seen (ns): the deposed
    /// holder's last act (a leader's, in an election); none if it wrote nothing after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_act: Option<u64>,
    /// History indexes: the holder's acquire ok, the new holder's acquire ok, then
    /// the invokes of the deposed holder's ops counted in `ops_after`.
    pub indexes: Vec<u64>,
}

/// The zombie windows of a run: their distribution, and the worst one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ZombieWindows {
    /// Critical sections during which another process acquired.
    pub deposed: usize,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub max_ns: u64,
    /// Writes deposed holders attempted after being deposed, in total.
    pub writes_after: usize,
    pub writes_accepted_after: usize,
    pub writes_rejected_after: usize,
    pub worst: Option<Zombie>,
    pub all: Vec<Zombie>,
}

/// For every critical section during which another process acquired: how long the
/// deposed holder went on believing it held the lock, and what it did meanwhile.
pub fn zombie_windows(history: &History, calls: &Calls) -> ZombieWindows {
    let idx = |pos: usize| history.ops[pos].index;
    let mut all = Vec::new();
    for (i, s) in calls.sections.iter().enumerate() {
        let Some(by) = calls.deposer(i) else {
            continue;
        };
        let d = by.start;
        let after: Vec<usize> = s
            .inside
            .iter()
            .chain(s.release.iter())
            .copied()
            // In flight at the deposition or later: a write invoked before it may
            // still land after it (a holder paused mid-write).
            .filter(|&c| calls.calls[c].last_seen() >= d)
            .collect();
        let writes = || {
            after
                .iter()
                .map(|&c| &calls.calls[c])
                // A write the client withheld (self-fenced) never left it.
                .filter(|c| c.is_write() && c.outcome != Outcome::Withheld)
        };
        let mut indexes = vec![
            idx(calls.calls[s.acquire]
                .completion
                .unwrap_or(calls.calls[s.acquire].invoke)),
            idx(calls.calls[by.acquire]
                .completion
                .unwrap_or(calls.calls[by.acquire].invoke)),
        ];
        indexes.extend(after.iter().map(|&c| idx(calls.calls[c].invoke)));
        all.push(Zombie {
            process: s.process,
            token: s.token,
            deposed_at: d,
            by_process: by.process,
            by_token: by.token,
            until: s.end,
            window_ns: s.end.saturating_sub(d),
            ops_after: after.len(),
            writes_after: writes().count(),
            writes_accepted_after: writes().filter(|c| c.outcome == Outcome::Ok).count(),
            writes_rejected_after: writes()
                .filter(|c| c.outcome == Outcome::StaleRejected)
                .count(),
            last_act: writes().map(|c| c.last_seen()).max(),
            indexes,
        });
    }
    let mut w: Vec<u64> = all.iter().map(|z| z.window_ns).collect();
    w.sort_unstable();
    let worst = all
        .iter()
        .max_by_key(|z| (z.window_ns, z.writes_after))
        .cloned();
    ZombieWindows {
        deposed: all.len(),
        p50_ns: percentile(&w, 50),
        p90_ns: percentile(&w, 90),
        max_ns: w.last().copied().unwrap_or(0),
        writes_after: all.iter().map(|z| z.writes_after).sum(),
        writes_accepted_after: all.iter().map(|z| z.writes_accepted_after).sum(),
        writes_rejected_after: all.iter().map(|z| z.writes_rejected_after).sum(),
        worst,
        all,
    }
}

/// Nearest-rank percentile of sorted values (0 for none).
pub(super) fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}
