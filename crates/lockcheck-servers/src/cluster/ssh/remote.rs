//! This machine's own programs on a host, over the run's connection to it: a
//! copy of the program ([`Host::install`]), a process of it whose standard
//! input and output are an SSH channel ([`Host::attached`]), and a port of this
//! machine's reachable from the host's loopback ([`Host::forward`]), so that
//! a process there reaches a service here whatever lies between (NAT, a
//! `ProxyJump`): the channel is the only path it needs.

use super::host::{quote, Host, Unreachable, PRELUDE};
use anyhow::{bail, Context, Result};
use lockcheck_journal::Proc;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What an [`Host::attached`] command prints first, with its pid and start time.
pub const STARTED: &str = "lockcheck-started";

impl Host {
    /// Copies the program `local` into `dir` on the host (made if need be),
    /// under its own name, executable; the host must run this machine's
    /// architecture. Returns its path there.
    pub fn install(&self, local: &Path, dir: &Path) -> Result<PathBuf> {
        let name = local
            .file_name()
            .with_context(|| format!("{} names no program", local.display()))?;
        let remote = dir.join(name);
        let arch = std::env::consts::ARCH;
        let file = quote(&remote.to_string_lossy());
        // Written aside, then renamed: a half-copied program never runs.
        let script = format!(
            "a=$(uname -m); [ \"$a\" = {arch} ] || {{ echo \"the host runs $a, this machine's program is built for {arch}\" >&2; exit 1; }}\n\
             mkdir -p {dir} && cat >{file}.part && chmod 700 {file}.part && mv {file}.part {file}",
            dir = quote(&dir.to_string_lossy()),
        );
        let program =
            std::fs::File::open(local).with_context(|| format!("reading {}", local.display()))?;
        let out = self
            .ssh()
            .arg(self.name())
            .arg(format!("sh -c {}", quote(&script)))
            .stdin(program)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("running ssh (Debian package openssh-client)")?;
        self.checked(out.status, &out.stderr)
            .with_context(|| format!("copying {} to {}", local.display(), remote.display()))?;
        Ok(remote)
    }

    /// `ssh` running `argv` on the host as a process of its own whose standard
    /// input, output and error are those of the returned command, through the
    /// channel. Before it runs, it prints `STARTED` `PID START`: the process
    /// as [`Host::started`] reads it (it then `exec`s: the same pid). Lines
    /// before that one are the account's shell start-up files talking.
    pub fn attached(&self, argv: &[String]) -> Command {
        let args: Vec<String> = argv.iter().map(|a| quote(a)).collect();
        let script = format!(
            "{PRELUDE}echo \"{STARTED} $$ $(lc_stat $$ | cut -d' ' -f20)\"\nexec {}",
            args.join(" ")
        );
        let mut c = self.ssh();
        c.arg(self.name()).arg(format!("sh -c {}", quote(&script)));
        c
    }

    /// The process an [`Host::attached`] command started, named `name`, from
    /// its `STARTED` line; none for another line.
    pub fn started(&self, name: &str, line: &str) -> Option<Result<Proc>> {
        let said = line.strip_prefix(STARTED)?;
        Some(self.started_at(name, said))
    }

    fn started_at(&self, name: &str, line: &str) -> Result<Proc> {
        let mut words = line.split_whitespace();
        let (Some(pid), Some(start), None) = (words.next(), words.next(), words.next()) else {
            bail!(
                "starting {name} on host {}: expected its pid and start time, found {line:?}",
                self.name()
            );
        };
        Ok(Proc {
            name: name.to_string(),
            pid: pid
                .parse()
                .with_context(|| format!("a pid from {line:?}"))?,
            start_time: start
                .parse()
                .with_context(|| format!("a start time from {line:?}"))?,
        })
    }

    /// Makes `local` (a TCP service of this machine's) reachable on the host
    /// at `127.0.0.1:<port>` through the run's connection (`ssh -O forward
    /// -R`), until that connection closes; returns the port, which the host
    /// picks. The host's sshd must allow forwarding (`AllowTcpForwarding`,
    /// its default).
    pub fn forward(&self, local: SocketAddr) -> Result<u16> {
        let out = self
            .ssh()
            .args(["-O", "forward", "-R"])
            .arg(format!("127.0.0.1:0:{}:{}", local.ip(), local.port()))
            .arg(self.name())
            .stdin(Stdio::null())
            .output()
            .context("running ssh (Debian package openssh-client)")?;
        self.checked(out.status, &out.stderr)
            .with_context(|| format!("forwarding a port of the host to {local}"))?;
        let said = String::from_utf8_lossy(&out.stdout);
        said.split_whitespace()
            .find_map(|w| w.parse::<u16>().ok())
            .with_context(|| {
                format!(
                    "forwarding a port of host {} to {local}: ssh named no port ({said:?}, {:?})",
                    self.name(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )
            })
    }

    /// An ssh run's outcome: 255 is ssh's own (the host unreachable).
    fn checked(&self, status: std::process::ExitStatus, stderr: &[u8]) -> Result<()> {
        let said = String::from_utf8_lossy(stderr).trim().to_string();
        match status.code() {
            Some(0) => Ok(()),
            Some(255) => Err(Unreachable {
                host: self.name().to_string(),
                said,
            }
            .into()),
            _ => bail!("on host {} ({status}): {said}", self.name()),
        }
    }
}
