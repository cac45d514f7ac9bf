//! Clock faults on real processes: Redis's key expiry, a Rust worker's Instant
//! and SystemTime, the time namespace, who cannot be reached, and a clock page
//! left torn by a writer killed mid-write. What the interposer costs Redis is
//! measured by `cargo run --release --example clock_shim_cost`.
//!
//! The child's readings are checked against the interval in which it answered
//! (read before the question, after the answer), never against a tolerance: a
//! loaded machine widens the interval, it cannot fail the check.

mod fault_support;
mod run_support;

use fault_support::{tear, Redis};
use lockcheck::fault::clock::{self, ClockControl, Reach, TORN_AFTER};
use run_support::{Helper, ANSWER_WITHIN};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SEC: i64 = 1_000_000_000;
/// The skew's float arithmetic rounds to the nanosecond: a microsecond's slack.
const ROUNDING: i64 = 1_000;

#[test]
fn clock_jump_forward_on_redis_expires_a_px_key_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "n1").unwrap();
    let redis = Redis::start(dir.path(), &clock.env());
    assert_eq!(redis.cmd(&["SET", "k", "v", "PX", "10000"]).unwrap(), "OK");
    assert_eq!(
        redis.cmd(&["GET", "k"]).unwrap(),
        "v",
        "the key lives before the jump"
    );
    clock.set_offset(20 * SEC);
    assert_eq!(
        redis.cmd(&["GET", "k"]).unwrap(),
        "(nil)",
        "a 20 s jump forward must expire a 10 s key at once"
    );
    // And back: a new key with the clock reset lives again.
    clock.reset();
    assert_eq!(redis.cmd(&["SET", "k2", "v", "PX", "10000"]).unwrap(), "OK");
    assert_eq!(redis.cmd(&["GET", "k2"]).unwrap(), "v");
}

/// Debian's libfaketime deadlocks redis-server at start (jemalloc reads the
/// clock while the hook initialises); ours must not.
#[test]
fn redis_starts_and_serves_under_the_interposer() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "n1").unwrap();
    clock.set_rate(1.5).unwrap(); // skewing, so every call does the arithmetic
    let redis = Redis::start(dir.path(), &clock.env()); // panics if it hangs
    assert_eq!(redis.cmd(&["SET", "k", "v"]).unwrap(), "OK");
    assert_eq!(redis.cmd(&["GET", "k"]).unwrap(), "v");
}

/// One reading of the probe's clocks, and the interval it was taken in.
struct Reading {
    /// The child's SystemTime, ns since the epoch; its Instant since it started, ns.
    wall: i64,
    mono: i64,
    /// Our wall clock before the question and after the answer.
    wall_lo: i64,
    wall_hi: i64,
    /// Our Instant before the question and after the answer.
    asked: Instant,
    answered: Instant,
}

impl Reading {
    fn is_off_by(&self, offset: i64) -> bool {
        (self.wall_lo - ROUNDING..=self.wall_hi + ROUNDING).contains(&(self.wall - offset))
    }

    /// The child's wall clock is ours moved by `offset`: ours plus `offset` at
    /// some moment between question and answer.
    fn assert_wall_off_by(&self, offset: i64, what: &str) {
        assert!(
            self.is_off_by(offset),
            "{what}: the child's wall clock {} ns off ours, outside the {} ns it took to answer",
            self.wall - self.wall_lo,
            self.wall_hi - self.wall_lo
        );
    }
}

/// The real time that passed between the child's readings `a` and `b`: at
/// least `lo`, at most `hi` ns.
fn between(a: &Reading, b: &Reading) -> (i64, i64) {
    let ns = |d: Duration| d.as_nanos() as i64;
    (
        ns(b.asked.saturating_duration_since(a.answered)) - ROUNDING,
        ns(b.answered - a.asked) + ROUNDING,
    )
}

/// A Rust child process whose clocks follow a ClockControl
/// (`lockcheck-test-helper clock-probe`).
struct Probe(Helper);

