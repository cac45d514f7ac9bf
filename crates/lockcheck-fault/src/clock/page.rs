//! The clock page: one small shared file per skewed process (or group), which
//! the controller writes and the interposer (native/clockshim.c) reads on every
//! clock call. A seqlock keeps a reader from seeing half a skew: the writer makes
//! `seq` odd, writes the fields, makes it even again.
//!
//! A writer killed between its two `seq` stores leaves the sequence odd for good.
//! Nobody waits on it for that: the interposer gives up after a bound and keeps
//! the last skew it read whole; a reader here reports the page torn; and the
//! reset (`lockcheck recover`'s, or the controller's own) never reads first: it
//! owns the page once its writer is gone, and closes the torn write with a whole
//! skew and a new even `seq`.

use super::shim::{child_env, install_shim, SHIM_NAME};
use super::skew::{ClockChange, SkewClock, SkewUpdate};
use anyhow::{bail, Context, Result};
use lockcheck_journal::Effect;
use std::ffi::OsString;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// "LCCLOCK1": marks a page the interposer may trust.
const MAGIC: u64 = u64::from_le_bytes(*b"LCCLOCK1");
/// The file is one page; the interposer maps only `struct lc_page`.
const FILE_LEN: u64 = 4096;

/// How long a reader waits for an odd `seq` to turn even before it calls the
/// page torn. A live writer holds it odd for six stores, unless it is preempted
/// right there; only a dead writer holds it this long (the interposer's
/// LC_TORN_NS is the same bound).
pub const TORN_AFTER: Duration = Duration::from_millis(100);

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

    /// Sets the fields `update` gives, keeps the others.
    pub(super) fn apply(&mut self, update: SkewUpdate) {
        let SkewUpdate {
            offset_ns,
            offset2_ns,
            strobe_period_ns,
            rate,
        } = update;
        self.offset_ns = offset_ns.unwrap_or(self.offset_ns);
        self.offset2_ns = offset2_ns.unwrap_or(self.offset2_ns);
        self.strobe_period_ns = strobe_period_ns.unwrap_or(self.strobe_period_ns);
        self.rate = rate.unwrap_or(self.rate);
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

/// This machine's clocks, read together.
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

    /// Writes a whole skew under the seqlock (single writer). A `seq` found odd
    /// is a write whose writer died midway: this write takes it over (keeps it
    /// odd while it writes) and ends it with the next even value, which no reader
    /// has seen before, so none mistakes the torn fields for a whole skew.
    fn publish(&self, s: &Skew) {
        let seq = self.seq();
        let writing = seq.load(Ordering::Relaxed) | 1;
        seq.store(writing, Ordering::Relaxed);
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
        seq.store(writing.wrapping_add(1), Ordering::Release);
    }

    /// One seqlock read: the skew, or None if a write is in progress (or was
    /// left in progress) or one went by meanwhile.
    fn read_once(&self) -> Option<Skew> {
        let p = self.page.as_ptr();
        let a = self.seq().load(Ordering::Acquire);
        if a & 1 == 1 {
            return None;
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
        (self.seq().load(Ordering::Relaxed) == a).then_some(s)
    }

    /// The skew, read whole; an error naming the file if no whole read comes
    /// within [`TORN_AFTER`] (a writer died mid-write).
    fn read(&self, path: &Path) -> Result<Skew> {
        let deadline = Instant::now() + TORN_AFTER;
        loop {
            if let Some(s) = self.read_once() {
                return Ok(s);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} is torn: its writer died in the middle of a change (odd sequence {}); \
                     `lockcheck recover RUN_DIR` resets it",
                    path.display(),
                    self.seq().load(Ordering::Relaxed)
                );
            }
            std::thread::yield_now();
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
        let map = create_file(&path)?;
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
        let skew = map.read(path)?;
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

    /// Applies `change` to the skew in effect, rebased to now first; nothing is
    /// published if the change is refused.
    fn update(&self, change: ClockChange) -> Result<()> {
        let update = change.update()?;
        let mut skew = self.skew.lock().unwrap_or_else(|e| e.into_inner());
        skew.rebase(now());
        skew.apply(update);
        self.map.publish(&skew);
        Ok(())
    }

    /// Jumps the clock to `offset_ns` away from real time (plus the drift a rate
    /// has built up), and stops any strobe.
    pub fn set_offset(&self, offset_ns: i64) {
        // A jump is never refused.
        let _ = self.update(ClockChange::Jump { offset_ns });
    }

    /// Makes the clock run `rate` times as fast as real time from now on,
    /// continuously (no jump).
    pub fn set_rate(&self, rate: f64) -> Result<()> {
        self.update(ClockChange::Rate { rate })
    }

    /// Flips the clock between `offset_ns` and `offset2_ns` every `period`.
    pub fn strobe(&self, offset_ns: i64, offset2_ns: i64, period: Duration) -> Result<()> {
        self.update(ClockChange::Strobe {
            offset_ns,
            offset2_ns,
            period,
        })
    }

    /// Back to real time, at real speed.
    pub fn reset(&self) {
        let mut skew = self.skew.lock().unwrap_or_else(|e| e.into_inner());
        *skew = Skew::NONE;
        self.map.publish(&skew);
    }
}

impl SkewClock for ClockControl {
    fn change(&self, change: ClockChange) -> Result<()> {
        self.update(change)
    }

    fn reset(&self) -> Result<()> {
        ClockControl::reset(self);
        Ok(())
    }

    fn effect(&self, target: &str) -> Effect {
        Effect::ClockSkew {
            target: target.to_string(),
            file: self.path.clone(),
        }
    }
}

impl Drop for ClockControl {
    fn drop(&mut self) {
        self.reset();
    }
}

/// Where the clock of process `name` of a run lives.
pub fn clock_file(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join("clocks").join(format!("{name}.clock"))
}

/// Creates (or clears) the clock file at `path`, unskewed.
fn create_file(path: &Path) -> Result<Mapping> {
    let clocks = path.parent().expect("a clock file is in clocks/");
    std::fs::create_dir_all(clocks).with_context(|| format!("creating {}", clocks.display()))?;
    Mapping::open(path, true)
}

/// Creates the clock file at `path`, unskewed, unless it is there already (a
/// restarted node keeps the skew in effect).
pub(super) fn ensure_file(path: &Path) -> Result<()> {
    if !path.exists() {
        create_file(path)?;
    }
    Ok(())
}

/// Resets a clock file left behind (by `lockcheck recover`). Returns whether it
/// was skewed; a page torn by a writer that died mid-write counts as skewed
/// (it was being changed). Never waits: the writer is gone, the page is ours.
pub fn reset_file(path: &Path) -> Result<bool> {
    let map = Mapping::open(path, false)?;
    let was = map.read_once().is_none_or(|s| !s.is_none());
    map.publish(&Skew::NONE);
    Ok(was)
}

/// The skew a clock file holds now; an error if the page is torn.
pub fn read_file(path: &Path) -> Result<Skew> {
    Mapping::open(path, false)?.read(path)
}
