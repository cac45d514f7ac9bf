//! Cutting and slowing links, in user space: a TCP proxy on every link.
//!
//! This kernel has no netem, and lockcheck must not touch the machine's
//! firewall; so each link a fault may cut (a client to a node, a node to a
//! peer) goes through a [`Link`]: a loopback listener forwarding to the real
//! address (for the links between nodes in namespaces, a listener on the host's
//! address of their network, which `fault::netns` redirects them to). Its [`Mode`] is set live:
//! - `Pass`: bytes flow;
//! - `Blackhole`: bytes stop (held, then delivered if the link heals, like a
//!   partition TCP rides out), so requests hang and time out;
//! - `Reset`: every connection is closed with an RST, and new ones too;
//! - `Latency`: each chunk is delayed by `delay ± jitter` (seeded), in order.
//!
//! Which links a partition cuts is a pure function of the party names
//! ([`cuts`], shared with the node partitions of `fault::netns`); [`Proxies`]
//! applies it to the links of a run.

pub use super::shape::{cuts, Cut, Shape};
use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What a link does to the bytes that cross it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Blackhole,
    Reset,
    Latency { delay: Duration, jitter: Duration },
}

/// A directed link: connections opened by `from` towards `to`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId {
    pub from: String,
    pub to: String,
}

impl LinkId {
    pub fn new(from: impl Into<String>, to: impl Into<String>) -> LinkId {
        LinkId {
            from: from.into(),
            to: to.into(),
        }
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.from, self.to)
    }
}

/// One proxied link. Dropping it closes the listener and every connection.
pub struct Link {
    id: LinkId,
    addr: SocketAddr,
    target: SocketAddr,
    mode: watch::Sender<Mode>,
    /// The connections `from` has open through the link now, and when a byte
    /// last crossed it: which nodes a client talks to ([`Proxies::connected`]).
    traffic: Arc<Traffic>,
    task: JoinHandle<()>,
}

impl Link {
    /// Listens on a free loopback port and forwards to `target`. `seed` drives
    /// the jitter, so the same seed gives the same delays.
    pub async fn start(id: LinkId, target: SocketAddr, seed: u64) -> Result<Link> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .with_context(|| format!("listening for link {id}"))?;
        Link::serve(id, listener, target, seed)
    }

    /// [`Link::start`], listening on `bind` (a free port of that address when
    /// its port is 0): the node-to-node links listen on the host's address on
    /// the nodes' network. Synchronous, for a hook run before the nodes start;
    /// needs a tokio runtime.
    pub fn start_on(id: LinkId, bind: SocketAddr, target: SocketAddr, seed: u64) -> Result<Link> {
        let listener = std::net::TcpListener::bind(bind)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(TcpListener::from_std)
            .with_context(|| format!("listening on {bind} for link {id}"))?;
        Link::serve(id, listener, target, seed)
    }

    fn serve(id: LinkId, listener: TcpListener, target: SocketAddr, seed: u64) -> Result<Link> {
        let addr = listener.local_addr()?;
        let (mode, rx) = watch::channel(Mode::Pass);
        let traffic = Arc::new(Traffic::default());
        let task = tokio::spawn(accept_loop(listener, target, rx, seed, traffic.clone()));
        Ok(Link {
            id,
            addr,
            target,
            mode,
            traffic,
            task,
        })
    }

    pub fn id(&self) -> &LinkId {
        &self.id
    }

    /// Where `from` must connect to reach `to` through this link.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }

    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// How many connections are open through the link now.
    pub fn open_connections(&self) -> usize {
        self.traffic.open.load(Ordering::SeqCst)
    }

    /// When a byte last crossed the link, either way (`None`: never).
    pub fn last_byte(&self) -> Option<Instant> {
        match self.traffic.last_byte_us.load(Ordering::SeqCst) {
            0 => None,
            us => Some(epoch() + Duration::from_micros(us)),
        }
    }
}

/// What crosses a link: its open connections, and its last byte.
#[derive(Default)]
struct Traffic {
    open: AtomicUsize,
    /// Microseconds from [`epoch`] to the last byte; 0 for none yet.
    last_byte_us: AtomicU64,
}

impl Traffic {
    fn carried(&self) {
        let us = Instant::now()
            .saturating_duration_since(epoch())
            .as_micros() as u64;
        self.last_byte_us.store(us.max(1), Ordering::SeqCst);
    }
}

