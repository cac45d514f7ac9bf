//! The lock backends against real servers started by `cluster::local`: mutual
//! exclusion, tokens, renew, a paused holder losing its lease, node restarts, and the
//! environment errors; and for PostgreSQL (advisory lock, lease row), NATS,
//! ZooKeeper and MariaDB, the way each loses a holder's lock behind its back. Every server runs on free loopback ports in a temp dir and is
//! stopped when its test ends (also on panic: `LocalCluster` and `Holder` stop on drop).
//!
//! The paused holder runs in a separate process (`lockcheck-test-helper holder`),
//! so that SIGSTOP stops its keep-alive too, as it does to a worker.

mod backend_support;
mod run_support;

use backend_support::*;
use lockcheck::backend::{connect, BackendKind, Grant, LockConfig, LockError};
use lockcheck::cluster::{ClusterError, ClusterPlan, ClusterSpec, LocalCluster};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use run_support::Helper;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// ---- one holder at a time ----

async fn one_holder_at_a_time(kind: BackendKind) {
    let r = start(kind).await;
    let first = backend_support::one_holder_at_a_time(&r, 5_000).await;
    assert!(first.lease_ms.unwrap() > 0, "{first:?}");
}

#[tokio::test]
async fn redis_one_holder_at_a_time() {
    one_holder_at_a_time(BackendKind::Redis).await;
}

#[tokio::test]
async fn redlock_one_holder_at_a_time() {
    one_holder_at_a_time(BackendKind::Redlock).await;
}

#[tokio::test]
async fn etcd_one_holder_at_a_time() {
    one_holder_at_a_time(BackendKind::Etcd).await;
}

// ---- tokens ----

async fn tokens_strictly_increase(kind: BackendKind) {
    backend_support::tokens_strictly_increase(&start(kind).await).await;
}

#[tokio::test]
async fn redis_fencing_tokens_strictly_increase() {
    tokens_strictly_increase(BackendKind::Redis).await;
}

#[tokio::test]
async fn etcd_revision_tokens_strictly_increase() {
    tokens_strictly_increase(BackendKind::Etcd).await;
}

#[tokio::test]
async fn redis_without_fencing_and_redlock_give_no_token() {
    for kind in [BackendKind::Redis, BackendKind::Redlock] {
        let r = start(kind).await;
        let cfg = LockConfig {
            fencing_token: false,
            ..config(kind, 5_000, 300)
        };
        let g = client(&r, &cfg).await.acquire().await.unwrap();
        assert_eq!(g.token, None, "{kind:?}");
    }
}

// ---- renew ----

/// A holder that renews keeps the lock past its first lease; one that is denied a
/// renew has lost it.
async fn renew_extends(kind: BackendKind) {
    let r = start(kind).await;
    let cfg = config(kind, 1_000, 100);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let g = a.renew().await.unwrap();
        assert!(g.lease_ms.unwrap() > 500, "{g:?}");
    }
    // 1.6 s after the acquire, past its 1 s lease: still held thanks to the renewals.
    denied(b.acquire().await);
    a.release().await.unwrap();
    denied(a.renew().await);
}

#[tokio::test]
async fn redis_renew_extends() {
    renew_extends(BackendKind::Redis).await;
}

#[tokio::test]
async fn redlock_renew_extends() {
    renew_extends(BackendKind::Redlock).await;
}

/// etcd: the holder's keep-alive holds the lock past its TTL, and a client that
/// waits longer than its own TTL for it keeps its lease alive meanwhile and gets it.
#[tokio::test]
async fn etcd_keep_alive_holds_past_the_ttl_and_a_long_wait_still_acquires() {
    let r = start(BackendKind::Etcd).await;
    let mut a = client(&r, &config(BackendKind::Etcd, 2_000, 1_000)).await;
    let mut b = client(&r, &config(BackendKind::Etcd, 2_000, 10_000)).await;
    let ga = a.acquire().await.unwrap();
    let t = Instant::now();
    let holder = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(4_000)).await;
        a.release().await
    });
    let gb = b.acquire().await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(3_900),
        "granted after {:?}, before the holder released",
        t.elapsed()
    );
    holder.await.unwrap().unwrap();
    assert!(gb.token > ga.token);
    b.renew().await.unwrap();
}

