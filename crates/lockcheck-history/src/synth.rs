//! A deterministic, seeded generator of realistic lock histories, for property tests
//! and benchmarks: N clients cycle acquire → (renew) → writes → release against a
//! simulated lock service with leases and fencing tokens and a simulated resource.
//!
//! The service grants in FIFO order, hands out increasing tokens, and re-grants a
//! hold whose client went silent once its lease expires. Latencies make the traps of
//! real histories appear on their own: waiters blocked for a long time, acquire oks
//! that arrive before the previous holder's release ack, tokens out of invoke order,
//! acquires that give up (`fail`), acquires and releases that time out (`info`, after
//! which the worker goes on under a new process id).
//!
//! Planted anomalies: `overlaps` holders are paused (a nemesis `pause`) right after
//! their first write, past their lease; the service re-grants to the next waiter; the
//! paused client resumes just after the new holder's first write, still believing it
//! holds the lock,
//! writes with its old token (a fenced resource rejects it: `stale-token`) and its
//! release fails ("not held"). Each plant makes exactly one double holder.

use super::{AppliedWrite, History, Op, OpType, Process};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Debug, Clone)]
pub struct SynthConfig {
    pub seed: u64,
    /// Concurrent workers.
    pub clients: usize,
    /// About how many lines to write: no cycle starts past it.
    pub lines: usize,
    /// Writes per critical section, at least 1.
    pub writes: (u32, u32),
    /// Chance that a holder renews before a write.
    pub renew_rate: f64,
    /// Chance that an op times out (`info`).
    pub info_rate: f64,
    /// Chance that an acquire has a short timeout and may give up (`fail`).
    pub fail_rate: f64,
    /// The resource rejects writes whose token is lower than one it applied.
    pub fenced: bool,
    /// Paused-holder overlaps to plant, spread evenly through the history.
    pub overlaps: usize,
    pub lease_ms: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            seed: 1,
            clients: 5,
            lines: 2_000,
            writes: (2, 3),
            renew_rate: 0.1,
            info_rate: 0.002,
            fail_rate: 0.02,
            fenced: true,
            overlaps: 0,
            lease_ms: 1_000,
        }
    }
}

/// A generated run: the history and the resource's log of applied writes.
#[derive(Debug, Clone)]
pub struct Synth {
    pub history: History,
    pub resource: Vec<AppliedWrite>,
}

impl Synth {
    /// The history as `history.jsonl` text.
    pub fn history_jsonl(&self) -> String {
        lines(&self.history.ops)
    }

    /// The resource log as `resource.jsonl` text.
    pub fn resource_jsonl(&self) -> String {
        lines(&self.resource)
    }
}

fn lines<T: serde::Serialize>(items: &[T]) -> String {
    let mut out = String::new();
    for item in items {
        out.push_str(&serde_json::to_string(item).unwrap_or_default());
        out.push('\n');
    }
    out
}

pub fn generate(cfg: &SynthConfig) -> Synth {
    let mut sim = Sim::new(cfg);
    for w in 0..cfg.clients.max(1) {
        let t = sim.think();
        sim.at(t, w, Ev::Start);
    }
    while let Some(Reverse((t, _, w, ev))) = sim.events.pop() {
        sim.now = t;
        sim.handle(w, ev);
    }
    Synth {
        history: History::new(sim.ops),
        resource: sim.resource,
    }
}

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Start,
    Granted {
        generation: u64,
    },
    GiveUp {
        generation: u64,
    },
    Act,
    Done,
    /// The service's lease on hold `hold` runs out.
    Expire {
        hold: u64,
    },
    Resume,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Idle,
    Waiting,
    /// Granted by the service; the ok is on its way.
    Granting,
    Holding,
    Busy,
}

/// What the op in flight will complete with.
#[derive(Debug, Clone)]
struct Pending {
    f: &'static str,
    kind: OpType,
    value: Value,
    error: Option<&'static str>,
    /// A write to apply at the resource when it completes.
    write: Option<(Option<u64>, String)>,
    /// A release: the section ends with it.
    ends_hold: bool,
}

struct Worker {
    pid: u64,
    generation: u64,
    phase: Phase,
    token: Option<u64>,
    hold: u64,
    writes_left: u32,
    written: u32,
    /// Planted: pause after the first write.
    pause_after_write: bool,
    /// No timeouts in this section (the plant and the grant that overlaps it must
    /// happen as planned).
    steady: bool,
    paused: bool,
    pending: Option<Pending>,
}

