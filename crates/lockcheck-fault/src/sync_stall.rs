//! `pause-node` with `method = "fsync"`: a node whose disk syncs stall while the
//! rest of it runs on, as a slow or stuck disk stalls a server: strace attached to
//! its process (every thread) delays each `fsync` and `fdatasync` it enters until
//! the fault ends. Its raft loop waits on the sync; its timers, lessor and network
//! go on (etcd issue 15247 is a leader stuck so).
//!
//! strace is a process of the run's, journaled before it attaches: ending it
//! (SIGTERM at the fault's end, SIGKILL by `lockcheck recover`) detaches it and
//! lets the delayed syscalls proceed; no process is left traced or stopped.

use anyhow::{bail, Context, Result};
use lockcheck_journal::{Effect, Journal, Proc};
use nix::sys::signal::Signal;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The syscalls stalled.
const SYNCS: &str = "fdatasync,fsync";

/// Why a sync stall cannot be made on this machine, if it cannot: strace is
/// missing. Asked when a workload loads, so that a run never starts a fault it
/// cannot apply.
pub fn unavailable() -> Option<String> {
    super::which("strace".as_ref())
        .err()
        .map(|_| "strace is not installed (apt-get install strace, or scripts/setup)".into())
}

/// strace attached to one node's process, delaying its syncs; detached by
/// [`SyncStall::end`] or on drop, whatever happens.
pub struct SyncStall {
    node: String,
    journal: Arc<Journal>,
    /// Until detached.
    strace: Option<Child>,
    id: u64,
}

impl SyncStall {
    /// Attaches to `pid` (node `node`), each sync delayed `delay` (the fault's
    /// duration: the fault ends it sooner). Returns once strace traces the process.
    pub fn begin(
        journal: Arc<Journal>,
        node: &str,
        pid: i32,
        delay: Duration,
    ) -> Result<SyncStall> {
        let strace = Command::new("strace")
            .args(["-f", "-qq", "-o", "/dev/null", "-e"])
            .arg(format!("trace={SYNCS}"))
            .arg("-e")
            .arg(format!(
                "inject={SYNCS}:delay_enter={}",
                delay.as_micros().max(1)
            ))
            .arg("-p")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting strace to stall a node's syncs (Debian's strace: scripts/setup)")?;
        let tracer = strace.id() as i32;
        let proc = Proc::of(format!("strace-{node}"), tracer);
        let id = match proc.and_then(|p| journal.record(Effect::Process(p))) {
            Ok(id) => id,
            Err(e) => {
                let mut strace = strace;
                let _ = strace.kill();
                let _ = strace.wait();
                return Err(e.context(format!("journaling strace of {node}")));
            }
        };
        let mut stall = SyncStall {
            node: node.to_string(),
            journal,
            strace: Some(strace),
            id,
        };
        // Attached once the kernel names strace as the process's tracer.
        let deadline = Instant::now() + Duration::from_secs(2);
        while tracer_of(pid) != Some(tracer) {
            if let Some(status) = stall
                .strace
                .as_mut()
                .and_then(|s| s.try_wait().transpose())
                .transpose()?
            {
                bail!("strace could not attach to {node} (pid {pid}): it exited, {status}");
            }
            if Instant::now() > deadline {
                bail!("strace did not attach to {node} (pid {pid}) within 2 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(stall)
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Detaches strace: the stalled syscalls go on.
    pub fn end(mut self) -> Result<()> {
        self.detach()
    }

    fn detach(&mut self) -> Result<()> {
        let Some(mut strace) = self.strace.take() else {
            return Ok(());
        };
        if strace.try_wait()?.is_none() {
            // SIGTERM: strace detaches from every thread before it exits.
            let pid = nix::unistd::Pid::from_raw(strace.id() as i32);
            let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(2);
            while strace.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    // The kernel detaches the tracees of a tracer that dies.
                    let _ = strace.kill();
                    strace.wait()?;
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.journal.undone(self.id)
    }
}

impl Drop for SyncStall {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

/// The pid tracing `pid`, if one is (`TracerPid` in /proc/<pid>/status).
fn tracer_of(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&t| t != 0)
}
