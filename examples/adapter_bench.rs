//! The protocol's overhead: acquire/release cycles per second against one private
//! Redis, through lockcheck's built-in Redis client and through the redis-py
//! adapter (clients/redis-py, over client.md's JSON lines), one client, no contention.
//!
//!     cargo run --release --example adapter_bench -- --cycles 3000

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::backend::adapter::{AdapterClient, Program, Spec};
use lockcheck::backend::{self, BackendKind, LockClient, LockConfig};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 3000)]
    cycles: u32,
}

/// A private redis-server on a free loopback port, killed on drop.
struct Redis(std::process::Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> Result<(Redis, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("starting redis-server")?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "redis-server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((Redis(child), addr))
}

/// Acquire/release cycles per second of `client`.
async fn cycles(client: &mut dyn LockClient, n: u32) -> Result<f64> {
    let t = Instant::now();
    for _ in 0..n {
        client.acquire().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        client.release().await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(f64::from(n) / t.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let (_redis, addr) = start_redis()?;
    let endpoints = vec![addr];
    let cfg = LockConfig {
        name: "bench".into(),
        lease: Duration::from_secs(10),
        acquire_timeout: Duration::from_secs(1),
        fencing_token: false,
    };
    let mut builtin = backend::connect(BackendKind::Redis, &endpoints, &cfg).await?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run_dir = tempfile::tempdir()?;
    let mut adapter = AdapterClient::start(
        Spec {
            program: Program {
                argv: vec![
                    "/usr/bin/python3".into(),
                    "clients/redis-py/redis_py_lock.py".into(),
                ],
                dir: repo.to_path_buf(),
            },
            client: "client-0".into(),
            op_timeout: Duration::from_secs(10),
            run_dir: run_dir.path().to_path_buf(),
        },
        BackendKind::Redis,
        &endpoints,
        &cfg,
    )
    .await?;
    // A warm-up round each, then the measured rounds.
    cycles(builtin.as_mut(), 100).await?;
    cycles(&mut adapter, 100).await?;
    let b = cycles(builtin.as_mut(), args.cycles).await?;
    let a = cycles(&mut adapter, args.cycles).await?;
    let library = adapter.hello().library.clone().unwrap_or_default();
    println!(
        "acquire/release cycles per second, one client, {} cycles:",
        args.cycles
    );
    println!("  built-in Redis client (lockcheck): {b:8.0}");
    println!(
        "  {library} through its adapter:    {a:8.0}  ({:.1}x slower)",
        b / a
    );
    Ok(())
}
