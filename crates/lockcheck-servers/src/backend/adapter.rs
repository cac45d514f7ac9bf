//! A lock client lockcheck did not write: an adapter program around the lock library a
//! team actually runs (redis-py's `Lock`, kazoo's `Lock`, Curator's
//! `InterProcessMutex`), spoken to over JSON lines as `docs/client.md` (v1)
//! lays down. To the worker it is one more [`LockClient`]; the history, the faults and
//! the checks are the built-in clients'.
//!
//! **Process.** The worker starts the adapter as its child, in the worker's own process
//! group: a `pause` of the client stops the group (the worker, the adapter and every
//! thread of the library: keep-alives, session heartbeats), a `kill` kills it. The
//! adapter also dies with the worker (`PR_SET_PDEATHSIG`), however the worker ends.
//!
//! **Misbehaviour.** No reply in time, a line that is not JSON (or longer than 1 MiB),
//! a reply with another `id`, the adapter exiting: the op is indeterminate (the worker
//! answers `info`, the controller retires the process id), the adapter is killed, and
//! the next request starts a fresh one. An adapter that cannot `init` at the start is a
//! run that cannot start, with the adapter's stderr tail.

use super::client::{Grant, LockClient, LockConfig, LockError};
use super::BackendKind;
use anyhow::{anyhow, bail, Context};
use async_trait::async_trait;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::time::Instant;

/// Has the child killed (SIGKILL) when the process that started it dies, however
/// it dies, even by -9: a worker's adapter, or a controller's worker, must never
/// outlive the one that drives it and go on acting on the lock unseen.
pub fn die_with_parent(cmd: &mut tokio::process::Command) {
    signal_on_parent_death(cmd, libc::SIGKILL)
}

/// Has the kernel send the child `signal` when the thread that started it dies:
/// SIGKILL for a child that must never act unseen, SIGTERM for one that undoes
/// what it did on the way out (a `lockcheck run` under `lockcheck audit`).
pub fn signal_on_parent_death(cmd: &mut tokio::process::Command, signal: libc::c_int) {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The longest reply line an adapter may print: past it, the adapter is misbehaving.
pub const MAX_LINE: usize = 1 << 20;

/// The error of a `held` the adapter answered `info`, recorded as `fail`.
pub const UNANSWERED_HELD: &str = "held: the library could not tell";

/// Lines of the adapter's stderr kept for the error when it cannot `init`.
const TAIL_LINES: usize = 20;

/// How long a first `init` may take (an interpreter or a JVM starting, a session
/// being set up), within the controller's wait for its workers.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(15);

/// The workload's `[client] command`: the program and its arguments, and the folder
/// relative paths are taken from (the workload file's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    pub argv: Vec<String>,
    pub dir: PathBuf,
}

impl Program {
    /// A workload's `[client] command`, run in `dir` (its `[client] dir`, already
    /// checked) or else the folder of the workload file at `workload`, its relative
    /// paths taken from there.
    pub fn of_workload(
        argv: Vec<String>,
        dir: Option<PathBuf>,
        workload: &std::path::Path,
    ) -> anyhow::Result<Program> {
        if argv.first().is_none_or(|a| a.is_empty()) {
            bail!(
                "expected the adapter program and its arguments, e.g. [\"python3\", \"lock.py\"]"
            );
        }
        let dir = dir.unwrap_or_else(|| Program::folder_of(workload));
        // Absolute, so that the worker finds it whatever its own working directory.
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        Ok(Program { argv, dir })
    }

    /// The folder of the workload file at `workload`: what relative paths in it
    /// are relative to.
    pub fn folder_of(workload: &std::path::Path) -> PathBuf {
        match workload.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// The program to execute: a relative path with a `/` is the folder's; a bare name
    /// is looked up on `PATH`, as a shell would.
    fn exe(&self) -> PathBuf {
        let first = PathBuf::from(&self.argv[0]);
        if first.is_relative() && self.argv[0].contains('/') {
            self.dir.join(first)
        } else {
            first
        }
    }
}

/// What a worker needs to run an adapter, besides the lock settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    pub program: Program,
    /// `client-N`: the adapter's `LOCKCHECK_CLIENT`.
    pub client: String,
    /// The controller's wait for one reply, beyond an acquire's own wait.
    pub op_timeout: Duration,
    /// The run directory: the adapter's `LOCKCHECK_RUN_DIR` (an extension of
    /// client.md v1), for files of its own, and to tell its processes from others'.
    pub run_dir: PathBuf,
    /// `mode = "election"`: the adapter campaigns (acquire), keeps its leadership's
    /// lease (renew) and resigns (release) through its library's election recipe.
    /// Sent in `init` as `"mode"` (an extension of client.md v1); such an adapter
    /// must list `campaign` in its init reply's ops.
    #[serde(default)]
    pub election: bool,
}

