//! What a run tells beyond valid / invalid: how long deposed holders went on acting
//! (the zombie window), whether a fencing resource would have stopped them, and which
//! of the three designs fits what was observed. Pure functions of the history.

pub use super::answer::{Answer, Guidance};
use super::election::Leaderships;
use super::library::{self, LibraryBelief};
use super::text::{count, times};
pub use super::zombies::{zombie_windows, Zombie, ZombieWindows};
use lockcheck_check::calls::{Calls, Outcome};
use lockcheck_check::provoked::{of_run, Provoked};
use lockcheck_check::secs;
use lockcheck_history::{AppliedWrite, History};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

/// Everything the report adds to the verdict. Stored under `analysis` in verdict.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Whether the run exercised the danger (history.md v1.2): provoked, deposed
    /// but not provoked, fired with nobody deposed, or the fault not seen. Absent
    /// from a verdict.json written before v1.2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provoked: Option<Provoked>,
    pub zombies: ZombieWindows,
    pub fencing: FencingReplay,
    /// Present when the workers checked their own lease deadline (run.self_fencing_margin_ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_fencing: Option<SelfFencing>,
    /// Present when the clients asked their lock library `held` (an adapter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<LibraryBelief>,
    pub guidance: Guidance,
    /// Present in an election (`mode = "election"`): the leaderships, and how long
    /// deposed leaders went on acting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub election: Option<Leaderships>,
}

/// The resource log replayed as if the resource enforced the token: a write whose
/// token is lower than one already applied is rejected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FencingReplay {
    /// `resource.jsonl`, or `history` (the write oks in `seq` order).
    pub source: String,
    /// False when no applied write carried a token: there is nothing to check.
    pub applicable: bool,
    /// Applied writes replayed.
    pub writes: usize,
    /// Applied writes that carried no token.
    pub tokenless: usize,
    /// `seq` of each applied write the fence would have rejected.
    pub would_reject: Vec<u64>,
    /// Writes the resource itself rejected (`stale-token`) during the run.
    pub rejected_in_run: usize,
    /// Writes of deposed holders the fence would still let through: the new holder
    /// had not yet written, so the resource had not seen its newer token.
    pub slipped: usize,
    /// After the replay, how often one critical section's writes are still split by
    /// another's (equal tokens, or no token).
    pub interleavings_after: usize,
    pub damage_remains: bool,
    pub sentence: String,
}

/// The residual window a self-fencing client (checks its lease deadline before each
/// write, exits on loss) left in this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfFencing {
    pub margin_ms: u64,
    /// Deposed holders that still acted, and for how long (the same measure as `zombies`).
    pub residual_max_ns: u64,
    pub residual_p90_ns: u64,
    pub writes_after: usize,
    pub sentence: String,
}

/// Runs every analysis. `self_fencing_margin_ms` is the runner's note that workers
/// fenced themselves (None: they did not, or it is not known).
pub fn analyze(
    history: &History,
    calls: &Calls,
    resource: Option<&[AppliedWrite]>,
    self_fencing_margin_ms: Option<u64>,
) -> Analysis {
    let zombies = zombie_windows(history, calls);
    let fencing = fencing_replay(history, calls, resource, &zombies);
    let self_fencing = self_fencing_margin_ms.map(|m| self_fencing(m, &zombies));
    let guidance = guidance(&zombies, &fencing, self_fencing.as_ref());
    let library = library::belief(history, &zombies);
    Analysis {
        provoked: Some(of_run(history, resource)),
        library,
        election: None,
        zombies,
        fencing,
        self_fencing,
        guidance,
    }
}

/// One applied write, in the resource's order, tied to its call where the history has it.
struct Applied {
    seq: u64,
    process: u64,
    token: Option<u64>,
    call: Option<usize>,
}

fn applied_writes(
    history: &History,
    calls: &Calls,
    resource: Option<&[AppliedWrite]>,
) -> Vec<Applied> {
    let by_seq: FxHashMap<u64, usize> = calls
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_write() && c.outcome == Outcome::Ok)
        .filter_map(|(i, c)| c.seq.map(|s| (s, i)))
        .collect();
    match resource {
        Some(log) => {
            // A write that completed `info` has no seq in the history: find it by its
            // process and data, which the resource log records.
            let data_of = |c: usize| {
                history.ops[calls.calls[c].invoke]
                    .value
                    .get("data")
                    .and_then(|d| d.as_str())
            };
            let by_data: FxHashMap<(u64, &str), usize> = calls
                .calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_write() && c.outcome == Outcome::Info)
                .filter_map(|(i, c)| data_of(i).map(|d| ((c.process, d), i)))
                .collect();
            log.iter()
                .map(|w| Applied {
                    seq: w.seq,
                    process: w.process,
                    token: w.token,
                    call: by_seq
                        .get(&w.seq)
                        .or_else(|| by_data.get(&(w.process, w.data.as_str())))
                        .copied(),
                })
                .collect()
        }
        None => {
            let mut v: Vec<Applied> = by_seq
                .iter()
                .map(|(&seq, &c)| Applied {
                    seq,
                    process: calls.calls[c].process,
                    token: calls.calls[c].token,
                    call: Some(c),
                })
                .collect();
            v.sort_by_key(|a| a.seq);
            v
        }
    }
}

