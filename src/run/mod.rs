//! Where everything meets: a workload (`workload`) starts a backend cluster
//! (`cluster`), the protected resource (`resource`), one worker process per client
//! (`worker`, driven by `controller`), and the fault schedule (`nemesis`); the run
//! records the history, stops everything, checks it (`check::lock`) and writes the
//! run directory with the figures (`figures`).
//!
//! Whatever happens (normal end, Ctrl-C, SIGTERM, an error, a panic) every paused
//! process is resumed and every process the run started is stopped before `run`
//! returns: workers, the servers and the faults are guards that undo themselves.

pub mod capacity;
pub mod controller;
pub mod figures;
mod live;
pub mod nemesis;
pub mod on_hosts;
pub mod phases;
pub mod worker;
pub mod workload;

pub use live::{Live, LOCK_NAME};

use crate::backend::adapter;
use crate::backend::LockConfig;
use crate::check;
use crate::cluster::{self, Cluster, ClusterSpec, Runtime};
use crate::fault::client_name;
use crate::fault::spec::{Needs, Setup, WorkerEnv};
use crate::history::{self, HistoryWriter};
use crate::resource;
use anyhow::{anyhow, Context, Result};
use controller::{AskHeld, Recorder, Shared, Slot, Workers};
use nemesis::FaultAccount;
use phases::Phases;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use workload::Workload;

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

/// What `verdict.json` holds: the checker's verdict and the run's figures (the run
/// directory's type, which the report reads it back with), and the adapter a run
/// tested as its `init` reply named it.
pub use crate::rundir::{ClientInfo, RunReport};

/// The run was stopped by a signal: everything was cleaned up, nothing was checked.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {signal} after {secs:.1} s; everything the run started was stopped; the history so far is in {dir}")]
pub struct Interrupted {
    pub signal: &'static str,
    pub secs: f64,
    pub dir: String,
}

/// Runs a workload once: a fresh cluster, the clients, the faults; then the check.
/// Writes the run directory and points `results/latest` at it.
pub fn run(w: &Workload, opts: &Options) -> Result<RunReport> {
    // Clients the machine cannot hold are refused before anything forks.
    capacity::check(w)?;
    // A missing server is an environment problem, found before anything starts.
    if w.runtime == Runtime::Local {
        cluster::server_binary(w.backend.kind)
            .resolve(None)
            .map_err(environment)?;
    }
    // A resource's server always runs here, whatever runs the lock service.
    if let Some(server) = resource::server(w.resource.kind) {
        server.resolve(None).map_err(environment)?;
    }
    if w.backend.network == cluster::NetworkKind::Namespaces && !nix::unistd::geteuid().is_root() {
        return Err(environment(
            "backend.network = \"namespaces\" needs root: lockcheck makes a network namespace, veths and a bridge for the nodes",
        ));
    }
    let phases = Phases::start();
    let seed = opts.seed.unwrap_or(w.seed);
    let duration = opts.time_limit.unwrap_or(w.duration);
    // A results directory lockcheck cannot write is this machine's problem too.
    let dir = new_run_dir(&opts.results, &w.name).map_err(environment)?;
    std::fs::write(dir.join("workload.toml"), &w.text)
        .with_context(|| format!("copying the workload into {}", dir.display()))
        .map_err(environment)?;
    point_latest(&opts.results, &dir).map_err(environment)?;
    phases.done("run dir");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let w = Arc::new(w.clone());
    let started = std::time::Instant::now();
    let outcome = runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        let interrupted = |signal| {
            anyhow!(Interrupted {
                signal,
                secs: started.elapsed().as_secs_f64(),
                dir: dir.display().to_string(),
            })
        };
        // A signal drops the run future: its guards stop the workers, the faults
        // and the servers on the way out. The check, once everything is stopped,
        // stays interruptible too: it runs on a blocking thread left behind.
        let run_and_check = async {
            let (mut faults, client) =
                execute(w.clone(), opts, seed, duration, &dir, &phases).await?;
            faults.allowed = opts.allow_missed_faults;
            let (w, dir) = (w.clone(), dir.clone());
            // `--image` is the command line's: the workload (whose runtime
            // `--runtime` already set) does not hold it.
            let image = (w.runtime == Runtime::Docker).then(|| docker_image(&w, opts).to_string());
            let judged =
                tokio::task::spawn_blocking(move || judge(&w, seed, &dir, faults, client, image))
                    .await?;
            phases.done("check");
            judged
        };
        tokio::select! {
            r = run_and_check => r,
            _ = int.recv() => Err(interrupted("SIGINT")),
            _ = term.recv() => Err(interrupted("SIGTERM")),
            _ = hup.recv() => Err(interrupted("SIGHUP")),
        }
    });
    // Do not wait for a check a signal interrupted.
    runtime.shutdown_background();
    let report = outcome?;
    crate::rundir::VerdictFile::of_run(report.clone()).write(&dir)?;
    // The report is rebuilt from the run directory alone, as `lockcheck report` does.
    crate::report::write_html(&dir, &dir.join(crate::report::REPORT_FILE))
        .context("writing report.html")?;
    phases.done("report");
    if !opts.keep_data {
        drop_server_data(&dir);
        phases.done("data removed");
    }
    tracing::info!("{}: {}", dir.display(), phases.line());
    Ok(report)
}

