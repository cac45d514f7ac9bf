//! Not part of lockcheck: the child processes its tests start, each a role
//! that talks over stdin/stdout (tests/run_support's `Helper` drives them).
//! A process of its own is the point of each: a clock that only the
//! interposer skews, a holder that SIGSTOP stops whole, a controller that
//! SIGKILL ends with no Drop run.
//!
//!     lockcheck-test-helper clock-probe
//!         answers each line with `probe WALL_NS MONO_NS` (SystemTime since the
//!         epoch, Instant since start), as a Rust worker sees its clocks
//!     lockcheck-test-helper holder SPEC_JSON
//!         a lock client ({"kind", "endpoints", "cfg"}) doing each line's
//!         `acquire`, `renew` or `release`, answering `holder: ...`
//!     lockcheck-test-helper killed-controller RUN_DIR
//!         journals a redis-server, a stopped worker and a skewed clock as a
//!         run would, says `ready REDIS_PID WORKER_PID CLOCK_FILE`, and waits
//!         to be killed

use anyhow::{bail, Context, Result};
use lockcheck::backend::{connect, BackendKind, LockConfig, LockError};
use lockcheck::fault::clock::ClockControl;
use lockcheck::fault::node;
use lockcheck::journal::{Effect, Journal, Proc};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["clock-probe"] => clock_probe(),
        ["holder", spec] => holder(spec),
        ["killed-controller", dir] => killed_controller(Path::new(dir)),
        _ => bail!(
            "usage: lockcheck-test-helper (clock-probe | holder SPEC_JSON | killed-controller RUN_DIR), not {args:?}"
        ),
    }
}

fn clock_probe() -> Result<()> {
    let start = Instant::now();
    for line in std::io::stdin().lock().lines() {
        line?;
        let wall = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        println!("probe {wall} {}", start.elapsed().as_nanos());
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn holder(spec: &str) -> Result<()> {
    use tokio::io::AsyncBufReadExt;
    let spec: serde_json::Value = serde_json::from_str(spec).context("the holder's spec")?;
    let kind: BackendKind = serde_json::from_value(spec["kind"].clone())?;
    let endpoints: Vec<String> = serde_json::from_value(spec["endpoints"].clone())?;
    let cfg: LockConfig = serde_json::from_value(spec["cfg"].clone())?;
    let mut client = connect(kind, &endpoints, &cfg).await?;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let outcome = match line.trim() {
            "acquire" => client.acquire().await.map(Some),
            "renew" => client.renew().await.map(Some),
            "release" => client.release().await.map(|()| None),
            _ => break,
        };
        let reply = match outcome {
            Ok(Some(g)) => format!(
                "ok token={}",
                g.token.map_or("none".into(), |t| t.to_string())
            ),
            Ok(None) => "ok".into(),
            Err(LockError::Denied(why)) => format!("denied {why}"),
            Err(LockError::Indeterminate(why)) => format!("indeterminate {why}"),
        };
        println!("holder: {reply}");
    }
    println!("holder: bye");
    Ok(())
}

// Leaving its children behind, unwaited, is the point: the test kills this
// process with -9 and `lockcheck recover` cleans up after it.
#[allow(clippy::zombie_processes)]
fn killed_controller(dir: &Path) -> Result<()> {
    let journal = Journal::for_run(dir)?;
    let clock = ClockControl::create(dir, "n1")?;
    journal.record(Effect::ClockSkew {
        target: "n1".into(),
        file: clock.path().to_path_buf(),
    })?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let server = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", ""])
        .envs(clock.env())
        .stdout(Stdio::null())
        .spawn()
        .context("starting redis-server (Debian package redis-server)")?;
    journal.record(Effect::Process(Proc::of("n1", server.id() as i32)?))?;
    let worker = Command::new("sleep")
        .arg("300")
        .stdout(Stdio::null())
        .spawn()?;
    journal.record(Effect::Process(Proc::of("client-0", worker.id() as i32)?))?;
    let stopped = node::stop(journal.clone(), &[("client-0".into(), worker.id() as i32)])?;
    clock.set_offset(20_000_000_000);
    println!(
        "ready {} {} {}",
        server.id(),
        worker.id(),
        clock.path().display()
    );
    std::thread::sleep(Duration::from_secs(60));
    drop(stopped);
    Ok(())
}