/// Replays the applied writes through a fence that keeps the highest token seen and
/// rejects lower ones; counts what it would have rejected and what would still be wrong.
pub fn fencing_replay(
    history: &History,
    calls: &Calls,
    resource: Option<&[AppliedWrite]>,
    zombies: &ZombieWindows,
) -> FencingReplay {
    let applied = applied_writes(history, calls, resource);
    let source = if resource.is_some() {
        "resource.jsonl"
    } else {
        "history"
    };
    let zombie_writes: FxHashSet<u64> = zombies
        .all
        .iter()
        .flat_map(|z| z.indexes[2..].iter().copied())
        .collect();
    let rejected_in_run = calls
        .calls
        .iter()
        .filter(|c| c.outcome == Outcome::StaleRejected)
        .count();
    let tokenless = applied.iter().filter(|a| a.token.is_none()).count();
    let mut max: Option<u64> = None;
    let mut would_reject = Vec::new();
    let mut slipped = 0;
    let mut kept = Vec::new();
    for a in &applied {
        if let (Some(t), Some(m)) = (a.token, max) {
            if t < m {
                would_reject.push(a.seq);
                continue;
            }
        }
        max = max.max(a.token);
        let is_zombie = a
            .call
            .is_some_and(|c| zombie_writes.contains(&history.ops[calls.calls[c].invoke].index));
        slipped += usize::from(is_zombie);
        kept.push((a.process, a.token));
    }
    let interleavings_after = interleavings(&kept);
    let applicable = !applied.is_empty() && tokenless < applied.len();
    let damage_remains = interleavings_after > 0;
    let sentence = fencing_sentence(
        applicable,
        applied.len(),
        &would_reject,
        rejected_in_run,
        slipped,
        interleavings_after,
    );
    FencingReplay {
        source: source.into(),
        applicable,
        writes: applied.len(),
        tokenless,
        would_reject,
        rejected_in_run,
        slipped,
        interleavings_after,
        damage_remains,
        sentence,
    }
}

/// How often, in the given order, the writes of one critical section (process,
/// token) resume after another's came in between.
fn interleavings(order: &[(u64, Option<u64>)]) -> usize {
    let mut closed: FxHashSet<(u64, Option<u64>)> = FxHashSet::default();
    let mut current: Option<(u64, Option<u64>)> = None;
    let mut n = 0;
    for &w in order {
        if current == Some(w) {
            continue;
        }
        if let Some(c) = current {
            closed.insert(c);
        }
        n += usize::from(closed.contains(&w));
        current = Some(w);
    }
    n
}

fn fencing_sentence(
    applicable: bool,
    writes: usize,
    would_reject: &[u64],
    rejected_in_run: usize,
    slipped: usize,
    interleavings_after: usize,
) -> String {
    if writes == 0 {
        return "No write reached the resource: there is nothing to replay.".into();
    }
    if !applicable {
        return format!(
            "The backend handed out no fencing token on any of the {writes} applied writes: a \
             resource has nothing to check, so fencing cannot stop a deposed holder here."
        );
    }
    let mut s = if would_reject.is_empty() {
        format!("All {writes} applied writes were already in token order: a fence would have rejected none of them")
    } else {
        let shown: Vec<String> = would_reject.iter().take(8).map(|s| s.to_string()).collect();
        let more = if would_reject.len() > 8 { ", ..." } else { "" };
        format!(
            "A resource enforcing the token would have rejected {} of the {writes} applied writes (seq {}{more})",
            would_reject.len(),
            shown.join(", ")
        )
    };
    if rejected_in_run > 0 {
        s += &format!(
            "; the resource's own fence rejected {} during the run",
            count(rejected_in_run, "stale write", "stale writes")
        );
    }
    s += if interleavings_after > 0 {
        ". Damage would remain: "
    } else {
        ". No damage would remain"
    };
    if interleavings_after > 0 {
        s += &format!(
            "{interleavings_after} times the writes of one holder would still be split by another's (equal tokens or none), which the token cannot tell apart"
        );
    }
    if slipped > 0 {
        s += &format!(
            ". {} of deposed holders {} the fence because the new holder had not written yet: fencing orders them before its writes",
            count(slipped, "write", "writes"),
            if slipped == 1 { "passes" } else { "pass" }
        );
    }
    s + "."
}

