//! Clock faults, per process and live, without touching the machine's clock.
//!
//! A process started with [`ClockControl::env`] loads lockcheck's own clock
//! interposer (native/clockshim.c, embedded in this binary) through
//! LD_PRELOAD. The interposer reads its skew from a small shared page, a file
//! in the run directory that the controller writes through a [`ClockControl`]:
//! jump forward or back (`set_offset`), run fast or slow (`set_rate`), or
//! flip between two offsets (`strobe`). This reaches Redis (whose key expiry
//! follows the wall clock), JVMs (ZooKeeper) and the workers themselves (their
//! own view of a lease).
//!
//! It cannot reach Go programs (etcd, nats-server): Go reads the vDSO directly
//! and never calls libc's clock functions. For those, [`time_namespace`] shifts
//! the monotonic clock once, at start (the workload's `backend.monotonic_offset`,
//! through [`monotonic_hook`]), and [`reach`] says plainly that a live skew does
//! not reach them, so that a verdict never claims a fault that did not happen.
//!
//! What a time namespace can and cannot do: it shifts CLOCK_MONOTONIC and
//! CLOCK_BOOTTIME of every process in it by a constant fixed before the first
//! process enters, never CLOCK_REALTIME, and never a rate. A constant offset on
//! the whole of one process changes no duration that process measures; it
//! matters only where a monotonic reading leaves the process (written to disk
//! and read back after a restart under another offset, or compared with another
//! node's). etcd does neither with its leases: measured on etcd 3.4 (3 members
//! at 0, +600 s and -300 s; leadership moved mid-lease; a leader killed and
//! restarted at another offset; one member restarted from +3000 s to -400 s), a
//! 5-6 s lease expired within the same half second as without offsets, because
//! a new leader (or a restarted one) renews every lease to its full TTL.

use super::node::{self, NodeTarget};
use super::{Fault, Scene, Target};
use crate::cluster::{NodeSpec, Prepare};
use crate::history::f;
use crate::journal::{Effect, Journal};
use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The environment variable naming the shared page (read by the interposer).
pub const CLOCK_FILE_ENV: &str = "LOCKCHECK_CLOCK_FILE";

/// The interposer, built by build.rs from native/clockshim.c.
static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libclockshim.so"));
const SHIM_NAME: &str = "libclockshim.so";

/// "LCCLOCK1": marks a page the interposer may trust.
const MAGIC: u64 = u64::from_le_bytes(*b"LCCLOCK1");
/// The file is one page; the interposer maps only `struct lc_page`.
const FILE_LEN: u64 = 4096;

/// The shared page; the same layout as `struct lc_page` in native/clockshim.c.
#[repr(C)]
struct Page {
    magic: u64,
    /// Seqlock: odd while the controller writes, so a reader never sees half a skew.
    seq: u64,
    offset_ns: i64,
    offset2_ns: i64,
    strobe_period_ns: i64,
    rate_bits: u64,
    base_realtime_ns: i64,
    base_monotonic_ns: i64,
}

/// How one process's clocks are skewed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Skew {
    pub offset_ns: i64,
    /// Strobe's second offset and period (0 = no strobe).
    pub offset2_ns: i64,
    pub strobe_period_ns: i64,
    /// 1.0 = real speed; 2.0 = twice as fast.
    pub rate: f64,
    base_realtime_ns: i64,
    base_monotonic_ns: i64,
}

impl Skew {
    pub const NONE: Skew = Skew {
        offset_ns: 0,
        offset2_ns: 0,
        strobe_period_ns: 0,
        rate: 1.0,
        base_realtime_ns: 0,
        base_monotonic_ns: 0,
    };

    pub fn is_none(&self) -> bool {
        self.offset_ns == 0 && self.strobe_period_ns == 0 && self.rate == 1.0
    }

