//! The search: from the run as it happened to the smallest workload that still
//! breaks the lock the same way. Each step keeps a change only if the changed
//! workload still gives the anomaly (k of m reruns), in the order that removes the
//! most first: the fault events (delta debugging), the clients, the run's length
//! (early, since every later rerun then takes less time), each fault's length and
//! start, the run's length again (down to the shorter faults' end), the critical
//! section. A time budget bounds
//! it all; when it runs out, the best so far is what it hands over.

use super::candidate::{Candidate, Size};
use super::ddmin::ddmin;
use super::trial::Trial;
use anyhow::Result;
use lockcheck_check::AnomalyKind;
use std::time::{Duration, Instant};

/// Says whether a candidate still breaks the lock: real reruns, or a fake in tests.
pub trait Oracle {
    fn trial(&mut self, c: &Candidate) -> Result<Trial>;
    /// Why a candidate is not a workload `lockcheck run` would take, if it is not
    /// (a fault that no longer fits the run): such a candidate is never run.
    fn refuses(&self, c: &Candidate) -> Option<String>;
}

/// The steps, in order, as progress lines name them.
pub const STEPS: [&str; 7] = [
    "fault events",
    "clients",
    "run length",
    "fault lengths",
    "fault starts",
    "run length again",
    "critical section",
];

/// One line of progress: which step, what was tried, what it gave.
pub struct Progress<'a> {
    pub step: usize,
    pub trial: u32,
    pub tried: Size,
    pub start: Size,
    pub result: &'a Trial,
    pub left: Duration,
}

/// What the search found.
pub struct Shrunk {
    pub start: Size,
    pub best: Candidate,
    /// Every candidate it kept, the start first and `best` last: each smaller
    /// than the one before, and (the search being greedy over noisy trials) each
    /// perhaps a little less sure to break; the confirmation walks back along it.
    pub kept: Vec<Candidate>,
    /// The step that cut each of `kept` (none for the start).
    pub kept_by: Vec<Option<usize>>,
    pub trials: u32,
    pub runs: u32,
    /// The budget ran out before every step had its say.
    pub out_of_time: bool,
}

/// Time units the search moves durations in: a tenth of a second is as fine as
/// a schedule on a loaded machine is kept.
const TICK: Duration = Duration::from_millis(100);

pub struct Search<'a, O: Oracle> {
    oracle: &'a mut O,
    best: Candidate,
    start: Size,
    kind: AnomalyKind,
    deadline: Instant,
    step: usize,
    trials: u32,
    runs: u32,
    out_of_time: bool,
    kept: Vec<Candidate>,
    kept_by: Vec<Option<usize>>,
    /// Dimensions (see [`dimension`]) not to cut: a cut of them broke too
    /// seldom when confirmed.
    frozen: Vec<usize>,
    progress: &'a mut dyn FnMut(&Progress<'_>),
}

/// The dimension each step cuts, as the step that cuts it first: the run's
/// length is cut twice (steps 2 and 5).
const DIMENSION: [usize; STEPS.len()] = [0, 1, 2, 3, 4, 2, 6];

/// The dimension step `step` cuts.
pub fn dimension(step: usize) -> usize {
    DIMENSION[step]
}