/// Removes a finished run's server data (`data/`): an etcd member preallocates
/// 64 MiB of log, so three members are a quarter of a GiB a run, and a Patroni
/// cluster more; `--test-count 50` would fill a disk with files nothing reads
/// afterwards (the report, `lockcheck report`, `analyze`, `recover` read the
/// history, the resource log, the journal and the nodes' logs, which stay). A run
/// that failed never gets here: its data stays for whoever looks into why.
pub fn drop_server_data(run_dir: &Path) {
    let data = run_dir.join(crate::cluster::DATA_DIR);
    if let Err(e) = std::fs::remove_dir_all(&data) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!("lockcheck: could not remove {}: {e}", data.display());
        }
    }
}

/// Checks the run's history and resource log and computes the figures.
fn judge(
    w: &Workload,
    seed: u64,
    dir: &Path,
    faults: FaultAccount,
    client: Option<ClientInfo>,
    image: Option<String>,
) -> Result<RunReport> {
    let history = history::read_jsonl(&dir.join("history.jsonl"))?;
    let applied = history::read_resource(&dir.join("resource.jsonl"))?;
    let mut verdict = check::lock::check(
        &history,
        &check::lock::LockInput {
            resource: Some(&applied),
        },
        &check::Limits::default(),
    );
    verdict.apply_allow(&w.allow);
    verdict.notes.extend(history.warnings.iter().cloned());
    // A valid verdict over a run that saw nothing of its faults is no evidence of
    // anything: untested, as a run whose faults never started.
    // A holder whose library the fault never reached is asked first: that is
    // so of every run of the workload, whatever this one's timing showed.
    let mut faults = faults;
    if verdict.valid == check::Validity::Valid {
        let missed = w
            .clients
            .self_fencing_library
            .then(|| figures::library_out_of_reach(&history.ops))
            .flatten();
        faults.out_of_reach = missed.is_some();
        faults.unseen = missed.or_else(|| figures::unobserved_fault(&history.ops));
    }
    let provoked = check::provoked::of_run(&history, Some(&applied));
    Ok(RunReport {
        figures: figures::of(&history, &verdict),
        provoked: Some(provoked),
        verdict,
        workload: w.name.clone(),
        seed,
        backend: w.backend.kind.name().to_string(),
        resource: w.resource.fence.mode(),
        resource_kind: w.resource.kind,
        fence: w.resource.fence,
        run_dir: dir.to_path_buf(),
        workload_dir: std::path::absolute(
            w.path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        )
        .ok(),
        self_fencing_margin_ms: w.clients.self_fencing_margin_ms(),
        mode: match &w.mode {
            workload::ClientMode::Lock(_) => None,
            m @ workload::ClientMode::Election(_) => Some(m.name().to_string()),
        },
        on_lease_loss: match &w.mode {
            workload::ClientMode::Lock(_) => None,
            workload::ClientMode::Election(e) => Some(e.on_lease_loss),
        },
        missed_faults: faults.failed(),
        faults,
        client,
        runtime: Some(w.runtime.name().to_string()),
        image,
        incident: w.incident.clone(),
    })
}