struct Sim<'c> {
    cfg: &'c SynthConfig,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, usize, Ev)>>,
    ops: Vec<Op>,
    resource: Vec<AppliedWrite>,
    resource_max: Option<u64>,
    workers: Vec<Worker>,
    next_pid: u64,
    // The lock service.
    holder: Option<(usize, u64)>,
    free_at: u64,
    queue: VecDeque<usize>,
    tokens: u64,
    holds: u64,
    /// A paused worker to resume right after the next grant's first write.
    resume_after_grant: Option<usize>,
    /// (new holder, paused worker): resume the paused one after this write.
    resume_after_write: Option<(usize, usize)>,
    plants_done: usize,
}

impl<'c> Sim<'c> {
    fn new(cfg: &'c SynthConfig) -> Self {
        let n = cfg.clients.max(1);
        Sim {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            ops: Vec::with_capacity(cfg.lines + 64),
            resource: Vec::new(),
            resource_max: None,
            workers: (0..n as u64)
                .map(|pid| Worker {
                    pid,
                    generation: 0,
                    phase: Phase::Idle,
                    token: None,
                    hold: 0,
                    writes_left: 0,
                    written: 0,
                    pause_after_write: false,
                    steady: false,
                    paused: false,
                    pending: None,
                })
                .collect(),
            next_pid: n as u64,
            holder: None,
            free_at: 0,
            queue: VecDeque::new(),
            tokens: 0,
            holds: 0,
            resume_after_grant: None,
            resume_after_write: None,
            plants_done: 0,
        }
    }

