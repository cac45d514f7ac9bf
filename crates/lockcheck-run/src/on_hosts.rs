//! `[clients] clients_on = "hosts"`: the workers run on the ssh runtime's hosts
//! (client i on host i mod n, in `backend.hosts` order), so that a client's
//! pause stops a process on another machine, with that machine's scheduler,
//! network and distance to the nodes, as the team's own clients would be.
//!
//! The controller still times every op on its own clock: a worker talks to it
//! over its SSH channel (its standard input and output, the same JSON lines),
//! and reaches the resource, which stays here, through a port of its host's
//! loopback forwarded over the run's connection to this machine's. This very
//! program is copied once per host per run into
//! `<remote_dir>/lockcheck-<run>-clients-<node>/` (journaled before, removed at
//! the end; a directory per host, as two may share a disk); each worker is journaled with its
//! host as it starts, and ended at the end, on a drop (error, Ctrl-C, SIGTERM,
//! a panic) and by `lockcheck recover`.

use super::worker;
use anyhow::{Context, Result};
use futures_util::future::join_all;
use lockcheck_fault::Place;
use lockcheck_journal::{Effect, Journal, Proc};
use lockcheck_servers::cluster::ssh::host::Host;
use lockcheck_servers::cluster::ssh::run_name;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The hosts' places for workers, and the workers placed there.
pub struct OnHosts {
    places: Vec<HostPlace>,
    /// The workers started, each with its host (an index into `places`) and
    /// its journal entry.
    procs: Vec<(usize, Proc, u64)>,
    journal: Arc<Journal>,
}

/// One host ready for workers: the program copied, the resource forwarded.
struct HostPlace {
    host: Host,
    program: PathBuf,
    /// Where the resource is, as a worker on the host dials it.
    resource: SocketAddr,
    /// The run's directory there, and its journal entry.
    dir: (PathBuf, u64),
}

impl OnHosts {
    /// Copies `exe` to the hosts `clients` workers will use (all of `hosts`, or
    /// the first `clients`) into a directory of the run's under `remote_dir`,
    /// and forwards a port of each to `resource`; the hosts in parallel.
    pub async fn prepare(
        hosts: Vec<Host>,
        clients: usize,
        exe: &Path,
        remote_dir: &Path,
        resource: SocketAddr,
        run_dir: &Path,
    ) -> Result<OnHosts> {
        let journal = Journal::for_run(run_dir)?;
        let run = run_name(run_dir);
        let slim = {
            let (exe, run_dir) = (exe.to_path_buf(), run_dir.to_path_buf());
            tokio::task::spawn_blocking(move || Slimmed::of(&exe, &run_dir)).await?
        };
        let mut on = OnHosts {
            places: Vec::new(),
            procs: Vec::new(),
            journal: journal.clone(),
        };
        let used = hosts.into_iter().take(clients.max(1)).enumerate();
        let prepared = join_all(used.map(|(i, host)| {
            // A directory per host, named by its node: two hosts may share a disk.
            let dir = remote_dir.join(format!("{run}-clients-n{}", i + 1));
            let (exe, journal) = (slim.path.clone(), journal.clone());
            tokio::task::spawn_blocking(move || {
                // Written down first: a controller killed meanwhile still has it removed.
                let id = journal.record(Effect::RemoteDir {
                    host: host.remote.clone(),
                    dir: dir.clone(),
                })?;
                let place = |program| {
                    let port = host.forward(resource)?;
                    Ok::<_, anyhow::Error>((SocketAddr::from(([127, 0, 0, 1], port)), program))
                };
                let ready = host
                    .install(&exe, &dir)
                    .and_then(place)
                    .with_context(|| format!("readying host {} for the clients", host.name()));
                Ok::<_, anyhow::Error>((host, (dir, id), ready))
            })
        }))
        .await;
        let mut first = None;
        for p in prepared {
            // A directory journaled is removed at the end, whether or not its copy worked.
            let (host, dir, ready) = match p? {
                Ok(p) => p,
                Err(e) => {
                    first.get_or_insert(e);
                    continue;
                }
            };
            let (resource, program) = match ready {
                Ok(r) => r,
                Err(e) => {
                    first.get_or_insert(e);
                    (resource, PathBuf::new())
                }
            };
            on.places.push(HostPlace {
                host,
                program,
                resource,
                dir,
            });
        }
        // Dropped on failure: what was made is removed again.
        first.map_or(Ok(on), Err)
    }