impl Probe {
    fn start(clock: &ClockControl) -> Probe {
        let mut cmd = Helper::command("clock-probe");
        cmd.envs(clock.env());
        Probe(Helper::spawn(cmd))
    }

    fn ask(&mut self) -> Reading {
        let (asked, wall_lo) = (Instant::now(), wall_ns());
        let answer = self.0.ask("", "probe ");
        let (answered, wall_hi) = (Instant::now(), wall_ns());
        let mut it = answer.split_whitespace().map(|x| x.parse::<i64>().unwrap());
        Reading {
            wall: it.next().unwrap(),
            mono: it.next().unwrap(),
            wall_lo,
            wall_hi,
            asked,
            answered,
        }
    }
}

fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

#[test]
fn a_rust_worker_sees_its_clocks_jump_and_run_fast() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "worker-1").unwrap();
    let mut probe = Probe::start(&clock);
    let r0 = probe.ask();
    r0.assert_wall_off_by(0, "unskewed");

    clock.set_offset(3600 * SEC);
    let r1 = probe.ask();
    r1.assert_wall_off_by(3600 * SEC, "SystemTime jumped an hour");
    let (lo, hi) = between(&r0, &r1);
    let jumped = r1.mono - r0.mono - 3600 * SEC;
    assert!(
        (lo..=hi).contains(&jumped),
        "Instant jumped an hour: {jumped} ns more, not within [{lo}, {hi}]"
    );

    // Twice as fast, continuously: no jump when the rate is set (between the
    // readings the clock ran at 1x, then 2x), then exactly 2 s per real second.
    clock.set_rate(2.0).unwrap();
    let r2 = probe.ask();
    let (lo, hi) = between(&r1, &r2);
    let ran = r2.mono - r1.mono;
    assert!(
        (lo..=2 * hi).contains(&ran),
        "a jump at set_rate: {ran} ns in [{lo}, {hi}] ns of real time"
    );
    std::thread::sleep(Duration::from_millis(400));
    let r3 = probe.ask();
    let (lo, hi) = between(&r2, &r3);
    let ran = r3.mono - r2.mono;
    assert!(
        (2 * lo..=2 * hi).contains(&ran),
        "the child's Instant ran {ran} ns in [{lo}, {hi}] ns of real time: not 2x"
    );

    clock.reset();
    probe
        .ask()
        .assert_wall_off_by(0, "reset brings the child back to real time");
}

#[test]
fn strobe_flips_a_child_clock_between_two_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "worker-1").unwrap();
    let mut probe = Probe::start(&clock);
    clock
        .strobe(0, 10 * SEC, Duration::from_millis(20))
        .unwrap();
    let (mut near, mut far) = (0, 0);
    let deadline = Instant::now() + ANSWER_WITHIN;
    while near == 0 || far == 0 {
        assert!(
            Instant::now() < deadline,
            "one offset never seen: {near} near, {far} far"
        );
        let r = probe.ask();
        if r.is_off_by(0) {
            near += 1;
        } else if r.is_off_by(10 * SEC) {
            far += 1;
        } else {
            panic!(
                "a strobed clock is at one of its two offsets, not {} ns off",
                r.wall - r.wall_lo
            );
        }
        std::thread::sleep(Duration::from_millis(7));
    }
}

#[test]
fn reach_names_the_go_servers_a_live_skew_cannot_touch() {
    for go in ["/usr/bin/etcd", "/usr/sbin/nats-server"] {
        match clock::reach(Path::new(go)).unwrap() {
            Reach::Unreachable(u) => {
                assert!(u.to_string().starts_with("unreachable: "), "{u}");
                assert!(u.why.contains("Go"), "{u}");
            }
            Reach::Live => panic!("{go} is a Go binary: a live skew cannot reach it"),
        }
    }
    assert_eq!(
        clock::reach(Path::new("/usr/bin/redis-server")).unwrap(),
        Reach::Live
    );
}

