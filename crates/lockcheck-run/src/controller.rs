//! The controller's side of the clients: one worker process per client slot, and the
//! generator loop that hands it ops one at a time (acquire → read → writes →
//! release → think), stamping every invoke and completion on the controller's own clock.
//!
//! A reply that does not come in time is `info`, and the slot's process id is retired
//! (as in Jepsen): the same worker goes on under a fresh id, and any late reply to
//! the old op is recognised by its request id and dropped.

use super::live::{stopped, Live, LOCK_NAME};
use super::worker::{self, Command, Reply};
use super::workload::{ClientMode, CriticalSection, Election, End, OnLeaseLoss, Renew, Workload};
use anyhow::{anyhow, Context, Result};
use lockcheck_exit::Exit;
use lockcheck_fault::{client_name, ClientProc, Place};
use lockcheck_history::error::withheld;
use lockcheck_history::{HistoryWriter, Op, OpType, Process};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{mpsc, oneshot, watch};

/// Appends ops to the history, stamped on the controller's monotonic clock. The
/// stamp is taken under the same lock as the append, so file order is time order.
pub struct Recorder {
    start: Instant,
    writer: Mutex<HistoryWriter>,
}

impl Recorder {
    pub fn new(writer: HistoryWriter) -> Recorder {
        Recorder {
            start: Instant::now(),
            writer: Mutex::new(writer),
        }
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn started(&self) -> Instant {
        self.start
    }

    /// Forces the history to disk (every line already reached the OS when written).
    pub fn sync(&self) -> Result<()> {
        Ok(self
            .writer
            .lock()
            .map_err(|_| anyhow!("the history writer was poisoned by a panic"))?
            .sync()?)
    }

    pub fn record(
        &self,
        process: Process,
        kind: OpType,
        f: &str,
        value: Value,
        node: Option<String>,
        error: Option<String>,
    ) -> Result<()> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| anyhow!("the history writer was poisoned by a panic"))?;
        w.append(Op {
            index: 0,
            time: self.now(),
            process,
            kind,
            f: f.to_string(),
            value,
            node,
            error,
        })?;
        Ok(())
    }
}

/// The worker processes of a run. Dropping this resumes and kills any still there,
/// so an error or a panic anywhere in the run leaves no client running or stopped.
pub struct Workers {
    /// The workers here, or the ssh processes carrying their channels to the
    /// workers on the hosts.
    children: Vec<Child>,
    procs: Vec<ClientProc>,
    /// The hosts the workers run on (`clients_on = "hosts"`), which end them.
    on_hosts: Option<super::on_hosts::OnHosts>,
    /// Each worker's first reply: what its adapter said about itself (null for a
    /// built-in client).
    hellos: Vec<Value>,
}

/// One started worker: its pipes, handed to the slot that drives it.
pub struct Pipes {
    stdin: ChildStdin,
    replies: mpsc::UnboundedReceiver<Reply>,
}

