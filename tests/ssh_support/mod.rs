//! Hosts for the tests of the `ssh` runtime, made by the test and by nothing
//! else: each a network namespace with its own address on a bridge of its own
//! (`cluster::netns::Network`, as the local runtime's nodes get), running its
//! own `sshd` (Debian's openssh-server) on port 22 of that address, which lets
//! in one key made for the test. The SSH configuration the runs get
//! (`LOCKCHECK_SSH_CONFIG`) names these hosts and nothing else; the user's own
//! is never read. Dropping the hosts stops the sshds and removes the namespaces.
#![allow(dead_code)]

use crate::run_support::{start_json_with, wait_for, workload, write_workload, Finished};
use lockcheck::cluster::netns::{self, Network};
use lockcheck::journal::{self, Effect};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `lockcheck run WORKLOAD --json` on the hosts; waits for its end.
pub fn run_on(hosts: &Hosts, workload: &Path, args: &[&str]) -> Finished {
    start_json_with(hosts.lockcheck(), workload, args).finish()
}

/// Waits until the journal of the run going on under `results` shows what
/// `check` looks for; the run directory and what `check` found.
pub fn wait_journaled<T>(
    what: &str,
    timeout: Duration,
    results: &Path,
    mut check: impl FnMut(&journal::Pending) -> Option<T>,
) -> (PathBuf, T) {
    wait_for(what, timeout, || {
        let dir = std::fs::canonicalize(results.join("latest")).ok()?;
        let pending = journal::pending(&dir).ok()?;
        check(&pending).map(|found| (dir, found))
    })
}

/// The run's journal holds nothing still in force on a host.
pub fn assert_nothing_left_on_hosts(run_dir: &Path) {
    let left: Vec<_> = journal::pending(run_dir)
        .unwrap()
        .effects
        .into_iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Effect::RemoteProcess { .. }
                    | Effect::RemoteStopped { .. }
                    | Effect::RemoteDir { .. }
                    | Effect::RemoteChain { .. }
            )
        })
        .collect();
    assert!(
        left.is_empty(),
        "a clean end leaves nothing on the hosts: {left:?}"
    );
}

/// A shipped workload moved onto the first `n` hosts.
pub fn shipped_on(hosts: &Hosts, name: &str, n: usize) -> PathBuf {
    let text = std::fs::read_to_string(workload(name)).unwrap();
    write_workload(hosts.dir.path(), name, &hosts.workload(&text, n))
}

pub struct Hosts {
    pub names: Vec<String>,
    pub addrs: Vec<std::net::Ipv4Addr>,
    /// The SSH configuration naming them (`Host h1` ... with its key).
    pub ssh_config: PathBuf,
    /// Where the runs keep the servers' data on the hosts (`remote_dir`).
    pub remote_dir: PathBuf,
    sshd: Vec<Option<Child>>,
    network: Option<Network>,
    pub dir: tempfile::TempDir,
}

