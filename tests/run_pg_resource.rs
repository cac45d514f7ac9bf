//! PostgreSQL as the protected resource: the conditional `UPDATE` against a real
//! server (a lower token rejected; an equal one accepted by `<=`, rejected by `<`;
//! concurrent writers serialised by the row lock into a dense `seq`), and whole runs
//! where a Redis lock's paused holder writes late: fenced, PostgreSQL rejects it;
//! unfenced, the stale write is found in PostgreSQL's own applied order.

mod run_support;
use lockcheck::history::{read_resource, AppliedWrite};
use lockcheck::resource::postgres::{Client, Resource};
use lockcheck::resource::{Fence, WriteOutcome, MISSING_TOKEN, STALE_TOKEN};
use run_support::*;

fn stale() -> WriteOutcome {
    WriteOutcome::Rejected(STALE_TOKEN.into())
}

fn applied(seq: u64) -> WriteOutcome {
    WriteOutcome::Applied { seq }
}

#[tokio::test]
async fn the_conditional_update_rejects_what_its_comparison_says() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("resource.jsonl");
    // The fence is the client's WHERE clause: one server, one client per fence.
    let res = Resource::start(Fence::NotBelow, dir.path()).await.unwrap();
    let mut not_below = Client::connect(res.addr(), Fence::NotBelow).await.unwrap();
    let mut above = Client::connect(res.addr(), Fence::Above).await.unwrap();
    let mut unfenced = Client::connect(res.addr(), Fence::Off).await.unwrap();
    assert_eq!(not_below.read().await.unwrap(), (0, None));

    assert_eq!(
        not_below.write(1, Some(5), "1:1").await.unwrap(),
        applied(1)
    );
    // Lower: rejected by `<=` and by `<`.
    assert_eq!(not_below.write(0, Some(4), "0:1").await.unwrap(), stale());
    assert_eq!(above.write(0, Some(4), "0:2").await.unwrap(), stale());
    // Equal: `token <= $2` holds, `token < $2` does not.
    assert_eq!(
        not_below.write(1, Some(5), "1:2").await.unwrap(),
        applied(2)
    );
    assert_eq!(above.write(1, Some(5), "1:3").await.unwrap(), stale());
    assert_eq!(above.write(2, Some(6), "2:1").await.unwrap(), applied(3));
    // A fenced write needs a token: `token <= NULL` holds for no row.
    assert_eq!(
        not_below.write(3, None, "3:1").await.unwrap(),
        WriteOutcome::Rejected(MISSING_TOKEN.into())
    );
    // Without the condition, the lower token overwrites the row.
    assert_eq!(unfenced.write(0, Some(4), "0:3").await.unwrap(), applied(4));
    assert_eq!(above.read().await.unwrap(), (4, Some("0:3".into())));

    let stats = res.stats_handle();
    res.finish().await.unwrap();
    let want = [
        (1, 1, 5, "1:1"),
        (2, 1, 5, "1:2"),
        (3, 2, 6, "2:1"),
        (4, 0, 4, "0:3"),
    ]
    .map(|(seq, process, token, data)| AppliedWrite {
        seq,
        process,
        token: Some(token),
        data: data.into(),
    });
    assert_eq!(read_resource(&log).unwrap(), want);
    assert_eq!(stats.get().applied, 4);
    assert_eq!(stats.get().stale_accepted, 1);
    let left = leftovers(dir.path());
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn concurrent_writers_are_serialised_by_the_row_lock_into_a_dense_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("resource.jsonl");
    let res = Resource::start(Fence::NotBelow, dir.path()).await.unwrap();
    let addr = res.addr();
    let writers: Vec<_> = (0..4u64)
        .map(|p| {
            tokio::spawn(async move {
                let mut c = Client::connect(addr, Fence::NotBelow).await.unwrap();
                let mut outcomes = Vec::new();
                for i in 0..25u64 {
                    // Interleaved tokens: each writer's are increasing, the others'
                    // overtake them, so both outcomes happen.
                    let token = i * 4 + (p * 7) % 4 + 1;
                    outcomes.push(c.write(p, Some(token), &format!("{p}:{i}")).await.unwrap());
                }
                outcomes
            })
        })
        .collect();
    let mut applied_seqs = Vec::new();
    let mut rejected = 0;
    for w in writers {
        for o in w.await.unwrap() {
            match o {
                WriteOutcome::Applied { seq } => applied_seqs.push(seq),
                WriteOutcome::Rejected(_) => rejected += 1,
            }
        }
    }
    res.finish().await.unwrap();
    let log = read_resource(&log).unwrap();
    assert_eq!(log.len() + rejected, 100);
    // seq is the row's version, taken under its lock: dense, each write once...
    applied_seqs.sort();
    let seqs: Vec<u64> = log.iter().map(|w| w.seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    assert_eq!(applied_seqs, seqs, "every ok's seq is in the log, once");
    // ...and in that order the fence held: each token re-checked after the wait.
    assert!(
        log.windows(2).all(|w| w[0].token <= w[1].token),
        "tokens in the database's order: {log:?}"
    );
    let left = leftovers(dir.path());
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn a_resource_dropped_without_finishing_still_writes_its_log_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("resource.jsonl");
    let res = Resource::start(Fence::Off, dir.path()).await.unwrap();
    let mut c = Client::connect(res.addr(), Fence::Off).await.unwrap();
    for i in 1..=3 {
        assert_eq!(
            c.write(0, None, &format!("0:{i}")).await.unwrap(),
            applied(i)
        );
    }
    // As an interrupted run drops it: the copy happens on the way out.
    drop(res);
    assert_eq!(read_resource(&log).unwrap().len(), 3);
    assert!(c.write(0, None, "0:4").await.is_err(), "the server is gone");
    let left = leftovers(dir.path());
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The applied log of a run, and its verdict's view of the resource.
fn applied_log(r: &Finished) -> Vec<AppliedWrite> {
    assert_eq!(r.json["resource_kind"], "postgres", "{}", r.json);
    let dir = r.run_dir();
    // The server's own log is there: the order came from PostgreSQL.
    assert!(dir.join("resource/nodes/n1.log").is_file());
    let log = read_resource(&dir.join("resource.jsonl")).unwrap();
    let seqs: Vec<u64> = log.iter().map(|w| w.seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        Some(log.len() as u64),
        r.json["figures"]["ops"]["write"]["ok"].as_u64(),
        "every write ok, and only those, in the log (no write timed out here)"
    );
    log
}

#[test]
fn a_paused_redis_holder_is_fenced_off_by_the_postgres_update() {
    let r = run(&workload("postgres-resource-fenced.toml"), &[]);
    assert_eq!(r.code, 0, "valid exits 0: {}\n{}", r.json, r.stderr);
    assert_eq!(r.json["fence"], "<=");
    assert!(r.anomalies("stale-write-accepted").is_empty());
    let doubles = r.anomalies("double-holder");
    assert!(
        !doubles.is_empty(),
        "the pause should still make two holders"
    );
    assert!(doubles.iter().all(|a| a["allowed"] == true));
    let f = &r.json["figures"];
    assert!(f["writes_rejected_by_fence"].as_u64().unwrap() >= 1, "{f}");
    assert!(f["write_latency_ms"]["p50"].as_f64().is_some(), "{f}");
    let log = applied_log(&r);
    assert!(log.windows(2).all(|w| w[0].token <= w[1].token));
    // `<=` lets a holder write several times with its token.
    assert!(log.windows(2).any(|w| w[0].token == w[1].token));
    r.assert_nothing_left();
}

#[test]
fn without_the_token_condition_the_stale_write_lands_in_postgres() {
    let r = run(&workload("postgres-resource-unfenced.toml"), &[]);
    assert_eq!(r.code, 1, "anomalies exit 1: {}\n{}", r.json, r.stderr);
    assert_eq!(r.json["fence"], "none");
    let stale = r.anomalies("stale-write-accepted");
    assert!(!stale.is_empty(), "{}", r.json["anomalies"]);
    assert_eq!(stale[0]["allowed"], false);
    assert_eq!(r.json["figures"]["writes_rejected_by_fence"], 0);
    // The stale write is in PostgreSQL's order after a higher token.
    let log = applied_log(&r);
    let tokens: Vec<u64> = stale[0]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_u64())
        .collect();
    let (low, high) = (tokens.iter().min().unwrap(), tokens.iter().max().unwrap());
    let first_high = log.iter().position(|w| w.token == Some(*high)).unwrap();
    assert!(log[first_high..].iter().any(|w| w.token == Some(*low)));
    r.assert_nothing_left();
}