fn self_fencing(margin_ms: u64, z: &ZombieWindows) -> SelfFencing {
    let sentence = if z.deposed == 0 {
        format!(
            "Workers checked their lease deadline ({margin_ms} ms margin) before each write: no holder was deposed while still acting."
        )
    } else {
        format!(
            "Workers checked their lease deadline ({margin_ms} ms margin) before each write, yet {} deposed while still acting, for up to {} ({} after deposition): the residual window is a pause between the check and the write.",
            count(z.deposed, "holder was", "holders were"),
            secs(z.max_ns),
            count(z.writes_after, "write", "writes")
        )
    };
    SelfFencing {
        margin_ms,
        residual_max_ns: z.max_ns,
        residual_p90_ns: z.p90_ns,
        writes_after: z.writes_after,
        sentence,
    }
}

/// Chooses among the three designs from what the run showed.
pub fn guidance(
    z: &ZombieWindows,
    f: &FencingReplay,
    self_fencing: Option<&SelfFencing>,
) -> Guidance {
    let mut figures = vec![
        format!(
            "{} deposed while they believed they held the lock",
            count(z.deposed, "holder", "holders")
        ),
        format!(
            "zombie window p50 {}, p90 {}, max {}",
            secs(z.p50_ns),
            secs(z.p90_ns),
            secs(z.max_ns)
        ),
        format!(
            "{} by deposed holders: {} accepted, {} rejected by the resource",
            count(z.writes_after, "write", "writes"),
            z.writes_accepted_after,
            z.writes_rejected_after
        ),
    ];
    if f.applicable {
        figures.push(format!(
            "a token-checking resource would reject {} of {} applied writes; damage would {}",
            f.would_reject.len(),
            f.writes,
            if f.damage_remains {
                "remain"
            } else {
                "not remain"
            }
        ));
    } else {
        figures.push("the backend hands out no fencing token".into());
    }
    if let Some(s) = self_fencing {
        figures.push(format!(
            "self-fencing margin {} ms, residual window {}",
            s.margin_ms,
            secs(s.residual_max_ns)
        ));
    }
    let (answer, sentence) = if z.writes_after == 0 {
        (
            Answer::EfficiencyLock,
            if z.deposed == 0 {
                "No holder was deposed while it held the lock: under these faults the lock alone kept the writes apart. If an occasional duplicate is cheap, an efficiency lock is enough; if not, a longer pause than this run's would need a fence.".to_string()
            } else {
                format!(
                    "{} deposed (up to {}), but none wrote after losing the lock: an efficiency lock is enough where a duplicate is cheap.",
                    count(z.deposed, "holder was", "holders were"),
                    secs(z.max_ns)
                )
            },
        )
    } else if f.applicable && !f.damage_remains {
        (Answer::FencingTokens, fencing_guidance(z, f))
    } else {
        let why = if f.applicable {
            "the tokens do not tell the holders apart, so a fence would leave damage"
        } else {
            "the backend gives no token a resource could check"
        };
        (
            Answer::ExitOnLoss,
            format!(
                "Deposed holders wrote {} after another process acquired (worst {} after), and {why}: workers must check their lease deadline before each write and exit on loss; a pause between that check and the write still leaves a window of this size.",
                times(z.writes_after),
                secs(z.max_ns)
            ),
        )
    };
    Guidance {
        answer,
        title: answer.title().into(),
        sentence,
        figures,
    }
}

/// Why fencing tokens fit: what the fence rejected (or would have), and the writes
/// that slip in before the new holder's first write, which no fence can see as stale.
fn fencing_guidance(z: &ZombieWindows, f: &FencingReplay) -> String {
    let stopped = f.rejected_in_run + f.would_reject.len();
    let mut s = format!(
        "Deposed holders wrote {} after another process acquired (worst {} after)",
        times(z.writes_after),
        secs(z.max_ns)
    );
    if f.rejected_in_run > 0 {
        s += &format!(
            "; the resource's token check rejected {} of them",
            f.rejected_in_run
        );
    } else if !f.would_reject.is_empty() {
        s += &format!(
            "; a resource that checks the token would have rejected {}",
            count(f.would_reject.len(), "applied write", "applied writes")
        );
    }
    if f.slipped > 0 {
        s += &format!(
            "; {} reached the resource before the new holder's first write, where no fence can tell them stale: the new holder should present its token to the resource (a write or a fenced read) before acting on what it reads",
            f.slipped
        );
    }
    s += if stopped > 0 {
        ". Fencing tokens are needed, and with the tokens checked no damage would remain."
    } else {
        ". The token order at the resource is intact: fencing tokens are needed to keep it so."
    };
    s
}