    /// Moves the base to now, folding the drift the rate has built up so far into
    /// the offset: the skewed clock stays continuous when the rate changes.
    fn rebase(&mut self, now: Now) {
        let drift = ((now.monotonic - self.base_monotonic_ns) as f64 * (self.rate - 1.0)) as i64;
        self.offset_ns += drift;
        self.base_realtime_ns = now.realtime;
        self.base_monotonic_ns = now.monotonic;
    }
}

#[derive(Clone, Copy)]
struct Now {
    realtime: i64,
    monotonic: i64,
}

fn now() -> Now {
    use nix::time::{clock_gettime, ClockId};
    let ns = |id| {
        let t = clock_gettime(id).expect("realtime and monotonic clocks always exist");
        t.tv_sec() * 1_000_000_000 + t.tv_nsec()
    };
    Now {
        realtime: ns(ClockId::CLOCK_REALTIME),
        monotonic: ns(ClockId::CLOCK_MONOTONIC),
    }
}

/// A mapped clock file.
struct Mapping {
    page: NonNull<Page>,
}

// The page is only written under ClockControl's mutex; readers are other processes.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    fn open(path: &Path, create: bool) -> Result<Mapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening clock file {}", path.display()))?;
        if create {
            file.set_len(FILE_LEN)?;
        } else if file.metadata()?.len() < std::mem::size_of::<Page>() as u64 {
            bail!(
                "{} is too short to be a lockcheck clock file",
                path.display()
            );
        }
        // SAFETY: a fresh shared mapping of a file at least one Page long.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<Page>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mapping clock file {}", path.display()));
        }
        let page = NonNull::new(page.cast::<Page>()).context("mmap returned null")?;
        let map = Mapping { page };
        if create {
            map.publish(&Skew::NONE);
            unsafe { std::ptr::write_volatile(&raw mut (*map.page.as_ptr()).magic, MAGIC) };
        } else if map.magic() != MAGIC {
            bail!("{} is not a lockcheck clock file", path.display());
        }
        Ok(map)
    }

    fn magic(&self) -> u64 {
        unsafe { std::ptr::read_volatile(&raw const (*self.page.as_ptr()).magic) }
    }

    fn seq(&self) -> &AtomicU64 {
        unsafe { AtomicU64::from_ptr(&raw mut (*self.page.as_ptr()).seq) }
    }

    /// Writes a whole skew under the seqlock (single writer).
    fn publish(&self, s: &Skew) {
        let seq = self.seq();
        let start = seq.load(Ordering::Relaxed);
        seq.store(start.wrapping_add(1) | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let p = self.page.as_ptr();
        unsafe {
            std::ptr::write_volatile(&raw mut (*p).offset_ns, s.offset_ns);
            std::ptr::write_volatile(&raw mut (*p).offset2_ns, s.offset2_ns);
            std::ptr::write_volatile(&raw mut (*p).strobe_period_ns, s.strobe_period_ns);
            std::ptr::write_volatile(&raw mut (*p).rate_bits, s.rate.to_bits());
            std::ptr::write_volatile(&raw mut (*p).base_realtime_ns, s.base_realtime_ns);
            std::ptr::write_volatile(&raw mut (*p).base_monotonic_ns, s.base_monotonic_ns);
        }
        seq.store((start | 1).wrapping_add(1), Ordering::Release);
    }

    fn read(&self) -> Skew {
        let p = self.page.as_ptr();
        loop {
            let a = self.seq().load(Ordering::Acquire);
            if a & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let s = unsafe {
                Skew {
                    offset_ns: std::ptr::read_volatile(&raw const (*p).offset_ns),
                    offset2_ns: std::ptr::read_volatile(&raw const (*p).offset2_ns),
                    strobe_period_ns: std::ptr::read_volatile(&raw const (*p).strobe_period_ns),
                    rate: f64::from_bits(std::ptr::read_volatile(&raw const (*p).rate_bits)),
                    base_realtime_ns: std::ptr::read_volatile(&raw const (*p).base_realtime_ns),
                    base_monotonic_ns: std::ptr::read_volatile(&raw const (*p).base_monotonic_ns),
                }
            };
            fence(Ordering::Acquire);
            if self.seq().load(Ordering::Relaxed) == a {
                return s;
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe {
            libc::munmap(self.page.as_ptr().cast(), std::mem::size_of::<Page>());
        }
    }
}

/// The controller's handle on one process's clock (or a group sharing a file).
/// Dropping it resets the clock: a run never leaves a clock skewed.
pub struct ClockControl {
    path: PathBuf,
    shim: PathBuf,
    map: Mapping,
    skew: Mutex<Skew>,
}

impl ClockControl {
    /// Creates `<dir>/clocks/<name>.clock` (unskewed) and installs the interposer
    /// in `<dir>`.
    pub fn create(dir: &Path, name: &str) -> Result<ClockControl> {
        let shim = install_shim(dir)?;
        let path = clock_file(dir, name);
        let clocks = path.parent().expect("a clock file is in clocks/");
        std::fs::create_dir_all(clocks)
            .with_context(|| format!("creating {}", clocks.display()))?;
        let map = Mapping::open(&path, true)?;
        Ok(ClockControl {
            path,
            shim,
            map,
            skew: Mutex::new(Skew::NONE),
        })
    }

    /// Takes control of an existing clock file (one a node was started with),
    /// keeping the skew it holds.
    pub fn attach(path: &Path) -> Result<ClockControl> {
        let map = Mapping::open(path, false)?;
        let skew = map.read();
        // <run_dir>/clocks/<name>.clock: the interposer sits in <run_dir>.
        let run_dir = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        Ok(ClockControl {
            path: path.to_path_buf(),
            shim: run_dir.join(SHIM_NAME),
            map,
            skew: Mutex::new(skew),
        })
    }

    /// The clock file (what the journal records, so `recover` can reset it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The environment a child needs for its clock to follow this control.
    /// LD_PRELOAD is replaced, not appended to: lockcheck starts its servers
    /// and workers with a clean preload.
    pub fn env(&self) -> [(OsString, OsString); 2] {
        child_env(&self.shim, &self.path)
    }

    /// The skew in effect now.
    pub fn skew(&self) -> Skew {
        *self.skew.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, change: impl FnOnce(&mut Skew)) {
        let mut skew = self.skew.lock().unwrap_or_else(|e| e.into_inner());
        skew.rebase(now());
        change(&mut skew);
        self.map.publish(&skew);
    }

    /// Jumps the clock to `offset_ns` away from real time (plus the drift a rate
    /// has built up), and stops any strobe.
    pub fn set_offset(&self, offset_ns: i64) {
        self.update(|s| {
            s.offset_ns = offset_ns;
            s.strobe_period_ns = 0;
        });
    }

    /// Makes the clock run `rate` times as fast as real time from now on,
    /// continuously (no jump).
    pub fn set_rate(&self, rate: f64) -> Result<()> {
        if !(rate.is_finite() && rate > 0.0) {
            bail!("a clock rate must be a positive number, not {rate}");
        }
        self.update(|s| s.rate = rate);
        Ok(())
    }

    /// Flips the clock between `offset_ns` and `offset2_ns` every `period`.
    pub fn strobe(&self, offset_ns: i64, offset2_ns: i64, period: Duration) -> Result<()> {
        let period_ns = i64::try_from(period.as_nanos()).unwrap_or(i64::MAX);
        if period_ns <= 0 {
            bail!("a strobe period must be positive");
        }
        self.update(|s| {
            s.offset_ns = offset_ns;
            s.offset2_ns = offset2_ns;
            s.strobe_period_ns = period_ns;
        });
        Ok(())
    }

    /// Back to real time, at real speed.
    pub fn reset(&self) {
        let mut skew = self.skew.lock().unwrap_or_else(|e| e.into_inner());
        *skew = Skew::NONE;
        self.map.publish(&skew);
    }
}

impl Drop for ClockControl {
    fn drop(&mut self) {
        self.reset();
    }
}

fn child_env(shim: &Path, file: &Path) -> [(OsString, OsString); 2] {
    [
        ("LD_PRELOAD".into(), shim.as_os_str().to_owned()),
        (CLOCK_FILE_ENV.into(), file.as_os_str().to_owned()),
    ]
}

/// Where the clock of process `name` of a run lives.
pub fn clock_file(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join("clocks").join(format!("{name}.clock"))
}

/// A cluster hook that starts every node the interposer can reach with its own
/// clock file (`<run_dir>/clocks/<node>.clock`, unskewed until a clock fault),
/// so that a clock fault can later skew it live. A restarted node maps its
/// existing file again, and keeps whatever skew is in effect. Nodes it cannot
/// reach (Go servers) start untouched; the clock fault says so when it hits them.
pub fn prepare_hook(run_dir: PathBuf) -> Prepare {
    Prepare(Arc::new(
        move |node: &NodeSpec, cmd: &mut std::process::Command| {
            let binary = which(cmd.get_program())?;
            if reach(&binary)? != Reach::Live {
                return Ok(());
            }
            cmd.envs(process_clock(&run_dir, &node.name)?);
            Ok(())
        },
    ))
}

/// The environment that starts process `name` of a run (a node, or a worker) under
/// the interposer with its own clock file, created unskewed if it is not there yet.
/// No ClockControl here, whose drop would reset a skew in effect when a node restarts.
pub fn process_clock(run_dir: &Path, name: &str) -> Result<[(OsString, OsString); 2]> {
    let shim = install_shim(run_dir)?;
    let path = clock_file(run_dir, name);
    if !path.exists() {
        let clocks = path.parent().expect("a clock file is in clocks/");
        std::fs::create_dir_all(clocks)
            .with_context(|| format!("creating {}", clocks.display()))?;
        Mapping::open(&path, true)?;
    }
    Ok(child_env(&shim, &path))
}

/// The file a command name runs (looked up on PATH unless it is a path).
fn which(program: &std::ffi::OsStr) -> Result<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return Ok(p.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(p))
        .find(|c| c.is_file())
        .with_context(|| format!("{} is not on PATH", p.display()))
}

/// Resets a clock file left behind (by `lockcheck recover`). Returns whether it
/// was skewed.
pub fn reset_file(path: &Path) -> Result<bool> {
    let map = Mapping::open(path, false)?;
    let was = !map.read().is_none();
    map.publish(&Skew::NONE);
    Ok(was)
}

/// The skew a clock file holds now.
pub fn read_file(path: &Path) -> Result<Skew> {
    Ok(Mapping::open(path, false)?.read())
}

/// Writes the interposer into `dir` (once) and returns its path.
pub fn install_shim(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(SHIM_NAME);
    let same = File::open(&path)
        .and_then(|mut f| {
            let mut v = Vec::with_capacity(SHIM.len());
            f.read_to_end(&mut v).map(|_| v == SHIM)
        })
        .unwrap_or(false);
    if !same {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Written aside and renamed: a process loading it never sees half a file.
        let tmp = dir.join(format!(".{SHIM_NAME}.{}", std::process::id()));
        std::fs::write(&tmp, SHIM).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("installing {}", path.display()))?;
    }
    Ok(path)
}

