//! The servers' stage: the lock service's cluster under the workload's runtime,
//! started as the faults' setup made it, its network journaled first, then the
//! protected resource.

use super::prepare::Prepared;
use anyhow::{Context, Result};
use lockcheck_exit::Exit;
use lockcheck_journal::{Effect, Journal};
use lockcheck_resource as resource;
use lockcheck_servers::cluster::{self, Cluster, ClusterSpec, Runtime};
use std::sync::Arc;

/// What a run has up once its servers are: each part a guard that stops what it
/// started.
pub(super) struct Servers {
    /// The run's journal, where the later stages write their processes.
    pub journal: Arc<Journal>,
    /// The journal's line for the nodes' network, undone once the servers stop.
    pub network: Option<u64>,
    /// Shared with the nemesis, whose node faults kill and restart servers.
    pub cluster: Arc<tokio::sync::Mutex<Box<dyn Cluster>>>,
    pub res: resource::Running,
}

/// Starts the cluster `spec` describes, then the resource.
pub(super) async fn start(run: &Prepared, spec: ClusterSpec) -> Result<Servers> {
    let (w, dir) = (&run.w, run.dir.as_path());
    // Namespaces, bridge and veths are written down before they exist, so that
    // `lockcheck recover` removes them after a kill -9 whenever it came.
    let journal = Journal::for_run(dir)?;
    let network = match spec.network {
        cluster::NetworkKind::Namespaces => Some(journal.record(Effect::Network {
            id: cluster::netns::run_id(dir),
        })?),
        cluster::NetworkKind::Loopback => None,
    };
    // The workload was checked: servers that do not start are this machine's
    // problem (a binary, a port, a directory the server may not enter).
    let cluster = start_cluster(run, spec).await.map_err(|e| {
        Exit::environment(format!(
            "starting the {} cluster ({} runtime): {e:#}",
            w.backend.kind,
            w.runtime.name()
        ))
    })?;
    run.phases.done("servers ready");
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));
    let res = resource::Running::start(w.resource, dir)
        .await
        .map_err(|e| Exit::environment(format!("starting the resource: {e:#}")))?;
    run.phases.done("resource");
    Ok(Servers {
        journal,
        network,
        cluster,
        res,
    })
}

/// Starts the workload's servers under its runtime.
async fn start_cluster(run: &Prepared, spec: ClusterSpec) -> Result<Box<dyn Cluster>> {
    let w = &run.w;
    Ok(match w.runtime {
        Runtime::Local => Box::new(cluster::LocalCluster::start(spec).await?),
        #[cfg(feature = "docker")]
        Runtime::Docker => {
            let image = run.docker_image();
            Box::new(cluster::DockerCluster::start(spec, image).await?)
        }
        // Refused with the workload (`Workload::with_runtime`), before anything starts.
        #[cfg(not(feature = "docker"))]
        Runtime::Docker => anyhow::bail!(cluster::WITHOUT_DOCKER),
        Runtime::Ssh => {
            let mut ssh = w
                .backend
                .ssh
                .clone()
                .context("the ssh runtime needs backend.hosts")?;
            // The workload's file first, else $LOCKCHECK_SSH_CONFIG, else the user's own.
            if ssh.ssh_config.is_none() {
                ssh.ssh_config = std::env::var_os("LOCKCHECK_SSH_CONFIG")
                    .filter(|v| !v.is_empty())
                    .map(std::path::PathBuf::from);
            }
            // Absolute, as the journal keeps it for `lockcheck recover`.
            if let Some(cfg) = &ssh.ssh_config {
                ssh.ssh_config = Some(
                    std::fs::canonicalize(cfg)
                        .with_context(|| format!("the SSH configuration {}", cfg.display()))?,
                );
            }
            if ssh.manage {
                Box::new(cluster::SshCluster::start(spec, ssh).await?)
            } else {
                Box::new(
                    cluster::ssh::attach::AttachedCluster::start(spec, ssh)
                        .await
                        .with_context(|| format!("{}: backend.manage = false", w.path.display()))?,
                )
            }
        }
        Runtime::External => Box::new(cluster::ExternalCluster::new(
            w.backend.kind,
            spec.dir,
            w.backend.endpoints.clone(),
        )?),
    })
}
