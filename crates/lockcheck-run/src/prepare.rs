//! The first stage of a run: what this machine must have before anything starts
//! (room for the clients, the servers' programs, root for a network of
//! namespaces), then the run directory with the workload in it, `results/latest`
//! pointing at it. Every later stage reads the run through the [`Prepared`] it
//! makes.

use super::capacity;
use super::phases::Phases;
use super::workload::Workload;
use anyhow::{Context, Result};
use lockcheck_exit::Exit;
use lockcheck_resource as resource;
use lockcheck_servers::cluster::{self, Runtime};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How a run is carried out, besides its workload.
#[derive(Debug, Clone)]
pub struct Options {
    /// Overrides the workload's duration.
    pub time_limit: Option<Duration>,
    /// Overrides the workload's seed.
    pub seed: Option<u64>,
    /// Where run directories go (`results/`).
    pub results: PathBuf,
    /// The program re-executed as `lockcheck worker` (normally this one).
    pub worker_exe: PathBuf,
    /// Show the live status line on stderr.
    pub live: bool,
    /// The image for the docker runtime, instead of the workload's or the backend's
    /// official one.
    pub image: Option<String>,
    /// A run whose planned faults did not all start still passes (`--allow-missed-faults`).
    pub allow_missed_faults: bool,
    /// Keep the servers' data in the run directory after the run (`--keep-data`).
    pub keep_data: bool,
}

/// A run about to start: its workload, settings and directory, and the clock of
/// its phases.
pub(super) struct Prepared {
    /// Shared with the clients' slots, which read the workload as they go.
    pub w: Arc<Workload>,
    pub opts: Options,
    /// The workload's seed, unless `--seed` gave one.
    pub seed: u64,
    /// The workload's duration, unless `--time-limit` cut it.
    pub duration: Duration,
    /// The run directory.
    pub dir: PathBuf,
    pub phases: Phases,
}

impl Prepared {
    /// The image a docker run's containers start from: `--image`, else the
    /// workload's `backend.image`, else the backend's default.
    pub fn docker_image(&self) -> &str {
        self.opts
            .image
            .as_deref()
            .or(self.w.backend.image.as_deref())
            .unwrap_or(cluster::default_image(self.w.backend.kind))
    }
}

/// Checks what the run needs of this machine, then makes its directory: clients
/// the machine cannot hold, a missing server or a results directory lockcheck
/// cannot write are found before anything forks, as the environment's problem.
pub(super) fn prepare(w: &Workload, opts: &Options) -> Result<Prepared> {
    // Clients the machine cannot hold are refused before anything forks.
    capacity::check(w)?;
    // A missing server is an environment problem, found before anything starts.
    if w.runtime == Runtime::Local {
        cluster::server_binary(w.backend.kind)
            .resolve(None)
            .map_err(Exit::environment)?;
    }
    // A resource's server always runs here, whatever runs the lock service.
    if let Some(server) = resource::server(w.resource.kind) {
        server.resolve(None).map_err(Exit::environment)?;
    }
    if w.backend.network == cluster::NetworkKind::Namespaces && !nix::unistd::geteuid().is_root() {
        return Err(Exit::environment(
            "backend.network = \"namespaces\" needs root: lockcheck makes a network namespace, veths and a bridge for the nodes",
        ));
    }
    let phases = Phases::start();
    let seed = opts.seed.unwrap_or(w.seed);
    let duration = opts.time_limit.unwrap_or(w.duration);
    // A results directory lockcheck cannot write is this machine's problem too.
    let dir = new_run_dir(&opts.results, &w.name).map_err(Exit::environment)?;
    std::fs::write(dir.join("workload.toml"), &w.text)
        .with_context(|| format!("copying the workload into {}", dir.display()))
        .map_err(Exit::environment)?;
    point_latest(&opts.results, &dir).map_err(Exit::environment)?;
    phases.done("run dir");
    Ok(Prepared {
        w: Arc::new(w.clone()),
        opts: opts.clone(),
        seed,
        duration,
        dir,
        phases,
    })
}

/// `results/<workload>-<UTC timestamp>`, made unique if two runs start in one second.
pub fn new_run_dir(results: &Path, name: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(results).with_context(|| format!("creating {}", results.display()))?;
    let stamp = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    for n in 1.. {
        let dir = match n {
            1 => results.join(format!("{name}-{stamp}")),
            n => results.join(format!("{name}-{stamp}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    unreachable!("some suffix is free")
}

/// Points `results/latest` at `dir`, replacing the link atomically.
fn point_latest(results: &Path, dir: &Path) -> Result<()> {
    let name = dir.file_name().context("run directory name")?;
    let tmp = results.join(format!(".latest-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(name, &tmp)
        .and_then(|()| std::fs::rename(&tmp, results.join("latest")))
        .with_context(|| format!("pointing {}/latest at {}", results.display(), dir.display()))
}