// ---- the paused holder ----

/// The known break, for every backend: a holder in its own process acquires and is
/// SIGSTOPped past its lease; the lease expires (etcd: no keep-alive reaches the
/// server) and another client acquires; the holder wakes up, and its renew and its
/// release are refused because the lock is no longer its own.
async fn paused_holder_loses_the_lock(kind: BackendKind, lease_ms: u64) {
    let r = start(kind).await;
    let cfg = config(kind, lease_ms, 1_000);
    let mut holder = Holder::spawn(kind, &r.cluster.endpoints(), &cfg);
    let first = holder.ask("acquire");
    assert!(first.starts_with("ok"), "holder acquire: {first}");

    // While the holder runs, its lease holds (etcd keeps it alive past the TTL).
    if kind == BackendKind::Etcd {
        tokio::time::sleep(Duration::from_millis(lease_ms + 1_000)).await;
    }
    denied_while_held(&r, &config(kind, lease_ms, 100)).await;

    holder.pause();
    let mut other = client(&r, &config(kind, lease_ms, lease_ms + 4_000)).await;
    let t = Instant::now();
    let second: Grant = match other.acquire().await {
        Ok(grant) => grant,
        // etcd's request timeout is a quarter of the lease (500 ms here): a txn
        // answered later than that on a loaded machine is an unknown outcome, not
        // a refusal. Ask again from a fresh client within the same bound: the
        // lock must still be granted (an unknown attempt that won lapses with its
        // lease, which the dropped client no longer keeps alive).
        Err(LockError::Indeterminate(why)) => {
            eprintln!("{kind:?}: first acquire after the pause unknown ({why}); again");
            drop(other);
            other = client(&r, &config(kind, lease_ms, lease_ms + 4_000)).await;
            other.acquire().await.unwrap()
        }
        Err(e) => panic!("acquire after the pause: {e:?}"),
    };
    eprintln!(
        "{kind:?}: lock re-granted {:?} after the pause",
        t.elapsed()
    );
    if let Some(t2) = second.token {
        let t1: u64 = first
            .strip_prefix("ok token=")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no token in {first}"));
        assert!(
            t2 > t1,
            "re-grant token {t2} not above the paused holder's {t1}"
        );
    }
    holder.resume();

    for op in ["renew", "release"] {
        let reply = holder.ask(op);
        assert!(reply.starts_with("denied"), "stale holder's {op}: {reply}");
    }
    // The second holder was not disturbed by the stale holder's release.
    other.renew().await.unwrap();
    other.release().await.unwrap();
    assert_eq!(holder.ask("exit"), "bye");
}

#[tokio::test]
async fn redis_paused_holder_loses_the_lock() {
    paused_holder_loses_the_lock(BackendKind::Redis, 1_000).await;
}

#[tokio::test]
async fn redlock_paused_holder_loses_the_lock() {
    paused_holder_loses_the_lock(BackendKind::Redlock, 1_000).await;
}

#[tokio::test]
async fn etcd_paused_holder_loses_the_lock() {
    // etcd's shortest lease with these election settings is 2 s.
    paused_holder_loses_the_lock(BackendKind::Etcd, 2_000).await;
}

/// A lock client in a child process (`lockcheck-test-helper holder`), driven
/// line by line over its stdin.
struct Holder(Helper);

impl Holder {
    fn spawn(kind: BackendKind, endpoints: &[String], cfg: &LockConfig) -> Holder {
        let spec = serde_json::json!({"kind": kind, "endpoints": endpoints, "cfg": cfg});
        let mut cmd = Helper::command("holder");
        cmd.arg(spec.to_string());
        Holder(Helper::spawn(cmd))
    }

    fn ask(&mut self, op: &str) -> String {
        self.0.ask(op, "holder: ")
    }

    fn signal(&self, s: Signal) {
        kill(Pid::from_raw(self.0.pid()), s).unwrap();
    }

    fn pause(&self) {
        self.signal(Signal::SIGSTOP);
    }

    fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }
}

// ---- servers that pause, die and come back ----

