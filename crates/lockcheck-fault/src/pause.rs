//! The pause: SIGSTOP a client process, SIGCONT it later. The process, its lock
//! client and its keep-alive all stop at once, like a long GC pause or a VM stall;
//! when it wakes it still believes it holds the lock and carries on with its
//! critical section. Recorded as nemesis `pause` / `resume`.
//!
//! The signal goes to the worker's process group (every worker leads its own): a
//! client that is an adapter program, the worker's child, stops with it, with every
//! thread of its lock library (keep-alives, session heartbeats). A worker on a
//! host of the ssh runtime (`clients_on = "hosts"`) is stopped there, over the
//! run's connection, and only once the host's kernel shows it stopped does the
//! fault count as started.

use super::spec::{Entry, Kind, Refusal, Requirement, Setting, Spec};
use super::{ClientProc, Fault, Place, Scene, Target};
use anyhow::{Context, Result};
use async_trait::async_trait;
use lockcheck_history::fault_ops;
use nix::sys::signal::{killpg, Signal};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const KIND: Kind = Kind {
    name: "pause",
    keys: &["target"],
    instead: &[(
        "nodes",
        "a client pause hits a client: use `target`, or kind = \"pause-node\"",
    )],
    ops: &fault_ops::PAUSE,
    read: PauseSpec::read,
    undo: None,
    undo_journaled: None,
    requires: Some(requires),
};

/// A pause signals the run's own children: it needs nothing but Linux.
fn requires() -> Vec<Requirement> {
    vec![Requirement {
        name: KIND.name.into(),
        ok: true,
        detail: "SIGSTOP / SIGCONT of client processes".into(),
        install: None,
    }]
}

/// `kind = "pause"`: the client it stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseSpec {
    pub target: Target,
}

impl PauseSpec {
    fn read(entry: &mut Entry<'_>, setting: &Setting) -> Result<Arc<dyn Spec>> {
        let Some(target) = entry.target(setting)? else {
            return Err(entry.bad(
                "target",
                "expected \"holder\", \"random\" or a client name like \"client-0\"",
            ));
        };
        Ok(Arc::new(PauseSpec { target }))
    }
}

impl Spec for PauseSpec {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    /// It stops a client, not a server.
    fn refused_unmanaged(&self) -> Option<Refusal> {
        None
    }

    fn fault(&self, duration: Duration) -> Box<dyn Fault> {
        Box::new(Pause::new(self.target.clone(), duration))
    }
}

pub struct Pause {
    target: Target,
    duration: Duration,
    /// The processes this fault stopped and has not resumed yet.
    paused: Vec<ClientProc>,
    /// Their slots, for `stopped_clients`.
    slots: Vec<usize>,
}

impl Pause {
    pub fn new(target: Target, duration: Duration) -> Pause {
        Pause {
            target,
            duration,
            paused: Vec::new(),
            slots: Vec::new(),
        }
    }

    fn names(&self) -> Vec<&str> {
        self.paused.iter().map(|p| p.name.as_str()).collect()
    }
}

#[async_trait]
impl Fault for Pause {
    fn target(&self) -> &Target {
        &self.target
    }

    async fn start(&mut self, scene: &mut Scene<'_>) -> Result<Option<Value>> {
        let Some(slot) = self.target.pick_client(scene) else {
            return Ok(None);
        };
        let proc = scene.clients[slot].clone();
        // A worker that has exited is nothing to pause.
        if !stop(&proc).await? {
            return Ok(None);
        }
        self.paused.push(proc);
        self.slots.push(slot);
        Ok(Some(json!({
            "targets": self.names(),
            "duration_ms": self.duration.as_millis() as u64,
        })))
    }

    fn stopped_clients(&self) -> Vec<usize> {
        self.slots.clone()
    }

    async fn stop(&mut self, _scene: &mut Scene<'_>) -> Result<Value> {
        let value = json!({ "targets": self.names() });
        // Off the runtime, whose clock times the clients' ops: a host is a round trip away.
        let mut paused = std::mem::take(&mut self.paused);
        self.slots.clear();
        tokio::task::spawn_blocking(move || resume_all(&mut paused)).await??;
        Ok(value)
    }
}