/// Whether a live clock fault can reach the processes of a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// It calls libc's clock functions: the interposer skews it live.
    Live,
    /// It does not; say so in the verdict instead of pretending.
    Unreachable(Unreachable),
}

/// A process a clock fault cannot reach, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreachable: {binary} is {why}")]
pub struct Unreachable {
    pub binary: String,
    pub why: String,
}

/// Tells whether the interposer can skew `binary`'s clock live: Go programs
/// (etcd, nats-server) read the vDSO directly, and statically linked programs
/// never load a preload library.
pub fn reach(binary: &Path) -> Result<Reach> {
    // Both marks sit in an ELF's first pages: the program interpreter
    // (/lib64/ld-linux-*.so) and the Go linker's build-id note (name "Go",
    // type 4), which every Go binary carries.
    let mut head = Vec::with_capacity(64 * 1024);
    File::open(binary)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut head))
        .with_context(|| format!("reading {}", binary.display()))?;
    let bytes = head;
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| binary.display().to_string());
    let why = if contains(&bytes, b"\x04\0\0\0Go\0\0") {
        Some("a Go binary reading the vDSO (it never calls libc's clock functions)")
    } else if !contains(&bytes, b"ld-linux") {
        Some("statically linked (LD_PRELOAD never loads)")
    } else {
        None
    };
    Ok(match why {
        Some(why) => Reach::Unreachable(Unreachable {
            binary: name,
            why: why.to_string(),
        }),
        None => Reach::Live,
    })
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Starts `cmd` in a new time namespace whose monotonic (and boot-time) clock
/// is `offset_ns` ahead (behind, if negative): the one clock change that reaches
/// a Go program. It is set once, before the program runs, and cannot change
/// afterwards; the program keeps its pid (the namespace is entered at exec, no
/// extra process). The realtime clock cannot be shifted this way (the kernel
/// offers no such namespace); the kernel refuses an offset that would take the
/// clock below zero, and `unshare` needs CAP_SYS_ADMIN.
pub fn time_namespace(
    cmd: &mut std::process::Command,
    offset_ns: i64,
) -> &mut std::process::Command {
    // The kernel takes seconds and a non-negative nanosecond part.
    let (secs, nanos) = (
        offset_ns.div_euclid(1_000_000_000),
        offset_ns.rem_euclid(1_000_000_000),
    );
    let offsets = format!("monotonic {secs} {nanos}\nboottime {secs} {nanos}\n");
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (unshare, open, write, close) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWTIME) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::open(
                c"/proc/self/timens_offsets".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let n = libc::write(fd, offsets.as_ptr().cast(), offsets.len());
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n != offsets.len() as isize {
                return Err(err);
            }
            Ok(())
        })
    }
}