    fn at(&mut self, t: u64, w: usize, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, w, ev)));
    }

    fn latency(&mut self) -> u64 {
        self.rng.gen_range(200 * US..2 * MS)
    }

    fn think(&mut self) -> u64 {
        self.now + self.rng.gen_range(0..3 * MS)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen_bool(p.min(1.0))
    }

    fn emit(&mut self, process: Process, kind: OpType, f: &str, value: Value, error: Option<&str>) {
        self.ops.push(Op {
            index: self.ops.len() as u64,
            time: self.now,
            process,
            kind,
            f: f.to_string(),
            value,
            node: None,
            error: error.map(str::to_string),
        });
    }

    fn client(&mut self, w: usize, kind: OpType, f: &str, value: Value, error: Option<&str>) {
        let p = Process::Client(self.workers[w].pid);
        self.emit(p, kind, f, value, error);
    }

    /// The service lets go of the current hold at `t` and grants the next waiter.
    fn handover(&mut self, t: u64) {
        match self.queue.pop_front() {
            Some(next) => self.grant(next, t),
            None => {
                self.holder = None;
                self.free_at = t;
            }
        }
    }

    fn grant(&mut self, w: usize, from: u64) {
        self.holds += 1;
        self.holder = Some((w, self.holds));
        let ok_at = from.max(self.now) + self.latency();
        let generation = self.workers[w].generation;
        self.workers[w].phase = Phase::Granting;
        self.workers[w].steady = false;
        self.at(ok_at, w, Ev::Granted { generation });
        if let Some(paused) = self.resume_after_grant.take() {
            self.workers[w].steady = true;
            self.resume_after_write = Some((w, paused));
        }
    }

    fn lease(&self) -> u64 {
        self.cfg.lease_ms * MS
    }

    /// The worker timed out: it goes on under a new process id; a hold it had stays
    /// with the service until its lease runs out.
    fn retire(&mut self, w: usize) {
        let hold = self.workers[w].hold;
        if self.holder.is_some_and(|(_, h)| h == hold) {
            let t = self.now + self.lease();
            self.at(t, w, Ev::Expire { hold });
        }
        let pid = self.next_pid;
        self.next_pid += 1;
        let wk = &mut self.workers[w];
        wk.pid = pid;
        wk.generation += 1;
        wk.phase = Phase::Idle;
        let t = self.think();
        self.at(t, w, Ev::Start);
    }

    fn handle(&mut self, w: usize, ev: Ev) {
        match ev {
            Ev::Start => self.start(w),
            Ev::Granted { generation } => self.granted(w, generation),
            Ev::GiveUp { generation } => {
                let wk = &self.workers[w];
                if wk.generation == generation && wk.phase == Phase::Waiting {
                    self.queue.retain(|&x| x != w);
                    self.client(
                        w,
                        OpType::Fail,
                        "acquire",
                        Value::Null,
                        Some("timed out waiting: lock busy"),
                    );
                    self.workers[w].phase = Phase::Idle;
                    let t = self.think();
                    self.at(t, w, Ev::Start);
                }
            }
            Ev::Act => self.act(w),
            Ev::Done => self.done(w),
            Ev::Expire { hold } => {
                if self.holder.is_some_and(|(_, h)| h == hold) {
                    self.handover(self.now);
                }
            }
            Ev::Resume => {
                let name = format!("client-{}", self.workers[w].pid);
                self.emit(
                    Process::Nemesis,
                    OpType::Info,
                    "resume",
                    json!({"targets": [name]}),
                    None,
                );
                self.workers[w].paused = false;
                self.act(w);
            }
        }
    }

    fn start(&mut self, w: usize) {
        if self.ops.len() >= self.cfg.lines {
            return;
        }
        self.workers[w].generation += 1;
        self.workers[w].phase = Phase::Waiting;
        self.client(w, OpType::Invoke, "acquire", json!({"lock": "l"}), None);
        if self.holder.is_none() {
            let from = self.free_at;
            self.grant(w, from);
        } else {
            self.queue.push_back(w);
            let timeout = if self.chance(self.cfg.fail_rate) {
                self.rng.gen_range(MS..10 * MS)
            } else {
                60_000 * MS
            };
            let generation = self.workers[w].generation;
            self.at(self.now + timeout, w, Ev::GiveUp { generation });
        }
    }

    fn granted(&mut self, w: usize, generation: u64) {
        if self.workers[w].generation != generation || self.workers[w].phase != Phase::Granting {
            return;
        }
        self.tokens += 1;
        let token = self.tokens;
        let hold = self.holder.map(|(_, h)| h).unwrap_or(0);
        let (lo, hi) = self.cfg.writes;
        let writes = self.rng.gen_range(lo.max(1)..=hi.max(lo.max(1)));
        let plant = self.cfg.overlaps > self.plants_done
            && self.ops.len() * (self.cfg.overlaps + 1) >= self.cfg.lines * (self.plants_done + 1)
            && !self.queue.is_empty();
        if plant {
            self.plants_done += 1;
        }
        let wk = &mut self.workers[w];
        wk.token = Some(token);
        wk.hold = hold;
        wk.writes_left = writes;
        wk.written = 0;
        wk.pause_after_write = plant;
        wk.steady |= plant;
        if !self.workers[w].steady && self.chance(self.cfg.info_rate) {
            self.client(w, OpType::Info, "acquire", Value::Null, Some("timed out"));
            self.retire(w);
            return;
        }
        self.workers[w].phase = Phase::Holding;
        let lease = self.cfg.lease_ms;
        self.client(
            w,
            OpType::Ok,
            "acquire",
            json!({"token": token, "lease_ms": lease}),
            None,
        );
        let t = self.now + self.rng.gen_range(50 * US..500 * US);
        self.at(t, w, Ev::Act);
    }

    fn act(&mut self, w: usize) {
        let (pid, token, paused_write) = {
            let wk = &self.workers[w];
            (wk.pid, wk.token, wk.pause_after_write && wk.written > 0)
        };
        if paused_write && !self.workers[w].paused && self.holder.is_some_and(|(x, _)| x == w) {
            // Planted: the holder stops here, past its lease.
            self.workers[w].paused = true;
            let name = format!("client-{pid}");
            self.emit(
                Process::Nemesis,
                OpType::Info,
                "pause",
                json!({"targets": [name]}),
                None,
            );
            let hold = self.workers[w].hold;
            self.at(self.now + self.lease(), w, Ev::Expire { hold });
            self.resume_after_grant = Some(w);
            return;
        }
        let stale = paused_write;
        // Only a release may time out while holding: a holder retired mid-section (its
        // write or renew unanswered) holds to the end of the history (history.md v1.1),
        // so any later grant would be a double holder — not what an unplanted history
        // may contain.
        let info = |g: &mut Self| !g.workers[w].steady && g.chance(g.cfg.info_rate);
        // A resumed holder writes once more with its old token, then releases.
        let write = if stale {
            self.workers[w].written == 1
        } else {
            self.workers[w].writes_left > 0
        };
        let pending = if write {
            if !stale && self.chance(self.cfg.renew_rate) {
                let lease = self.cfg.lease_ms;
                Pending {
                    f: "renew",
                    kind: OpType::Ok,
                    value: json!({"token": token, "lease_ms": lease}),
                    error: None,
                    write: None,
                    ends_hold: false,
                }
            } else {
                let wk = &mut self.workers[w];
                wk.writes_left = wk.writes_left.saturating_sub(1);
                self.workers[w].written += 1;
                let data = format!(
                    "p{pid}-t{}-w{}",
                    token.unwrap_or(0),
                    self.workers[w].written
                );
                Pending {
                    f: "write",
                    kind: OpType::Ok,
                    value: json!({"token": token, "data": data}),
                    error: None,
                    write: Some((token, data)),
                    ends_hold: false,
                }
            }
        } else {
            let ours = self.holder.is_some_and(|(_, h)| h == self.workers[w].hold);
            if ours {
                let free = self.now + self.rng.gen_range(100 * US..500 * US);
                self.handover(free);
            }
            let kind = match (ours, info(self)) {
                (false, _) => OpType::Fail,
                (true, true) => OpType::Info,
                (true, false) => OpType::Ok,
            };
            Pending {
                f: "release",
                kind,
                value: Value::Null,
                error: (!ours).then_some("not held: the lease had expired"),
                write: None,
                ends_hold: true,
            }
        };
        self.client(
            w,
            OpType::Invoke,
            pending.f,
            pending_invoke_value(&pending, token),
            None,
        );
        let lat = if stale { 100 * US } else { self.latency() };
        self.workers[w].pending = Some(pending);
        self.workers[w].phase = Phase::Busy;
        self.at(self.now + lat, w, Ev::Done);
    }

    fn done(&mut self, w: usize) {
        let Some(mut p) = self.workers[w].pending.take() else {
            return;
        };
        if let Some((holder, paused)) = self.resume_after_write {
            if holder == w && p.write.is_some() {
                self.resume_after_write = None;
                self.at(self.now + 50 * US, paused, Ev::Resume);
            }
        }
        if let Some((token, data)) = p.write.take() {
            let stale = self.cfg.fenced
                && matches!((token, self.resource_max), (Some(t), Some(m)) if t < m);
            if stale {
                p.kind = OpType::Fail;
                p.error = Some("stale-token");
            } else {
                self.seq_apply(w, token, data.clone());
                if p.kind == OpType::Ok {
                    p.value = json!({"token": token, "data": data, "seq": self.resource.len()});
                }
            }
        }
        let value = if p.kind == OpType::Ok {
            p.value.clone()
        } else {
            Value::Null
        };
        let error = match p.kind {
            OpType::Info => Some("timed out"),
            _ => p.error,
        };
        self.client(w, p.kind, p.f, value, error);
        if p.kind == OpType::Info {
            self.retire(w);
        } else if p.ends_hold {
            self.workers[w].phase = Phase::Idle;
            let t = self.think();
            self.at(t, w, Ev::Start);
        } else {
            self.workers[w].phase = Phase::Holding;
            // A resumed holder goes straight on to its release.
            let pause = if self.workers[w].pause_after_write && self.workers[w].written > 1 {
                10 * US
            } else {
                self.rng.gen_range(50 * US..500 * US)
            };
            let t = self.now + pause;
            self.at(t, w, Ev::Act);
        }
    }

    fn seq_apply(&mut self, w: usize, token: Option<u64>, data: String) {
        self.resource_max = self.resource_max.max(token);
        self.resource.push(AppliedWrite {
            seq: self.resource.len() as u64 + 1,
            process: self.workers[w].pid,
            token,
            data,
        });
    }
}

fn pending_invoke_value(p: &Pending, token: Option<u64>) -> Value {
    match p.f {
        "write" => p.value.clone(),
        _ => json!({ "token": token }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_history_and_it_reads_back() {
        let cfg = SynthConfig {
            lines: 3_000,
            overlaps: 1,
            ..Default::default()
        };
        let a = generate(&cfg);
        let b = generate(&cfg);
        assert_eq!(a.history.ops, b.history.ops);
        let text = a.history_jsonl();
        let back = crate::parse_jsonl(&text, "synth").unwrap();
        assert_eq!(back.ops.len(), a.history.ops.len());
        assert!(a.history.ops.len() >= 3_000);
        assert_eq!(
            a.history.ops.iter().filter(|o| o.f == "pause").count(),
            1,
            "one planted pause"
        );
    }
}
