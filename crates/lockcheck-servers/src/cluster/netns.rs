//! Server nodes in network namespaces of their own (`[backend] network =
//! "namespaces"`), so that the links *between* nodes (etcd raft, ZooKeeper's
//! quorum) can be cut inside the kernel: a per-link proxy cannot sit there, since
//! etcd derives its member ids from the peer URLs every member is told.
//!
//! One run's network, named by a short id derived from its run directory:
//! - a namespace per node, `lockcheck-<id>-n1` ..., with one interface `eth0` at
//!   `10.213.S.i` (node n*i*; `S` picks the run's /24) and its loopback;
//! - a switch namespace, `lockcheck-<id>-switch`, holding the bridge `br0` that
//!   joins the nodes' veths and the host's. The bridge lives there, not in the
//!   host's namespace, because with `br_netfilter` loaded bridged frames cross the
//!   host's iptables FORWARD chain, whose policy Docker sets to DROP; the switch
//!   namespace's own chains are empty, and the host's firewall is never touched;
//! - the host's end of that veth, `lck<id>`, at `10.213.S.254`: the controller,
//!   the workers and the client proxies reach every node from the host namespace.
//!
//! Deleting the switch namespace removes the bridge and every veth (each pair
//! dies with either end), the host's interface included; a node's namespace goes
//! once its server has exited. [`remove_run`] does both from the id alone, which
//! is all `lockcheck recover` needs from the journal.

use super::node::NodeSpec;
use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Every run's namespace names start with this.
const PREFIX: &str = "lockcheck-";

/// The runs' /24s are `10.213.S.0/24`, S from 0 to 255.
const NET: [u8; 2] = [10, 213];

/// The host's address on a run's network: `10.213.S.254`.
const HOST: u8 = 254;

/// Serialises the choice of a run's /24 between lockcheck processes (tests run
/// in parallel): held from the look at the host's addresses to the assignment.
const SUBNET_LOCK: &str = "/run/lockcheck-netns.lock";

/// The short id of the run in `run_dir`: 6 hex digits of a hash of its path, so
/// that the names fit an interface's 15 characters and `recover` finds them
/// again from the run directory's journal.
pub fn run_id(run_dir: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let path = std::fs::canonicalize(run_dir).unwrap_or_else(|_| run_dir.to_path_buf());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut h);
    format!("{:06x}", h.finish() & 0xff_ffff)
}

/// The namespace of `node` in run `id`.
pub fn namespace(id: &str, node: &str) -> String {
    format!("{PREFIX}{id}-{node}")
}

/// The run's switch namespace, holding its bridge.
fn switch(id: &str) -> String {
    namespace(id, "switch")
}

/// The host's end of the run's veth to its bridge.
pub fn host_interface(id: &str) -> String {
    format!("lck{id}")
}

/// A run's network, made by [`Network::create`]; dropping it removes it all.
#[derive(Debug)]
pub struct Network {
    id: String,
    subnet: u8,
    nodes: Vec<String>,
    removed: std::sync::atomic::AtomicBool,
    /// What lives as long as the network: the proxies its nodes' links are
    /// redirected to ([`Network::hold`]).
    held: std::sync::Mutex<Vec<Held>>,
}

/// Something a [`Network`] keeps alive until it is removed.
struct Held(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held(..)")
    }
}

/// Runs once the run's network exists and before any node starts, with the
/// nodes' addresses: what must be in the nodes' namespaces from their first
/// packet (`fault::netns` redirects the links between nodes to proxies, which a
/// rule added later would not do for connections already open).
#[derive(Clone)]
pub struct OnNetwork(pub Arc<OnNetworkFn>);

/// What an [`OnNetwork`] runs.
pub type OnNetworkFn = dyn Fn(&Network, &[NodeSpec]) -> Result<()> + Send + Sync;

impl std::fmt::Debug for OnNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnNetwork(..)")
    }
}

