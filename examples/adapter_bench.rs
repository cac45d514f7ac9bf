//! The protocol's overhead and each shipped adapter's speed: acquire/release cycles
//! per second of one uncontended client against private servers (one Redis, five
//! for Redlock, one etcd member, one ZooKeeper node), through lockcheck's built-in
//! client of each backend and through every adapter of clients/ for it (client.md's
//! JSON lines, then the library). The PyPI adapters need scripts/setup's virtualenv;
//! the etcd one its binary (`cargo build --release --bins`).
//!
//!     cargo build --release --bins && cargo run --release --example adapter_bench -- --secs 3

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::backend::adapter::{AdapterClient, Program, Spec};
use lockcheck::backend::{self, BackendKind, LockClient, LockConfig};
use lockcheck::cluster::{ClusterSpec, LocalCluster};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// How long to measure each client, in seconds.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Only the backends named (redis, redlock, etcd, zookeeper); all by default.
    #[arg(long)]
    only: Vec<String>,
}

/// The adapters of clients/ for `kind`: a name and the command, relative to the repo.
fn adapters(kind: BackendKind, etcd_lock: &Path) -> Vec<(&'static str, Vec<String>)> {
    let venv = "clients/.venv/bin/python";
    let py = |python: &str, script: &str| vec![python.to_string(), script.to_string()];
    match kind {
        BackendKind::Redis => vec![
            (
                "redis-py",
                py("/usr/bin/python3", "clients/redis-py/redis_py_lock.py"),
            ),
            (
                "python-redis-lock",
                py(venv, "clients/python-redis-lock/redis_lock_adapter.py"),
            ),
            ("tooz (redis)", py(venv, "clients/tooz/tooz_lock.py")),
        ],
        BackendKind::Redlock => vec![("pottery", py(venv, "clients/pottery/pottery_lock.py"))],
        BackendKind::Etcd => vec![
            ("etcd Lock/Unlock", vec![etcd_lock.display().to_string()]),
            ("tooz (etcd3gw)", py(venv, "clients/tooz/tooz_lock.py")),
        ],
        BackendKind::Zookeeper => vec![
            (
                "kazoo",
                py("/usr/bin/python3", "clients/kazoo/kazoo_lock.py"),
            ),
            ("Curator", vec!["clients/curator/run".to_string()]),
        ],
        _ => Vec::new(),
    }
}

/// Acquire/release cycles per second of `client`: `n` cycles, or as many as `secs` allow.
async fn round(client: &mut dyn LockClient, n: Option<u32>, secs: f64) -> Result<f64> {
    let t = Instant::now();
    let mut done = 0u32;
    while n.map_or(t.elapsed().as_secs_f64() < secs, |n| done < n) {
        client.acquire().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        client.release().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        done += 1;
    }
    Ok(f64::from(done) / t.elapsed().as_secs_f64())
}

/// Acquire/release cycles per second of `client` over `secs`, after a warm-up.
async fn cycles(client: &mut dyn LockClient, secs: f64) -> Result<f64> {
    round(client, Some(20), secs).await?;
    round(client, None, secs).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The etcd adapter is a binary of this crate, built beside this example's folder.
    let etcd_lock: PathBuf = std::env::current_exe()?
        .parent()
        .and_then(Path::parent)
        .context("this example's folder")?
        .join("lockcheck-etcd-lock");
    let cfg = LockConfig {
        name: "bench".into(),
        lease: Duration::from_secs(10),
        acquire_timeout: Duration::from_secs(1),
        fencing_token: false,
        options: Default::default(),
    };
    println!(
        "acquire/release cycles per second, one client, no contention, {} s each:",
        args.secs
    );
    for (kind, nodes) in [
        (BackendKind::Redis, 1),
        (BackendKind::Redlock, 5),
        (BackendKind::Etcd, 1),
        (BackendKind::Zookeeper, 1),
    ] {
        let name = kind.name();
        if !args.only.is_empty() && !args.only.iter().any(|o| o == name) {
            continue;
        }
        let dir = tempfile::tempdir()?;
        let spec = ClusterSpec {
            nodes,
            ..ClusterSpec::new(kind, dir.path())
        };
        let mut cluster = LocalCluster::start(spec)
            .await
            .with_context(|| format!("starting {nodes} {name} node(s)"))?;
        let endpoints = cluster.endpoints();
        let mut builtin = backend::connect(kind, &endpoints, &cfg).await?;
        let base = cycles(builtin.as_mut(), args.secs).await?;
        println!("  {name} ({nodes} node(s)), lockcheck's built-in client: {base:8.0}");
        for (i, (library, argv)) in adapters(kind, &etcd_lock).into_iter().enumerate() {
            let spec = Spec {
                program: Program {
                    argv,
                    dir: repo.to_path_buf(),
                },
                client: format!("client-{i}"),
                op_timeout: Duration::from_secs(10),
                run_dir: dir.path().to_path_buf(),
                election: false,
            };
            let measured = match AdapterClient::start(spec, kind, &endpoints, &cfg).await {
                Ok(mut adapter) => cycles(&mut adapter, args.secs).await,
                Err(e) => Err(e),
            };
            match measured {
                Ok(a) if a <= base => println!(
                    "    {library:<18} through its adapter: {a:8.0}  ({:.1}x slower)",
                    base / a
                ),
                Ok(a) => println!(
                    "    {library:<18} through its adapter: {a:8.0}  ({:.1}x faster)",
                    a / base
                ),
                Err(e) => println!("    {library:<18} not measured: {e:#}"),
            }
        }
        cluster.stop().await;
    }
    Ok(())
}
