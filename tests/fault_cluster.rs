//! The node and clock faults, through the `Fault` trait, on real clusters:
//! a paused etcd leader is replaced, a killed node rejoins, a clock jump on the
//! Redis nodes expires a key at once, and etcd is reported out of a clock
//! fault's reach.

mod fault_support;

use fault_support::redis_cmd;
use lockcheck::backend::BackendKind;
use lockcheck::cluster::{Cluster, ClusterSpec, LocalCluster};
use lockcheck::fault::clock::{self, ClockChange, ClockFault, Clocks};
use lockcheck::fault::kill::KillNodes;
use lockcheck::fault::node::NodeTarget;
use lockcheck::fault::pause_node::PauseNodes;
use lockcheck::fault::{Fault, Scene};
use lockcheck::journal::{self, is_stopped};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

async fn cluster(
    kind: BackendKind,
    dir: &std::path::Path,
    clocks: bool,
) -> Mutex<Box<dyn Cluster>> {
    let spec = ClusterSpec {
        prepare: clocks.then(|| clock::prepare_hook(dir.to_path_buf())),
        ..ClusterSpec::new(kind, dir)
    };
    Mutex::new(Box::new(LocalCluster::start(spec).await.unwrap()))
}

fn scene<'a>(cluster: &'a Mutex<Box<dyn Cluster>>, rng: &'a mut ChaCha8Rng) -> Scene<'a> {
    Scene {
        clients: &[],
        holder: None,
        stopped: &[],
        rng,
        cluster: Some(cluster),
    }
}

/// The node that leads once the cluster has elected one (an election after
/// a start takes seconds on a loaded machine; 30 s is no election at all).
async fn leader(c: &Mutex<Box<dyn Cluster>>) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(l) = c.lock().await.leader().await {
            return l;
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts a clock jump of `offset_ns` on the nodes `target` picks: the fault,
/// its record, and the nodes it hit.
async fn jump(
    c: &Mutex<Box<dyn Cluster>>,
    rng: &mut ChaCha8Rng,
    target: NodeTarget,
    offset_ns: i64,
) -> (ClockFault, serde_json::Value, Vec<String>) {
    let mut fault = ClockFault::new(Clocks::Nodes(target), ClockChange::Jump { offset_ns });
    let value = fault.start(&mut scene(c, rng)).await.unwrap().unwrap();
    let hit = value["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    (fault, value, hit)
}

/// Every node in `hit` has its clock back: no skew left in its page.
fn assert_reset(dir: &std::path::Path, hit: &[String]) {
    for n in hit {
        assert!(
            clock::read_file(&clock::clock_file(dir, n))
                .unwrap()
                .is_none(),
            "{n} reset"
        );
    }
}

#[tokio::test]
async fn a_paused_etcd_leader_is_replaced_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Etcd, dir.path(), false).await;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let leader = leader(&c).await;
    let mut pause = PauseNodes::new(NodeTarget::Primary, Duration::from_secs(3));
    let value = pause
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(value["targets"][0], leader.as_str(), "{value}");
    let pid = c.lock().await.pid(&leader).unwrap() as i32;
    assert!(is_stopped(pid));
    let deadline = Instant::now() + Duration::from_secs(10);
    let next = loop {
        match c.lock().await.leader().await {
            Some(l) if l != leader => break l,
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "{leader} paused, and no one replaced it"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("leader {leader} paused; {next} took over");
    let value = pause.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_eq!(value["targets"][0], leader.as_str());
    tokio::time::sleep(Duration::from_millis(50)).await; // SIGCONT is asynchronous
    assert!(!is_stopped(pid));
    // The pause is undone in the journal; the servers, journaled as the cluster
    // started them, are still the run's.
    let pending = journal::pending(dir.path()).unwrap().effects;
    assert!(
        pending
            .iter()
            .all(|(_, e)| matches!(e, journal::Effect::Process(_))),
        "resume journaled: {pending:?}"
    );
}

#[tokio::test]
async fn a_killed_redis_node_restarts_empty_when_wiped() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Redlock, dir.path(), false).await;
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let n3 = c.lock().await.endpoints()[2].parse().unwrap();
    redis_cmd(n3, &["SET", "k", "v"], Duration::from_secs(1)).unwrap();
    let mut kill = KillNodes::new(NodeTarget::Node("n3".into()), true);
    let value = kill.start(&mut scene(&c, &mut rng)).await.unwrap().unwrap();
    assert_eq!(value["targets"][0], "n3");
    assert!(c.lock().await.pid("n3").is_none());
    assert!(
        redis_cmd(n3, &["PING"], Duration::from_millis(300)).is_err(),
        "down"
    );
    let value = kill.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_eq!(value["targets"][0], "n3");
    assert_eq!(
        redis_cmd(n3, &["PING"], Duration::from_secs(1)).unwrap(),
        "PONG",
        "back"
    );
    assert_eq!(
        redis_cmd(n3, &["GET", "k"], Duration::from_secs(1)).unwrap(),
        "(nil)",
        "wiped"
    );
    // The restarted process is journaled: recover would find it.
    let pid = c.lock().await.pid("n3").unwrap() as i32;
    let pending = journal::pending(dir.path()).unwrap().effects;
    assert!(
        pending.iter().any(
            |(_, e)| matches!(e, journal::Effect::Process(p) if p.name == "n3" && p.pid == pid && p.alive())
        ),
        "{pending:?}"
    );
}