impl Network {
    /// Makes the namespaces, the bridge and the veths of run `id` for `nodes`
    /// (names, in node order). On failure, whatever was made is removed.
    pub fn create(id: &str, nodes: &[String]) -> Result<Network> {
        if nodes.len() > 250 {
            bail!("a network of namespaces holds at most 250 nodes");
        }
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(SUBNET_LOCK)
            .with_context(|| format!("opening {SUBNET_LOCK}"))?;
        // SAFETY: flock on a descriptor we own; released when `lock` closes.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {SUBNET_LOCK}"));
        }
        let subnet = free_subnet()?;
        let net = Network {
            id: id.to_string(),
            subnet,
            nodes: nodes.to_vec(),
            removed: false.into(),
            held: Default::default(),
        };
        net.build()
            .with_context(|| format!("making the network namespaces of run {id}"))?;
        drop(lock);
        Ok(net)
    }

    fn build(&self) -> Result<()> {
        let (id, sw) = (&self.id, switch(&self.id));
        let host = host_interface(id);
        if Path::new(NETNS_DIR).join(&sw).exists() {
            bail!("namespace {sw} exists already: another run with the same directory, or one not recovered (`lockcheck recover`)");
        }
        ip(&["netns", "add", &sw])?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", "host", "netns", &sw,
        ])?;
        ip(&["-n", &sw, "link", "set", "host", "master", "br0", "up"])?;
        let host_cidr = format!("{}/24", self.host_addr());
        ip(&["addr", "add", &host_cidr, "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        for (i, node) in self.nodes.iter().enumerate() {
            let ns = namespace(id, node);
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", node, "netns",
                &sw,
            ])?;
            ip(&["-n", &sw, "link", "set", node, "master", "br0", "up"])?;
            let cidr = format!("{}/24", self.addr(i));
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Node `i`'s address (0-based, node order).
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(NET[0], NET[1], self.subnet, i as u8 + 1)
    }

    /// The host's address on the run's network.
    pub fn host_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(NET[0], NET[1], self.subnet, HOST)
    }

    /// The namespace of `node`, if it is one of this network's.
    pub fn namespace_of(&self, node: &str) -> Option<String> {
        self.nodes
            .iter()
            .any(|n| n == node)
            .then(|| namespace(&self.id, node))
    }

    /// The address of `node`, if it is one of this network's.
    pub fn addr_of(&self, node: &str) -> Option<Ipv4Addr> {
        let i = self.nodes.iter().position(|n| n == node)?;
        Some(self.addr(i))
    }

    /// Opens `node`'s namespace, for a process to enter (`setns`) before it runs.
    pub fn open(&self, node: &str) -> Result<std::fs::File> {
        let ns = self
            .namespace_of(node)
            .with_context(|| format!("no node {node} in network {}", self.id))?;
        let path = Path::new(NETNS_DIR).join(&ns);
        std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))
    }

    /// Keeps `thing` until the network is removed: the proxies of its links,
    /// which must serve as long as any node may use them.
    pub fn hold(&self, thing: Box<dyn std::any::Any + Send + Sync>) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Held(thing));
    }

    /// Runs `program ARGS` (iptables-restore) in node `node`'s namespace with
    /// `input` on its stdin.
    pub fn run_in(&self, node: &str, program: &str, args: &[&str], input: &str) -> Result<()> {
        let ns = self
            .namespace_of(node)
            .with_context(|| format!("no node {node} in network {}", self.id))?;
        run_in(&ns, program, args, input)
    }

    /// Removes the network (call it once the nodes' processes have exited, so
    /// that their namespaces go at once). Idempotent; also what drop does.
    pub fn remove(&self) -> Result<()> {
        if self.removed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        // No node is left to use them.
        self.held.lock().unwrap_or_else(|e| e.into_inner()).clear();
        remove_run(&self.id).map(|_| ())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            tracing::warn!("removing the network of run {}: {e:#}", self.id);
        }
    }
}