/// The instant link times are counted from (the first asked for, this process).
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Counts a connection open from its accept to its end, however it ends.
struct Open(Arc<Traffic>);

impl Open {
    fn new(traffic: &Arc<Traffic>) -> Open {
        traffic.open.fetch_add(1, Ordering::SeqCst);
        Open(traffic.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    mode: watch::Receiver<Mode>,
    seed: u64,
    traffic: Arc<Traffic>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let mut n = 0u64;
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of descriptors, or a connection gone before accept: wait a
                // little rather than spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        n += 1;
        // Each connection and direction gets its own stream of jitter.
        let seed = seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let counted = Open::new(&traffic);
        let conn = connection(client, target, mode.clone(), seed, traffic.clone());
        conns.spawn(async move {
            conn.await;
            drop(counted);
        });
        while conns.try_join_next().is_some() {}
    }
}

/// Forwards one connection both ways until either side closes, or the link
/// resets it.
async fn connection(
    mut client: TcpStream,
    target: SocketAddr,
    mut mode: watch::Receiver<Mode>,
    seed: u64,
    traffic: Arc<Traffic>,
) {
    // A cut link accepts (the kernel does anyway) but does not reach the target
    // until it heals: the client's request hangs, as over a partition.
    let reset = match mode.wait_for(|m| *m != Mode::Blackhole).await {
        Ok(m) => *m == Mode::Reset,
        Err(_) => return,
    };
    if reset {
        abort(&client);
        return;
    }
    let Ok(mut server) = TcpStream::connect(target).await else {
        abort(&client);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let reset = {
        let (cr, cw) = client.split();
        let (sr, sw) = server.split();
        let (up, down) = (mode.clone(), mode.clone());
        let both = async {
            tokio::join!(
                pump(cr, sw, up, seed, &traffic),
                pump(sr, cw, down, seed.rotate_left(1), &traffic)
            )
        };
        tokio::select! {
            _ = both => false,
            _ = mode.wait_for(|m| *m == Mode::Reset) => true,
        }
    };
    if reset {
        abort(&client);
        abort(&server);
    }
}

/// Closes with an RST rather than a FIN: the peer sees "connection reset".
fn abort(s: &TcpStream) {
    let _ = s.set_zero_linger();
}

/// How many chunks may wait in one direction: beyond it the reader stops, and
/// TCP's own flow control holds the sender (a black hole fills up, not memory).
const IN_FLIGHT: usize = 64;

/// One direction: a reader stamps each chunk with the time it may be delivered,
/// a writer delivers it then, and holds everything while the link is a black hole.
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mode: watch::Receiver<Mode>,
    seed: u64,
    traffic: &Traffic,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let read = async {
        // Owned here, so that the writer sees the channel close when the sender
        // finishes and passes its FIN on: held by the enclosing function, it
        // kept every connection (and its far end) open until the link went.
        let tx = tx;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut last = Instant::now();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            traffic.carried();
            let delay = match *mode.borrow() {
                Mode::Latency { delay, jitter } => jittered(delay, jitter, &mut rng),
                _ => Duration::ZERO,
            };
            // In order: a chunk never overtakes the one before it.
            last = last.max(Instant::now() + delay);
            if tx.send((last, buf[..n].to_vec())).await.is_err() {
                break;
            }
        }
    };
    let write = async {
        let mut mode = mode.clone();
        while let Some((at, chunk)) = rx.recv().await {
            if mode.wait_for(|m| *m != Mode::Blackhole).await.is_err() {
                return;
            }
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // The sender finished: pass its FIN on.
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

fn jittered(delay: Duration, jitter: Duration, rng: &mut ChaCha8Rng) -> Duration {
    if jitter.is_zero() {
        return delay;
    }
    let j = jitter.as_nanos() as i128;
    let d = delay.as_nanos() as i128 + rng.gen_range(-j..=j);
    Duration::from_nanos(d.max(0) as u64)
}

impl From<Cut> for Mode {
    fn from(c: Cut) -> Mode {
        match c {
            Cut::Blackhole => Mode::Blackhole,
            Cut::Reset => Mode::Reset,
        }
    }
}

/// How close to a client's latest byte a link's last one must be for the client
/// to count as talking to its node: well under the keep-alive period of any
/// lease lockcheck runs (a third of it, 667 ms for the audit's 2 s), well over
/// a request's round trip to a node on this machine.
pub const TALKING: Duration = Duration::from_millis(250);

/// The proxied links of a run. Dropping it heals everything (the listeners go).
pub struct Proxies {
    links: BTreeMap<LinkId, Link>,
    seed: u64,
}

impl Proxies {
    pub fn new(seed: u64) -> Proxies {
        Proxies {
            links: BTreeMap::new(),
            seed,
        }
    }

    /// Puts a proxy on the link `from -> to`; returns the address `from` must
    /// use to reach `to`.
    pub async fn add(&mut self, id: LinkId, target: SocketAddr) -> Result<SocketAddr> {
        let seed = self.next_seed(&id)?;
        let link = Link::start(id.clone(), target, seed).await?;
        Ok(self.insert(link))
    }

    /// [`Proxies::add`], the proxy listening on `bind` ([`Link::start_on`]).
    pub fn add_on(
        &mut self,
        id: LinkId,
        bind: SocketAddr,
        target: SocketAddr,
    ) -> Result<SocketAddr> {
        let seed = self.next_seed(&id)?;
        let link = Link::start_on(id.clone(), bind, target, seed)?;
        Ok(self.insert(link))
    }

    /// The jitter seed of the next link, `id`, which must be new.
    fn next_seed(&self, id: &LinkId) -> Result<u64> {
        if self.links.contains_key(id) {
            bail!("link {id} is already proxied");
        }
        Ok(self.seed ^ (self.links.len() as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9))
    }

    fn insert(&mut self, link: Link) -> SocketAddr {
        let addr = link.addr();
        self.links.insert(link.id.clone(), link);
        addr
    }

    pub fn get(&self, id: &LinkId) -> Option<&Link> {
        self.links.get(id)
    }

    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    /// The nodes `from` (a client) talks to through its links now: of the
    /// links it has a connection open on, those whose last byte came within
    /// [`TALKING`] of its latest. That is the node its session lives on, for a
    /// client that talks to one node at a time (ZooKeeper's), or the nodes it
    /// balances over (etcd's, unless `client_endpoint` pins it to one). A
    /// connection left open and idle is not one: one a client's library keeps
    /// to a node it no longer asks anything, or whose end was not passed on.
    pub fn connected(&self, from: &str) -> Vec<String> {
        let open: Vec<(&Link, Instant)> = self
            .links
            .values()
            .filter(|l| l.id.from == from && l.open_connections() > 0)
            .filter_map(|l| Some((l, l.last_byte()?)))
            .collect();
        let Some(latest) = open.iter().map(|(_, at)| *at).max() else {
            return Vec::new();
        };
        open.into_iter()
            .filter(|(_, at)| latest.saturating_duration_since(*at) <= TALKING)
            .map(|(l, _)| l.id.to.clone())
            .collect()
    }

    /// Cuts every proxied link whose (from, to) is in `cut`; returns the links cut.
    pub fn partition(&self, cut: &BTreeSet<(String, String)>, how: Cut) -> Vec<LinkId> {
        let mut done = Vec::new();
        for link in self.links.values() {
            if cut.contains(&(link.id.from.clone(), link.id.to.clone())) {
                link.set(how.into());
                done.push(link.id.clone());
            }
        }
        done
    }

    /// Sets `mode` on the named links.
    pub fn set(&self, ids: &[LinkId], mode: Mode) -> Result<()> {
        for id in ids {
            self.links
                .get(id)
                .with_context(|| format!("no proxied link {id}"))?
                .set(mode);
        }
        Ok(())
    }

    /// Every link back to `Pass`.
    pub fn heal(&self) {
        for link in self.links.values() {
            link.set(Mode::Pass);
        }
    }
}

impl Proxies {
    /// Puts a proxy between each client and each node (`client-0->n1`, ...):
    /// returns the set, registered for the run in `run_dir` (so that the run's
    /// link faults find it), and for each client the endpoints it must dial, in
    /// node order.
    pub async fn for_clients(
        run_dir: &Path,
        clients: &[String],
        nodes: &[(String, SocketAddr)],
        seed: u64,
    ) -> Result<(Arc<Proxies>, Vec<Vec<String>>)> {
        let mut proxies = Proxies::new(seed);
        let mut endpoints = Vec::new();
        for c in clients {
            let mut mine = Vec::new();
            for (n, addr) in nodes {
                mine.push(proxies.add(LinkId::new(c, n), *addr).await?.to_string());
            }
            endpoints.push(mine);
        }
        let proxies = Arc::new(proxies);
        proxies.register(run_dir, Between::Clients);
        Ok((proxies, endpoints))
    }

    /// Makes these the proxies of the run in `run_dir` for the links `between`
    /// (held weakly: they go when their owner drops them).
    pub fn register(self: &Arc<Self>, run_dir: &Path, between: Between) {
        let mut runs = RUNS.lock().unwrap_or_else(|e| e.into_inner());
        runs.retain(|_, p| p.strong_count() > 0);
        runs.insert((run_dir.to_path_buf(), between), Arc::downgrade(self));
    }

    /// The client proxies of the run in `run_dir`, while the run holds them.
    pub fn of_run(run_dir: &Path) -> Option<Arc<Proxies>> {
        Proxies::registered(run_dir, Between::Clients)
    }

    /// The proxies of the run in `run_dir` for the links `between`, while the
    /// run holds them.
    pub fn registered(run_dir: &Path, between: Between) -> Option<Arc<Proxies>> {
        RUNS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(run_dir.to_path_buf(), between))
            .and_then(Weak::upgrade)
    }
}

/// Which links a set of proxies carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Between {
    /// The clients' links to the nodes.
    Clients,
    /// The nodes' links to each other (`fault::netns`).
    Nodes,
}

/// The runs' proxies, by run directory. A registry rather than a field of the
/// scene: link faults are built from the workload before the run's links exist.
static RUNS: Mutex<BTreeMap<(PathBuf, Between), Weak<Proxies>>> = Mutex::new(BTreeMap::new());

pub(super) fn mode_value(mode: Mode, value: &mut Value) {
    match mode {
        Mode::Pass => {}
        Mode::Blackhole => value["mode"] = "blackhole".into(),
        Mode::Reset => value["mode"] = "reset".into(),
        Mode::Latency { delay, jitter } => {
            value["delay_ms"] = (delay.as_millis() as u64).into();
            value["jitter_ms"] = (jitter.as_millis() as u64).into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `done` until it holds or 10 s pass: a loaded machine accepts late.
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within 10 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Whom a client talks to is what its links carry now: a connection open
    /// through `client-0->n2` that carries bytes names n2; one left idle on
    /// `client-0->n1` stops naming n1 once n2 carries on without it; closed,
    /// nobody.
    #[tokio::test]
    async fn a_client_talks_to_the_nodes_its_open_links_carry_bytes_to() {
        let node = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = node.local_addr().unwrap();
        let mut proxies = Proxies::new(1);
        let mut addr = BTreeMap::new();
        for (c, n) in [("client-0", "n1"), ("client-0", "n2"), ("client-1", "n1")] {
            addr.insert((c, n), proxies.add(LinkId::new(c, n), at).await.unwrap());
        }
        assert!(proxies.connected("client-0").is_empty());
        let open = |n| TcpStream::connect(addr[&("client-0", n)]);
        let (mut idle, mut talking) = (open("n1").await.unwrap(), open("n2").await.unwrap());
        let servers = [
            node.accept().await.unwrap().0,
            node.accept().await.unwrap().0,
        ];
        idle.write_all(b"x").await.unwrap();
        until("n1 carried a byte", || {
            proxies.connected("client-0") == ["n1"]
        })
        .await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while proxies.connected("client-0") != ["n2"] {
            assert!(
                Instant::now() < deadline,
                "{:?}",
                proxies.connected("client-0")
            );
            talking.write_all(b"x").await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(proxies.connected("client-1").is_empty());
        drop((idle, talking, servers));
        until("closed", || proxies.connected("client-0").is_empty()).await;
    }

    #[test]
    fn jitter_is_seeded_and_bounded() {
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..50)
                .map(|_| {
                    jittered(
                        Duration::from_millis(20),
                        Duration::from_millis(5),
                        &mut rng,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(draw(7)
            .iter()
            .all(|d| (Duration::from_millis(15)..=Duration::from_millis(25)).contains(d)));
    }
}
