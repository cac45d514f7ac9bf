//! The NATS lock's speed on real nats-server processes: how long one node and a
//! three-node JetStream cluster (R3) take to be ready, and how many
//! acquire/release cycles one uncontended client makes per second on each (the
//! figures in the README's NATS table).
//!
//!     cargo run --release --example nats_rate -- --secs 5

use anyhow::{Context, Result};
use clap::Parser;
use lockcheck::backend::{connect, BackendKind, LockConfig};
use lockcheck::cluster::{ClusterSpec, LocalCluster};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// How long to measure the rate on each cluster, in seconds.
    #[arg(long, default_value_t = 3)]
    secs: u64,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    for nodes in [1, 3] {
        let dir = tempfile::tempdir()?;
        let spec = ClusterSpec {
            nodes,
            ..ClusterSpec::new(BackendKind::Nats, dir.path())
        };
        let t = Instant::now();
        let cluster = LocalCluster::start(spec)
            .await
            .with_context(|| format!("starting {nodes} nats nodes"))?;
        let ready = t.elapsed();
        let cfg = LockConfig {
            name: "lock".into(),
            lease: Duration::from_secs(5),
            acquire_timeout: Duration::from_secs(1),
            fencing_token: true,
            options: Default::default(),
        };
        let mut c = connect(BackendKind::Nats, &cluster.endpoints(), &cfg).await?;
        let t = Instant::now();
        let mut cycles = 0u32;
        while t.elapsed() < Duration::from_secs(args.secs) {
            c.acquire().await?;
            c.release().await?;
            cycles += 1;
        }
        let per_sec = f64::from(cycles) / t.elapsed().as_secs_f64();
        println!(
            "nats, {nodes} node(s): ready in {ready:.1?}; {per_sec:.0} acquire/release cycles per second, one client"
        );
    }
    Ok(())
}
