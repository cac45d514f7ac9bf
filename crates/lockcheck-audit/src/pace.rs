//! How many runs at once. A run of the battery mostly waits (on leases, pauses,
//! partitions): two runs of etcd at once left this 2-core machine 89 % idle. So
//! an audit left to choose starts at one run a core and adds one more at a time,
//! up to four a core (`run::capacity::PACED_RUNS_A_CORE`), only while two probes
//! say the timing margins every run relies on would still hold, and steps back
//! the moment they do not. A level it stepped back from is tried again only
//! after a wait that doubles each time ([`RETRY_AFTER`]): what made it too busy
//! may have passed (two runs' servers starting together), and an audit held at
//! its lowest level for good ran at half the pace it could (ZooKeeper's
//! `--bound 1%` shards, docs/audits/zookeeper-bound-1.md).
//!
//! - The machine's CPU share busy over the level (/proc/stat, time stolen by a
//!   hypervisor counted as busy): one more run's share added must leave
//!   headroom ([`CPU_CEILING`]). A server in a JVM loses its timing to a
//!   starved collector or scheduler long before a sleeping thread notices.
//! - A thread that asks to sleep 10 ms over and over and records how late it
//!   woke: what a holder's next write, a worker's deadline check or a nemesis
//!   timer suffers. The tightest margin a battery's run relies on is the
//!   self-fencing holder's 200 ms (it checks its deadline less 200 ms, then
//!   writes): lateness within a tenth of that, at the 99th percentile.
//!
//! Each level's figures go into the scorecard, so the parallelism an audit ran
//! at is itself evidence.

use serde::{Deserialize, Serialize};
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
/// The share of the machine's CPU time a level may leave busy once one more run
/// is added (its runs' share scaled by one more): the rest is headroom for the
/// bursts a run has (servers starting, a JVM's collector). Measured: ZooKeeper
/// at 4 runs at once (load 9, 60-80 % busy, up to 33 % stolen by the
/// hypervisor) provoked its clock-jump fenced twin in 4 of 8 runs where 2 at once
/// had provoked 17 of 17 with the same seeds, while timers still woke within
/// 8 ms: timer lateness alone does not say a JVM server keeps its timing.
pub const CPU_CEILING: f64 = 0.6;
/// A level busier than this goes back down.
pub const CPU_OVER: f64 = 0.85;
/// How long a level is seen before its timers may be judged late: the look right
/// after a level went up covers a few of the kernel's 10 ms ticks, and one busy
/// tick read as 100 % (measured: Redis Sentinel went from 4 back to 3 after
/// 0 s, its one wake-up 0.1 ms late).
pub const SEEN_AT_LEAST: Duration = Duration::from_secs(2);
/// How long a level is seen before its CPU share may be judged too busy. The
/// run a step up starts begins by starting its servers, the busiest seconds a
/// run has: ZooKeeper's `--bound 1%` shards went from 2 to 3 at 37-39 % busy,
/// read 85-97 % over the 3 s the third run's ensemble took to start, went back
/// to 2 and ran there for 5 minutes at 37-39 %. Over 10 s that one start is
/// weighed with the level's steady work; the timers, which a starved run feels
/// first, are still judged after [`SEEN_AT_LEAST`].
pub const SEEN_BUSY_AT_LEAST: Duration = Duration::from_secs(10);
/// How long a level that went back down waits before the level above it may be
/// tried again; doubled at each step down, so that a level that stays too busy
/// costs a few seconds in minutes.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);

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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub jobs: usize,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lateness: Option<Lateness>,
    /// The machine's CPU time busy (time stolen by a hypervisor counted as
    /// busy: it is not ours to use), 0-1, over the level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
}

impl Level {
    /// `4 at once for 312 s: CPU 45 % busy, timer lateness p99 3.1 ms, max
    /// 9.0 ms (2000 wake-ups)`, with what went over its limit.
    pub fn line(&self) -> String {
        let mut s = format!("{} at once for {:.0} s", self.jobs, self.seconds);
        if let Some(busy) = self.cpu_busy {
            let over = if busy > CPU_OVER {
                format!(", over the {:.0} % limit", CPU_OVER * 100.0)
            } else {
                String::new()
            };
            s += &format!(": CPU {:.0} % busy{over}", busy * 100.0);
        }
        if let Some(t) = self.lateness {
            let over = if t.holds() {
                String::new()
            } else {
                format!(", over the {} ms limit", LATENESS_LIMIT.as_millis())
            };
            s += &format!(
                ", timer lateness p99 {:.1} ms, max {:.1} ms ({} wake-ups{over})",
                t.p99_ms, t.max_ms, t.samples
            );
        }
        s
    }
}