#[cfg(test)]
mod tests {
    use super::super::zombies::percentile;
    use super::*;
    use lockcheck_history::HistoryBuilder as H;
    use serde_json::json;

    /// Process 0 holds token 1, pauses; its lease runs out; process 1 acquires token 2
    /// at 1201 ms and writes; process 0 wakes at 1650 ms, writes with token 1, releases.
    fn paused_holder(fenced: bool) -> History {
        let h = H::default()
            .acquire(0, 0, Some(1))
            .write(10, 0, Some(1), 1)
            .nemesis(150, "pause", &["client-0"])
            .acquire(1200, 1, Some(2))
            .write(1210, 1, Some(2), 2)
            .nemesis(1650, "resume", &["client-0"])
            .inv(1651, 0, "write", json!({"token": 1, "data": "late"}));
        let h = if fenced {
            h.fail(1652, 0, "write", "stale-token")
        } else {
            h.ok(
                1652,
                0,
                "write",
                json!({"token": 1, "data": "late", "seq": 3}),
            )
        };
        h.write(1700, 1, Some(2), if fenced { 3 } else { 4 })
            .release(1800, 0, Some(1))
            .release(1900, 1, Some(2))
            .history()
    }

    #[test]
    fn zombie_window_runs_from_the_new_acquire_to_the_deposed_release() {
        let h = paused_holder(false);
        let c = Calls::of(&h);
        let z = zombie_windows(&h, &c);
        assert_eq!(z.deposed, 1);
        let w = z.worst.as_ref().unwrap();
        assert_eq!((w.process, w.by_process), (0, 1));
        assert_eq!((w.token, w.by_token), (Some(1), Some(2)));
        assert_eq!(w.deposed_at, 1_201_000_000);
        assert_eq!(w.until, 1_800_000_000);
        assert_eq!(w.window_ns, 599_000_000);
        assert_eq!((w.writes_after, w.writes_accepted_after), (1, 1));
        // The late write's invoke and the release invoke are the ops after deposition.
        assert_eq!(w.ops_after, 2);
        assert_eq!(z.max_ns, 599_000_000);
    }

    /// The report reads sections as the checker does (spec v1.1): a holder's failed
    /// retry of its acquire does not end its section, so its write after another
    /// process acquired is a zombie write, and an ok retry does not split it.
    #[test]
    fn a_holder_acquiring_again_is_still_the_holder() {
        let h = H::default()
            .acquire(0, 0, Some(1))
            .inv(10, 0, "acquire", json!({"lock": "l"}))
            .fail(11, 0, "acquire", "already held")
            .acquire(1200, 1, Some(2))
            .write(1300, 0, Some(1), 1)
            .release(1400, 0, Some(1))
            // Process 1 lets go: a holder that never released would hold to the end.
            .release(1450, 1, Some(2))
            .acquire(1500, 0, Some(3))
            .acquire(1510, 0, Some(4))
            .release(1600, 0, Some(4))
            .history();
        let c = Calls::of(&h);
        assert_eq!(c.sections.len(), 3);
        let z = zombie_windows(&h, &c);
        assert_eq!(z.deposed, 1);
        let w = z.worst.as_ref().unwrap();
        assert_eq!((w.process, w.by_process, w.until), (0, 1, 1_400_000_000));
        assert_eq!((w.writes_after, w.writes_accepted_after), (1, 1));
        // The ok retry at 1510 ms is inside the section begun at 1501 ms, and its lease
        // is the section's last grant.
        let s = &c.sections[2];
        assert_eq!(
            (s.start, s.end, s.inside.len()),
            (1_501_000_000, 1_600_000_000, 1)
        );
        assert_eq!(s.lease_end, Some(2_511_000_000));
    }

    /// A holder retired after its write went unanswered never released: it holds to
    /// the end of the history (the checker's rule), so a later acquire deposes it even
    /// though it was last seen long before; its window is what was seen of it: none.
    #[test]
    fn a_retired_holder_is_deposed_by_any_later_acquire() {
        let h = H::default()
            .acquire(0, 0, Some(1))
            .inv(10, 0, "write", json!({"token": 1, "data": "p0-1"}))
            .op(
                510,
                0,
                lockcheck_history::OpType::Info,
                "write",
                serde_json::Value::Null,
                Some("timed out"),
            )
            .acquire(1200, 1, Some(2))
            .release(1300, 1, Some(2))
            .history();
        let c = Calls::of(&h);
        let z = zombie_windows(&h, &c);
        assert_eq!(z.deposed, 1);
        let w = z.worst.as_ref().unwrap();
        assert_eq!((w.process, w.by_process, w.window_ns), (0, 1, 0));
    }