/// Enters the network namespace open as `fd`: for a child between fork and exec
/// (`CommandExt::pre_exec`), so that the server it becomes, with its own pid,
/// lives in its node's namespace.
pub fn enter(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: setns is async-signal-safe and only reads the descriptor.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this machine can put nodes in namespaces and cut their links: root,
/// `ip` and `iptables-restore`. Else why not, and the Debian package to install
/// where one is missing.
pub fn available() -> Result<(), (String, Option<&'static str>)> {
    for (program, package) in [("ip", "iproute2"), ("iptables-restore", "iptables")] {
        let found = Command::new(program)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err((format!("{program} not found"), Some(package)));
        }
    }
    if !nix::unistd::geteuid().is_root() {
        return Err((
            "needs root, to make network namespaces, veths and a bridge".into(),
            None,
        ));
    }
    Ok(())
}

/// What [`remove_run`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub namespaces: Vec<String>,
    /// Whether the host's interface was still there.
    pub host_interface: bool,
}

/// Removes every namespace of run `id` and the host's interface; nothing left
/// is not an error. The switch namespace goes first: with it go the bridge and
/// every veth, the host's end included.
pub fn remove_run(id: &str) -> Result<Removed> {
    let mut removed = Removed::default();
    let mut names: Vec<String> = namespaces_of(id)?;
    // The switch first: the veths' pairs die with it.
    names.sort_by_key(|n| *n != switch(id));
    let host = host_interface(id);
    removed.host_interface = interface_exists(&host);
    let mut first = None;
    for ns in names {
        match ip(&["netns", "delete", &ns]) {
            Ok(()) => removed.namespaces.push(ns),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    // The kernel destroys a namespace (and its veths) asynchronously.
    let deadline = Instant::now() + Duration::from_secs(2);
    while interface_exists(&host) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if interface_exists(&host) {
        if let Err(e) = ip(&["link", "delete", &host]) {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(removed), Err)
}

/// The named namespaces of run `id`.
pub fn namespaces_of(id: &str) -> Result<Vec<String>> {
    let prefix = format!("{PREFIX}{id}-");
    let entries = match std::fs::read_dir(NETNS_DIR) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {NETNS_DIR}")),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    names.sort();
    Ok(names)
}

fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// A /24 of 10.213/16 that no host interface has an address in.
fn free_subnet() -> Result<u8> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .context("running `ip -o -4 addr show` (Debian package iproute2)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let taken = |s: u8| text.contains(&format!("inet {}.{}.{s}.", NET[0], NET[1]));
    // Start from a pseudo-random place: two machines' runs rarely meet anyway,
    // and a stale network of a killed run only takes its own /24.
    let start = (std::process::id() % 256) as u8;
    (0..=255u8)
        .map(|k| start.wrapping_add(k))
        .find(|&s| !taken(s))
        .context("every /24 of 10.213.0.0/16 is in use on this machine")
}

/// Runs `ip ARGS`; an error carries what it printed.
fn ip(args: &[&str]) -> Result<()> {
    run("ip", args)
}

/// Runs a network tool to completion; an error names the command and carries its
/// output. A missing tool is named with its Debian package.
pub fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program).args(args).output().with_context(|| {
        let package = if program.starts_with("iptables") {
            "iptables"
        } else {
            "iproute2"
        };
        format!("running {program} (Debian package {package})")
    })?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Runs `program ARGS` inside namespace `ns`, with `input` on its stdin.
pub fn run_in(ns: &str, program: &str, args: &[&str], input: &str) -> Result<()> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!("running {program} in {ns} (Debian packages iproute2, iptables)")
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .with_context(|| format!("feeding {program} in {ns}"))?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "`{program} {}` in {ns} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_an_interface_and_find_the_run_again() {
        let id = run_id(Path::new("/tmp/some-run"));
        assert_eq!(id.len(), 6);
        assert_eq!(id, run_id(Path::new("/tmp/some-run")));
        assert_ne!(id, run_id(Path::new("/tmp/other-run")));
        assert!(host_interface(&id).len() <= 15);
        assert_eq!(namespace(&id, "n2"), format!("lockcheck-{id}-n2"));
    }
}
