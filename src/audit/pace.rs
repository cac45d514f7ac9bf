//! How many runs at once. A run of the battery mostly waits (on leases, pauses,
//! partitions): two runs of etcd at once left this 2-core machine 89 % idle. So
//! an audit left to choose starts at one run a core and adds one more at a time,
//! up to twice the cores, only while a probe shows the timing margins every run
//! relies on still hold, and steps back (for good) the moment they do not.
//!
//! The probe is a thread that asks to sleep 10 ms over and over and records how
//! late it woke: what a holder's next write, a worker's deadline check or a
//! nemesis timer suffers when the machine is short of CPU. The tightest margin a
//! battery's run relies on is the self-fencing holder's 200 ms (it checks its
//! deadline less 200 ms, then writes): lateness within a tenth of that, at the
//! 99th percentile, leaves it standing. Each level's figures go into the
//! scorecard, so the parallelism an audit ran at is itself evidence.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the probe wakes.
const TICK: Duration = Duration::from_millis(10);
/// The lateness at the 99th percentile a level may show and still be kept: a
/// tenth of the self-fencing margin (200 ms).
pub const LATENESS_LIMIT: Duration = Duration::from_millis(20);
/// How long a level is watched before it is judged: long enough to take in a
/// run's start (servers starting are the busiest part) and its fault.
pub const WATCH: Duration = Duration::from_secs(20);

/// How many runs at once: `--jobs N`, or paced by the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    Fixed(usize),
    /// From `start` up to `most`, while the margins hold.
    Paced {
        start: usize,
        most: usize,
    },
}

impl Jobs {
    pub fn start(self) -> usize {
        match self {
            Jobs::Fixed(n) | Jobs::Paced { start: n, .. } => n,
        }
    }
}

/// A level's timer lateness, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Lateness {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Lateness {
    fn of(mut ms: Vec<f64>) -> Option<Lateness> {
        if ms.is_empty() {
            return None;
        }
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
        Some(Lateness {
            samples: ms.len(),
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: ms[ms.len() - 1],
        })
    }

    pub fn holds(&self) -> bool {
        self.p99_ms <= LATENESS_LIMIT.as_secs_f64() * 1e3
    }
}

/// One level the audit ran at: how long, and what the probe saw.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Level {
    pub jobs: usize,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lateness: Option<Lateness>,
}