    fn place_of(&self, slot: usize) -> &HostPlace {
        &self.places[slot % self.places.len()]
    }

    /// The command that starts slot `slot`'s worker on its host with `config`
    /// (its resource reached through the host's forwarded port).
    pub fn command(&self, slot: usize, config: &worker::Config) -> Result<std::process::Command> {
        let place = self.place_of(slot);
        let config = worker::Config {
            resource: config.resource.at(place.resource),
            ..config.clone()
        };
        Ok(place.host.attached(&[
            place.program.to_string_lossy().into_owned(),
            "worker".into(),
            "--config".into(),
            serde_json::to_string(&config)?,
        ]))
    }

    /// Where slot `slot`'s worker, `name`, started on its host, as `line`
    /// says, journaled; none if `line` is not the one that says it.
    pub fn started(&mut self, slot: usize, name: &str, line: &str) -> Option<Result<Place>> {
        let i = slot % self.places.len();
        let host = self.places[i].host.clone();
        Some(
            host.started(name, line)?
                .and_then(|proc| self.journaled(i, host, proc)),
        )
    }

    fn journaled(&mut self, i: usize, host: Host, proc: Proc) -> Result<Place> {
        let id = self.journal.record(Effect::RemoteProcess {
            host: host.remote.clone(),
            proc: proc.clone(),
        })?;
        self.procs.push((i, proc.clone(), id));
        Ok(Place::Host { host, proc })
    }

    /// Ends the workers still there (resumed and killed), and removes the
    /// run's directories, the hosts in parallel; what could not be undone is
    /// left in the journal for `lockcheck recover`. Blocking.
    pub fn end(&mut self) {
        let procs = std::mem::take(&mut self.procs);
        let places = std::mem::take(&mut self.places);
        let journal = &self.journal;
        std::thread::scope(|s| {
            for (i, place) in places.iter().enumerate() {
                let mine: Vec<&(usize, Proc, u64)> = procs.iter().filter(|p| p.0 == i).collect();
                s.spawn(move || {
                    let ended = {
                        let list: Vec<&Proc> = mine.iter().map(|p| &p.1).collect();
                        // A worker whose stdin closed has exited; one stopped is killed.
                        place.host.end(&list, None)
                    };
                    let ids = match ended {
                        Ok(()) => mine.iter().map(|p| p.2).collect(),
                        Err(e) => {
                            tracing::warn!(
                                "ending the clients on host {}: {e:#}",
                                place.host.name()
                            );
                            Vec::new()
                        }
                    };
                    let removed = match place.host.remove_dir(&place.dir.0) {
                        Ok(_) => Some(place.dir.1),
                        Err(e) => {
                            tracing::warn!("{e:#}");
                            None
                        }
                    };
                    for id in ids.into_iter().chain(removed) {
                        if let Err(e) = journal.undone(id) {
                            tracing::warn!("{e:#}");
                        }
                    }
                });
            }
        });
    }
}

/// The program the hosts are sent: this one without its debug information,
/// which is most of a build with it (a debug build: 323 MB, 49 MB without), as
/// each host is sent a copy each run. Made with binutils' `objcopy` where this
/// machine has it, in the run directory's `clients/`, and removed once copied;
/// else this program as it is.
struct Slimmed {
    path: PathBuf,
    made: bool,
}

impl Slimmed {
    fn of(exe: &Path, run_dir: &Path) -> Slimmed {
        let dir = run_dir.join("clients");
        // Named as the program, as its copies on the hosts are.
        let path = dir.join(exe.file_name().unwrap_or("lockcheck".as_ref()));
        let made = std::fs::create_dir_all(&dir).is_ok()
            && std::process::Command::new("objcopy")
                .arg("--strip-debug")
                .arg(exe)
                .arg(&path)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if made {
            Slimmed { path, made }
        } else {
            let _ = std::fs::remove_file(&path);
            Slimmed {
                path: exe.to_path_buf(),
                made,
            }
        }
    }
}

impl Drop for Slimmed {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for OnHosts {
    fn drop(&mut self) {
        self.end();
    }
}
