//! The link proxy against a real redis-server: pass, black hole, reset, latency.

mod fault_support;

use fault_support::{redis_cmd, Redis};
use lockcheck::fault::proxy::{cuts, Cut, LinkId, Mode, Proxies, Shape};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A command through `addr` (blocking client, off the proxy's runtime threads).
async fn via(addr: SocketAddr, args: &'static [&'static str]) -> Result<String, String> {
    tokio::task::spawn_blocking(move || redis_cmd(addr, args, Duration::from_millis(700)))
        .await
        .unwrap()
}

async fn setup() -> (tempfile::TempDir, Redis, Proxies, SocketAddr, SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path(), &[]);
    let mut proxies = Proxies::new(42);
    let a = proxies
        .add(LinkId::new("client-0", "n1"), redis.addr)
        .await
        .unwrap();
    let b = proxies
        .add(LinkId::new("client-1", "n1"), redis.addr)
        .await
        .unwrap();
    (dir, redis, proxies, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_hole_makes_one_client_time_out_while_another_goes_on() {
    let (_dir, _redis, proxies, a, b) = setup().await;
    assert_eq!(via(a, &["PING"]).await.unwrap(), "PONG", "pass forwards");
    let cut = cuts(
        &Shape::Links(vec![("client-0".into(), "n1".into())]),
        &["client-0".into(), "client-1".into(), "n1".into()],
    )
    .unwrap();
    let links = proxies.partition(&cut, Cut::Blackhole);
    assert_eq!(links, vec![LinkId::new("client-0", "n1")]);
    let started = Instant::now();
    let err = via(a, &["PING"]).await.unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "it hung until the timeout: {err}"
    );
    assert_eq!(
        via(b, &["PING"]).await.unwrap(),
        "PONG",
        "the other link still works"
    );
    proxies.heal();
    assert_eq!(via(a, &["PING"]).await.unwrap(), "PONG", "healed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_link_gives_a_connection_error_at_once() {
    let (_dir, redis, proxies, a, _b) = setup().await;
    // An open connection through the link, reset under its feet.
    let conn = tokio::task::spawn_blocking(move || {
        let mut c = redis::Client::open(format!("redis://{a}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let pong: String = redis::cmd("PING").query(&mut c).unwrap();
        assert_eq!(pong, "PONG");
        c
    })
    .await
    .unwrap();
    proxies
        .set(&[LinkId::new("client-0", "n1")], Mode::Reset)
        .unwrap();
    let open = tokio::task::spawn_blocking(move || {
        let mut c = conn;
        redis::cmd("PING")
            .query::<String>(&mut c)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let fresh = via(a, &["PING"]).await;
    // A reset, not a timeout (the open connection waits up to 2 s for a reply):
    // the errors say so, which no slowness of the machine can fake.
    for (which, outcome) in [("open", &open), ("fresh", &fresh)] {
        let err = outcome.as_ref().expect_err(which);
        assert!(
            err.to_lowercase().contains("reset"),
            "{which}: the error says reset: {err}"
        );
    }
    assert_eq!(
        redis.cmd(&["PING"]).unwrap(),
        "PONG",
        "the server itself is fine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_shows_in_the_round_trip_time() {
    let (_dir, _redis, proxies, a, _b) = setup().await;
    let rtt = || async move {
        tokio::task::spawn_blocking(move || {
            let mut c = redis::Client::open(format!("redis://{a}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            let t = Instant::now();
            let _: String = redis::cmd("PING").query(&mut c).unwrap();
            t.elapsed()
        })
        .await
        .unwrap()
    };
    let before = rtt().await;
    proxies
        .set(
            &[LinkId::new("client-0", "n1")],
            Mode::Latency {
                delay: Duration::from_millis(100),
                jitter: Duration::from_millis(10),
            },
        )
        .unwrap();
    let slow = rtt().await;
    println!("PING round trip: {before:?} direct link, {slow:?} with 100 ms ± 10 ms each way");
    // Only the lower bound is the proxy's doing; an upper one would measure the
    // machine's load.
    assert!(
        slow >= Duration::from_millis(180),
        "both directions delayed: {slow:?}"
    );
}