#[tokio::test]
async fn a_clock_jump_on_a_majority_of_redlock_nodes_expires_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Redlock, dir.path(), true).await;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let endpoints: Vec<std::net::SocketAddr> = c
        .lock()
        .await
        .endpoints()
        .iter()
        .map(|e| e.parse().unwrap())
        .collect();
    for e in &endpoints {
        redis_cmd(
            *e,
            &["SET", "lock", "me", "PX", "10000"],
            Duration::from_secs(1),
        )
        .unwrap();
    }
    let (mut fault, value, hit) = jump(&c, &mut rng, NodeTarget::Majority, 20_000_000_000).await;
    assert_eq!(hit.len(), 3, "{value}");
    assert_eq!(value["offset_ms"], 20000);
    for (i, e) in endpoints.iter().enumerate() {
        let name = format!("n{}", i + 1);
        let got = redis_cmd(*e, &["GET", "lock"], Duration::from_secs(1)).unwrap();
        let want = if hit.contains(&name) { "(nil)" } else { "me" };
        assert_eq!(got, want, "{name}");
    }
    fault.stop(&mut scene(&c, &mut rng)).await.unwrap();
    assert_reset(dir.path(), &hit);
}

#[tokio::test]
async fn a_clock_jump_on_a_majority_with_the_primary_hits_the_zookeeper_leader() {
    // A ZooKeeper leader expires the sessions: a majority picked at random
    // missed it a third of the time, and those runs could not break.
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Zookeeper, dir.path(), true).await;
    let leader = leader(&c).await;
    // Eight picks: a majority at random would leave the leader out of one
    // of them 24 times in 25.
    for seed in 0..8 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut fault, value, hit) =
            jump(&c, &mut rng, NodeTarget::MajorityWithPrimary, 1_000_000_000).await;
        fault.stop(&mut scene(&c, &mut rng)).await.unwrap();
        assert_eq!(hit.len(), 2, "{value}");
        assert!(
            hit.contains(&leader),
            "{leader} leads and was not hit: {value}"
        );
        assert_reset(dir.path(), &hit);
    }
    c.lock().await.stop().await;
}