/// What the adapter said about itself in its `init` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// `"redis-py 4.3.4"`: named in the verdict and the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// The optional ops it supports (`renew`, `held`).
    #[serde(default)]
    pub ops: Vec<String>,
}

impl Hello {
    pub fn supports(&self, op: &str) -> bool {
        self.ops.iter().any(|o| o == op)
    }
}

/// One running adapter process and its pipes.
struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The stderr copier: done once the adapter's stderr closes.
    stderr: tokio::task::JoinHandle<()>,
}

/// A client of the lock, through an adapter program.
pub struct AdapterClient {
    spec: Spec,
    kind: BackendKind,
    endpoints: Vec<String>,
    cfg: LockConfig,
    /// None once retired: the next request starts a fresh adapter.
    running: Option<Running>,
    next_id: u64,
    hello: Hello,
    /// The last lines of the adapter's stderr (every adapter this client started).
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl AdapterClient {
    /// Starts the adapter and sends `init`. An error here carries the adapter's stderr
    /// tail: the run cannot start with a client that cannot.
    pub async fn start(
        spec: Spec,
        kind: BackendKind,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<AdapterClient> {
        anyhow::ensure!(
            !spec.program.argv.is_empty(),
            "the adapter's command is empty"
        );
        let mut client = AdapterClient {
            spec,
            kind,
            endpoints: endpoints.to_vec(),
            cfg: cfg.clone(),
            running: None,
            next_id: 1,
            hello: Hello::default(),
            tail: Arc::default(),
        };
        client.hello = client.init(Instant::now() + INIT_TIMEOUT).await?;
        Ok(client)
    }

    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Starts an adapter and asks it to `init` by `deadline`; kills it if it cannot.
    async fn init(&mut self, deadline: Instant) -> anyhow::Result<Hello> {
        let started = self.spawn();
        let result = match started {
            Ok(()) => {
                let request = json!({
                    "backend": self.kind,
                    "endpoints": self.endpoints,
                    "lock": self.cfg.name,
                    "lease_ms": self.cfg.lease.as_millis() as u64,
                    "client": self.spec.client,
                    // Extension (client.md v1 + fencing_token): whether the workload
                    // asks for a fencing token, for a library that can give one or not.
                    "fencing_token": self.cfg.fencing_token,
                    // Extension: whether to take the lock or campaign for leadership.
                    "mode": if self.spec.election { "election" } else { "lock" },
                });
                match self.exchange("init", request, deadline).await {
                    Ok(reply) => match kind_of(&reply) {
                        "ok" => {
                            let reply = Value::Object(reply);
                            serde_json::from_value::<Hello>(reply.clone())
                                .map_err(|e| anyhow!("its init reply {reply}: {e}"))
                                .and_then(|hello| self.able(hello))
                        }
                        _ => Err(anyhow!(
                            "init: {}",
                            reply
                                .get("error")
                                .and_then(Value::as_str)
                                .unwrap_or("failed, no reason given")
                        )),
                    },
                    Err(Misbehaved(why)) => Err(anyhow!(why)),
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(hello) => Ok(hello),
            Err(e) => {
                self.retire().await;
                let tail = self.tail();
                let argv = self.spec.program.argv.join(" ");
                let e = e.context(format!("the adapter `{argv}` could not init"));
                Err(if tail.is_empty() {
                    e.context("(it wrote nothing on stderr)")
                } else {
                    e.context(format!("its stderr ends with:\n{tail}"))
                })
            }
        }
    }

    /// An adapter that ignores `"mode": "election"` would take a lock where the
    /// workload asked for an election: it must say it campaigns.
    fn able(&self, hello: Hello) -> anyhow::Result<Hello> {
        if self.spec.election && !hello.supports("campaign") {
            bail!(
                "mode = \"election\" needs an adapter that campaigns, and its init reply's ops {:?} \
                 do not name \"campaign\"",
                hello.ops
            );
        }
        Ok(hello)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let p = &self.spec.program;
        let mut cmd = tokio::process::Command::new(p.exe());
        cmd.args(&p.argv[1..])
            .current_dir(&p.dir)
            .env("LOCKCHECK_BACKEND", backend_name(self.kind))
            .env("LOCKCHECK_ENDPOINTS", self.endpoints.join(","))
            .env("LOCKCHECK_LOCK", &self.cfg.name)
            .env(
                "LOCKCHECK_LEASE_MS",
                (self.cfg.lease.as_millis() as u64).to_string(),
            )
            .env("LOCKCHECK_CLIENT", &self.spec.client)
            .env("LOCKCHECK_RUN_DIR", &self.spec.run_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // No process group of its own: it stays in the worker's, which the faults
        // signal. And it dies with the worker, even one killed with -9.
        die_with_parent(&mut cmd);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", p.exe().display()))?;
        let stdin = child.stdin.take().context("the adapter's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the adapter's stdout")?);
        let stderr = child.stderr.take().context("the adapter's stderr")?;
        let tail = self.tail.clone();
        // The adapter's log goes on into the worker's (clients/client-N.log), and its
        // last lines are kept for an adapter that cannot init.
        let stderr = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            let mut line = Vec::new();
            while let Ok(n) = lines.read_until(b'\n', &mut line).await {
                if n == 0 {
                    break;
                }
                let _ = std::io::stderr().write_all(&line);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(text);
                line.clear();
            }
        });
        self.running = Some(Running {
            child,
            stdin,
            stdout,
            stderr,
        });
        Ok(())
    }

    /// The adapter's last stderr lines, once its stderr has closed (or a moment passed).
    fn tail(&self) -> String {
        let t = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Kills the adapter (its threads with it) and every process it started, and
    /// waits for it; the next request starts a fresh one.
    async fn retire(&mut self) {
        if let Some(mut r) = self.running.take() {
            // Its children are in the worker's process group, which only the end of
            // the run kills: a library's helper must not go on acting for a retired id.
            if let Some(pid) = r.child.id().and_then(|p| i32::try_from(p).ok()) {
                for p in stop_tree(pid) {
                    let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
                }
            }
            let _ = r.child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), r.child.wait()).await;
            // Its stderr is closed once it is dead: let the copier take the last lines.
            let _ = tokio::time::timeout(Duration::from_millis(500), &mut r.stderr).await;
        }
    }

    /// Sends one request and reads its reply, by `deadline`. Anything but a JSON
    /// object with the request's id and a history type is misbehaviour.
    async fn exchange(
        &mut self,
        op: &str,
        fields: Value,
        deadline: Instant,
    ) -> Result<Map<String, Value>, Misbehaved> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        request.insert("id".into(), id.into());
        request.insert("op".into(), op.into());
        let mut line = serde_json::to_vec(&request).expect("a JSON object serializes");
        line.push(b'\n');
        let r = self
            .running
            .as_mut()
            .ok_or_else(|| Misbehaved("no adapter is running".into()))?;
        let wait = deadline.saturating_duration_since(Instant::now());
        let exchanged = tokio::time::timeout_at(deadline, async {
            r.stdin
                .write_all(&line)
                .await
                .map_err(|e| format!("the adapter no longer reads its stdin: {e}"))?;
            r.stdin
                .flush()
                .await
                .map_err(|e| format!("the adapter no longer reads its stdin: {e}"))?;
            read_line(&mut r.stdout, MAX_LINE).await
        })
        .await;
        let line = match exchanged {
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) => {
                let status = tokio::time::timeout(Duration::from_millis(500), r.child.wait())
                    .await
                    .map_or("still running".to_string(), |s| match s {
                        Ok(s) => s.to_string(),
                        Err(e) => e.to_string(),
                    });
                return Err(Misbehaved(format!(
                    "the adapter exited ({status}) with `{op}` (id {id}) unanswered"
                )));
            }
            Ok(Err(why)) => return Err(Misbehaved(format!("{why} (`{op}`, id {id})"))),
            Err(_) => {
                return Err(Misbehaved(format!(
                    "no reply from the adapter to `{op}` (id {id}) within {:.1} s",
                    wait.as_secs_f64()
                )))
            }
        };
        let reply: Map<String, Value> = serde_json::from_slice(&line).map_err(|e| {
            let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).to_string();
            Misbehaved(format!(
                "the adapter's reply to `{op}` (id {id}) is not a JSON object ({e}): {shown}"
            ))
        })?;
        match reply.get("id").and_then(Value::as_u64) {
            Some(got) if got == id => {}
            got => {
                return Err(Misbehaved(format!(
                    "the adapter answered id {} to `{op}` (id {id})",
                    got.map_or("none".to_string(), |g| g.to_string())
                )))
            }
        }
        if !matches!(kind_of(&reply), "ok" | "fail" | "info") {
            return Err(Misbehaved(format!(
                "the adapter's reply to `{op}` (id {id}) has type {}, not ok, fail or info",
                reply.get("type").unwrap_or(&Value::Null)
            )));
        }
        Ok(reply)
    }

    /// One op, in the history's words: a retired adapter is started afresh first (if
    /// that fails, the op never left: `fail`); misbehaviour retires it (`info`).
    async fn call(
        &mut self,
        op: &str,
        fields: Value,
        wait: Duration,
    ) -> Result<Map<String, Value>, LockError> {
        let deadline = Instant::now() + wait;
        if self.running.is_none() {
            let hello = self.init(deadline).await.map_err(|e| {
                LockError::Denied(format!("the adapter could not be started again: {e:#}"))
            })?;
            if hello != self.hello {
                tracing::warn!(
                    "the restarted adapter says {hello:?}, the first {:?}",
                    self.hello
                );
            }
        }
        let reply = match self.exchange(op, fields, deadline).await {
            Ok(reply) => reply,
            Err(Misbehaved(why)) => {
                self.retire().await;
                return Err(LockError::Indeterminate(format!("{why}; adapter retired")));
            }
        };
        let error = || {
            reply
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_string()
        };
        match kind_of(&reply) {
            "ok" => Ok(reply.clone()),
            "fail" => Err(LockError::Denied(error())),
            _ => Err(LockError::Indeterminate(error())),
        }
    }

    /// How long the worker waits for a reply: a little less than the controller, so
    /// that the history says why (and the adapter is retired) before the controller
    /// gives up on the worker.
    fn wait(&self, extra: Duration) -> Duration {
        let t = self.spec.op_timeout;
        t.saturating_sub((t / 5).min(Duration::from_secs(1))) + extra
    }

    fn grant(&self, reply: &Map<String, Value>) -> Result<Grant, LockError> {
        let field = |name: &str| match reply.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                LockError::Indeterminate(format!(
                    "the adapter's {name} {v} is not a non-negative integer"
                ))
            }),
        };
        Ok(Grant {
            token: field("token")?,
            lease_ms: field("lease_ms")?.or(Some(self.cfg.lease.as_millis() as u64)),
        })
    }
}