/// A cluster hook that starts each node of `offsets` (node, offset in ns) in a
/// time namespace of its own with its monotonic clock shifted, at every start,
/// restarts included (so a restarted node keeps its offset).
pub fn monotonic_hook(offsets: Vec<(String, i64)>) -> Prepare {
    Prepare(Arc::new(
        move |node: &NodeSpec, cmd: &mut std::process::Command| {
            if let Some((_, ns)) = offsets.iter().find(|(n, _)| *n == node.name) {
                time_namespace(cmd, *ns);
            }
            Ok(())
        },
    ))
}

/// What a clock fault does to the clocks it hits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClockChange {
    /// Jump by `offset_ns` (forward if positive).
    Jump { offset_ns: i64 },
    /// Run `rate` times as fast as real time.
    Rate { rate: f64 },
    /// Flip between two offsets every `period`.
    Strobe {
        offset_ns: i64,
        offset2_ns: i64,
        period: Duration,
    },
}

impl ClockChange {
    fn apply(&self, clock: &ClockControl) -> Result<()> {
        match *self {
            ClockChange::Jump { offset_ns } => {
                clock.set_offset(offset_ns);
                Ok(())
            }
            ClockChange::Rate { rate } => clock.set_rate(rate),
            ClockChange::Strobe {
                offset_ns,
                offset2_ns,
                period,
            } => clock.strobe(offset_ns, offset2_ns, period),
        }
    }

