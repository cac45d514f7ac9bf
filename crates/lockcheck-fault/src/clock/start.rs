//! Starting a process under the interposer with its own clock file: a node
//! (through the cluster's hook) or a worker.

use super::page::{clock_file, ensure_file};
use super::remote::host_hook;
use super::shim::{child_env, install_shim, reach, Reach};
use crate::spec::Setup;
use anyhow::Result;
use lockcheck_servers::cluster::{NodeSpec, Prepare, Runtime};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a clock fault needs before the run starts: the nodes (`of_nodes`) or
/// the workers start under the interposer, each with its page, once however
/// many clock faults the workload has.
pub(super) fn prepare_run(of_nodes: bool, setup: &mut Setup<'_>) {
    if of_nodes && setup.first("the nodes' clock interposer") {
        match setup.runtime {
            // The interposer goes to the nodes' hosts, their paths are theirs.
            Runtime::Ssh => setup.cluster.prepare_on_host = Some(host_hook()),
            _ => setup.nodes.push(prepare_hook(setup.run_dir.to_path_buf())),
        }
    } else if !of_nodes && setup.first("the workers' clock interposer") {
        let dir = setup.run_dir.to_path_buf();
        setup
            .workers
            .push(Arc::new(move |name| Ok(process_clock(&dir, name)?.into())));
    }
}

/// A cluster hook that starts every node the interposer can reach with its own
/// clock file (`<run_dir>/clocks/<node>.clock`, unskewed until a clock fault),
/// so that a clock fault can later skew it live. A restarted node maps its
/// existing file again, and keeps whatever skew is in effect. Nodes it cannot
/// reach (Go servers) start untouched; the clock fault says so when it hits them.
pub fn prepare_hook(run_dir: PathBuf) -> Prepare {
    Prepare(Arc::new(
        move |node: &NodeSpec, cmd: &mut std::process::Command| {
            let binary = crate::which(cmd.get_program())?;
            if reach(&binary)? != Reach::Live {
                return Ok(());
            }
            cmd.envs(process_clock(&run_dir, &node.name)?);
            Ok(())
        },
    ))
}

/// The environment that starts process `name` of a run (a node, or a worker) under
/// the interposer with its own clock file, created unskewed if it is not there yet.
/// No ClockControl here, whose drop would reset a skew in effect when a node restarts.
pub fn process_clock(run_dir: &Path, name: &str) -> Result<[(OsString, OsString); 2]> {
    let shim = install_shim(run_dir)?;
    let path = clock_file(run_dir, name);
    ensure_file(&path)?;
    Ok(child_env(&shim, &path))
}