/// Runs `program ARGS` to its end; fails the test with its output if it fails.
fn must(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Hosts {
    /// `n` hosts, h1..hN, each serving SSH.
    pub fn new(n: usize) -> Hosts {
        let dir = tempfile::tempdir().unwrap();
        let id = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
        let names: Vec<String> = (1..=n).map(|i| format!("h{i}")).collect();
        let network = Network::create(&id, &names).unwrap();
        let addrs: Vec<_> = (0..n).map(|i| network.addr(i)).collect();
        let key = dir.path().join("key");
        let host_key = dir.path().join("host_key");
        for k in [&key, &host_key] {
            must(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-f", k.to_str().unwrap()],
            );
        }
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).unwrap();
        // sshd's privilege separation directory, made by its package's service.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let mut config = String::new();
        let mut hosts = Hosts {
            names: names.clone(),
            addrs: addrs.clone(),
            ssh_config: dir.path().join("ssh_config"),
            remote_dir: dir.path().join("remote"),
            sshd: Vec::new(),
            network: Some(network),
            dir,
        };
        std::fs::create_dir_all(&hosts.remote_dir).unwrap();
        for (name, addr) in names.iter().zip(&addrs) {
            let cfg = hosts.dir.path().join(format!("sshd_config.{name}"));
            std::fs::write(
                &cfg,
                format!(
                    "ListenAddress {addr}:22\nHostKey {}\nAuthorizedKeysFile {}\nPidFile none\n\
                     PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                     StrictModes no\nPermitRootLogin prohibit-password\nMaxSessions 100\nMaxStartups 100\n",
                    host_key.display(),
                    authorized.display()
                ),
            )
            .unwrap();
            config.push_str(&format!(
                "Host {name}\n  HostName {addr}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  \
                 IdentityAgent none\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
                key.display()
            ));
        }
        std::fs::write(&hosts.ssh_config, config).unwrap();
        for i in 0..n {
            hosts.sshd.push(None);
            hosts.start_sshd(i);
        }
        hosts
    }

    /// Starts host `i`'s sshd and waits until it listens.
    pub fn start_sshd(&mut self, i: usize) {
        let name = &self.names[i];
        let ns = self.network.as_ref().unwrap().namespace_of(name).unwrap();
        let cfg = self.dir.path().join(format!("sshd_config.{name}"));
        let log = std::fs::File::create(self.dir.path().join(format!("sshd.{name}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.sshd[i] = Some(child);
        let addr = SocketAddr::from((self.addrs[i], 22));
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < deadline, "sshd of {name} did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops host `i`'s sshd: the host is then unreachable over SSH.
    pub fn stop_sshd(&mut self, i: usize) {
        if let Some(mut c) = self.sshd[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `ssh HOST SCRIPT` with the test's configuration; its stdout.
    pub fn ssh(&self, host: &str, script: &str) -> String {
        let out = Command::new("ssh")
            .arg("-F")
            .arg(&self.ssh_config)
            .args(["-o", "BatchMode=yes", host, script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ssh {host} {script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `text` (a workload) run on these hosts: `runtime = "ssh"`, and its
    /// `[backend]` given the first `n` hosts and the test's `remote_dir`.
    pub fn workload(&self, text: &str, n: usize) -> String {
        self.workload_on(text, &self.names[..n])
    }

    /// [`Hosts::workload`] on the hosts `names`.
    pub fn workload_on(&self, text: &str, names: &[String]) -> String {
        let hosts: Vec<String> = names.iter().map(|h| format!("{h:?}")).collect();
        let backend = format!(
            "[backend]\nhosts = [{}]\nremote_dir = {:?}\n",
            hosts.join(", "),
            self.remote_dir.display().to_string()
        );
        assert!(text.contains("[backend]\n"), "{text}");
        format!(
            "runtime = \"ssh\"\n{}",
            text.replacen("[backend]\n", &backend, 1)
        )
    }

    /// `lockcheck` with the hosts' SSH configuration in its environment.
    pub fn lockcheck(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_lockcheck"));
        c.env("LOCKCHECK_SSH_CONFIG", &self.ssh_config);
        c
    }

    /// `lockcheck run WORKLOAD --results RESULTS` on the hosts in the background,
    /// its output dropped: for a test that stops or kills it mid-run.
    pub fn spawn_run(&self, workload: &Path, results: &Path) -> Child {
        self.lockcheck()
            .arg("run")
            .arg(workload)
            .arg("--results")
            .arg(results)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// `lockcheck recover RUN_DIR` with the hosts' configuration: its exit code,
    /// stdout and stderr.
    pub fn recover(&self, run_dir: &Path) -> (Option<i32>, String, String) {
        let out = self
            .lockcheck()
            .arg("recover")
            .arg(run_dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Nothing a run left on the hosts: no server (a process whose command
    /// line names the runs' remote directory), none stopped, no directory.
    pub fn assert_clean(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let left = crate::run_support::leftovers(&self.remote_dir);
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "processes left on the hosts: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let dirs: Vec<_> = std::fs::read_dir(&self.remote_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(dirs.is_empty(), "directories left on the hosts: {dirs:?}");
    }

    /// The iptables rules and chains of lockcheck's on host `name`, in its
    /// filter and nat tables.
    pub fn chains(&self, name: &str) -> Vec<String> {
        self.ssh(name, "iptables -w -S; iptables -w -t nat -S")
            .lines()
            .filter(|l| l.contains("lockcheck-"))
            .map(str::to_string)
            .collect()
    }

    /// No rule of lockcheck's on any host.
    pub fn assert_no_chains(&self) {
        for name in &self.names {
            let left = self.chains(name);
            assert!(left.is_empty(), "{name}: {left:?}");
        }
    }

    pub fn ssh_config(&self) -> &Path {
        &self.ssh_config
    }

    /// A server of the test's own on host `i`, started in its namespace outside
    /// lockcheck (as a team's server runs before any audit): `program ARGS`,
    /// output in the test's directory, nothing of it under `remote_dir`.
    pub fn serve(&self, i: usize, program: &str, args: &[&str]) -> Server {
        let name = &self.names[i];
        let ns = self.network.as_ref().unwrap().namespace_of(name).unwrap();
        let log = std::fs::File::create(self.dir.path().join(format!("own-{name}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, program])
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        Server { child }
    }
}

/// A server the test started on a host itself; killed (resumed first) on drop.
pub struct Server {
    child: Child,
}

impl Server {
    /// `ip netns exec` execs the program: the server's own pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Still running, as the test started it (not stopped, not exited).
    pub fn assert_running(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the team's server exited"
        );
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let state = stat.rsplit_once(") ").unwrap().1.chars().next().unwrap();
        assert!(
            state != 'T' && state != 'Z',
            "the team's server is in state {state}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for i in 0..self.sshd.len() {
            self.stop_sshd(i);
        }
        if let Some(net) = self.network.take() {
            let id = net.id().to_string();
            drop(net);
            let _ = netns::remove_run(&id);
        }
    }
}