/// The body of a run, inside the runtime: [`prepare`] the servers, the resource
/// and the clients, run them [`live`] with the nemesis for the run's duration, then
/// [`finish`]. Every process it starts is owned by a guard local to this future, so
/// dropping it (a signal) stops them all. Returns the account of the workload's
/// faults (planned against started), and what the adapter under test said about
/// itself, if the clients are one.
async fn execute(
    w: Arc<Workload>,
    opts: &Options,
    seed: u64,
    duration: Duration,
    dir: &Path,
    phases: &Phases,
) -> Result<(FaultAccount, Option<ClientInfo>)> {
    let mut prepared = prepare(&w, opts, seed, dir, phases).await?;
    let ran = live(&w, opts, seed, duration, dir, &mut prepared, phases).await?;
    finish(&w, opts, duration, prepared, ran, phases).await
}

/// What a run has up before its clock starts, each part a guard that stops what it
/// started: the servers, the resource, the clients' proxies and the workers.
struct Prepared {
    journal: Arc<crate::journal::Journal>,
    /// The journal's line for the nodes' network, undone once the servers stop.
    network: Option<u64>,
    servers: Arc<tokio::sync::Mutex<Box<dyn Cluster>>>,
    res: resource::Running,
    _proxies: Option<Arc<crate::fault::proxy::Proxies>>,
    workers: Workers,
    /// The workers' pipes, taken by the live part.
    pipes: Vec<controller::Pipes>,
    client: Option<ClientInfo>,
    ask_held: AskHeld,
}

/// Starts the servers (with the hooks the planned faults need), the resource and
/// the workers, and journals every process.
async fn prepare(
    w: &Arc<Workload>,
    opts: &Options,
    seed: u64,
    dir: &Path,
    phases: &Phases,
) -> Result<Prepared> {
    let Servers {
        cluster,
        network,
        journal,
        needs,
        workers: worker_env,
    } = prepare_servers(w, opts, seed, dir).await?;
    phases.done("servers ready");
    // Shared with the nemesis, whose node faults kill and restart servers.
    let servers = Arc::new(tokio::sync::Mutex::new(cluster));
    let res = resource::Running::start(w.resource, dir)
        .await
        .map_err(|e| environment(format!("starting the resource: {e:#}")))?;
    phases.done("resource");
    // With link faults planned, each client reaches each node through a proxy of
    // its own (`client-0->n1`, ...) that the faults cut or slow.
    let clients: Vec<String> = (0..w.clients.count).map(client_name).collect();
    let (_proxies, endpoints) = if needs.client_links {
        // Whatever the runtime, a node's proxy forwards to where clients would dial.
        let nodes = {
            let c = servers.lock().await;
            c.node_names()
                .into_iter()
                .zip(c.endpoints())
                .map(|(name, e)| {
                    use std::net::ToSocketAddrs;
                    let addr = e.to_socket_addrs().ok().and_then(|mut a| a.next());
                    Ok((name, addr.with_context(|| format!("resolving {e}"))?))
                })
                .collect::<Result<Vec<_>>>()?
        };
        let (p, e) = crate::fault::proxy::Proxies::for_clients(dir, &clients, &nodes, seed).await?;
        (Some(p), e)
    } else {
        let direct = servers.lock().await.endpoints();
        let mut each = vec![direct; clients.len()];
        if w.backend.kind.client_per_node() {
            // Client i is node i's application: its own node first.
            for (i, e) in each.iter_mut().enumerate() {
                let n = e.len();
                e.rotate_left(i % n);
            }
        }
        (None, each)
    };
    let configs = worker_configs(w, endpoints, &res, dir);
    // Clients on the hosts: this program copied there, the resource forwarded.
    let on_hosts = match (&w.backend.ssh, w.clients.on_hosts) {
        (Some(ssh), true) => {
            let hosts = servers.lock().await.hosts();
            let placed = on_hosts::OnHosts::prepare(
                hosts,
                w.clients.count,
                &opts.worker_exe,
                &ssh.remote_dir,
                res.endpoint().addr(),
                dir,
            );
            Some(placed.await.map_err(|e| environment(format!("{e:#}")))?)
        }
        _ => None,
    };
    let (workers, pipes) = Workers::start(
        &opts.worker_exe,
        &configs,
        &worker_env,
        on_hosts,
        dir,
        Duration::from_secs(20),
    )
    .await
    // A lock client of the team's own that cannot start is the environment's
    // problem (a missing interpreter or library), reported with its stderr tail.
    .map_err(|e| match &w.client {
        Some(_) => environment(format!("{e:#}")),
        None => e,
    })?;
    let (client, ask_held) = adapter_in_use(w, workers.hello())?;
    phases.done("clients started");
    // Every process of the run goes into its journal, so that `lockcheck recover`
    // can end what a controller killed with -9 leaves behind. The servers are
    // already there: a local cluster journals each server as it spawns it, a
    // docker cluster its containers, the resource its PostgreSQL.
    {
        for (name, pid) in workers.local_pids() {
            // One that has already exited cannot be left behind.
            if let Ok(proc) = crate::journal::Proc::of(name, pid) {
                journal.record(crate::journal::Effect::Process(proc))?;
            }
        }
    }

    Ok(Prepared {
        journal,
        network,
        servers,
        res,
        _proxies,
        workers,
        pipes,
        client,
        ask_held,
    })
}