    #[test]
    fn unfenced_stale_write_would_have_been_rejected() {
        let h = paused_holder(false);
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, None);
        assert!(a.fencing.applicable);
        assert_eq!(a.fencing.would_reject, vec![3]);
        assert!(!a.fencing.damage_remains);
        assert_eq!(a.fencing.slipped, 0);
        assert_eq!(a.guidance.answer, Answer::FencingTokens);
        assert!(a.fencing.sentence.contains("rejected 1 of the 4"));
    }

    #[test]
    fn fenced_run_counts_the_fence_rejections() {
        let h = paused_holder(true);
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, None);
        assert!(a.fencing.would_reject.is_empty());
        assert_eq!(a.fencing.rejected_in_run, 1);
        assert_eq!(a.zombies.writes_rejected_after, 1);
        assert_eq!(a.guidance.answer, Answer::FencingTokens);
    }

    #[test]
    fn no_tokens_means_exit_on_loss() {
        let h = H::default()
            .acquire(0, 0, None)
            .write(10, 0, None, 1)
            .acquire(1200, 1, None)
            .write(1210, 1, None, 2)
            .write(1300, 0, None, 3)
            .release(1400, 0, None)
            .history();
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, Some(200));
        assert!(!a.fencing.applicable);
        assert!(a.fencing.sentence.contains("no fencing token"));
        assert_eq!(a.guidance.answer, Answer::ExitOnLoss);
        let sf = a.self_fencing.unwrap();
        assert_eq!(sf.margin_ms, 200);
        assert_eq!(sf.writes_after, 1);
        assert_eq!(sf.residual_max_ns, 1_400_000_000 - 1_201_000_000);
    }

    #[test]
    fn equal_tokens_leave_damage_after_the_replay() {
        // A broken backend hands token 5 to both: the fence cannot separate them.
        let h = H::default()
            .acquire(0, 0, Some(5))
            .write(10, 0, Some(5), 1)
            .acquire(20, 1, Some(5))
            .write(30, 1, Some(5), 2)
            .write(40, 0, Some(5), 3)
            .history();
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, None);
        assert!(a.fencing.would_reject.is_empty());
        assert_eq!(a.fencing.interleavings_after, 1);
        assert!(a.fencing.damage_remains);
        assert_eq!(a.guidance.answer, Answer::ExitOnLoss);
    }

    #[test]
    fn slipped_zombie_writes_are_counted_and_resource_log_is_preferred() {
        // Process 0 is deposed at 21 ms but writes at 25 ms, before process 1's first
        // write: the fence has not seen token 2 yet and lets it through.
        let h = H::default()
            .acquire(0, 0, Some(1))
            .acquire(20, 1, Some(2))
            .inv(25, 0, "write", json!({"token": 1, "data": "z"}))
            .op(
                26,
                0,
                lockcheck_history::OpType::Info,
                "write",
                json!(null),
                None,
            )
            .write(30, 1, Some(2), 2)
            .history();
        let c = Calls::of(&h);
        let log = vec![
            AppliedWrite {
                seq: 1,
                process: 0,
                token: Some(1),
                data: "z".into(),
            },
            AppliedWrite {
                seq: 2,
                process: 1,
                token: Some(2),
                data: "p1-2".into(),
            },
        ];
        let a = analyze(&h, &c, Some(&log), None);
        assert_eq!(a.fencing.source, "resource.jsonl");
        assert_eq!(a.fencing.writes, 2);
        assert_eq!(a.fencing.slipped, 1);
        assert!(a
            .fencing
            .sentence
            .contains("1 write of deposed holders passes"));
    }

    #[test]
    fn quiet_run_needs_only_an_efficiency_lock() {
        let h = H::default()
            .acquire(0, 0, Some(1))
            .write(10, 0, Some(1), 1)
            .release(20, 0, Some(1))
            .acquire(30, 1, Some(2))
            .release(40, 1, Some(2))
            .history();
        let c = Calls::of(&h);
        let a = analyze(&h, &c, None, None);
        assert_eq!(a.zombies.deposed, 0);
        assert_eq!(a.guidance.answer, Answer::EfficiencyLock);
        assert_eq!(percentile(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90), 9);
        assert_eq!(percentile(&[7], 50), 7);
    }
}