/// Process `root` and every process it started, children of children too, each
/// stopped (SIGSTOP) as it is found, so that none starts another unseen: a stopped
/// process forks nothing, and a running one's new child is found on the next look.
fn stop_tree(root: i32) -> Vec<i32> {
    let mut tree = vec![root];
    let _ = kill(Pid::from_raw(root), Signal::SIGSTOP);
    loop {
        let found: Vec<i32> = parents()
            .into_iter()
            .filter(|(pid, ppid)| tree.contains(ppid) && !tree.contains(pid))
            .map(|(pid, _)| pid)
            .collect();
        if found.is_empty() {
            return tree;
        }
        for &p in &found {
            let _ = kill(Pid::from_raw(p), Signal::SIGSTOP);
        }
        tree.extend(found);
    }
}

/// Every process's (pid, parent pid), from /proc.
fn parents() -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
            let (_, rest) = stat.rsplit_once(") ")?;
            let ppid = rest.split(' ').nth(1)?.parse::<i32>().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// Why an adapter is no longer trusted.
struct Misbehaved(String);

fn kind_of(reply: &Map<String, Value>) -> &str {
    reply.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The backend's name as workloads write it (`postgres-lease`).
fn backend_name(kind: BackendKind) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(s)) => s,
        _ => format!("{kind:?}"),
    }
}