/// Each worker's configuration: its endpoints, the lock, the resource, its adapter.
fn worker_configs(
    w: &Workload,
    endpoints: Vec<Vec<String>>,
    res: &resource::Running,
    dir: &Path,
) -> Vec<worker::Config> {
    endpoints
        .into_iter()
        .enumerate()
        .map(|(i, endpoints)| worker::Config {
            backend: w.backend.kind,
            endpoints,
            lock: LockConfig {
                name: LOCK_NAME.to_string(),
                lease: w.backend.lease.ttl,
                acquire_timeout: w.backend.acquire_timeout,
                fencing_token: w.backend.fencing_token,
                options: w.backend.options.clone(),
            },
            resource: res.endpoint(),
            self_fencing_margin_ms: w.clients.self_fencing_margin_ms(),
            election: matches!(w.mode, workload::ClientMode::Election(_)),
            adapter: w.client.as_ref().map(|program| adapter::Spec {
                program: program.clone(),
                client: client_name(i),
                op_timeout: w.clients.op_timeout,
                run_dir: dir.to_path_buf(),
                election: matches!(w.mode, workload::ClientMode::Election(_)),
            }),
            background_renew_ms: match w.backend.renew {
                workload::Renew::Background => {
                    w.backend.lease.renew_every.map(|r| r.as_millis() as u64)
                }
                workload::Renew::Section => None,
            },
        })
        .collect()
}

/// The servers as [`prepare_servers`] started them, and what the faults need of
/// the workers.
struct Servers {
    cluster: Box<dyn Cluster>,
    /// The journal's line for the nodes' network, undone once the servers stop.
    network: Option<u64>,
    journal: Arc<crate::journal::Journal>,
    needs: Needs,
    /// What each worker starts with for the faults (the clock interposer).
    workers: Vec<WorkerEnv>,
}