    /// The parameters, as the history's nemesis value carries them.
    fn describe(&self, value: &mut serde_json::Value) {
        let ms = |ns: i64| ns / 1_000_000;
        match *self {
            ClockChange::Jump { offset_ns } => value["offset_ms"] = ms(offset_ns).into(),
            ClockChange::Rate { rate } => value["rate"] = rate.into(),
            ClockChange::Strobe {
                offset_ns,
                offset2_ns,
                period,
            } => {
                value["offset_ms"] = ms(offset_ns).into();
                value["offset2_ms"] = ms(offset2_ns).into();
                value["period_ms"] = (period.as_millis() as u64).into();
            }
        }
    }
}

/// Skews the clocks of server nodes, live, and resets them when it ends.
/// Recorded as nemesis `clock-skew` / `clock-reset`; a node the interposer
/// cannot reach is listed under `unreachable` with the reason, never skewed in
/// words only.
/// Whose clocks a clock fault skews.
#[derive(Debug, Clone)]
pub enum Clocks {
    Nodes(NodeTarget),
    /// A worker's own clock: its view of its lease (started under the interposer).
    Client(Target),
}

pub struct ClockFault {
    clocks: Clocks,
    change: ClockChange,
    /// (node, journal id, control) of each clock skewed now.
    active: Vec<(String, u64, ClockControl)>,
    journal: Option<Arc<Journal>>,
}

