//! What a run shares while it goes: the lock its clients compete for, what people
//! watch (updated by the clients and the nemesis), and the stop flag. The base of
//! `run`'s controller and nemesis.

use crate::fault::client_name;
use crate::resource;
use std::collections::BTreeSet;
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
        })
    }

    /// When the first fault's effect has been seen through: the later of its end
    /// and the first holder deposed after it took effect; none until both.
    pub fn effect_seen(&self) -> Option<Instant> {
        self.with(|s| Some(s.first_fault_over?.max(s.first_deposed?)))
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