/// The cluster of the workload, started with what its faults need in place first
/// (each fault's own [`Spec::prepare_run`](crate::fault::spec::Spec::prepare_run)
/// and `prepare_nodes` hooks), the nodes' network and their time namespaces.
async fn prepare_servers(w: &Workload, opts: &Options, seed: u64, dir: &Path) -> Result<Servers> {
    let mut spec = ClusterSpec::new(w.backend.kind, dir);
    spec.nodes = w.backend.nodes;
    spec.lease = Some(w.backend.lease.ttl);
    spec.options = w.backend.options.clone();
    spec.network = w.backend.network;
    let needs = Needs::of(w.faults.iter().map(|f| &*f.spec));
    let mut setup = Setup::new(&mut spec, w.runtime, dir, seed);
    for f in &w.faults {
        f.spec.prepare_run(&mut setup);
    }
    let (mut hooks, workers) = (
        std::mem::take(&mut setup.nodes),
        std::mem::take(&mut setup.workers),
    );
    // Namespaces, bridge and veths are written down before they exist, so that
    // `lockcheck recover` removes them after a kill -9 whenever it came.
    let journal = crate::journal::Journal::for_run(dir)?;
    let network = match spec.network {
        cluster::NetworkKind::Namespaces => {
            Some(journal.record(crate::journal::Effect::Network {
                id: cluster::netns::run_id(dir),
            })?)
        }
        cluster::NetworkKind::Loopback => None,
    };
    // Nodes with a monotonic offset start in a time namespace.
    if !w.backend.monotonic_offsets.is_empty() {
        let offsets = w.backend.monotonic_offsets.clone();
        hooks.push(cluster::timens::monotonic_hook(offsets));
    }
    // What a fault puts in place under each node itself, by its own code.
    hooks.extend(w.faults.iter().filter_map(|f| f.spec.prepare_nodes(dir)));
    spec.prepare = cluster::Prepare::chain(hooks);
    // The workload was checked: servers that do not start are this machine's
    // problem (a binary, a port, a directory the server may not enter).
    let cluster = start_cluster(w, spec, opts).await.map_err(|e| {
        environment(format!(
            "starting the {} cluster ({} runtime): {e:#}",
            w.backend.kind,
            w.runtime.name()
        ))
    })?;
    Ok(Servers {
        cluster,
        network,
        journal,
        needs,
        workers,
    })
}

/// What the live part of a run leaves for [`finish`].
struct Ran {
    recorder: Arc<Recorder>,
    shifted: Vec<serde_json::Value>,
    failure: Option<anyhow::Error>,
    tally: Arc<nemesis::Tally>,
    /// How many times each fault is planned to start.
    planned: Vec<u64>,
}

/// The run itself: its clock starts, the clients and the nemesis go for
/// `duration`, then the clients finish the section under way.
async fn live(
    w: &Arc<Workload>,
    opts: &Options,
    seed: u64,
    duration: Duration,
    dir: &Path,
    prepared: &mut Prepared,
    phases: &Phases,
) -> Result<Ran> {
    let pipes = std::mem::take(&mut prepared.pipes);
    let Prepared {
        servers,
        res,
        workers,
        ask_held,
        ..
    } = &*prepared;
    // The run's clock starts here, with everything up.
    let recorder = Arc::new(Recorder::new(HistoryWriter::create(
        &dir.join("history.jsonl"),
    )?));
    let shifted = time_namespaces(&w.backend.monotonic_offsets);
    for value in &shifted {
        let f = crate::history::f::CLOCK_SKEW;
        recorder.record(
            history::Process::Nemesis,
            history::OpType::Info,
            f,
            value.clone(),
            None,
            None,
        )?;
    }
    let live = Arc::new(Live::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (acquired_tx, acquired_rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        recorder: recorder.clone(),
        live: live.clone(),
        workload: w.clone(),
        next_process: AtomicU64::new(w.clients.count as u64),
        acquired: acquired_tx,
        ask_held: *ask_held,
    });
    let plan = w.schedule.map(|s| s.plan(duration));
    // What the workload asks for is what its own duration holds, whatever
    // `--time-limit` cuts off.
    let planned = nemesis::planned(
        &w.faults,
        w.schedule.map(|s| s.plan(w.duration)).as_ref(),
        seed,
    )?;
    let nemesis = nemesis::Nemesis::new(
        &w.faults,
        plan.as_ref(),
        workers.procs().to_vec(),
        seed,
        recorder.clone(),
        live.clone(),
        servers.clone(),
    )?;
    let tally = nemesis.tally();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(nemesis.run(acquired_rx, stopped.clone()));
    for (i, p) in pipes.into_iter().enumerate() {
        tasks.spawn(Slot::new(i, p, shared.clone()).run(stopped.clone()));
    }
    drop(shared);

    let status = opts.live.then(|| {
        show_status(
            live.clone(),
            recorder.started(),
            duration,
            res.stats_handle(),
        )
    });
    // Clients finish the section under way. A stuck worker costs at most an acquire
    // and one more op timing out (then its id is retired and the section ends).
    let finish = w.mode.finishing() + (w.clients.op_timeout + w.backend.acquire_timeout) * 2;
    let after_effect = (w.end == workload::End::AfterEffect).then(|| AfterEffect {
        live: live.clone(),
        tally: tally.clone(),
        planned: planned.clone(),
        wait: w.backend.lease.ttl + AFTER_EFFECT_MARGIN,
    });
    let failure = supervise(&mut tasks, duration, after_effect, &stop, finish, phases).await;
    if let Some(status) = status {
        status.abort();
        eprint!("\r\x1b[2K");
    }
    Ok(Ran {
        recorder,
        shifted,
        failure,
        tally,
        planned,
    })
}