/// The machine's CPU ticks so far, busy and all, from /proc/stat's first line
/// (user nice system idle iowait irq softirq steal ...): idle and iowait are
/// free, everything else (steal included) is not.
fn cpu_ticks() -> Option<(u64, u64)> {
    ticks_of(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn ticks_of(stat: &str) -> Option<(u64, u64)> {
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = ticks.iter().sum();
    let free = ticks.get(3)? + ticks.get(4)?;
    Some((total - free, total))
}

/// The busy share between two readings of [`cpu_ticks`].
fn busy_between(from: Option<(u64, u64)>, to: Option<(u64, u64)>) -> Option<f64> {
    let ((b0, t0), (b1, t1)) = (from?, to?);
    let total = t1.checked_sub(t0).filter(|&t| t > 0)?;
    Some(b1.saturating_sub(b0) as f64 / total as f64)
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
/// lateness held, one more run's share of the CPU would still leave the machine
/// within [`CPU_CEILING`], and there is room (`most`); a level whose lateness did
/// not hold (seen for [`SEEN_AT_LEAST`]), or busier than [`CPU_OVER`] (seen for
/// [`SEEN_BUSY_AT_LEAST`]), goes down one, never below `start`. Nothing measured
/// is no reason to go up.
pub fn step(jobs: usize, most: usize, start: usize, watched: Duration, seen: Level) -> Step {
    let (Some(l), Some(busy)) = (seen.lateness, seen.cpu_busy) else {
        return Step::Stay;
    };
    let one_more = busy * (jobs + 1) as f64 / jobs.max(1) as f64;
    let late = !l.holds() && seen.seconds >= SEEN_AT_LEAST.as_secs_f64();
    let too_busy = busy > CPU_OVER && seen.seconds >= SEEN_BUSY_AT_LEAST.as_secs_f64();
    if (late || too_busy) && jobs > start {
        Step::Down
    } else if l.holds() && one_more <= CPU_CEILING && watched >= WATCH && jobs < most {
        Step::Up
    } else {
        Step::Stay
    }
}

/// The highest level allowed: the audit's most, lowered to the level a step
/// down went to, and given back [`RETRY_AFTER`] later, then twice that after
/// the next step down, and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    most: usize,
    lowered: Option<(usize, Instant)>,
    retry_after: Duration,
}

impl Ceiling {
    pub fn new(most: usize) -> Ceiling {
        Ceiling {
            most,
            lowered: None,
            retry_after: RETRY_AFTER,
        }
    }

    /// The highest level allowed at `now`.
    pub fn at(&mut self, now: Instant) -> usize {
        match self.lowered {
            Some((level, until)) if now < until => level,
            _ => {
                self.lowered = None;
                self.most
            }
        }
    }

    /// A level did not hold: nothing above `level` until the wait is over.
    pub fn lower(&mut self, level: usize, now: Instant) {
        self.lowered = Some((level, now + self.retry_after));
        self.retry_after *= 2;
    }
}

/// The current level and the levels so far.
pub struct Pace {
    jobs: Jobs,
    level: usize,
    /// The highest level allowed now.
    most: Ceiling,
    /// When the current level began, and since when it has been full (as many
    /// runs going as it allows): only a full level is judged for going up.
    since: Instant,
    /// The CPU ticks when the current level began.
    ticks: Option<(u64, u64)>,
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
            most: Ceiling::new(most),
            since: Instant::now(),
            ticks: cpu_ticks(),
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
        let Jobs::Paced { start, .. } = self.jobs else {
            return None;
        };
        let seen = self.current(now);
        let watched = self.full_since.map_or(Duration::ZERO, |t| now - t);
        let to = match step(self.level, self.most.at(now), start, watched, seen) {
            Step::Stay => return None,
            Step::Up => self.level + 1,
            Step::Down => {
                self.most.lower(self.level - 1, now);
                self.level - 1
            }
        };
        self.levels.push(seen);
        self.level = to;
        self.since = now;
        self.ticks = cpu_ticks();
        self.full_since = None;
        Some(seen)
    }

    /// The current level, from its start to `now`.
    fn current(&self, now: Instant) -> Level {
        Level {
            jobs: self.level,
            seconds: (now - self.since).as_secs_f64(),
            lateness: self.probe.as_ref().and_then(|p| p.since(self.since)),
            cpu_busy: self
                .probe
                .as_ref()
                .and_then(|_| busy_between(self.ticks, cpu_ticks())),
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

    /// A level seen at `p99_ms` timer lateness and `busy` CPU share.
    fn seen(p99_ms: f64, busy: f64) -> Level {
        Level {
            jobs: 2,
            seconds: 20.0,
            lateness: late(p99_ms),
            cpu_busy: Some(busy),
        }
    }

    #[test]
    fn a_level_goes_up_only_once_watched_full_with_its_margins_held() {
        let long = WATCH;
        // etcd's runs: 11 % busy at 2, timers 2.4 ms late.
        assert_eq!(step(2, 4, 2, long, seen(2.4, 0.11)), Step::Up);
        let short = long / 2;
        assert_eq!(
            step(2, 4, 2, short, seen(2.4, 0.11)),
            Step::Stay,
            "not watched long enough"
        );
        assert_eq!(
            step(4, 4, 2, long, seen(2.4, 0.11)),
            Step::Stay,
            "at the most"
        );
        let unmeasured = Level {
            lateness: None,
            ..seen(2.4, 0.11)
        };
        assert_eq!(step(2, 4, 2, long, unmeasured), Step::Stay, "nothing seen");
        // One more run at 45 % busy over 2 would make 67 %: over the ceiling.
        assert_eq!(step(2, 4, 2, long, seen(2.4, 0.45)), Step::Stay);
        assert_eq!(step(3, 4, 2, long, seen(2.4, 0.40)), Step::Up, "53 % at 4");
        assert_eq!(step(3, 4, 2, Duration::ZERO, seen(25.0, 0.2)), Step::Down);
        let glimpse = Level {
            seconds: 0.01,
            ..seen(0.1, 1.0)
        };
        assert_eq!(
            step(4, 4, 2, Duration::ZERO, glimpse),
            Step::Stay,
            "a tick is no measure"
        );
        assert_eq!(
            step(3, 4, 2, Duration::ZERO, seen(8.0, 0.9)),
            Step::Down,
            "ZooKeeper at 4"
        );
        let floor = step(2, 4, 2, long, seen(25.0, 0.9));
        assert_eq!(floor, Step::Stay, "never below the start");
    }

    /// The seconds after a step up are the new run's servers starting: the CPU
    /// share is judged over a longer look than the timers.
    #[test]
    fn a_new_runs_start_is_not_read_as_a_busy_level() {
        let ensemble_starting = Level {
            jobs: 3,
            seconds: 3.0,
            ..seen(4.3, 0.97)
        };
        assert_eq!(
            step(3, 4, 2, Duration::ZERO, ensemble_starting),
            Step::Stay,
            "ZooKeeper's third ensemble starting, 3 s at 97 %"
        );
        let late_timers = Level {
            seconds: 3.0,
            ..seen(25.0, 0.5)
        };
        assert_eq!(step(3, 4, 2, Duration::ZERO, late_timers), Step::Down);
        let still_busy = Level {
            seconds: SEEN_BUSY_AT_LEAST.as_secs_f64(),
            ..seen(4.3, 0.9)
        };
        assert_eq!(step(3, 4, 2, Duration::ZERO, still_busy), Step::Down);
    }

    #[test]
    fn a_level_stepped_back_from_is_tried_again_after_a_growing_wait() {
        let t0 = Instant::now();
        let mut most = Ceiling::new(4);
        assert_eq!(most.at(t0), 4);
        most.lower(2, t0);
        assert_eq!(most.at(t0 + RETRY_AFTER - Duration::from_millis(1)), 2);
        let t1 = t0 + RETRY_AFTER;
        assert_eq!(most.at(t1), 4, "given back");
        most.lower(3, t1);
        assert_eq!(most.at(t1 + RETRY_AFTER), 3, "the second wait is longer");
        assert_eq!(most.at(t1 + 2 * RETRY_AFTER), 4);
    }

    #[test]
    fn the_cpu_share_counts_stolen_time_as_busy() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let stat = "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n";
        assert_eq!(ticks_of(stat), Some((190, 1000)));
        assert_eq!(ticks_of("cpu  1 2\n"), None, "too few fields");
        let from = Some((0, 0));
        assert_eq!(busy_between(from, Some((50, 100))), Some(0.5));
        assert_eq!(busy_between(from, Some((0, 0))), None, "no time passed");
        assert_eq!(busy_between(None, Some((1, 2))), None);
        let (busy, total) = cpu_ticks().expect("/proc/stat");
        assert!(busy <= total);
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
