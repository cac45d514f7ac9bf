//! The stopping stage: the workers stop, the resource's log is completed, the
//! shifted clocks end with the servers, the nodes' network goes, and the faults
//! are accounted for (planned against started).

use super::clients::Clients;
use super::drive::Ran;
use super::nemesis::FaultAccount;
use super::prepare::Prepared;
use super::servers::Servers;
use anyhow::{Context, Result};
use lockcheck_history as history;
use lockcheck_rundir::ClientInfo;
use std::time::Duration;

/// A run with everything it started stopped: what the judge needs besides the
/// run directory.
pub(super) struct Stopped {
    /// The workload's faults, planned against started.
    pub faults: FaultAccount,
    /// What the adapter under test said about itself, if the clients are one.
    pub client: Option<ClientInfo>,
}

/// Stops the workers, completes the resource's log, ends the shifted clocks and the
/// servers, and accounts for the faults. The run's first failure, if any, is its
/// error, once everything stopped.
pub(super) async fn stop(
    run: &Prepared,
    servers: Servers,
    clients: Clients,
    ran: Ran,
) -> Result<Stopped> {
    let (w, opts, phases) = (&run.w, &run.opts, &run.phases);
    let Servers {
        journal,
        network,
        cluster,
        res,
    } = servers;
    let Clients {
        workers, client, ..
    } = clients;
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
        let f = lockcheck_history::f::CLOCK_RESET;
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
        cluster.lock().await.stop().await;
    } else {
        cluster.lock().await.discard().await;
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
            let faults = tally.account(&w.faults, &planned, run.duration, cut_short);
            Stopped { faults, client }
        }),
    }
}