#[test]
fn a_time_namespace_shifts_the_monotonic_clock_of_a_child_at_start() {
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/self/timens_offsets");
    clock::time_namespace(&mut cmd, 1_000_000_000_000);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let monotonic: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("monotonic"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(monotonic[1], "1000", "{text}");
}

#[test]
fn reset_file_undoes_a_skew_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "n1").unwrap();
    clock.set_offset(-5 * SEC);
    let path = clock.path().to_path_buf();
    // What a killed controller leaves: the file still says "skewed".
    std::mem::forget(clock);
    assert_eq!(clock::read_file(&path).unwrap().offset_ns, -5 * SEC);
    assert!(clock::reset_file(&path).unwrap(), "it was skewed");
    assert!(clock::read_file(&path).unwrap().is_none());
    assert!(!clock::reset_file(&path).unwrap(), "nothing left to reset");
}

// ---- a page torn by a writer killed between its two `seq` stores ----

/// Runs `f` on a thread of its own, and fails the test if it has not returned
/// within ANSWER_WITHIN (instead of hanging it, as a spin on a torn page would).
fn returns<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(ANSWER_WITHIN)
        .unwrap_or_else(|_| panic!("{what} did not return within {ANSWER_WITHIN:?}"))
}

/// A shimmed process keeps answering its time calls on a torn page, with the
/// skew it last read whole (not the torn half of the new one, not the real
/// clock): so does a real server; the page reads as torn; and the reset
/// `recover` does completes without waiting on the dead writer, after which
/// the process is back on real time.
#[test]
fn a_torn_page_keeps_the_last_whole_skew_until_the_reset_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "n1").unwrap();
    clock.set_offset(3600 * SEC);
    let path = clock.path().to_path_buf();
    let redis = Redis::start(dir.path(), &clock.env());
    let mut probe = Probe::start(&clock);
    probe.ask().assert_wall_off_by(3600 * SEC, "skewed an hour");
    assert_eq!(redis.cmd(&["SET", "k", "v"]).unwrap(), "OK");

    tear(&path, -3600 * SEC);
    let first = probe.ask();
    let took = first.answered - first.asked;
    eprintln!("figure: first answer on a torn page after {took:?}, then:");
    first.assert_wall_off_by(3600 * SEC, "the last whole skew, on a torn page");
    assert!(
        took >= TORN_AFTER,
        "the reader waited {took:?}, less than the {TORN_AFTER:?} a live writer gets to finish"
    );
    for _ in 0..3 {
        let r = probe.ask();
        eprintln!("figure:   {:?}", r.answered - r.asked);
        r.assert_wall_off_by(3600 * SEC, "still the last whole skew");
    }
    assert_eq!(
        redis.cmd(&["GET", "k"]).unwrap(),
        "v",
        "redis serves on a torn page"
    );

    let err = clock::read_file(&path).unwrap_err().to_string();
    assert!(err.contains("torn") && err.contains("recover"), "{err}");
    let err = ClockControl::attach(&path).err().expect("a torn page");
    assert!(err.to_string().contains("torn"), "{err}");

    let reset = path.clone();
    assert!(
        returns("the reset of a torn page", move || clock::reset_file(
            &reset
        ))
        .unwrap(),
        "a torn page was being skewed"
    );
    assert!(clock::read_file(&path).unwrap().is_none());
    probe
        .ask()
        .assert_wall_off_by(0, "back on real time after the reset");
    assert_eq!(redis.cmd(&["GET", "k"]).unwrap(), "v");
    drop(clock);
}

/// A process that never read the page whole has no skew of its own to keep: on a
/// torn page it runs on the real clock. The controller's next change takes the
/// torn page over, and the process follows it.
#[test]
fn a_process_started_on_a_torn_page_runs_on_real_time_until_the_next_change() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "worker-1").unwrap();
    clock.set_offset(3600 * SEC);
    tear(clock.path(), -3600 * SEC);
    let mut probe = Probe::start(&clock);
    probe
        .ask()
        .assert_wall_off_by(0, "real time on a torn page");
    let clock = returns("a change on a torn page", move || {
        clock.set_offset(2 * 3600 * SEC);
        clock
    });
    probe
        .ask()
        .assert_wall_off_by(2 * 3600 * SEC, "the change after the tear");
    drop(clock);
}
