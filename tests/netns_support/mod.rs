//! Helpers of the tests of faults between nodes in network namespaces
//! (`fault_netns`, `fault_netns_latency`) or on hosts (`runtime_ssh_faults`):
//! a fault's scene, one etcd member's client, the leader, the time of a put
//! and a get, and the checks that nothing of a run's network or processes is
//! left (with `run_support`, which every user also includes).
#![allow(dead_code)]

use etcd_client::{Client, ConnectOptions};
use lockcheck::cluster::{netns, Cluster};
use lockcheck::fault::Scene;
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// A fault's scene over cluster `c`, without clients.
pub fn scene<'a>(cluster: &'a Mutex<Box<dyn Cluster>>, rng: &'a mut ChaCha8Rng) -> Scene<'a> {
    Scene {
        clients: &[],
        holder: None,
        stopped: &[],
        rng,
        cluster: Some(cluster),
    }
}

/// A client of the one member at `addr`, asking it alone, with short timeouts.
pub async fn member(addr: &str) -> Option<Client> {
    let opts = ConnectOptions::new()
        .with_timeout(Duration::from_secs(1))
        .with_connect_timeout(Duration::from_secs(1))
        // As the lock's clients do: a member without a leader says so at once.
        .with_require_leader(true);
    tokio::time::timeout(
        Duration::from_secs(2),
        Client::connect([format!("http://{addr}")], Some(opts)),
    )
    .await
    .ok()?
    .ok()
}

/// The median time of a put then a linearizable get on the member at `addr`
/// (the leader: a put commits after a round trip to a follower, a get confirms
/// the leadership with one), over 5 tries. A try the member answers with "no
/// leader" (an election going on: a leader just found can lose a term on a
/// loaded machine) is not timed, and made again, for up to 15 s.
pub async fn put_get(addr: &str) -> Duration {
    let mut c = member(addr).await.expect("a client of the leader");
    let mut times = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut i = 0;
    while times.len() < 5 {
        i += 1;
        let t = Instant::now();
        let put = tokio::time::timeout(Duration::from_secs(5), c.put("k", format!("{i}"), None));
        let put = put.await.expect("the put in time");
        let got = match put {
            Ok(_) => {
                let get = tokio::time::timeout(Duration::from_secs(5), c.get("k", None));
                get.await.expect("the get in time")
            }
            Err(e) => Err(e),
        };
        match got {
            Ok(got) => {
                assert_eq!(got.kvs()[0].value_str().unwrap(), format!("{i}"));
                times.push(t.elapsed());
            }
            Err(e) if e.to_string().contains("no leader") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the put and get: {e:?}"),
        }
    }
    times.sort();
    times[2]
}

/// Slow raft links showed in [`put_get`]'s times, and went with the heal. A put
/// commits after a round trip to a follower and a linearizable get confirms the
/// leadership with another: with 200 ms each way, ~2 x 400 ms added; 150 ms is a
/// margin a loaded machine cannot fake.
pub fn assert_slowed_then_healed(before: Duration, during: Duration, after: Duration) {
    assert!(
        during > before + Duration::from_millis(150),
        "{during:?} with the latency, {before:?} without"
    );
    assert!(
        after + Duration::from_millis(150) < during,
        "{after:?} after the heal, {during:?} during"
    );
}

/// Whether the member at `addr` grants a lease (which needs a quorum) within 1 s.
pub async fn grants_lease(addr: &str) -> bool {
    let Some(mut c) = member(addr).await else {
        return false;
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), c.lease_grant(5, None)).await,
        Ok(Ok(_))
    )
}

/// Waits (up to `within`) for the cluster to name a leader that `ok` accepts.
pub async fn leader_where(
    c: &Mutex<Box<dyn Cluster>>,
    within: Duration,
    ok: impl Fn(&str) -> bool,
) -> Option<String> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Some(l) = c.lock().await.leader().await.filter(|l| ok(l)) {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Nothing of run `id` on the machine: no namespace, no host interface.
pub fn assert_network_gone(id: &str) {
    let names = netns::namespaces_of(id).unwrap();
    assert!(names.is_empty(), "namespaces left behind: {names:?}");
    let listed = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !listed.contains(id),
        "ip netns list still shows {id}: {listed}"
    );
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    let host = netns::host_interface(id);
    assert!(
        !links.contains(&host),
        "ip link still shows {host}: {links}"
    );
}

/// Waits up to 3 s for every process of the run under `results` to be gone.
pub fn assert_processes_gone(results: &Path) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !crate::run_support::leftovers(results).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = crate::run_support::leftovers(results);
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