#[tokio::test]
async fn a_clock_fault_on_etcd_says_it_cannot_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Etcd, dir.path(), true).await;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut fault = ClockFault::new(
        Clocks::Nodes(NodeTarget::All),
        ClockChange::Rate { rate: 2.0 },
    );
    let value = fault
        .start(&mut scene(&c, &mut rng))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(value["targets"].as_array().unwrap().len(), 0, "{value}");
    let unreachable = value["unreachable"].as_array().unwrap();
    assert_eq!(unreachable.len(), 3, "{value}");
    assert!(
        unreachable[0]["why"]
            .as_str()
            .unwrap()
            .contains("Go binary"),
        "{value}"
    );
    fault.stop(&mut scene(&c, &mut rng)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_faults_cut_a_node_off_cut_the_holder_off_and_slow_a_node() {
    use lockcheck::fault::link_fault::{LinkFault, Links};
    use lockcheck::fault::proxy::{Mode, Proxies};
    use lockcheck::fault::{ClientProc, Place, Target};
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Redlock, dir.path(), false).await;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let nodes: Vec<_> = {
        let c = c.lock().await;
        c.node_names()
            .into_iter()
            .zip(c.endpoints().iter().map(|e| e.parse().unwrap()))
            .collect()
    };
    let names = ["client-0".to_string(), "client-1".to_string()];
    let (_proxies, endpoints) = Proxies::for_clients(dir.path(), &names, &nodes, 5)
        .await
        .unwrap();
    // Link faults only need the clients' names; this process stands in for them.
    let me = nix::unistd::Pid::this();
    let clients: Vec<ClientProc> = names
        .iter()
        .map(|n| ClientProc {
            name: n.clone(),
            place: Place::Here(me),
        })
        .collect();
    macro_rules! scene {
        ($holder:expr) => {
            Scene {
                clients: &clients,
                holder: $holder,
                stopped: &[],
                rng: &mut rng,
                cluster: Some(&c),
            }
        };
    }
    // via[client][node]
    let via: Vec<Vec<std::net::SocketAddr>> = endpoints
        .iter()
        .map(|e| e.iter().map(|a| a.parse().unwrap()).collect())
        .collect();
    let ping = |addr| {
        tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            (
                redis_cmd(addr, &["PING"], Duration::from_millis(700)),
                t.elapsed(),
            )
        })
    };

    // n1 cut off from every client.
    let mut cut = LinkFault::new(
        Links::ToNodes(NodeTarget::Node("n1".into())),
        Mode::Blackhole,
    );
    let value = cut.start(&mut scene!(None)).await.unwrap().unwrap();
    assert_eq!(
        value["links"],
        serde_json::json!(["client-0->n1", "client-1->n1"]),
        "{value}"
    );
    let (cut_off, waited) = ping(via[1][0]).await.unwrap();
    assert!(
        cut_off.is_err() && waited >= Duration::from_millis(650),
        "n1 hangs: {cut_off:?}"
    );
    assert_eq!(
        ping(via[1][1]).await.unwrap().0.unwrap(),
        "PONG",
        "n2 goes on"
    );
    cut.stop(&mut scene!(None)).await.unwrap();
    assert_eq!(ping(via[1][0]).await.unwrap().0.unwrap(), "PONG", "healed");

    // The holder (client-1) cut off from every node, with resets; client-0 goes on.
    let mut cut = LinkFault::new(Links::FromClient(Target::Holder), Mode::Reset);
    assert_eq!(
        cut.target(),
        &Target::Holder,
        "armed by the schedule on an acquire"
    );
    let value = cut.start(&mut scene!(Some(1))).await.unwrap().unwrap();
    assert_eq!(value["targets"], serde_json::json!(["client-1"]), "{value}");
    assert_eq!(value["links"].as_array().unwrap().len(), 5);
    for (other, holder) in via[0].iter().zip(&via[1]) {
        let err = ping(*holder).await.unwrap().0.unwrap_err();
        assert!(err.to_lowercase().contains("reset"), "{err}");
        assert_eq!(ping(*other).await.unwrap().0.unwrap(), "PONG");
    }
    cut.stop(&mut scene!(None)).await.unwrap();

    let delay = Duration::from_millis(100);
    let mut slow = LinkFault::new(
        Links::ToNodes(NodeTarget::Node("n2".into())),
        Mode::Latency {
            delay,
            jitter: Duration::ZERO,
        },
    );
    let value = slow.start(&mut scene!(None)).await.unwrap().unwrap();
    assert_eq!(value["delay_ms"], 100, "{value}");
    let (reply, took) = ping(via[0][1]).await.unwrap();
    assert_eq!(reply.unwrap(), "PONG");
    // A fresh connection: the handshake's round trips and the PING's are all delayed.
    assert!(took >= 2 * delay, "{took:?}");
    eprintln!("PING on a fresh connection through 100 ms of latency each way: {took:?}");
    drop(slow); // dropped while active: the link heals all the same
    let (_, fast) = ping(via[0][1]).await.unwrap();
    assert!(fast < delay, "{fast:?}");
}

