//! The last stages: the judge checks the stopped run's history and resource log
//! and computes its figures, then the verdict and the report go into the run
//! directory, and the servers' data goes unless kept.

use super::figures;
use super::nemesis::FaultAccount;
use super::prepare::Prepared;
use super::stop::Stopped;
use super::workload::{self, Workload};
use anyhow::{Context, Result};
use lockcheck_check as check;
use lockcheck_history as history;
use lockcheck_rundir::{ClientInfo, RunReport};
use lockcheck_servers::cluster::Runtime;
use std::path::Path;

/// Judges the stopped run on a blocking thread: a signal still interrupts the
/// check, which is left behind.
pub(super) async fn judge(run: &Prepared, stopped: Stopped) -> Result<RunReport> {
    let Stopped { mut faults, client } = stopped;
    faults.allowed = run.opts.allow_missed_faults;
    let (w, dir, seed) = (run.w.clone(), run.dir.clone(), run.seed);
    // `--image` is the command line's: the workload (whose runtime
    // `--runtime` already set) does not hold it.
    let image = (w.runtime == Runtime::Docker).then(|| run.docker_image().to_string());
    let judged =
        tokio::task::spawn_blocking(move || check_run(&w, seed, &dir, faults, client, image))
            .await?;
    run.phases.done("check");
    judged
}

/// Writes the run's verdict.json and report.html, and removes the servers' data
/// unless `--keep-data`; logs the phases' timings.
pub(super) fn write(run: &Prepared, report: &RunReport) -> Result<()> {
    let (dir, phases) = (&run.dir, &run.phases);
    lockcheck_rundir::VerdictFile::of_run(report.clone()).write(dir)?;
    // The report is rebuilt from the run directory alone, as `lockcheck report` does.
    lockcheck_report::write_html(dir, &dir.join(lockcheck_report::REPORT_FILE))
        .context("writing report.html")?;
    phases.done("report");
    if !run.opts.keep_data {
        drop_server_data(dir);
        phases.done("data removed");
    }
    tracing::info!("{}: {}", dir.display(), phases.line());
    Ok(())
}

/// Removes a finished run's server data (`data/`): an etcd member preallocates
/// 64 MiB of log, so three members are a quarter of a GiB a run, and a Patroni
/// cluster more; `--test-count 50` would fill a disk with files nothing reads
/// afterwards (the report, `lockcheck report`, `analyze`, `recover` read the
/// history, the resource log, the journal and the nodes' logs, which stay). A run
/// that failed never gets here: its data stays for whoever looks into why.
pub fn drop_server_data(run_dir: &Path) {
    let data = run_dir.join(lockcheck_servers::cluster::DATA_DIR);
    if let Err(e) = std::fs::remove_dir_all(&data) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!("lockcheck: could not remove {}: {e}", data.display());
        }
    }
}

/// Checks the run's history and resource log and computes the figures.
fn check_run(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// verdict.json records the runtime by name: the name serde gave it when the
    /// record held the enum, which older verdicts carry (the backend's is held
    /// so by backend's own test).
    #[test]
    fn the_record_names_a_runtime_as_serde_does() {
        for r in &Runtime::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.name(), "{r:?}");
        }
    }
}