/// Stops the workers, completes the resource's log, ends the shifted clocks and the
/// servers, and accounts for the faults.
async fn finish(
    w: &Workload,
    opts: &Options,
    duration: Duration,
    prepared: Prepared,
    ran: Ran,
    phases: &Phases,
) -> Result<(FaultAccount, Option<ClientInfo>)> {
    let Prepared {
        journal,
        network,
        servers,
        res,
        workers,
        client,
        ..
    } = prepared;
    let Ran {
        recorder,
        shifted,
        failure,
        tally,
        planned,
    } = ran;
    workers.stop(Duration::from_secs(2)).await;
    // The resource's log is complete only once no worker can write any more.
    let copied = res.finish().await.context("completing resource.jsonl");
    phases.done("clients stopped");
    // The shifted clocks end with the servers.
    for value in shifted {
        let value = serde_json::json!({ "targets": value["targets"], "method": value["method"] });
        let f = crate::history::f::CLOCK_RESET;
        recorder.record(
            history::Process::Nemesis,
            history::OpType::Info,
            f,
            value,
            None,
            None,
        )?;
    }
    // Data the run drops needs no clean shutdown.
    if opts.keep_data {
        servers.lock().await.stop().await;
    } else {
        servers.lock().await.discard().await;
    }
    phases.done("servers stopped");
    // Stopping the cluster removed its network.
    if let Some(id) = network {
        journal.undone(id)?;
    }
    recorder.sync()?;
    match failure {
        Some(e) => Err(e),
        None => copied.map(|()| {
            let cut_short = opts.time_limit.is_some_and(|t| t < w.duration);
            let faults = tally.account(&w.faults, &planned, duration, cut_short);
            (faults, client)
        }),
    }
}

/// What the run records about the adapter under test, and whether holders ask its
/// library before each write: always when it can tell (to show whether it knew it had
/// lost the lock), and heeding it under `self_fencing = "library"`.
fn adapter_in_use(
    w: &Workload,
    hello: Option<adapter::Hello>,
) -> Result<(Option<ClientInfo>, AskHeld)> {
    let Some(program) = &w.client else {
        return Ok((None, AskHeld::Never));
    };
    let hello = hello.unwrap_or_default();
    let ask = match (hello.supports("held"), w.clients.self_fencing_library) {
        (true, true) => AskHeld::Fence,
        (true, false) => AskHeld::Observe,
        (false, false) => AskHeld::Never,
        (false, true) => {
            return Err(environment(format!(
                "clients.self_fencing = \"library\" asks the library before each write, but the \
                 adapter `{}` does not support `held` (its init reply's ops: {:?})",
                program.argv.join(" "),
                hello.ops
            )))
        }
    };
    let info = ClientInfo {
        command: program.argv.clone(),
        library: hello.library,
        ops: hello.ops,
        self_fencing: w.clients.self_fencing_library.then(|| "library".into()),
    };
    Ok((Some(info), ask))
}

