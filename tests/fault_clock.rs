//! Clock faults on real processes: Redis's key expiry, a Rust worker's Instant
//! and SystemTime, the time namespace, and who cannot be reached.

mod fault_support;

use fault_support::Redis;
use lockcheck::fault::clock::{self, ClockControl, Reach};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SEC: i64 = 1_000_000_000;

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
/// clock while the hook initialises); ours must not, and must stay cheap.
#[test]
fn redis_under_the_interposer_starts_and_keeps_its_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ClockControl::create(dir.path(), "n1").unwrap();
    clock.set_rate(1.5).unwrap(); // skewing, so every call does the arithmetic
    let plain = Redis::start(dir.path(), &[]);
    let shimmed = Redis::start(dir.path(), &clock.env()); // panics if it hangs
    let ops = |r: &Redis| {
        let out = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &r.addr.port().to_string()])
            .args(["-t", "set", "-n", "20000", "-c", "4", "-q", "--csv"])
            .output()
            .expect("redis-benchmark (Debian package redis-tools)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.starts_with("\"SET\""))
            .unwrap_or_else(|| panic!("{text}"));
        line.split(',')
            .nth(1)
            .unwrap()
            .trim_matches('"')
            .parse::<f64>()
            .unwrap()
    };
    // Interleaved, best of two: the machine is shared, and a burst of other work
    // during one measurement must not decide the comparison.
    let (mut p, mut s) = (0f64, 0f64);
    for _ in 0..2 {
        p = p.max(ops(&plain));
        s = s.max(ops(&shimmed));
    }
    println!("redis SET throughput: {p:.0} ops/s plain, {s:.0} ops/s under the clock interposer ({:.0}%)", 100.0 * s / p);
    // Loose on a shared 2-core machine; libfaketime's file re-reading halves it.
    assert!(
        s > 0.6 * p,
        "the interposer costs too much: {s:.0} vs {p:.0} ops/s"
    );
}

/// The probe child: this test binary re-executed (see `Probe`).
#[test]
#[ignore = "helper: run as a child process by the clock tests"]
fn clock_probe_child() {
    if std::env::var_os("LOCKCHECK_CLOCK_PROBE").is_none() {
        return;
    }
    let start = Instant::now();
    for _ in std::io::stdin().lock().lines() {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        println!("probe {wall} {}", start.elapsed().as_nanos());
    }
}

/// A Rust child process whose clocks follow a ClockControl: it answers each
/// line with its SystemTime (ns since the epoch) and its Instant elapsed (ns).
struct Probe {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Probe {
    fn start(clock: &ClockControl) -> Probe {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "clock_probe_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("LOCKCHECK_CLOCK_PROBE", "1")
            .envs(clock.env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Probe {
            child,
            stdin,
            stdout,
        }
    }

    /// (wall clock ns since the epoch, Instant elapsed ns) as the child sees them.
    fn ask(&mut self) -> (i64, i64) {
        writeln!(self.stdin).unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "probe child ended"
            );
            // libtest may print "test clock_probe_child ... " on the same line first.
            if let Some((_, rest)) = line.split_once("probe ") {
                let mut it = rest.split_whitespace().map(|x| x.parse::<i64>().unwrap());
                return (it.next().unwrap(), it.next().unwrap());
            }
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let (wall0, mono0) = probe.ask();
    assert!(
        (wall0 - wall_ns()).abs() < SEC,
        "unskewed, the child's wall clock is ours"
    );

    clock.set_offset(3600 * SEC);
    let (wall1, mono1) = probe.ask();
    assert!(
        (wall1 - wall_ns() - 3600 * SEC).abs() < SEC,
        "SystemTime jumped an hour"
    );
    assert!(
        (mono1 - mono0 - 3600 * SEC).abs() < SEC,
        "Instant jumped an hour"
    );

    // Twice as fast, continuously: no jump when the rate is set, then 2 s per real second.
    clock.set_rate(2.0).unwrap();
    let (_, mono2) = probe.ask();
    let real = Instant::now();
    std::thread::sleep(Duration::from_millis(400));
    let (_, mono3) = probe.ask();
    let real = real.elapsed().as_nanos() as i64;
    assert!(
        (0..SEC).contains(&(mono2 - mono1)),
        "no jump at set_rate: {} ns",
        mono2 - mono1
    );
    let ratio = (mono3 - mono2) as f64 / real as f64;
    assert!(
        (1.7..2.3).contains(&ratio),
        "the child's Instant ran {ratio:.2}x real time"
    );

    clock.reset();
    let (wall4, _) = probe.ask();
    assert!(
        (wall4 - wall_ns()).abs() < SEC,
        "reset brings the child back to real time"
    );
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
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        let skew = probe.ask().0 - wall_ns();
        if skew.abs() < SEC / 2 {
            near += 1;
        } else if (skew - 10 * SEC).abs() < SEC / 2 {
            far += 1;
        } else {
            panic!("a strobed clock is at one of its two offsets, not {skew} ns off");
        }
        std::thread::sleep(Duration::from_millis(7));
    }
    assert!(
        near > 0 && far > 0,
        "both offsets seen: {near} near, {far} far"
    );
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