impl ClockFault {
    pub fn new(clocks: Clocks, change: ClockChange) -> ClockFault {
        ClockFault {
            clocks,
            change,
            active: Vec::new(),
            journal: None,
        }
    }

    fn names(&self) -> Vec<String> {
        self.active.iter().map(|(n, _, _)| n.clone()).collect()
    }
}

#[async_trait]
impl Fault for ClockFault {
    fn ops(&self) -> (&'static str, &'static str) {
        (f::CLOCK_SKEW, f::CLOCK_RESET)
    }

    fn target(&self) -> &Target {
        match &self.clocks {
            Clocks::Nodes(_) => &node::TIMED,
            Clocks::Client(t) => t,
        }
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<serde_json::Value>> {
        let (names, dir) = match &self.clocks {
            Clocks::Nodes(nodes) => match node::pick(nodes, scene).await? {
                Some(p) => p,
                None => return Ok(None),
            },
            Clocks::Client(t) => {
                let (Some(slot), Some(c)) = (t.pick_client(scene), scene.cluster) else {
                    return Ok(None);
                };
                let dir = c.lock().await.dir().to_path_buf();
                (vec![scene.clients[slot].name.clone()], dir)
            }
        };
        // Workers are this program: only a node may be a binary the interposer misses.
        let binary = match (scene.cluster, &self.clocks) {
            (_, Clocks::Client(_)) => std::env::current_exe()?,
            (Some(c), _) => c
                .lock()
                .await
                .program()
                .context("a clock fault needs a server program lockcheck runs")?
                .to_path_buf(),
            (None, _) => bail!("a clock fault needs the run's cluster"),
        };
        let journal = Journal::for_run(&dir)?;
        let mut unreachable = Vec::new();
        for n in names {
            let path = clock_file(&dir, &n);
            if !path.exists() {
                let why = match reach(&binary)? {
                    Reach::Unreachable(u) => u.to_string(),
                    Reach::Live => {
                        format!("unreachable: {n} was started without lockcheck's clock interposer")
                    }
                };
                unreachable.push(serde_json::json!({ "node": n, "why": why }));
                continue;
            }
            let clock = ClockControl::attach(&path)?;
            let id = journal.record(Effect::ClockSkew {
                target: n.clone(),
                file: path,
            })?;
            self.change.apply(&clock)?;
            self.active.push((n, id, clock));
        }
        self.journal = Some(journal);
        let mut value = serde_json::json!({ "targets": self.names() });
        self.change.describe(&mut value);
        if !unreachable.is_empty() {
            value["unreachable"] = unreachable.into();
        }
        Ok(Some(value))
    }

    async fn stop(&mut self, _scene: &mut Scene<'_>) -> Result<serde_json::Value> {
        let value = serde_json::json!({ "targets": self.names() });
        for (_, id, clock) in self.active.drain(..) {
            clock.reset();
            if let Some(j) = &self.journal {
                j.undone(id)?;
            }
        }
        Ok(value)
    }
}