impl Workers {
    /// Starts one worker per config (`exe worker --config ...`; they differ where
    /// each client reaches the nodes through links of its own), each in its own process
    /// group (a Ctrl-C at the terminal reaches the controller, which stops them in
    /// order), killed by the kernel if the controller dies, logging to
    /// `clients/client-N.log` (with the log of its adapter, if any: the adapter is its
    /// child, in its process group, so a pause or a kill of the worker's group takes
    /// the adapter and its library's threads too), with the environment each of `env`
    /// gives it (a fault's: the clock interposer and a page of its own). With `on_hosts`, each runs on
    /// a host instead, through an ssh process here. Waits until each has connected.
    pub async fn start(
        exe: &Path,
        configs: &[worker::Config],
        env: &[lockcheck_fault::spec::WorkerEnv],
        on_hosts: Option<super::on_hosts::OnHosts>,
        dir: &Path,
        ready_timeout: Duration,
    ) -> Result<(Workers, Vec<Pipes>)> {
        let logs = dir.join("clients");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let mut workers = Workers {
            children: Vec::new(),
            procs: Vec::new(),
            on_hosts,
            hellos: Vec::new(),
        };
        let mut pipes = Vec::new();
        for (i, config) in configs.iter().enumerate() {
            let name = client_name(i);
            let log = std::fs::File::create(logs.join(format!("{name}.log")))?;
            let mut cmd = match &workers.on_hosts {
                Some(hosts) => tokio::process::Command::from(hosts.command(i, config)?),
                None => {
                    let mut cmd = tokio::process::Command::new(exe);
                    cmd.arg("worker")
                        .arg("--config")
                        .arg(serde_json::to_string(config)?);
                    cmd
                }
            };
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .process_group(0)
                .kill_on_drop(true);
            for env in env {
                cmd.envs(env(&name)?);
            }
            lockcheck_servers::backend::adapter::die_with_parent(&mut cmd);
            let mut child = cmd
                .spawn()
                .with_context(|| format!("starting worker {name} ({})", exe.display()))?;
            let pid = Pid::from_raw(child.id().context("the worker exited at once")? as i32);
            let stdin = child.stdin.take().context("worker stdin")?;
            let stdout = child.stdout.take().context("worker stdout")?;
            workers.children.push(child);
            let mut lines = BufReader::new(stdout).lines();
            let place = match &mut workers.on_hosts {
                None => Place::Here(pid),
                // The worker on its host says which process it is, first,
                // after whatever the account's shell start-up files print.
                Some(hosts) => {
                    let started = async {
                        while let Ok(Some(line)) = lines.next_line().await {
                            match hosts.started(i, &name, &line) {
                                Some(place) => return Some(place),
                                None => tracing::warn!("{name}'s host said: {line}"),
                            }
                        }
                        None
                    };
                    tokio::time::timeout(ready_timeout, started)
                        .await
                        .ok()
                        .flatten()
                        .with_context(|| {
                            format!(
                                "worker {name} did not start on its host (see {})",
                                logs.join(format!("{name}.log")).display()
                            )
                        })??
                }
            };
            workers.procs.push(ClientProc { name, place });
            let (tx, replies) = mpsc::unbounded_channel();
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    match serde_json::from_str::<Reply>(&line) {
                        Ok(r) => {
                            if tx.send(r).is_err() {
                                break;
                            }
                        }
                        Err(e) => tracing::warn!("worker said something odd ({e}): {line}"),
                    }
                }
            });
            pipes.push(Pipes { stdin, replies });
        }
        for (i, p) in pipes.iter_mut().enumerate() {
            let hello = hello(i, p, ready_timeout, &logs).await?;
            workers.hellos.push(hello);
        }
        Ok((workers, pipes))
    }

    pub fn procs(&self) -> &[ClientProc] {
        &self.procs
    }

    /// The processes of this machine's the workers are, or that carry their
    /// channels (ssh), by client name: what a kill -9 of the controller leaves.
    pub fn local_pids(&self) -> Vec<(String, i32)> {
        self.children
            .iter()
            .zip(&self.procs)
            .filter_map(|(c, p)| Some((p.name.clone(), c.id()? as i32)))
            .collect()
    }

    /// What the first worker's adapter said about itself in its `init` reply; None
    /// for built-in clients.
    pub fn hello(&self) -> Option<lockcheck_servers::backend::adapter::Hello> {
        let first = self.hellos.first().filter(|v| !v.is_null())?;
        serde_json::from_value(first.clone()).ok()
    }

    /// Waits up to `grace` for the workers to exit (their stdin is closed once the
    /// slots are done), then resumes and kills what is left, and reaps them all.
    pub async fn stop(mut self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        for child in &mut self.children {
            if tokio::time::timeout_at(deadline, child.wait())
                .await
                .is_err()
            {
                resume_and_kill(child);
                let _ = child.wait().await;
            }
        }
        // Off the runtime: a host is a round trip away.
        if let Some(mut hosts) = self.on_hosts.take() {
            let _ = tokio::task::spawn_blocking(move || hosts.end()).await;
        }
    }
}

/// Resumes and kills the worker's whole process group: the worker and its adapter,
/// if it has one.
fn resume_and_kill(child: &mut Child) {
    if let Some(pid) = child.id() {
        let group = Pid::from_raw(pid as i32);
        let _ = killpg(group, Signal::SIGCONT);
        let _ = killpg(group, Signal::SIGKILL);
    }
    let _ = child.start_kill();
}

/// How long a dropped [`Workers`] waits for its killed workers to end.
const KILLED_GRACE: Duration = Duration::from_secs(5);