/// Reads one line (without its newline), at most `max` bytes: `None` at the end of the
/// stream; an error for a longer line, which is not kept in memory.
async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    loop {
        let buf = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the adapter's stdout: {e}"))?;
        if buf.is_empty() {
            // A last line without its newline is no reply: the adapter is gone.
            return Ok(None);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > max {
            return Err(format!(
                "the adapter printed a line longer than {max} bytes"
            ));
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(chunk.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some(line));
        }
    }
}

#[async_trait]
impl LockClient for AdapterClient {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let timeout = self.cfg.acquire_timeout;
        let fields = json!({ "timeout_ms": timeout.as_millis() as u64 });
        let reply = self.call("acquire", fields, self.wait(timeout)).await?;
        self.grant(&reply)
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        if !self.hello.supports("renew") {
            return Err(LockError::Denied(
                "the adapter does not support renew (not in its init reply's ops)".into(),
            ));
        }
        let reply = self
            .call("renew", json!({}), self.wait(Duration::ZERO))
            .await?;
        self.grant(&reply)
    }

    async fn release(&mut self) -> Result<(), LockError> {
        self.call("release", json!({}), self.wait(Duration::ZERO))
            .await
            .map(|_| ())
    }

    async fn held(&mut self) -> Option<Result<bool, LockError>> {
        if !self.hello.supports("held") {
            return None;
        }
        Some(
            match self
                .call("held", json!({}), self.wait(Duration::ZERO))
                .await
            {
                Ok(reply) => match reply.get("held").and_then(Value::as_bool) {
                    Some(b) => Ok(b),
                    None => {
                        // An `ok` that does not say is as good as no answer.
                        self.retire().await;
                        Err(LockError::Indeterminate(
                            "the adapter's held reply has no boolean `held`; adapter retired"
                                .into(),
                        ))
                    }
                },
                // The adapter answered `info`: its library could not tell in time (a
                // server it could not reach). A question changes nothing in the lock,
                // so no effect is left unknown: the holder is not retired (which would
                // count it holding to the end of the run, never writing again) but
                // told its library cannot say, as a client without `held` is. A
                // misbehaving adapter was killed with its library's session: that
                // stays `info`, and retires the holder.
                Err(LockError::Indeterminate(why)) if self.running.is_some() => {
                    Err(LockError::Denied(format!("{UNANSWERED_HELD}: {why}")))
                }
                Err(e) => Err(e),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_is_read_whole_and_a_long_one_is_refused_without_being_kept() {
        let data = b"{\"id\":1}\nsecond\nlast without newline".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        assert_eq!(
            read_line(&mut r, 100).await.unwrap().unwrap(),
            b"{\"id\":1}"
        );
        assert_eq!(read_line(&mut r, 100).await.unwrap().unwrap(), b"second");
        assert_eq!(read_line(&mut r, 100).await.unwrap(), None);
        let long = [b'x'; 64];
        let mut r = BufReader::with_capacity(8, &long[..]);
        let e = read_line(&mut r, 16).await.unwrap_err();
        assert!(e.contains("longer than 16 bytes"), "{e}");
    }

    #[test]
    fn a_relative_program_is_the_workload_folders_and_a_bare_name_is_on_path() {
        let p = |a: &str| Program {
            argv: vec![a.into()],
            dir: PathBuf::from("/w/clients"),
        };
        assert_eq!(p("./a.sh").exe(), PathBuf::from("/w/clients/./a.sh"));
        assert_eq!(p("bin/a").exe(), PathBuf::from("/w/clients/bin/a"));
        assert_eq!(p("python3").exe(), PathBuf::from("python3"));
        assert_eq!(p("/usr/bin/env").exe(), PathBuf::from("/usr/bin/env"));
        assert_eq!(backend_name(BackendKind::PostgresLease), "postgres-lease");
    }
}
