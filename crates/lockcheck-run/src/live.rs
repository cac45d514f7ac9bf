//! What a run shares while it goes: the lock its clients compete for, what people
//! watch (updated by the clients and the nemesis), and the stop flag. The base of
//! `run`'s controller and nemesis.

use lockcheck_fault::client_name;
use lockcheck_resource as resource;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The lock every client of a run competes for.
pub const LOCK_NAME: &str = "lockcheck";

/// What people watch while a run goes: updated by the clients and the nemesis.
#[derive(Default)]
pub struct Live {
    pub ops: AtomicU64,
    /// Writes the fence rejected, as the workers were told.
    pub stale_rejected: AtomicU64,
    /// Holder faults due and waiting for the next grant to land on its holder.
    armed: AtomicUsize,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    /// Slots inside a critical section, as the controller has seen their acquires.
    holding: BTreeSet<usize>,
    latest: Option<usize>,
    /// Acquires that succeeded while another slot was still inside its section.
    overlaps: u64,
    faults: Vec<String>,
    /// When the first fault occurrence took effect, and when it was over.
    first_fault: Option<Instant>,
    first_fault_over: Option<Instant>,
    /// The first acquire, after a fault took effect, while another slot was
    /// still inside its section: a holder deposed.
    first_deposed: Option<Instant>,
    /// What the first deposition asks, and what answers it (see [`Live::answered`]).
    question: Question,
}

/// The first deposition's question: does a deposed holder's late write get in?
/// It is answered once the successor has had a write applied and every holder it
/// deposed has, with no write of its still on the way to the resource, either
/// left its section or had a write sent after that one judged: the resource has
/// then decided on it against the successor's token, as it would on each later
/// write of the same section (a fence only ever rises), so the run can show
/// nothing more about that deposition.
#[derive(Default)]
struct Question {
    /// The holders the deposition found inside their sections.
    deposed: BTreeSet<usize>,
    /// Those of them the question still waits for: inside the section they were
    /// deposed in, no write of theirs judged since the successor's.
    inside: BTreeSet<usize>,
    /// Deposed holders that sent a write after the successor's was applied.
    wrote_after: BTreeSet<usize>,
    /// The slot whose grant deposed them.
    successor: Option<usize>,
    successor_wrote: bool,
    /// Writes sent to each slot's worker and not answered yet. A write given up on
    /// (no reply in time) stays until its late reply comes: a paused worker makes it
    /// when it wakes, and the resource judges it then.
    in_flight: BTreeMap<usize, u64>,
    answered: Option<Instant>,
}

impl Question {
    /// Notes the moment the question is answered, the first time it is.
    fn settle(&mut self, fault_over: bool) {
        let quiet = self
            .deposed
            .iter()
            .all(|d| self.in_flight.get(d).is_none_or(|&n| n == 0));
        let done = fault_over
            && self.successor.is_some()
            && self.inside.is_empty()
            && quiet
            && self.successor_wrote;
        if done && self.answered.is_none() {
            self.answered = Some(Instant::now());
        }
    }
}

impl LiveState {
    fn settle(&mut self) {
        let fault_over = self.first_fault_over.is_some();
        self.question.settle(fault_over);
    }
}