impl<'a, O: Oracle> Search<'a, O> {
    pub fn new(
        oracle: &'a mut O,
        start: Candidate,
        kind: AnomalyKind,
        budget: Duration,
        progress: &'a mut dyn FnMut(&Progress<'_>),
    ) -> Self {
        Search {
            oracle,
            start: start.size(),
            kept: vec![start.clone()],
            kept_by: vec![None],
            frozen: Vec::new(),
            best: start,
            kind,
            deadline: Instant::now() + budget,
            step: 0,
            trials: 0,
            runs: 0,
            out_of_time: false,
            progress,
        }
    }

    /// Leaves the dimensions `frozen` (see [`dimension`]) as they are.
    pub fn freezing(mut self, frozen: &[usize]) -> Self {
        self.frozen = frozen.to_vec();
        self
    }

    /// Every step in turn; the best candidate when they are done or time is up.
    pub fn run(mut self) -> Result<Shrunk> {
        for step in 0..STEPS.len() {
            if self.frozen.contains(&dimension(step)) {
                continue;
            }
            match step {
                0 => self.events()?,
                1 => self.clients()?,
                3 => self.fault_lengths()?,
                4 => self.fault_starts()?,
                6 => self.critical_section()?,
                _ => self.run_length(step)?,
            }
        }
        Ok(Shrunk {
            start: self.start,
            best: self.best,
            kept: self.kept,
            kept_by: self.kept_by,
            trials: self.trials,
            runs: self.runs,
            out_of_time: self.out_of_time,
        })
    }

    /// Whether `c` still breaks; keeps it as the best if so.
    fn keep_if_breaks(&mut self, c: Candidate) -> Result<bool> {
        if Instant::now() >= self.deadline {
            self.out_of_time = true;
            return Ok(false);
        }
        if c == self.best || self.oracle.refuses(&c).is_some() {
            return Ok(false);
        }
        let t = self.oracle.trial(&c)?;
        self.trials += 1;
        self.runs += t.ran;
        (self.progress)(&Progress {
            step: self.step,
            trial: self.trials,
            tried: c.size(),
            start: self.start,
            result: &t,
            left: self.deadline.saturating_duration_since(Instant::now()),
        });
        if t.breaks {
            self.kept.push(c.clone());
            self.kept_by.push(Some(self.step));
            self.best = c;
        }
        Ok(t.breaks)
    }

    /// The smallest `v` in `lo..=hi` for which `make(v)` still breaks, taking the
    /// break as monotone in `v` (fewer clients, a shorter fault: at some point it
    /// stops breaking); `hi` is where the best stands now.
    fn smallest(
        &mut self,
        mut lo: u64,
        mut hi: u64,
        make: impl Fn(&Candidate, u64) -> Candidate,
    ) -> Result<()> {
        while lo < hi && !self.out_of_time {
            let mid = lo + (hi - lo) / 2;
            let c = make(&self.best, mid);
            if self.keep_if_breaks(c)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(())
    }

    fn events(&mut self) -> Result<()> {
        self.step = 0;
        let all = self.best.events.clone();
        let base = self.best.clone();
        let kept = ddmin(&all, |subset| {
            self.keep_if_breaks(base.with_events(subset.to_vec()))
        })?;
        // ddmin's last yes is not always its answer's own trial: set it.
        self.best = base.with_events(kept);
        Ok(())
    }

    fn clients(&mut self) -> Result<()> {
        self.step = 1;
        let now = self.best.clients();
        self.smallest(fewest_clients(self.kind).min(now), now, |c, n| {
            c.with_clients(n)
        })
    }

    fn fault_lengths(&mut self) -> Result<()> {
        self.step = 3;
        for i in 0..self.best.events.len() {
            let now = ticks(self.best.events[i].duration);
            self.smallest(1, now, |c, t| {
                let mut c = c.clone();
                c.events[i].duration = TICK * t as u32;
                c
            })?;
        }
        Ok(())
    }

    fn fault_starts(&mut self) -> Result<()> {
        self.step = 4;
        for i in 0..self.best.events.len() {
            let now = ticks(self.best.events[i].at);
            self.smallest(0, now, |c, t| {
                let mut c = c.clone();
                c.events[i].at = TICK * t as u32;
                c
            })?;
        }
        Ok(())
    }

    /// The run's length, as step `step` of [`STEPS`].
    fn run_length(&mut self, step: usize) -> Result<()> {
        self.step = step;
        // A deposed holder shows only once a lease has run out after its fault
        // began and it acted after: no shorter run can show the break honestly
        // (one that ends mid-fault is refused anyway).
        let lease = self.best.dur(&["backend"], "lease").unwrap_or_default();
        let floor = ticks(self.best.faults_over().max(self.first_fault() + lease)) + 1;
        let now = ticks(self.best.duration());
        self.smallest(floor.min(now), now, |c, t| c.with_duration(TICK * t as u32))
    }

    /// When the first fault is due.
    fn first_fault(&self) -> Duration {
        self.best
            .events
            .iter()
            .map(|e| e.at)
            .min()
            .unwrap_or_default()
    }

    fn critical_section(&mut self) -> Result<()> {
        self.step = 6;
        const SECTION: &[&str] = &["critical_section"];
        if let Some(writes) = self.best.int(SECTION, "writes") {
            self.smallest(1, writes.max(1) as u64, |c, n| {
                c.with_value(SECTION, "writes", toml::Value::Integer(n as i64))
            })?;
        }
        for key in ["hold", "think"] {
            if let Some(d) = self.best.dur(SECTION, key) {
                self.smallest(0, ticks(d), |c, t| {
                    c.with_dur(SECTION, key, TICK * t as u32)
                })?;
            }
        }
        Ok(())
    }
}

/// The fewest clients that can show `kind`: two holders need two processes; a
/// token handed out twice or backwards, or a lost update, can show with one.
pub fn fewest_clients(kind: AnomalyKind) -> u64 {
    match kind {
        AnomalyKind::DoubleHolder
        | AnomalyKind::InterleavedWrites
        | AnomalyKind::StaleWriteAccepted
        | AnomalyKind::ForeignRelease => 2,
        _ => 1,
    }
}

