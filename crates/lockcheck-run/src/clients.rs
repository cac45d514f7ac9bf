//! The clients' stage: each client's way to the nodes (straight, or through the
//! link faults' proxies of its own), one worker process per client (here, or on
//! the hosts), what the adapter under test says of itself, and every worker in
//! the journal.

use super::controller::{AskHeld, Pipes, Workers};
use super::live::LOCK_NAME;
use super::on_hosts::OnHosts;
use super::prepare::Prepared;
use super::servers::Servers;
use super::worker;
use super::workload::{self, Workload};
use anyhow::{Context, Result};
use lockcheck_exit::Exit;
use lockcheck_fault::client_name;
use lockcheck_fault::proxy::Proxies;
use lockcheck_fault::spec::{Needs, WorkerEnv};
use lockcheck_journal::{Effect, Proc};
use lockcheck_resource as resource;
use lockcheck_rundir::ClientInfo;
use lockcheck_servers::backend::adapter;
use lockcheck_servers::backend::LockConfig;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The clients, up and connected: guards that stop what they started.
pub(super) struct Clients {
    pub workers: Workers,
    /// The clients' proxies to the nodes, with link faults planned.
    _proxies: Option<Arc<Proxies>>,
    /// What the adapter under test said about itself, if the clients are one.
    pub client: Option<ClientInfo>,
    pub ask_held: AskHeld,
}

/// Starts one worker per client, each reaching the nodes as `needs` asks, with
/// the environment of `worker_env`. Returns the workers' pipes apart, for the
/// stage that drives them.
pub(super) async fn start(
    run: &Prepared,
    servers: &Servers,
    needs: Needs,
    worker_env: Vec<WorkerEnv>,
) -> Result<(Clients, Vec<Pipes>)> {
    let (w, opts, dir) = (&run.w, &run.opts, run.dir.as_path());
    let (_proxies, endpoints) = endpoints(run, servers, &needs).await?;
    let configs = worker_configs(w, endpoints, &servers.res, dir);
    // Clients on the hosts: this program copied there, the resource forwarded.
    let on_hosts = match (&w.backend.ssh, w.clients.on_hosts) {
        (Some(ssh), true) => {
            let hosts = servers.cluster.lock().await.hosts();
            let placed = OnHosts::prepare(
                hosts,
                w.clients.count,
                &opts.worker_exe,
                &ssh.remote_dir,
                servers.res.endpoint().addr(),
                dir,
            );
            Some(
                placed
                    .await
                    .map_err(|e| Exit::environment(format!("{e:#}")))?,
            )
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
        Some(_) => Exit::environment(format!("{e:#}")),
        None => e,
    })?;
    let (client, ask_held) = adapter_in_use(w, workers.hello())?;
    run.phases.done("clients started");
    // Every process of the run goes into its journal, so that `lockcheck recover`
    // can end what a controller killed with -9 leaves behind. The servers are
    // already there: a local cluster journals each server as it spawns it, a
    // docker cluster its containers, the resource its PostgreSQL.
    for (name, pid) in workers.local_pids() {
        // One that has already exited cannot be left behind.
        if let Ok(proc) = Proc::of(name, pid) {
            servers.journal.record(Effect::Process(proc))?;
        }
    }
    let clients = Clients {
        workers,
        _proxies,
        client,
        ask_held,
    };
    Ok((clients, pipes))
}

/// Each client's endpoints, one list per client. With link faults planned, each
/// client reaches each node through a proxy of its own (`client-0->n1`, ...) that
/// the faults cut or slow.
async fn endpoints(
    run: &Prepared,
    servers: &Servers,
    needs: &Needs,
) -> Result<(Option<Arc<Proxies>>, Vec<Vec<String>>)> {
    let w = &run.w;
    let clients: Vec<String> = (0..w.clients.count).map(client_name).collect();
    if needs.client_links {
        // Whatever the runtime, a node's proxy forwards to where clients would dial.
        let nodes = {
            let c = servers.cluster.lock().await;
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
        let (p, e) = Proxies::for_clients(&run.dir, &clients, &nodes, run.seed).await?;
        Ok((Some(p), e))
    } else {
        let direct = servers.cluster.lock().await.endpoints();
        let mut each = vec![direct; clients.len()];
        if w.backend.kind.client_per_node() {
            // Client i is node i's application: its own node first.
            for (i, e) in each.iter_mut().enumerate() {
                let n = e.len();
                e.rotate_left(i % n);
            }
        }
        Ok((None, each))
    }
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
            return Err(Exit::environment(format!(
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