impl Live {
    fn with<T>(&self, f: impl FnOnce(&mut LiveState) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn acquired(&self, slot: usize) {
        self.with(|s| {
            if s.holding.iter().any(|&h| h != slot) {
                s.overlaps += 1;
                if s.first_fault.is_some() && s.first_deposed.is_none() {
                    s.first_deposed = Some(Instant::now());
                    let deposed: BTreeSet<usize> =
                        s.holding.iter().copied().filter(|&h| h != slot).collect();
                    s.question.inside = deposed.clone();
                    s.question.deposed = deposed;
                    s.question.successor = Some(slot);
                }
            }
            s.holding.insert(slot);
            s.latest = Some(slot);
        })
    }

    pub fn release(&self, slot: usize) {
        self.with(|s| {
            s.holding.remove(&slot);
            if s.latest == Some(slot) {
                s.latest = None;
            }
            s.question.inside.remove(&slot);
            s.settle();
        })
    }

    /// A slot sent a write to its worker.
    pub fn write_sent(&self, slot: usize) {
        self.with(|s| {
            let q = &mut s.question;
            *q.in_flight.entry(slot).or_default() += 1;
            if q.successor_wrote && q.deposed.contains(&slot) {
                q.wrote_after.insert(slot);
            }
        })
    }

    /// A slot's write was answered (in time or late); `applied` when the resource
    /// took it.
    pub fn write_answered(&self, slot: usize, applied: bool) {
        self.with(|s| {
            let q = &mut s.question;
            let n = q.in_flight.entry(slot).or_default();
            *n = n.saturating_sub(1);
            if *n == 0 && q.wrote_after.contains(&slot) {
                // Its write sent after the successor's is judged, and nothing older.
                q.inside.remove(&slot);
            }
            if applied && q.successor == Some(slot) {
                q.successor_wrote = true;
            }
            s.settle();
        })
    }

    /// The nemesis armed a holder fault: the next grant's holder is its target.
    pub fn arm_holder_fault(&self) {
        self.armed.fetch_add(1, Ordering::SeqCst);
    }

    /// An armed holder fault landed on a holder.
    pub fn holder_fault_landed(&self) {
        let _ = self
            .armed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// Whether a grant must wait for the nemesis: only while a holder fault is
    /// armed, to land before the holder's next op.
    pub fn holder_fault_armed(&self) -> bool {
        self.armed.load(Ordering::SeqCst) > 0
    }

    /// The slot that acquired most recently and has not finished its section.
    pub fn holder(&self) -> Option<usize> {
        self.with(|s| s.latest)
    }

    pub fn set_faults(&self, faults: Vec<String>) {
        self.with(|s| s.faults = faults)
    }

    /// A fault occurrence took effect (it reached a target).
    pub fn fault_took_effect(&self) {
        self.with(|s| {
            s.first_fault.get_or_insert_with(Instant::now);
        })
    }

    /// A fault occurrence is over (healed, resumed, restarted, clock reset).
    pub fn fault_over(&self) {
        self.with(|s| {
            if s.first_fault.is_some() {
                s.first_fault_over.get_or_insert_with(Instant::now);
            }
            s.settle();
        })
    }

    /// When the first fault's effect has been seen through: the later of its end
    /// and the first holder deposed after it took effect; none until both.
    pub fn effect_seen(&self) -> Option<Instant> {
        self.with(|s| Some(s.first_fault_over?.max(s.first_deposed?)))
    }

    /// When the first deposition's question was answered (its fault over, the
    /// successor's write applied, every holder it deposed out of its section or
    /// with a write sent after that one judged, none with a write on its way);
    /// none until then.
    pub fn answered(&self) -> Option<Instant> {
        self.with(|s| s.question.answered)
    }

    pub(super) fn line(&self, elapsed: Duration, total: Duration, res: resource::Stats) -> String {
        self.with(|s| {
            let holder = s.latest.map_or("-".to_string(), client_name);
            let faults = if s.faults.is_empty() {
                "no fault".to_string()
            } else {
                s.faults.join(", ")
            };
            format!(
                "[{:5.1}/{:.0} s] {} ops | holder {holder} | {faults} | {} overlaps | stale writes: {} accepted, {} rejected",
                elapsed.as_secs_f64(),
                total.as_secs_f64(),
                self.ops.load(Ordering::Relaxed),
                s.overlaps,
                res.stale_accepted,
                self.stale_rejected.load(Ordering::Relaxed)
            )
        })
    }
}

/// Resolves once the run's stop flag is raised (or its sender is gone).
pub(super) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, not held across an await.
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holder 0 is deposed by 1's grant while a fault is on, and leaves its section
    /// with a write given up on (its worker was paused): the question stays open
    /// until that write's late reply says the resource judged it, whatever else
    /// happened first.
    #[test]
    fn a_deposition_is_answered_only_once_its_late_write_is_judged() {
        let live = Live::default();
        live.acquired(0);
        live.fault_took_effect();
        live.write_sent(0); // given up on: no reply in time
        live.acquired(1);
        live.release(0);
        live.fault_over();
        live.write_sent(1);
        live.write_answered(1, true);
        assert_eq!(
            live.answered(),
            None,
            "holder 0's write is still on its way"
        );
        live.write_answered(0, false);
        assert!(live.answered().is_some(), "judged: nothing more to see");
    }

    /// Each part of the answer is needed: the fault over, the deposed holder out of
    /// its section, the successor's write applied (a refused one is not enough).
    #[test]
    fn a_deposition_stays_open_until_every_part_is_seen() {
        let live = Live::default();
        live.fault_took_effect();
        live.acquired(0);
        live.acquired(1);
        live.write_sent(1);
        live.write_answered(1, false);
        live.release(0);
        assert_eq!(live.answered(), None, "the fault is not over");
        live.fault_over();
        assert_eq!(live.answered(), None, "the successor wrote nothing yet");
        live.write_sent(1);
        live.write_answered(1, true);
        assert!(live.answered().is_some());
    }

    /// A deposed holder that writes on in its section (cut off from the lock
    /// service, not from the resource): its writes before the successor's were
    /// judged against no higher token, so only one sent after it answers; a
    /// deposed holder that writes nothing more keeps the question open.
    #[test]
    fn a_holder_writing_on_is_answered_by_a_write_sent_after_the_successors() {
        let live = Live::default();
        live.fault_took_effect();
        live.acquired(0);
        live.acquired(1);
        live.fault_over();
        live.write_sent(0);
        live.write_answered(0, true);
        live.write_sent(1);
        live.write_answered(1, true);
        assert_eq!(live.answered(), None, "0 wrote before 1 did");
        live.write_sent(0);
        assert_eq!(live.answered(), None, "on its way");
        live.write_answered(0, false);
        assert!(live.answered().is_some(), "judged against 1's token");
        let silent = Live::default();
        silent.fault_took_effect();
        silent.acquired(0);
        silent.acquired(1);
        silent.fault_over();
        silent.write_sent(1);
        silent.write_answered(1, true);
        assert_eq!(
            silent.answered(),
            None,
            "a deposed leader that never acts again"
        );
    }

    /// An overlap before any fault took effect is no deposition: nothing is asked.
    #[test]
    fn no_question_without_a_fault() {
        let live = Live::default();
        live.acquired(0);
        live.acquired(1);
        live.release(0);
        live.write_sent(1);
        live.write_answered(1, true);
        live.fault_took_effect();
        live.fault_over();
        assert_eq!(live.answered(), None);
    }
}