#[test]
fn the_strict_comparison_admits_each_token_once() {
    let r = run(&workload("postgres-resource-strict.toml"), &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.json, r.stderr);
    assert_eq!(r.json["fence"], "<");
    let log = applied_log(&r);
    assert!(
        log.windows(2).all(|w| w[0].token < w[1].token),
        "with `<` every applied token is new: {log:?}"
    );
    // Each section's own second and third writes were rejected.
    let f = &r.json["figures"];
    let rejected = f["writes_rejected_by_fence"].as_u64().unwrap();
    assert!(log.len() >= 3, "sections wrote: {log:?}");
    assert!(rejected >= 2 * (log.len() as u64 - 1), "{f}");
    r.assert_nothing_left();
}

#[test]
fn an_interrupted_run_still_copies_the_applied_writes_and_stops_the_server() {
    use nix::sys::signal::Signal;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg-long.toml");
    std::fs::write(
        &path,
        r#"duration = "60s"

[resource]
kind = "postgres"
fence = "<="

[backend]
kind = "redis"
lease = "2s"

[clients]
count = 2

[critical_section]
hold = "50ms"
writes = 2
"#,
    )
    .unwrap();
    let results = dir.path().join("results");
    let history = results.join("latest/history.jsonl");
    let oks = |h: &lockcheck::history::History| {
        h.ops
            .iter()
            .filter(|o| o.f == "write" && o.kind == lockcheck::history::OpType::Ok)
            .map(|o| (o.process, o.value["data"].as_str().unwrap().to_string()))
            .collect::<Vec<_>>()
    };
    let (mut controller, ()) = run_until(
        &path,
        &results,
        &[],
        "no writes",
        Duration::from_secs(30),
        |_| {
            let writes = std::fs::read_to_string(&history)
                .map_or(0, |t| t.matches(r#""type":"ok","f":"write""#).count());
            (writes >= 5).then_some(())
        },
    );
    let status = end(&mut controller, Signal::SIGINT);
    let stderr = std::io::read_to_string(controller.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let h = lockcheck::history::read_jsonl(&history).unwrap();
    let applied = read_resource(&results.join("latest/resource.jsonl")).unwrap();
    let in_log: Vec<_> = applied
        .iter()
        .map(|w| {
            (
                lockcheck::history::Process::Client(w.process),
                w.data.clone(),
            )
        })
        .collect();
    let acknowledged = oks(&h);
    assert!(acknowledged.len() >= 5);
    for ok in &acknowledged {
        assert!(
            in_log.contains(ok),
            "{ok:?} acknowledged but not in resource.jsonl"
        );
    }
    let left = leftovers(&results);
    assert!(left.is_empty(), "left behind: {left:?}");
}
