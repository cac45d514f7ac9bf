//! One host of the `ssh` runtime, reached with the system's OpenSSH client: the
//! user's `~/.ssh/config` (or the file `ssh_config` names), agent, `ProxyJump` and
//! `known_hosts` apply unchanged, and lockcheck carries no SSH or crypto code of
//! its own. A run keeps one connection per host open (a `ControlMaster`,
//! [`Master`]) so that each command after the first costs a channel, not a
//! handshake.
//!
//! Every command is a POSIX `sh` script fed on the remote `sh`'s standard input
//! (whatever the account's login shell), with `PRELUDE`'s helpers. A remote
//! process is named as a local one is ([`Proc`]): pid and start time (field 22
//! of its `/proc/<pid>/stat`, read on the host), so that a pid the host has
//! since given to another program is never signalled, and a zombie (the host's
//! init may reap late) counts as gone.
//!
//! An exit status of 255 is ssh's own: the host could not be reached (or would
//! not let us in); the error says so and names the host.

use anyhow::{bail, Context, Result};
use lockcheck_journal::{Effect, Journal, Proc, RemoteHost};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shell helpers every script may use: `lc_alive PID START` (that very
/// process is there and not a zombie), `lc_state PID` (its state letter),
/// `lc_which PROGRAM` (the file a server's program name runs: a path as it is,
/// a name looked up on `PATH`, then in `/usr/sbin`, which an account's `PATH`
/// often lacks; fails if there is none).
pub(super) const PRELUDE: &str = r#"lc_stat() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null; }
lc_alive() { s=$(lc_stat "$1") && [ -n "$s" ] || return 1; [ "${s%% *}" != Z ] && [ "$(echo "$s" | cut -d' ' -f20)" = "$2" ]; }
lc_state() { s=$(lc_stat "$1"); echo "${s%% *}"; }
lc_which() { case $1 in */*) w=$1 ;; *) w=$(command -v "$1") || w=/usr/sbin/$1 ;; esac; [ -f "$w" ] && [ -x "$w" ] && echo "$w"; }
"#;

/// How long ssh may take to reach a host before it is unreachable.
const CONNECT_TIMEOUT_SECS: u32 = 5;

/// ssh could not reach a host, or was not let in (its exit status 255).
#[derive(Debug, thiserror::Error)]
#[error("host {host} is unreachable over SSH: {said}")]
pub struct Unreachable {
    pub host: String,
    pub said: String,
}

/// A host, and the connection the run keeps open to it, if any.
#[derive(Debug, Clone)]
pub struct Host {
    pub remote: RemoteHost,
    /// The control socket of the run's [`Master`] to it.
    control: Option<PathBuf>,
}

/// `s` quoted for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Host {
    /// A host reached without a master of the run's (`lockcheck recover`).
    pub fn new(remote: RemoteHost) -> Host {
        Host {
            remote,
            control: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.remote.name
    }

    /// `ssh` with the run's configuration file and options, before the host:
    /// no connection sharing yet (ssh takes the first value of an option given).
    fn ssh_base(&self) -> Command {
        let mut c = Command::new("ssh");
        if let Some(cfg) = &self.remote.ssh_config {
            c.arg("-F").arg(cfg);
        }
        c.args(["-o", "BatchMode=yes"])
            .arg("-o")
            .arg(format!("ConnectTimeout={CONNECT_TIMEOUT_SECS}"));
        c
    }

    /// `ssh` through the run's connection to the host, if it has one.
    pub(super) fn ssh(&self) -> Command {
        let mut c = self.ssh_base();
        match &self.control {
            // Falls back to a connection of its own should the master be gone.
            Some(p) => c
                .args(["-o", "ControlMaster=no"])
                .arg("-o")
                .arg(format!("ControlPath={}", p.display())),
            None => c.args(["-o", "ControlMaster=no", "-o", "ControlPath=none"]),
        };
        c
    }

    /// The address this machine reaches the host at: the `HostName` the SSH
    /// configuration gives it (`ssh -G`), resolved here.
    pub fn address(&self) -> Result<std::net::IpAddr> {
        use std::net::ToSocketAddrs;
        let mut c = Command::new("ssh");
        if let Some(cfg) = &self.remote.ssh_config {
            c.arg("-F").arg(cfg);
        }
        let out = c
            .arg("-G")
            .arg(self.name())
            .output()
            .context("running ssh -G (Debian package openssh-client)")?;
        if !out.status.success() {
            bail!(
                "ssh -G {}: {}",
                self.name(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let hostname = text
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .unwrap_or(self.name())
            .trim()
            .to_string();
        let addrs: Vec<_> = (hostname.as_str(), 0)
            .to_socket_addrs()
            .with_context(|| format!("resolving host {} ({hostname})", self.name()))?
            .map(|a| a.ip())
            .collect();
        addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .with_context(|| format!("host {} ({hostname}) has no address", self.name()))
    }

    /// Runs `script` on the host with `PRELUDE` and returns what it printed; a
    /// failure names the host and carries what it said.
    pub fn run(&self, script: &str) -> Result<String> {
        let mut child = self
            .ssh()
            .arg(self.name())
            .args(["sh", "-s"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running ssh (Debian package openssh-client)")?;
        if let Some(mut stdin) = child.stdin.take() {
            // A host that hangs up early leaves the pipe broken: its status says why.
            let _ = stdin.write_all(format!("{PRELUDE}{script}\n").as_bytes());
        }
        let out = child.wait_with_output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        match out.status.code() {
            Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            Some(255) => Err(Unreachable {
                host: self.name().to_string(),
                said: stderr,
            }
            .into()),
            _ => bail!("on host {} ({}): {stderr}", self.name(), out.status),
        }
    }

    /// [`Host::run`] off the async runtime, whose clock times the clients' ops.
    pub async fn run_async(&self, script: String) -> Result<String> {
        let host = self.clone();
        tokio::task::spawn_blocking(move || host.run(&script)).await?
    }

    /// Starts `cmd` (program, arguments, environment, directory) on the host in
    /// a session of its own, once `data` exists, output appended to `log`, and
    /// names it `name`. A program the host does not have is `Ok(Err(program))`.
    pub fn spawn(
        &self,
        name: &str,
        cmd: &Command,
        data: &Path,
        log: &Path,
    ) -> Result<std::result::Result<Proc, String>> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut line = String::from("env");
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                line.push_str(&format!(
                    " {}",
                    quote(&format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                ));
            }
        }
        line.push_str(" setsid \"$p\"");
        for a in cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(&a.to_string_lossy()));
        }
        let cd = cmd
            .get_current_dir()
            .map(|d| format!("cd {} || exit 1\n", quote(&d.to_string_lossy())))
            .unwrap_or_default();
        // No job control in `sh -s`: the background child is no group leader, so
        // setsid does not fork, and $! is the server's own pid.
        let script = format!(
            "p=$(lc_which {prog}) || {{ echo missing; exit 0; }}\n\
             mkdir -p {data} {dir} || exit 1\n{cd}\
             {line} </dev/null >>{log} 2>&1 &\n\
             pid=$!\necho \"$pid $(lc_stat $pid | cut -d' ' -f20)\"",
            prog = quote(&program),
            data = quote(&data.to_string_lossy()),
            dir = quote(&log.parent().unwrap_or(Path::new("/")).to_string_lossy()),
            log = quote(&log.to_string_lossy()),
        );
        let out = self.run(&script)?;
        let out = out.trim();
        if out == "missing" {
            return Ok(Err(program));
        }
        let mut words = out.split_whitespace();
        let (Some(pid), Some(start)) = (words.next(), words.next()) else {
            bail!(
                "starting {name} on host {}: it exited at once (said {out:?})",
                self.name()
            );
        };
        Ok(Ok(Proc {
            name: name.to_string(),
            pid: pid.parse().with_context(|| format!("a pid from {out:?}"))?,
            start_time: start
                .parse()
                .with_context(|| format!("a start time from {out:?}"))?,
        }))
    }

    /// Whether that very process still runs on the host.
    pub fn alive(&self, p: &Proc) -> Result<bool> {
        let out = self.run(&format!(
            "if lc_alive {} {}; then echo yes; else echo no; fi",
            p.pid, p.start_time
        ))?;
        Ok(out.trim() == "yes")
    }

    /// SIGSTOP to the process, and a wait (up to 1 s) until the host's kernel
    /// shows it stopped. False: it was gone.
    pub fn sigstop(&self, p: &Proc) -> Result<bool> {
        let (pid, start) = (p.pid, p.start_time);
        let out = self.run(&format!(
            "lc_alive {pid} {start} || {{ echo gone; exit 0; }}\nkill -STOP {pid}\ni=0\n\
             while [ \"$(lc_state {pid})\" != T ] && [ $i -lt 1000 ]; do sleep 0.001; i=$((i+1)); done\n\
             if [ \"$(lc_state {pid})\" = T ]; then echo stopped; else echo \"pid {pid} did not stop within 1 s of SIGSTOP\" >&2; exit 1; fi"
        ))?;
        Ok(out.trim() == "stopped")
    }

    /// Sends `signal` (`CONT`, `KILL`) to the process if it is still that
    /// process; says whether it was.
    pub fn signal(&self, p: &Proc, signal: &str) -> Result<bool> {
        let out = self.run(&format!(
            "if lc_alive {pid} {start}; then kill -{signal} {pid} && echo yes; else echo no; fi",
            pid = p.pid,
            start = p.start_time
        ))?;
        Ok(out.trim() == "yes")
    }

    /// Ends the processes: SIGCONT and SIGTERM, up to `grace` for them to exit
    /// (with no grace, SIGKILL alone: a crash, no shutdown), then SIGKILL, and a
    /// wait until they are gone; in one round trip.
    pub fn end(&self, procs: &[&Proc], grace: Option<Duration>) -> Result<()> {
        if procs.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = procs
            .iter()
            .map(|p| format!("{}:{}", p.pid, p.start_time))
            .collect();
        let ticks = grace.map_or(0, |g| g.as_millis() / 10);
        let term = if grace.is_some() {
            "lc_each kill -CONT; lc_each kill -TERM"
        } else {
            ""
        };
        self.run(&format!(
            "lc_each() {{ for ps in {list}; do lc_alive ${{ps%%:*}} ${{ps#*:}} && \"$@\" ${{ps%%:*}}; done; true; }}\n\
             lc_any() {{ for ps in {list}; do lc_alive ${{ps%%:*}} ${{ps#*:}} && return 0; done; return 1; }}\n\
             {term}\n\
             i=0; while lc_any && [ $i -lt {ticks} ]; do sleep 0.01; i=$((i+1)); done\n\
             lc_each kill -KILL\n\
             i=0; while lc_any && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done\n\
             if lc_any; then echo 'a killed server is still there after 5 s' >&2; exit 1; fi",
            list = list.join(" ")
        ))
        .map(|_| ())
    }

    /// The whole of the file `path` on the host (a node's log), empty if it is not there.
    pub fn read(&self, path: &Path) -> Result<String> {
        self.run(&format!(
            "cat {} 2>/dev/null; true",
            quote(&path.to_string_lossy())
        ))
    }

    /// Removes the run's directory `dir` on the host (or a node's data in it):
    /// only one lockcheck named (`lockcheck-...`), or inside one. Says whether it
    /// was there.
    pub fn remove_dir(&self, dir: &Path) -> Result<bool> {
        use std::path::Component;
        let named = dir
            .ancestors()
            .filter_map(Path::file_name)
            .any(|n| n.to_string_lossy().starts_with("lockcheck-"));
        let plain = dir
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !named || !plain || !dir.is_absolute() {
            bail!(
                "{} on host {} is no directory lockcheck made: left alone",
                dir.display(),
                self.name()
            );
        }
        let d = quote(&dir.to_string_lossy());
        let out = self.run(&format!(
            "if [ -e {d} ]; then rm -rf {d} && echo yes; else echo no; fi"
        ))?;
        Ok(out.trim() == "yes")
    }
}

impl Host {
    /// Makes iptables chain `chain` in `table` holding `rules` (matches and
    /// target), and jumps to it first thing from the table's OUTPUT, in one
    /// `iptables-restore` that leaves every other rule alone. `filter` rules
    /// cut what the host sends, and what comes back on its connections (by the
    /// address conntrack remembers): they are jumped to from INPUT too. `nat`
    /// rules redirect what it sends.
    pub fn add_chain(&self, table: &str, chain: &str, rules: &[String]) -> Result<()> {
        let mut input = format!("*{table}\n:{chain} - [0:0]\n");
        for r in rules {
            input.push_str(&format!("-A {chain} {r}\n"));
        }
        let from: &[&str] = if table == "filter" {
            &["OUTPUT", "INPUT"]
        } else {
            &["OUTPUT"]
        };
        for hook in from {
            input.push_str(&format!("-I {hook} 1 -j {chain}\n"));
        }
        input.push_str("COMMIT\n");
        self.run(&format!(
            "iptables-restore -w --noflush <<'LOCKCHECK_RULES'\n{input}LOCKCHECK_RULES"
        ))
        .map(|_| ())
        .with_context(|| {
            format!(
                "adding rules to the {table} table of host {} (iptables, as root)",
                self.name()
            )
        })
    }

    /// Removes chain `chain` of `table` and the jumps to it; says whether it
    /// was there.
    pub fn remove_chain(&self, table: &str, chain: &str) -> Result<bool> {
        let ours = |s: &str| !s.contains(|c: char| !c.is_ascii_alphanumeric() && c != '-');
        if !chain.starts_with("lockcheck-") || !ours(chain) || !ours(table) {
            bail!(
                "{chain} ({table}) on host {} is no chain lockcheck made: left alone",
                self.name()
            );
        }
        let out = self.run(&format!(
            "if iptables -w -t {table} -n -L {chain} >/dev/null 2>&1; then\n\
             for hook in OUTPUT INPUT; do while iptables -w -t {table} -D $hook -j {chain} 2>/dev/null; do :; done; done\n\
             iptables -w -t {table} -F {chain} && iptables -w -t {table} -X {chain} && echo removed\nelse echo gone; fi"
        ))?;
        Ok(out.trim() == "removed")
    }
}

/// The run's open connection to a host (`ssh -N` as `ControlMaster`), journaled
/// as a process of the run; closed when dropped.
pub struct Master {
    child: Child,
    socket: PathBuf,
    journal: Arc<Journal>,
    id: u64,
}

impl Master {
    /// Opens the connection to `remote`, its socket under `control_dir`, its
    /// complaints in `log`; waits until it serves. Returns the host reached
    /// through it.
    pub fn open(
        remote: RemoteHost,
        control_dir: &Path,
        index: usize,
        log: &Path,
        journal: Arc<Journal>,
    ) -> Result<(Master, Host)> {
        let socket = control_dir.join(format!("h{index}"));
        let host = Host::new(remote);
        let err =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = host
            .ssh_base()
            .args(["-o", "ControlMaster=yes", "-o", "ControlPersist=no"])
            .arg("-o")
            .arg(format!("ControlPath={}", socket.display()))
            .arg("-N")
            .arg(host.name())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .context("running ssh (Debian package openssh-client)")?;
        let pid = child.id() as i32;
        let id = journal.record(Effect::Process(Proc::of(
            format!("ssh-master-{}", host.name()),
            pid,
        )?))?;
        let mut master = Master {
            child,
            socket: socket.clone(),
            journal,
            id,
        };
        let deadline = Instant::now() + Duration::from_secs(CONNECT_TIMEOUT_SECS as u64 + 5);
        while !socket.exists() {
            if let Ok(Some(status)) = master.child.try_wait() {
                bail!(
                    "host {} is unreachable over SSH ({status}): {}",
                    host.name(),
                    std::fs::read_to_string(log).unwrap_or_default().trim()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "host {}: no SSH connection within {} s: {}",
                    host.name(),
                    CONNECT_TIMEOUT_SECS + 5,
                    std::fs::read_to_string(log).unwrap_or_default().trim()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok((
            master,
            Host {
                control: Some(socket),
                ..host
            },
        ))
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
        let _ = self.journal.undone(self.id);
    }
}