impl Drop for Workers {
    /// A run dropped by a signal (Ctrl-C, SIGTERM) or an error kills its
    /// workers here. A SIGKILL takes effect only when its process next runs:
    /// on a loaded machine a controller that returned at once left a worker
    /// running a moment after it had exited, the very thing Ctrl-C promises
    /// not to do. So each worker's group is waited for (reaped where it is our
    /// child), within `KILLED_GRACE`.
    fn drop(&mut self) {
        for child in &mut self.children {
            resume_and_kill(child);
        }
        let deadline = Instant::now() + KILLED_GRACE;
        for child in &mut self.children {
            let group = child.id().map(|pid| pid as i32);
            while Instant::now() < deadline {
                let reaped = !matches!(child.try_wait(), Ok(None));
                if reaped && group.is_none_or(|g| lockcheck_journal::group_members(g).is_empty()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Sent to the nemesis when a client has just acquired the lock; the client waits
/// for the ack before its next op, so a holder-targeted fault lands before it writes.
pub struct Acquired {
    pub slot: usize,
    pub ack: oneshot::Sender<()>,
}

/// Tells the nemesis that `slot` holds the lock and waits for its ack, so that a
/// fault armed for the holder lands before the slot's next op; with none armed,
/// nothing: the nemesis may be busy for seconds (a killed node's restart waits
/// until it serves), and a holder kept waiting on its ack that long is a pause
/// lockcheck made, not the fault. Measured before: in 44 of the 203 runs of two
/// nats audits whose fault restarts or heals nodes (kill and restart, the wiped
/// restart, the leader isolated), a holder granted while the nemesis was at it
/// waited up to 14.5 s for its first op; its lease ran out, a successor was
/// granted, and one of the two unfenced kill-restart breaks was of that kind.
async fn announce_holder(live: &Live, acquired: &mpsc::UnboundedSender<Acquired>, slot: usize) {
    if !live.holder_fault_armed() {
        return;
    }
    let (ack, wait) = oneshot::channel();
    if acquired.send(Acquired { slot, ack }).is_ok() {
        let _ = wait.await;
    }
}

/// What every slot shares.
pub struct Shared {
    pub recorder: Arc<Recorder>,
    pub live: Arc<Live>,
    pub workload: Arc<Workload>,
    /// The next unused process id: slots start as 0..count, retired ids are replaced.
    pub next_process: AtomicU64,
    pub acquired: mpsc::UnboundedSender<Acquired>,
    /// Whether a holder asks its lock library (`held`) before each write.
    pub ask_held: AskHeld,
}

/// Whether holders ask their lock library if it still holds the lock before each write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskHeld {
    /// The client cannot tell (a built-in client, an adapter without `held`).
    Never,
    /// Asked and recorded, to show whether the library knew it had lost the lock;
    /// the holder writes whatever it says.
    Observe,
    /// `[clients] self_fencing = "library"`: a holder whose library says no (or
    /// cannot say) stops writing, as on a refused renew.
    Fence,
}

/// What a holder does after asking its library ([`Slot::ask_library`]).
enum Heeded {
    /// Write (the library said yes, or it is only observed).
    Go,
    /// Stop writing: `self_fencing = "library"` and the library did not say yes.
    Stop,
    /// The process id was retired meanwhile: the new id holds nothing.
    Retired,
}

/// One client slot: a worker process driven through the ops of the workload.
pub struct Slot {
    index: usize,
    process: u64,
    next_request: u64,
    /// Writes this slot made, to make every write's data unique.
    writes: u64,
    pipes: Pipes,
    shared: Arc<Shared>,
    /// False once the worker is gone: the slot stops.
    alive: bool,
    /// Writes given up on (no reply in time), by request id: one may still reach
    /// the resource, and its late reply says when it did.
    given_up_writes: BTreeSet<u64>,
}

/// What came back from one op.
struct Outcome {
    kind: OpType,
    value: Value,
    error: Option<String>,
}

impl Slot {
    pub fn new(index: usize, pipes: Pipes, shared: Arc<Shared>) -> Slot {
        Slot {
            index,
            process: index as u64,
            next_request: 1,
            writes: 0,
            pipes,
            shared,
            alive: true,
            given_up_writes: BTreeSet::new(),
        }
    }

    /// Runs critical sections (or, in an election, campaigns and leads) until `stop`
    /// turns true, then finishes the turn under way (its writes and its release) and
    /// closes the worker's stdin.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<()> {
        let mode = self.shared.workload.mode.clone();
        let think = match &mode {
            ClientMode::Lock(s) => s.think,
            ClientMode::Election(_) => Duration::ZERO,
        };
        while self.alive && !*stop.borrow() {
            let acquired = self.call(Command::Acquire).await?;
            if acquired.kind == OpType::Ok {
                let token = acquired.value.get("token").and_then(Value::as_u64);
                self.shared.live.acquired(self.index);
                self.announce_holder().await;
                match &mode {
                    ClientMode::Lock(s) => self.section(s, token, &mut stop).await?,
                    ClientMode::Election(e) => self.lead(e, token, &mut stop).await?,
                }
                self.shared.live.release(self.index);
            }
            tokio::select! {
                _ = tokio::time::sleep(think) => {}
                _ = stopped(&mut stop) => {}
            }
        }
        Ok(())
    }

    /// Tells the nemesis that this slot holds the lock and waits for its ack, so that
    /// a fault armed for the holder lands before the slot's next op.
    async fn announce_holder(&mut self) {
        announce_holder(&self.shared.live, &self.shared.acquired, self.index).await;
    }

    /// Leads until the run ends or, with `on_lease_loss = "exit"`, until it learns
    /// that its lease is gone: renews every `renew_every`, acts (writes with its
    /// token) every `act_every`, announcing itself to the nemesis before each act (a
    /// fault armed for the holder hits the leader there), then resigns. With
    /// `"ignore"`, a failed renewal changes nothing: the leader goes on acting.
    /// Ends early when the process id is retired (an `info`).
    async fn lead(
        &mut self,
        e: &Election,
        mut token: Option<u64>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<()> {
        let process = self.process;
        let exit = e.on_lease_loss == OnLeaseLoss::Exit;
        let mut renewed = Instant::now();
        let mut lease_lost = false;
        while !*stop.borrow() {
            if renewed.elapsed() >= e.renew_every {
                let r = self.call(Command::Renew { token }).await?;
                if self.process != process || !self.alive {
                    return Ok(());
                }
                renewed = Instant::now();
                if r.kind == OpType::Ok {
                    token = r.value.get("token").and_then(Value::as_u64).or(token);
                } else if exit {
                    lease_lost = true;
                    break;
                }
            }
            self.announce_holder().await;
            match self.ask_library(process).await? {
                Heeded::Retired => return Ok(()),
                Heeded::Stop => {
                    // The library says it no longer leads: it resigns, as on a lost lease.
                    lease_lost = true;
                    break;
                }
                Heeded::Go => {}
            }
            self.writes += 1;
            let data = format!("{}:{}", self.process, self.writes);
            let acted = self.call(Command::Write { token, data }).await?;
            if self.process != process || !self.alive {
                return Ok(());
            }
            if exit && acted.error.as_deref().is_some_and(withheld) {
                // Its own deadline passed, or its node's agent no longer names it
                // the primary: the leader stops acting at once.
                lease_lost = true;
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(e.act_every) => {}
                _ = stopped(stop) => {}
            }
        }
        self.call(Command::Release { token, lease_lost }).await?;
        Ok(())
    }

    /// Reads, writes with the token (renewing when the lease needs it), releases. Ends
    /// early when the process id is retired (an `info`): the new id holds nothing;
    /// and once the run is over with its question answered ([`Slot::answered_and_over`]).
    async fn section(
        &mut self,
        s: &CriticalSection,
        mut token: Option<u64>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<()> {
        let w = self.shared.workload.clone();
        let process = self.process;
        let pause = s.hold / s.writes;
        let mut granted = Instant::now();
        // A holder reads what it is about to change, as a read-modify-write client does.
        self.call(Command::Read).await?;
        if self.process != process || !self.alive {
            return Ok(());
        }
        // With `renew = "background"` the worker's lock client renews on its own.
        let renew_every = match w.backend.renew {
            Renew::Section => w.backend.lease.renew_every,
            Renew::Background => None,
        };
        for _ in 0..s.writes {
            if self.answered_and_over(stop) {
                break;
            }
            if renew_every.is_some_and(|r| granted.elapsed() >= r) {
                let renewed = self.call(Command::Renew { token }).await?;
                if self.process != process || !self.alive {
                    return Ok(());
                }
                if renewed.kind != OpType::Ok {
                    // The backend says the lease is gone: a correct holder stops writing.
                    break;
                }
                granted = Instant::now();
                token = renewed.value.get("token").and_then(Value::as_u64).or(token);
            }
            match self.ask_library(process).await? {
                Heeded::Retired => return Ok(()),
                Heeded::Stop => break,
                Heeded::Go => {}
            }
            self.writes += 1;
            let data = format!("{}:{}", self.process, self.writes);
            let written = self.call(Command::Write { token, data }).await?;
            if self.process != process || !self.alive {
                return Ok(());
            }
            if written.error.as_deref().is_some_and(withheld) {
                // The worker judged its lease gone: it stops writing, as on a refused renew.
                break;
            }
            let next = tokio::time::Instant::now() + pause;
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = stopped(stop) => {}
            }
            if !self.answered_and_over(stop) {
                tokio::time::sleep_until(next).await;
            }
        }
        self.call(Command::Release {
            token,
            lease_lost: false,
        })
        .await?;
        Ok(())
    }

    /// Whether a section may end at once: an `end = "after-effect"` run is over
    /// and its deposition answered, so the rest of a holder's writes can show
    /// nothing more (a run that ends at its `duration` lets every section finish:
    /// a holder deposed late may still be writing).
    fn answered_and_over(&self, stop: &watch::Receiver<bool>) -> bool {
        *stop.borrow()
            && self.shared.workload.end == End::AfterEffect
            && self.shared.live.answered().is_some()
    }

    /// Before a write or an act: asks the adapter's library whether it still holds
    /// (when it can tell), recorded as a `held` op, and heeds a no under
    /// `self_fencing = "library"`.
    async fn ask_library(&mut self, process: u64) -> Result<Heeded> {
        if self.shared.ask_held == AskHeld::Never {
            return Ok(Heeded::Go);
        }
        let held = self.call(Command::Held).await?;
        if self.process != process || !self.alive {
            return Ok(Heeded::Retired);
        }
        let believes = held.value.get("held").and_then(Value::as_bool);
        Ok(
            if self.shared.ask_held == AskHeld::Fence && believes != Some(true) {
                Heeded::Stop
            } else {
                Heeded::Go
            },
        )
    }

    /// Sends one op to the worker and records its invoke and completion.
    async fn call(&mut self, cmd: Command) -> Result<Outcome> {
        let w = &self.shared.workload;
        let invoke_value = match &cmd {
            Command::Acquire => json!({ "lock": LOCK_NAME }),
            Command::Renew { token } => json!({ "token": token }),
            // A leader that resigns on losing its lease says so (docs/election.md).
            Command::Release {
                token,
                lease_lost: true,
            } => json!({ "token": token, "lease_lost": true }),
            Command::Release { token, .. } => json!({ "token": token }),
            Command::Write { token, data } => json!({ "token": token, "data": data }),
            Command::Read | Command::Held => Value::Null,
        };
        let f = cmd.f();
        // An acquire may wait for the lock itself before the reply is due.
        let wait = w.clients.op_timeout
            + if cmd == Command::Acquire {
                w.backend.acquire_timeout
            } else {
                Duration::ZERO
            };
        let id = self.next_request;
        self.next_request += 1;
        let process = Process::Client(self.process);
        let rec = self.shared.recorder.clone();
        rec.record(process, OpType::Invoke, f, invoke_value.clone(), None, None)?;
        self.shared.live.ops.fetch_add(1, Ordering::Relaxed);
        let write = matches!(cmd, Command::Write { .. });
        if write {
            self.shared.live.write_sent(self.index);
        }
        let reply = self
            .exchange(
                worker::Request {
                    id,
                    process: self.process,
                    op: cmd,
                },
                wait,
            )
            .await;
        if write {
            match &reply {
                Ok(r) => self
                    .shared
                    .live
                    .write_answered(self.index, r.kind == OpType::Ok),
                Err(_) => {
                    self.given_up_writes.insert(id);
                }
            }
        }
        let (kind, value, node, error) = match reply {
            Ok(r) => {
                // A completion carries its result; a fail or info repeats what was tried.
                let value = if r.kind == OpType::Ok {
                    r.value
                } else {
                    invoke_value
                };
                (r.kind, value, r.node, r.error)
            }
            Err(why) => (OpType::Info, invoke_value, None, Some(why)),
        };
        rec.record(process, kind, f, value.clone(), node, error.clone())?;
        if kind == OpType::Fail && error.as_deref() == Some(lockcheck_resource::STALE_TOKEN) {
            self.shared
                .live
                .stale_rejected
                .fetch_add(1, Ordering::Relaxed);
        }
        if kind == OpType::Info {
            // The op may still take effect: this id must never act again.
            self.process = self.shared.next_process.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Outcome { kind, value, error })
    }

    /// Writes the request and waits for the reply with its id, dropping late replies
    /// to ops already given up on. `Err` says why no reply came.
    async fn exchange(&mut self, req: worker::Request, wait: Duration) -> Result<Reply, String> {
        let mut line = serde_json::to_vec(&req).map_err(|e| e.to_string())?;
        line.push(b'\n');
        if let Err(e) = self.pipes.stdin.write_all(&line).await {
            self.alive = false;
            return Err(format!("the worker is gone: {e}"));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, self.pipes.replies.recv()).await {
                Ok(Some(r)) if r.id == req.id => return Ok(r),
                Ok(Some(late)) => {
                    if self.given_up_writes.remove(&late.id) {
                        let applied = late.kind == OpType::Ok;
                        self.shared.live.write_answered(self.index, applied);
                    }
                }
                Ok(None) => {
                    self.alive = false;
                    return Err("the worker exited".into());
                }
                Err(_) => return Err(format!("no reply within {:.1} s", wait.as_secs_f64())),
            }
        }
    }
}

/// Worker `i`'s first reply, its hello: what its client says of itself once it
/// has connected, or why it could not.
async fn hello(i: usize, p: &mut Pipes, ready_timeout: Duration, logs: &Path) -> Result<Value> {
    let hello = tokio::time::timeout(ready_timeout, p.replies.recv()).await;
    match hello {
        Ok(Some(r)) if r.id == 0 && r.kind == OpType::Ok => Ok(r.value),
        // The worker ran and said why its client could not start: its
        // connection to the lock service (whose servers had answered their
        // readiness checks) failed or timed out, or a team's own client
        // could not init. Nothing was tested, and it is no bug of
        // lockcheck's: a loaded machine or a service not yet serving does
        // this, and the message says which.
        Ok(Some(r)) => Err(Exit::environment(format!(
            "worker {} could not start, so nothing was tested (its lock service's \
             servers had answered their readiness checks): {}",
            client_name(i),
            r.error.unwrap_or_default()
        ))),
        Ok(None) => Err(anyhow!(
            "worker {} exited while starting (see {})",
            client_name(i),
            logs.join(format!("{}.log", client_name(i))).display()
        )),
        Err(_) => Err(anyhow!(
            "worker {} did not connect within {:?}",
            client_name(i),
            ready_timeout
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grant waits on the nemesis only while a holder fault is armed: with
    /// none, a nemesis busy elsewhere (here: one that never reads) holds no
    /// holder up; with one, the holder waits for its ack, as the fault must land
    /// before its next op.
    #[tokio::test]
    async fn a_grant_waits_on_the_nemesis_only_while_a_holder_fault_is_armed() {
        let live = Live::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::time::timeout(Duration::from_secs(5), announce_holder(&live, &tx, 0))
            .await
            .expect("no holder fault armed: the grant goes on at once");
        assert!(rx.try_recv().is_err(), "nothing announced");
        live.arm_holder_fault();
        let waiting = announce_holder(&live, &tx, 1);
        tokio::pin!(waiting);
        // Whatever the load, it cannot end before the ack below.
        let early = tokio::time::timeout(Duration::from_millis(50), &mut waiting).await;
        assert!(early.is_err(), "an armed fault's holder waits for the ack");
        let Acquired { slot, ack } = rx.recv().await.expect("announced");
        assert_eq!(slot, 1);
        ack.send(()).expect("the holder still waits");
        waiting.await;
        live.holder_fault_landed();
        assert!(!live.holder_fault_armed());
        live.holder_fault_landed();
        assert!(!live.holder_fault_armed(), "never below none");
    }
}