/// The history values of the nodes started in a time namespace, one per offset:
/// `{"targets": ["n1"], "monotonic_offset_ms": 600000, "method": "time-namespace"}`.
fn time_namespaces(offsets: &[(String, i64)]) -> Vec<serde_json::Value> {
    let mut by_offset: Vec<(i64, Vec<&str>)> = Vec::new();
    for (node, ns) in offsets {
        match by_offset.iter_mut().find(|(o, _)| o == ns) {
            Some((_, nodes)) => nodes.push(node),
            None => by_offset.push((*ns, vec![node])),
        }
    }
    by_offset
        .into_iter()
        .map(|(ns, nodes)| {
            serde_json::json!({
                "targets": nodes,
                "monotonic_offset_ms": ns / 1_000_000,
                "method": "time-namespace",
            })
        })
        .collect()
}

/// The image a docker run's containers start from: `--image`, else the
/// workload's `backend.image`, else the backend's default.
fn docker_image<'a>(w: &'a Workload, opts: &'a Options) -> &'a str {
    opts.image
        .as_deref()
        .or(w.backend.image.as_deref())
        .unwrap_or(cluster::docker::default_image(w.backend.kind))
}

/// Starts the workload's servers under its runtime.
async fn start_cluster(
    w: &Workload,
    spec: ClusterSpec,
    opts: &Options,
) -> Result<Box<dyn Cluster>> {
    Ok(match w.runtime {
        Runtime::Local => Box::new(cluster::LocalCluster::start(spec).await?),
        Runtime::Docker => {
            let image = docker_image(w, opts);
            Box::new(cluster::DockerCluster::start(spec, image).await?)
        }
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

/// `end = "after-effect"`: beyond one lease after a holder was deposed, its
/// successor holds a grant of its own and the deposed holder's section has run
/// out (or been cut off); the margin lets its last writes land.
const AFTER_EFFECT_MARGIN: Duration = Duration::from_millis(500);

/// `end = "after-effect"`: what tells the run that its fault's effect was seen through.
struct AfterEffect {
    live: Arc<Live>,
    tally: Arc<nemesis::Tally>,
    planned: Vec<u64>,
    /// One lease plus [`AFTER_EFFECT_MARGIN`].
    wait: Duration,
}

impl AfterEffect {
    /// When the run may end, once every planned fault started (none before): as
    /// soon as the first deposition's question is answered (its late writes judged,
    /// the successor's write applied), else `wait` after the first fault's effect
    /// was seen through (it is over and a holder was deposed), which covers what
    /// the run cannot see answered (a killed worker, a deposed leader).
    fn due(&self) -> Option<std::time::Instant> {
        if !self.tally.all_started(&self.planned) {
            return None;
        }
        let waited = self.live.effect_seen()? + self.wait;
        Some(self.live.answered().map_or(waited, |a| a.min(waited)))
    }

    /// Why the run ended at [`AfterEffect::due`], for the log.
    fn why(&self) -> &'static str {
        match self.live.answered() {
            Some(_) => "its first deposition was answered",
            None => "one lease had passed since its fault's effect",
        }
    }
}

/// Lets the run go for `duration`, or until `after_effect` is due (the first task
/// to fail ends it early), raises the stop flag, and waits up to `finish` for the
/// clients and the nemesis to wind down. Returns the first failure.
async fn supervise(
    tasks: &mut tokio::task::JoinSet<Result<()>>,
    duration: Duration,
    after_effect: Option<AfterEffect>,
    stop: &tokio::sync::watch::Sender<bool>,
    finish: Duration,
    phases: &Phases,
) -> Option<anyhow::Error> {
    let failed = |done: Result<Result<()>, tokio::task::JoinError>| match done {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => Some(anyhow!("a run task failed: {e}")),
    };
    let ended = tokio::time::sleep(duration);
    tokio::pin!(ended);
    let mut look = tokio::time::interval(Duration::from_millis(50));
    let mut failure = None;
    while failure.is_none() {
        tokio::select! {
            _ = &mut ended => break,
            _ = look.tick(), if after_effect.is_some() => {
                let due = after_effect.as_ref().and_then(AfterEffect::due);
                if due.is_some_and(|t| t <= std::time::Instant::now()) {
                    let why = after_effect.as_ref().map_or("", AfterEffect::why);
                    tracing::info!("the run ends early: {why}");
                    break;
                }
            }
            done = tasks.join_next() => match done {
                Some(done) => failure = failed(done),
                None => break,
            },
        }
    }
    phases.done(phases::LIVE);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(finish + Duration::from_secs(2), async {
        while let Some(done) = tasks.join_next().await {
            if let Some(e) = failed(done) {
                failure.get_or_insert(e);
            }
        }
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
        failure.get_or_insert(anyhow!(
            "the clients did not finish within {finish:?} of the end"
        ));
    }
    phases.done("sections finished");
    failure
}

/// The live status line on stderr, redrawn four times a second.
fn show_status(
    live: Arc<Live>,
    start: std::time::Instant,
    duration: Duration,
    stats: resource::StatsHandle,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            let line = live.line(start.elapsed(), duration, stats.get());
            // A line wider than the terminal wraps, and `\r` no longer erases it.
            let line: String = line
                .chars()
                .take(terminal_width().saturating_sub(1))
                .collect();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    })
}

/// The width of the terminal on stderr, 80 if it cannot be told.
fn terminal_width() -> usize {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we pass.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    if ok && size.ws_col > 0 {
        size.ws_col as usize
    } else {
        80
    }
}

fn environment(e: impl std::fmt::Display) -> anyhow::Error {
    crate::exit::Exit::environment(e)
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

/// The summary of `--test-count N`: how often the workload found an anomaly, and
/// how quickly: the detection rate users compare backends and settings by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub runs: usize,
    pub runs_with_anomalies: usize,
    pub runs_unknown: usize,
    /// Runs whose planned faults did not all start (`--allow-missed-faults` not
    /// given), counted apart whatever their verdict: they did not test what the
    /// workload claims.
    #[serde(default)]
    pub runs_with_missed_faults: usize,
    /// Runs that provoked the danger (a deposed holder's late write reached the
    /// resource): a valid run counts as evidence for a fence only if it did.
    #[serde(default)]
    pub runs_provoked: usize,
    /// Run time of the first anomaly (allowed ones excluded), over the runs that had one.
    pub median_first_anomaly_s: Option<f64>,
    pub worst_first_anomaly_s: Option<f64>,
}

impl Summary {
    pub fn of(reports: &[RunReport]) -> Summary {
        let mut firsts: Vec<f64> = reports
            .iter()
            .filter_map(|r| r.figures.first_anomaly_s)
            .collect();
        firsts.sort_by(f64::total_cmp);
        let median = match firsts.len() {
            0 => None,
            n if n % 2 == 1 => Some(firsts[n / 2]),
            n => Some((firsts[n / 2 - 1] + firsts[n / 2]) / 2.0),
        };
        Summary {
            runs: reports.len(),
            runs_with_anomalies: reports
                .iter()
                .filter(|r| r.verdict.valid == check::Validity::Invalid)
                .count(),
            runs_unknown: reports
                .iter()
                .filter(|r| r.verdict.valid == check::Validity::Unknown)
                .count(),
            runs_with_missed_faults: reports.iter().filter(|r| r.missed_faults).count(),
            runs_provoked: reports
                .iter()
                .filter(|r| {
                    r.provoked.as_ref().map(|p| p.class)
                        == Some(check::provoked::Provocation::Provoked)
                })
                .count(),
            median_first_anomaly_s: median,
            worst_first_anomaly_s: firsts.last().copied(),
        }
    }

    /// 1 if any run found anomalies, else 3 if any was unknown or missed faults,
    /// else 0.
    pub fn exit_code(&self) -> u8 {
        if self.runs_with_anomalies > 0 {
            crate::exit::ANOMALIES
        } else if self.runs_unknown > 0 || self.runs_with_missed_faults > 0 {
            crate::exit::UNKNOWN
        } else {
            crate::exit::VALID
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// verdict.json records the runtime by name: the name serde gave it when the
    /// record held the enum, which older verdicts carry (the backend's is held
    /// so by backend's own test).
    #[test]
    fn the_record_names_a_runtime_as_serde_does() {
        for r in <Runtime as clap::ValueEnum>::value_variants() {
            assert_eq!(serde_json::to_value(r).unwrap(), r.name(), "{r:?}");
        }
    }
}