/// The probe thread: its wake-ups' lateness, timestamped, until dropped.
pub struct Probe {
    seen: Arc<Mutex<VecDeque<(Instant, f64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Probe {
    pub fn start() -> Probe {
        let seen = Arc::new(Mutex::new(VecDeque::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::Builder::new()
                .name("lateness-probe".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let asked = Instant::now();
                        std::thread::sleep(TICK);
                        let woke = Instant::now();
                        let late = woke.duration_since(asked).saturating_sub(TICK);
                        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                        s.push_back((woke, late.as_secs_f64() * 1e3));
                        // Only the current level's window is ever asked for.
                        while s.len() > 60_000 {
                            s.pop_front();
                        }
                    }
                })
                .ok()
        };
        Probe { seen, stop, thread }
    }

    /// The lateness of the wake-ups since `t`.
    pub fn since(&self, t: Instant) -> Option<Lateness> {
        let s = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        Lateness::of(
            s.iter()
                .filter(|(at, _)| *at >= t)
                .map(|&(_, ms)| ms)
                .collect(),
        )
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What to do with the level after a look at the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Up,
    Down,
    Stay,
}

/// The rule, pure: a level watched for [`WATCH`] while full goes up one if its
/// lateness held and there is room; a level whose lateness did not hold goes
/// down one (never below `start`), and never up again.
pub fn step(
    jobs: usize,
    most: usize,
    start: usize,
    watched: Duration,
    l: Option<Lateness>,
) -> Step {
    match l {
        Some(l) if !l.holds() && jobs > start => Step::Down,
        Some(l) if l.holds() && watched >= WATCH && jobs < most => Step::Up,
        _ => Step::Stay,
    }
}

/// The current level and the levels so far.
pub struct Pace {
    jobs: Jobs,
    level: usize,
    /// The highest level still allowed: lowered when one did not hold.
    most: usize,
    /// When the current level began, and since when it has been full (as many
    /// runs going as it allows): only a full level is judged for going up.
    since: Instant,
    full_since: Option<Instant>,
    levels: Vec<Level>,
    probe: Option<Probe>,
}

impl Pace {
    pub fn new(jobs: Jobs) -> Pace {
        let (level, most, probe) = match jobs {
            Jobs::Fixed(n) => (n, n, None),
            Jobs::Paced { start, most } => (start, most.max(start), Some(Probe::start())),
        };
        Pace {
            jobs,
            level,
            most,
            since: Instant::now(),
            full_since: None,
            levels: Vec::new(),
            probe,
        }
    }

    /// Runs allowed at once now.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Told after the loop started what it could: `running` runs going.
    /// Returns the level just left, if the level changed.
    pub fn look(&mut self, running: usize) -> Option<Level> {
        let now = Instant::now();
        if running < self.level {
            // A level not full shows nothing of what it would cost full.
            self.full_since = None;
        } else if self.full_since.is_none() {
            self.full_since = Some(now);
        }
        let (Jobs::Paced { start, .. }, Some(probe)) = (self.jobs, &self.probe) else {
            return None;
        };
        let lateness = probe.since(self.since);
        let watched = self.full_since.map_or(Duration::ZERO, |t| now - t);
        let to = match step(self.level, self.most, start, watched, lateness) {
            Step::Stay => return None,
            Step::Up => self.level + 1,
            Step::Down => {
                self.most = self.level - 1;
                self.level - 1
            }
        };
        let left = self.current(now);
        self.levels.push(left);
        self.level = to;
        self.since = now;
        self.full_since = None;
        Some(left)
    }

    /// The current level, from its start to `now`.
    fn current(&self, now: Instant) -> Level {
        Level {
            jobs: self.level,
            seconds: (now - self.since).as_secs_f64(),
            lateness: self.probe.as_ref().and_then(|p| p.since(self.since)),
        }
    }

    /// Every level the audit ran at, the current one up to now.
    pub fn levels(&self) -> Vec<Level> {
        let mut out = self.levels.clone();
        out.push(self.current(Instant::now()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn late(p99_ms: f64) -> Option<Lateness> {
        Some(Lateness {
            samples: 2000,
            p50_ms: 0.1,
            p99_ms,
            max_ms: p99_ms * 2.0,
        })
    }

    #[test]
    fn a_level_goes_up_only_once_watched_full_with_its_margins_held() {
        let long = WATCH;
        assert_eq!(step(2, 4, 2, long, late(2.4)), Step::Up);
        assert_eq!(
            step(2, 4, 2, long / 2, late(2.4)),
            Step::Stay,
            "not watched long enough"
        );
        assert_eq!(step(4, 4, 2, long, late(2.4)), Step::Stay, "at the most");
        assert_eq!(step(2, 4, 2, long, None), Step::Stay, "nothing seen");
        assert_eq!(step(3, 4, 2, Duration::ZERO, late(25.0)), Step::Down);
        assert_eq!(
            step(2, 4, 2, long, late(25.0)),
            Step::Stay,
            "never below the start"
        );
    }

    #[test]
    fn lateness_by_nearest_rank() {
        let l = Lateness::of((1..=100).map(f64::from).collect()).unwrap();
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (50.0, 99.0, 100.0));
        assert!(Lateness::of(vec![]).is_none());
        assert!(late(20.0).unwrap().holds());
        assert!(!late(20.1).unwrap().holds());
    }

    /// The probe measures: an idle thread wakes within a few ms of asking.
    #[test]
    fn the_probe_records_its_wake_ups() {
        let probe = Probe::start();
        let t = Instant::now();
        let deadline = t + Duration::from_secs(10);
        while probe.since(t).map_or(0, |l| l.samples) < 10 && Instant::now() < deadline {
            std::thread::sleep(TICK);
        }
        let l = probe.since(t).expect("samples within 10 s");
        assert!(
            l.samples >= 10 && l.p50_ms >= 0.0 && l.max_ms >= l.p99_ms,
            "{l:?}"
        );
    }

    #[test]
    fn a_fixed_level_never_moves_and_says_what_it_ran_at() {
        let mut p = Pace::new(Jobs::Fixed(3));
        assert_eq!(p.look(3), None);
        assert_eq!(p.level(), 3);
        let levels = p.levels();
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].jobs, 3);
        assert!(levels[0].lateness.is_none());
    }
}