/// A paused server must give an indeterminate result within the request timeout,
/// never a hang.
#[tokio::test]
async fn redis_paused_server_gives_indeterminate_not_a_hang() {
    let r = start(BackendKind::Redis).await;
    let cfg = config(BackendKind::Redis, 1_000, 2_000);
    let mut a = client(&r, &cfg).await;
    a.acquire().await.unwrap();
    let pid = Pid::from_raw(r.cluster.pid("n1").unwrap() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    // The request times out after about a second; only a hang, not a loaded
    // machine, takes 20.
    let renewed = tokio::time::timeout(Duration::from_secs(20), a.renew()).await;
    kill(pid, Signal::SIGCONT).unwrap();
    eprintln!(
        "renew on a paused server: {:?} after {:?}",
        renewed,
        t.elapsed()
    );
    let renewed = renewed.expect("the renew hung on the paused server");
    assert!(
        matches!(renewed, Err(LockError::Indeterminate(_))),
        "{renewed:?}"
    );
}

#[tokio::test]
async fn redis_killed_node_restarts_empty_and_serves() {
    let mut r = start(BackendKind::Redis).await;
    let cfg = config(BackendKind::Redis, 30_000, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    let pid = r.cluster.pid("n1").unwrap();
    kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    r.cluster.restart("n1").await.unwrap();
    assert_ne!(r.cluster.pid("n1"), Some(pid));
    // Without persistence the restarted instance has forgotten the lock: the 30 s
    // lease is gone and another client acquires at once (the clients reconnect).
    let mut granted = b.acquire().await;
    if matches!(granted, Err(LockError::Indeterminate(_))) {
        granted = b.acquire().await; // the first request found the old connection dead
    }
    granted.unwrap();
    assert!(
        r.cluster.restart("n1").await.is_err(),
        "restart of a running node"
    );
}

#[tokio::test]
async fn etcd_killed_member_restarts_with_its_data() {
    let mut r = start(BackendKind::Etcd).await;
    let cfg = config(BackendKind::Etcd, 5_000, 3_000);
    let mut a = client(&r, &cfg).await;
    let g1 = a.acquire().await.unwrap();
    a.release().await.unwrap();
    r.cluster.kill("n1").await.unwrap();
    assert_eq!(r.cluster.pid("n1"), None);
    // Two of three members still make a quorum.
    let g2 = a.acquire().await.unwrap();
    a.release().await.unwrap();
    r.cluster.restart("n1").await.unwrap();
    // n1 alone: a client of only the restarted member sees the revisions it missed.
    let n1 = vec![r.cluster.endpoints()[0].clone()];
    let mut c = connect(BackendKind::Etcd, &n1, &cfg).await.unwrap();
    let g3 = c.acquire().await.unwrap();
    assert!(
        g1.token < g2.token && g2.token < g3.token,
        "{g1:?} {g2:?} {g3:?}"
    );
    assert_eq!(c.node().as_deref(), Some("n1"));
}

// ---- PostgreSQL ----

#[tokio::test]
async fn postgres_advisory_one_holder_at_a_time_and_no_token() {
    let r = start(BackendKind::PostgresAdvisory).await;
    backend_support::one_holder_at_a_time(&r, 5_000).await;
    let g = client(&r, &config(BackendKind::PostgresAdvisory, 5_000, 300))
        .await
        .acquire()
        .await
        .unwrap();
    assert_eq!(g.token, None);
}

#[tokio::test]
async fn postgres_lease_one_holder_at_a_time_and_tokens_increase() {
    let r = start(BackendKind::PostgresLease).await;
    backend_support::one_holder_at_a_time(&r, 5_000).await;
    backend_support::tokens_strictly_increase(&r).await;
}

/// The known break of the advisory lock: the holder goes quiet (as a paused process
/// does) past `idle_session_timeout`; the server ends its session, which frees the
/// lock; another session takes it. The first holder learns it only when it next
/// speaks: its renew and release are refused.
#[tokio::test]
async fn postgres_advisory_lock_goes_with_an_idle_holders_session() {
    let r = start(BackendKind::PostgresAdvisory).await;
    let cfg = config(BackendKind::PostgresAdvisory, 800, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    b.acquire().await.unwrap();
    let why = denied(a.renew().await);
    assert!(why.starts_with("not-held"), "{why}");
    denied(a.release().await);
    // The deposed client takes the lock again once it is free: a new session.
    b.release().await.unwrap();
    a.acquire().await.unwrap();
}

/// The known break of the lease row: the holder's lease runs out while it is quiet;
/// the next acquire takes the row with a greater token; the old holder's renew and
/// release are refused and do not disturb the new holder.
#[tokio::test]
async fn postgres_lease_row_expires_and_the_next_token_is_greater() {
    let r = start(BackendKind::PostgresLease).await;
    let cfg = config(BackendKind::PostgresLease, 600, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    let ta = a.acquire().await.unwrap().token.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(700)).await;
    backend_support::next_holder_outranks_the_lapsed(&mut *a, &mut *b, ta).await;
}

// ---- NATS JetStream KV ----

#[tokio::test]
async fn nats_one_holder_at_a_time_and_revisions_increase() {
    let r = start(BackendKind::Nats).await;
    backend_support::one_holder_at_a_time(&r, 5_000).await;
    backend_support::tokens_strictly_increase(&r).await;
}

/// The known break of the KV lease: the holder stops renewing (as a paused process
/// does); the key ages out at the bucket's max age; another client creates it with
/// a greater revision; the first holder's renew and release are refused.
#[tokio::test]
async fn nats_key_ages_out_and_the_next_revision_is_greater() {
    let r = start(BackendKind::Nats).await;
    let cfg = config(BackendKind::Nats, 800, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    let ta = a.acquire().await.unwrap().token.unwrap();
    denied(b.acquire().await);
    // A renewing holder keeps the key past its first max age.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        a.renew().await.unwrap();
    }
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    backend_support::next_holder_outranks_the_lapsed(&mut *a, &mut *b, ta).await;
}

// ---- ZooKeeper ----

#[tokio::test]
async fn zookeeper_one_holder_at_a_time_and_czxids_increase() {
    let r = start(BackendKind::Zookeeper).await;
    backend_support::one_holder_at_a_time(&r, 4_000).await;
    backend_support::tokens_strictly_increase(&r).await;
}

/// Contenders queue behind the holder: each watches its predecessor and takes the
/// lock when the one before it releases, in the order they asked.
#[tokio::test]
async fn zookeeper_waiters_take_the_lock_in_turn() {
    let r = start(BackendKind::Zookeeper).await;
    let cfg = config(BackendKind::Zookeeper, 4_000, 5_000);
    let mut a = client(&r, &cfg).await;
    let ta = a.acquire().await.unwrap().token.unwrap();
    let mut b = client(&r, &cfg).await;
    let waiter = tokio::spawn(async move {
        let t = Instant::now();
        let g = b.acquire().await;
        (g, t.elapsed(), b)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.release().await.unwrap();
    let (g, waited, mut b) = waiter.await.unwrap();
    let tb = g.unwrap().token.unwrap();
    assert!(tb > ta, "{tb} after {ta}");
    assert!(
        waited >= Duration::from_millis(400),
        "granted after {waited:?}"
    );
    b.release().await.unwrap();
}

// ---- MariaDB ----

#[tokio::test]
async fn mariadb_one_holder_at_a_time_and_no_token() {
    let r = start(BackendKind::Mariadb).await;
    backend_support::one_holder_at_a_time(&r, 5_000).await;
    let g = client(&r, &config(BackendKind::Mariadb, 5_000, 300))
        .await
        .acquire()
        .await
        .unwrap();
    assert_eq!(g.token, None);
}

/// The known break of `GET_LOCK`: the holder goes quiet past `wait_timeout`; the
/// server ends its session, which frees the lock; another session takes it; the
/// first holder's renew is refused.
/// Under a results directory deep enough that a socket's path there would pass the
/// 107 bytes a Unix socket's path may hold, MariaDB (which always makes one) still
/// starts and serves the lock, and its socket is inside that directory: nothing a
/// node killed with -9 leaves behind lies outside the run's directory.
#[tokio::test]
async fn mariadb_starts_under_a_directory_too_deep_for_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("d".repeat(60)).join("e".repeat(60));
    std::fs::create_dir_all(&deep).unwrap();
    let cluster = LocalCluster::start(ClusterSpec::new(BackendKind::Mariadb, &deep))
        .await
        .unwrap_or_else(|e| panic!("starting MariaDB under {}: {e:#}", deep.display()));
    let r = backend_support::Running { cluster, dir };
    let cfg = config(BackendKind::Mariadb, 2_000, 300);
    let mut a = client(&r, &cfg).await;
    a.acquire().await.unwrap();
    a.release().await.unwrap();
    let sockets = files_named(&deep, "mysqld.sock");
    assert_eq!(
        sockets.len(),
        1,
        "the node's socket under {}: {sockets:?}",
        deep.display()
    );
    assert!(sockets[0].as_os_str().len() > 107, "{sockets:?}");
}

/// Every file called `name` under `dir`, at any depth.
fn files_named(dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            found.extend(files_named(&path, name));
        } else if entry.file_name() == name {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn mariadb_lock_goes_with_an_idle_holders_session() {
    let r = start(BackendKind::Mariadb).await;
    let cfg = config(BackendKind::Mariadb, 1_000, 200);
    let (mut a, mut b) = (client(&r, &cfg).await, client(&r, &cfg).await);
    a.acquire().await.unwrap();
    denied(b.acquire().await);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    b.acquire().await.unwrap();
    let why = denied(a.renew().await);
    assert!(why.starts_with("not-held"), "{why}");
    b.release().await.unwrap();
}

// ---- environment ----

#[tokio::test]
async fn missing_server_binary_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    for kind in [BackendKind::Redis, BackendKind::Etcd] {
        let spec = ClusterSpec {
            binary: Some("/nonexistent/lockcheck-server".into()),
            ..ClusterSpec::new(kind, dir.path())
        };
        let err = LocalCluster::start(spec).await.unwrap_err();
        let typed = err
            .downcast_ref::<ClusterError>()
            .unwrap_or_else(|| panic!("untyped: {err:#}"));
        assert!(typed.is_environment());
        let package = if kind == BackendKind::Etcd {
            "etcd-server"
        } else {
            "redis-server"
        };
        assert!(
            typed
                .to_string()
                .contains(&format!("apt-get install {package}")),
            "{typed}"
        );
    }
}

#[test]
fn this_machine_can_run_every_backend() {
    for a in lockcheck::cluster::available_backends() {
        assert!(a.found.is_ok(), "{:?}: {:?}", a.kind, a.found);
    }
}

#[tokio::test]
async fn cluster_files_go_under_the_run_directory_and_servers_stop_on_drop() {
    let r = start(BackendKind::Redlock).await;
    let nodes = r.cluster.nodes().to_vec();
    assert_eq!(nodes.len(), 5);
    let pids: Vec<u32> = nodes
        .iter()
        .map(|n| r.cluster.pid(&n.name).unwrap())
        .collect();
    for n in &nodes {
        assert!(n.data_dir.starts_with(r.dir.path().join("data")), "{n:?}");
        assert!(n.log_path.exists(), "{n:?}");
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3", "n4", "n5"]);
    // One node paused: drop must still stop it (SIGCONT first, then SIGTERM).
    kill(Pid::from_raw(pids[2] as i32), Signal::SIGSTOP).unwrap();
    drop(r);
    for pid in pids {
        let gone = kill(Pid::from_raw(pid as i32), None).is_err();
        assert!(gone, "pid {pid} still there after drop");
    }
}

#[tokio::test]
async fn etcd_names_its_leader_and_a_paused_leader_is_replaced() {
    let r = start(BackendKind::Etcd).await;
    let leader = r.cluster.leader().await.expect("a leader");
    let pid = Pid::from_raw(r.cluster.pid(&leader).unwrap() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    let mut next = None;
    while t.elapsed() < Duration::from_secs(10) && next.is_none() {
        next = r.cluster.leader().await.filter(|l| *l != leader);
    }
    kill(pid, Signal::SIGCONT).unwrap();
    let next = next.expect("a new leader while the old one is paused");
    eprintln!("{leader} paused: {next} leads after {:?}", t.elapsed());
}

/// The prepare hook's change reaches the server, at its first start and at a restart
/// (here: a `maxclients` per node, read back with CONFIG GET).
#[tokio::test]
async fn prepare_runs_before_every_start_of_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ClusterSpec {
        prepare: Some(lockcheck::cluster::Prepare(Arc::new(|node, cmd| {
            cmd.arg("--maxclients")
                .arg(format!("40{}", &node.name[1..]));
            Ok(())
        }))),
        ..ClusterSpec::new(BackendKind::Redlock, dir.path())
    };
    let mut cluster = LocalCluster::start(spec).await.unwrap();
    async fn maxclients(addr: &str) -> String {
        let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let reply: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxclients")
            .query_async(&mut conn)
            .await
            .unwrap();
        reply[1].clone()
    }
    let endpoints = cluster.endpoints();
    assert_eq!(maxclients(&endpoints[1]).await, "402");
    cluster.kill("n4").await.unwrap();
    cluster.wipe("n4").await.unwrap();
    // Emptied, the directory kept (a fault's disk may be mounted on it).
    let data = &cluster.nodes()[3].data_dir;
    assert!(
        std::fs::read_dir(data).unwrap().next().is_none(),
        "{data:?}"
    );
    cluster.restart("n4").await.unwrap();
    assert_eq!(maxclients(&endpoints[3]).await, "404");
    assert!(cluster.wipe("n4").await.is_err(), "wiping a running node");
}

/// A member that comes back with its data wiped rejoins as a new member and catches
/// up: through it alone, a client sees the revisions it missed.
#[tokio::test]
async fn etcd_wiped_member_rejoins_empty_and_catches_up() {
    let mut r = start(BackendKind::Etcd).await;
    let cfg = config(BackendKind::Etcd, 5_000, 3_000);
    let mut a = client(&r, &cfg).await;
    let g1 = a.acquire().await.unwrap();
    a.release().await.unwrap();
    r.cluster.kill("n3").await.unwrap();
    r.cluster.wipe("n3").await.unwrap();
    r.cluster.restart("n3").await.unwrap();
    let n3 = vec![r.cluster.endpoints()[2].clone()];
    let mut c = connect(BackendKind::Etcd, &n3, &cfg).await.unwrap();
    let g2 = c.acquire().await.unwrap();
    assert!(g2.token > g1.token, "{g1:?} {g2:?}");
    assert_eq!(c.node().as_deref(), Some("n3"));
}

/// The door for a proxy: every link of an etcd cluster (client→member and
/// member→member) goes through a forwarder that the caller put in the plan, and the
/// cluster forms and serves through them.
#[tokio::test]
async fn etcd_serves_through_forwarders_on_every_link() {
    async fn forwarder(to: std::net::SocketAddr) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let used = Arc::new(AtomicUsize::new(0));
        let count = used.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        (addr, used)
    }
    // Another test's server may take a port between its pick and etcd's bind:
    // `LocalCluster::start` tries again for that, and so does this plan, built by
    // hand (a fresh plan and directory each time).
    let mut attempt = 0;
    let (cluster, peer_links, _dir) = loop {
        attempt += 1;
        let dir = tempfile::tempdir().unwrap();
        let mut plan = ClusterPlan::new(ClusterSpec::new(BackendKind::Etcd, dir.path())).unwrap();
        let mut peer_links = Vec::new();
        for node in &mut plan.nodes {
            node.client_advertise = forwarder(node.client_listen).await.0;
            let (addr, used) = forwarder(node.peer_listen.unwrap()).await;
            node.peer_advertise = Some(addr);
            peer_links.push(used);
        }
        match plan.start().await {
            Ok(cluster) => break (cluster, peer_links, dir),
            Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {}
            Err(e) => panic!("{e:#}"),
        }
    };
    let listen: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| n.client_listen.to_string())
        .collect();
    assert!(cluster.endpoints().iter().all(|e| !listen.contains(e)));
    let cfg = config(BackendKind::Etcd, 5_000, 1_000);
    let mut a = connect(BackendKind::Etcd, &cluster.endpoints(), &cfg)
        .await
        .unwrap();
    a.acquire().await.unwrap();
    a.release().await.unwrap();
    for used in &peer_links {
        assert!(
            used.load(Ordering::Relaxed) > 0,
            "a peer link bypassed its forwarder"
        );
    }
}