fn ticks(d: Duration) -> u64 {
    d.as_millis() as u64 / TICK.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::super::candidate::Event;
    use super::*;

    /// A lock that breaks, deterministically, when event `needed` is in the run
    /// with at least 2 clients, lasts at least 1.5 s, starts no earlier than
    /// 0.8 s, and the run lasts 1 s past it: the exact minimum is known.
    struct Fake {
        needed: usize,
        asked: u32,
    }

    impl Oracle for Fake {
        fn trial(&mut self, c: &Candidate) -> Result<Trial> {
            self.asked += 1;
            let hit = c.events.iter().find(|e| e.entry == self.needed);
            let breaks = c.clients() >= 2
                && hit.is_some_and(|e| {
                    e.duration >= Duration::from_millis(1500)
                        && e.at >= Duration::from_millis(800)
                        && c.duration() >= e.end() + Duration::from_secs(1)
                })
                && c.int(&["critical_section"], "writes") >= Some(2);
            Ok(Trial {
                flagged: u32::from(breaks),
                ran: 1,
                breaks,
                flagged_dirs: vec![],
            })
        }

        fn refuses(&self, c: &Candidate) -> Option<String> {
            (c.faults_over() >= c.duration()).then(|| "a fault outlasts the run".into())
        }
    }

    fn noisy_run() -> Candidate {
        let base: toml::Table = toml::from_str(
            "duration = \"20s\"\n[clients]\ncount = 7\n[critical_section]\nhold = \"500ms\"\nwrites = 5\nthink = \"300ms\"\n",
        )
        .unwrap();
        let table: toml::Table = toml::from_str("kind = \"pause\"\ntarget = \"holder\"\n").unwrap();
        let events = (0..9)
            .map(|i| Event {
                entry: i,
                at: Duration::from_millis(1000 + 1500 * i as u64),
                duration: Duration::from_millis(3000),
                table: table.clone(),
            })
            .collect();
        Candidate { base, events }
    }

    #[test]
    fn shrinks_a_noisy_run_to_the_known_minimum() {
        let mut fake = Fake {
            needed: 6,
            asked: 0,
        };
        let mut lines = 0;
        let mut progress = |_: &Progress<'_>| lines += 1;
        let s = Search::new(
            &mut fake,
            noisy_run(),
            AnomalyKind::DoubleHolder,
            Duration::from_secs(600),
            &mut progress,
        )
        .run()
        .unwrap();
        let b = &s.best;
        assert_eq!(b.events.len(), 1);
        assert_eq!(b.events[0].entry, 6);
        assert_eq!(b.clients(), 2);
        assert_eq!(b.events[0].duration, Duration::from_millis(1500));
        assert_eq!(b.events[0].at, Duration::from_millis(800));
        assert_eq!(b.duration(), Duration::from_millis(3300));
        assert_eq!(b.int(&["critical_section"], "writes"), Some(2));
        assert_eq!(b.dur(&["critical_section"], "hold"), Some(Duration::ZERO));
        assert!(!s.out_of_time);
        assert_eq!(s.kept.first(), Some(&noisy_run()));
        assert_eq!(s.kept.last(), Some(&s.best));
        assert_eq!(s.trials, fake.asked);
        assert_eq!(lines, s.trials);
        assert!(s.trials < 80, "{} trials", s.trials);
    }

    /// A confirmation found two clients too few: the search goes on from the
    /// candidate before that cut and leaves the clients as they are.
    #[test]
    fn a_frozen_dimension_is_left_as_it_is() {
        let mut fake = Fake {
            needed: 6,
            asked: 0,
        };
        let mut progress = |_: &Progress<'_>| {};
        let s = Search::new(
            &mut fake,
            noisy_run(),
            AnomalyKind::DoubleHolder,
            Duration::from_secs(600),
            &mut progress,
        )
        .freezing(&[dimension(1)])
        .run()
        .unwrap();
        assert_eq!(s.best.clients(), 7);
        assert_eq!(s.best.events.len(), 1);
        assert_eq!(s.best.duration(), Duration::from_millis(3300));
        assert_eq!(s.kept.len(), s.kept_by.len());
        assert_eq!(s.kept_by[0], None);
        assert!(s.kept_by.iter().flatten().all(|&step| dimension(step) != 1));
        // Both passes over the run's length are one dimension.
        assert_eq!(dimension(5), dimension(2));
        for (step, &d) in DIMENSION.iter().enumerate() {
            assert!(
                d <= step && STEPS[step].starts_with(STEPS[d]),
                "step {step} ({}) cuts what step {d} ({}) cut first",
                STEPS[step],
                STEPS[d]
            );
        }
    }

    #[test]
    fn out_of_time_keeps_the_start() {
        let mut fake = Fake {
            needed: 6,
            asked: 0,
        };
        let mut progress = |_: &Progress<'_>| {};
        let start = noisy_run();
        let s = Search::new(
            &mut fake,
            start.clone(),
            AnomalyKind::DoubleHolder,
            Duration::ZERO,
            &mut progress,
        )
        .run()
        .unwrap();
        assert!(s.out_of_time);
        assert_eq!(s.best, start);
        assert_eq!(fake.asked, 0);
    }
}