#[tokio::test]
async fn a_whole_etcd_cluster_killed_comes_back_together_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let c = cluster(BackendKind::Etcd, dir.path(), false).await;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let endpoints = c.lock().await.endpoints();
    let mut client = etcd_client::Client::connect(&endpoints, None)
        .await
        .unwrap();
    client.put("k", "before", None).await.unwrap();
    let mut kill = KillNodes::new(NodeTarget::All, false);
    let value = kill.start(&mut scene(&c, &mut rng)).await.unwrap().unwrap();
    assert_eq!(value["targets"].as_array().unwrap().len(), 3);
    // One member alone never becomes ready without a quorum: restarted one at a
    // time, the first would wait out its ready timeout.
    let started = Instant::now();
    kill.stop(&mut scene(&c, &mut rng)).await.unwrap();
    let took = started.elapsed();
    let mut client = etcd_client::Client::connect(&endpoints, None)
        .await
        .unwrap();
    let got = client.get("k", None).await.unwrap();
    assert_eq!(got.kvs()[0].value(), b"before", "the data survived");
    eprintln!("3 etcd members restarted together, serving after {took:?}");
    let c = c.lock().await;
    assert!(["n1", "n2", "n3"].iter().all(|n| c.pid(n).is_some()));
}

/// A node's faults and its stop wait without holding up the runtime they run on:
/// in a run that is one thread, which also stamps the clients' ops, and a stall
/// there widens every op window under way. A ticker on the same current-thread
/// runtime keeps its beat while a PostgreSQL node is killed, wiped, set up again
/// (`initdb`, seconds) and restarted, and while the cluster stops a server that
/// waits for its last session (SIGTERM is a smart shutdown) until the grace ends.
#[test]
fn node_faults_and_stop_never_stall_the_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let grace = Duration::from_secs(4);
        let spec = ClusterSpec {
            stop_grace: grace,
            ..ClusterSpec::new(BackendKind::PostgresLease, dir.path())
        };
        let mut cluster = LocalCluster::start(spec).await.unwrap();
        let beat = Duration::from_millis(5);
        let longest = std::sync::Arc::new(std::sync::Mutex::new(Duration::ZERO));
        let ticker = tokio::spawn({
            let longest = longest.clone();
            async move {
                let mut last = Instant::now();
                loop {
                    tokio::time::sleep(beat).await;
                    let gap = last.elapsed();
                    last = Instant::now();
                    let mut l = longest.lock().unwrap();
                    *l = (*l).max(gap);
                }
            }
        });
        cluster.kill("n1").await.unwrap();
        cluster.wipe("n1").await.unwrap();
        cluster.restart("n1").await.unwrap();
        assert!(cluster.nodes()[0].data_dir.join("PG_VERSION").exists());
        // A session left open: the server waits for it before it exits.
        let addr = cluster.nodes()[0].client_listen;
        let (client, conn) = tokio_postgres::connect(
            &format!(
                "host={} port={} user=postgres dbname=postgres",
                addr.ip(),
                addr.port()
            ),
            tokio_postgres::NoTls,
        )
        .await
        .unwrap();
        let session = tokio::spawn(conn);
        client.simple_query("SELECT 1").await.unwrap();
        let t = Instant::now();
        cluster.stop().await;
        let stopping = t.elapsed();
        // A beat after the stop: a stall shows when the ticker next runs.
        tokio::time::sleep(beat * 4).await;
        ticker.abort();
        drop(client);
        let _ = session.await;
        // The stall this guards against was there to be had: the stop waited out
        // its grace (a lower bound, which load only lengthens).
        assert!(
            stopping >= grace - Duration::from_millis(500),
            "the server exited after {stopping:?}, before its grace: nothing waited"
        );
        // Generous against a loaded machine, far below the grace (or an initdb)
        // a blocking wait would show.
        let longest = *longest.lock().unwrap();
        assert!(
            longest < Duration::from_millis(1500),
            "the runtime stalled for {longest:?} while a node stopped"
        );
    });
}