/// Stops the client's process (its group here; that process on its host); false
/// if it was gone.
async fn stop(p: &ClientProc) -> Result<bool> {
    match &p.place {
        Place::Here(pid) => match killpg(*pid, Signal::SIGSTOP) {
            Ok(()) => stopped_here(*pid, &p.name).await,
            Err(nix::errno::Errno::ESRCH) => Ok(false),
            Err(e) => Err(e).with_context(|| format!("pausing {} (pid {pid})", p.name)),
        },
        Place::Host { host, proc } => {
            let (host, proc) = (host.clone(), proc.clone());
            let name = p.name.clone();
            tokio::task::spawn_blocking(move || {
                host.sigstop(&proc).with_context(|| {
                    format!("pausing {name} (pid {}) on host {}", proc.pid, host.name())
                })
            })
            .await?
        }
    }
}

/// How long a signalled worker may take to show stopped: SIGSTOP is acted on
/// when the kernel next schedules it, milliseconds even on a loaded machine.
const STOP_SEEN_WITHIN: Duration = Duration::from_secs(2);

/// Waits until the kernel shows the worker stopped (state `T`): only then has
/// the pause taken effect, and only then is it written into the history (a
/// delivered signal is not a stopped holder). False if it exited meanwhile.
async fn stopped_here(pid: nix::unistd::Pid, name: &str) -> Result<bool> {
    let deadline = tokio::time::Instant::now() + STOP_SEEN_WITHIN;
    loop {
        match proc_state(pid) {
            None | Some('Z') | Some('X') => return Ok(false),
            Some('T') | Some('t') => return Ok(true),
            Some(other) if tokio::time::Instant::now() >= deadline => {
                return Err(anyhow::anyhow!(
                    "pausing {name} (pid {pid}): still in state {other} {} s after SIGSTOP",
                    STOP_SEEN_WITHIN.as_secs()
                ))
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// A process's state letter from /proc (`R`, `S`, `T`, `Z`...); None once gone.
fn proc_state(pid: nix::unistd::Pid) -> Option<char> {
    lockcheck_journal::stat_fields(pid.as_raw())?.chars().next()
}

/// Resumes every process in `paused`, emptying it; the first error is returned
/// after all were tried. Blocking: a drop resumes too.
fn resume_all(paused: &mut Vec<ClientProc>) -> Result<()> {
    let mut first_error = None;
    for p in paused.drain(..) {
        let resumed = match &p.place {
            Place::Here(pid) => killpg(*pid, Signal::SIGCONT)
                .map_err(|e| anyhow::anyhow!("resuming {} (pid {pid}): {e}", p.name)),
            Place::Host { host, proc } => {
                host.signal(proc, "CONT").map(|_| ()).with_context(|| {
                    format!(
                        "resuming {} (pid {}) on host {}",
                        p.name,
                        proc.pid,
                        host.name()
                    )
                })
            }
        };
        if let Err(e) = resumed {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl Drop for Pause {
    /// A panic or an early return must not leave a client stopped.
    fn drop(&mut self) {
        let _ = resume_all(&mut self.paused);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::os::unix::process::CommandExt;

    fn state(pid: u32) -> char {
        proc_state(nix::unistd::Pid::from_raw(pid as i32)).unwrap()
    }

    /// The process's state once it is `want`, or whatever it is after 2 s (a loaded
    /// machine may take a while to deliver the signal).
    fn settled(pid: u32, want: char) -> char {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            let s = state(pid);
            if s == want || std::time::Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[tokio::test]
    async fn pauses_the_holder_and_resumes_it_on_stop_or_drop() {
        // A worker leads its own process group, as the controller starts it.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let clients = vec![ClientProc {
            name: "client-0".into(),
            place: Place::Here(nix::unistd::Pid::from_raw(child.id() as i32)),
        }];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut pause = Pause::new(Target::Holder, Duration::from_secs(1));
        let mut scene = Scene {
            clients: &clients,
            holder: None,
            stopped: &[],
            rng: &mut rng,
            cluster: None,
        };
        assert!(
            pause.start(&mut scene).await.unwrap().is_none(),
            "no holder, nothing to pause"
        );
        scene.holder = Some(0);
        let v = pause.start(&mut scene).await.unwrap().unwrap();
        assert_eq!(v["targets"], json!(["client-0"]));
        assert_eq!(settled(child.id(), 'T'), 'T');
        assert_eq!(
            pause.stop(&mut scene).await.unwrap()["targets"],
            json!(["client-0"])
        );
        assert_eq!(settled(child.id(), 'S'), 'S');
        // Dropped while active: the process is resumed all the same.
        let mut scene = Scene {
            clients: &clients,
            holder: Some(0),
            stopped: &[],
            rng: &mut rng,
            cluster: None,
        };
        pause.start(&mut scene).await.unwrap().unwrap();
        drop(pause);
        assert_eq!(settled(child.id(), 'S'), 'S');
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
