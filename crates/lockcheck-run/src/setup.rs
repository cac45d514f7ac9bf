//! The faults' setup, the stage before the servers start: the cluster about to
//! start, with what the workload's faults need in place first (each fault's own
//! [`Spec::prepare_run`](lockcheck_fault::spec::Spec::prepare_run) and `prepare_nodes`
//! hooks) and the nodes' time namespaces, and what the workers start with. Nothing
//! starts here: the hooks run as the servers and the workers do.

use super::prepare::Prepared;
use lockcheck_fault::spec::{Needs, Setup, WorkerEnv};
use lockcheck_servers::cluster::{self, ClusterSpec};

/// What the faults put in place, for the servers and the workers to start with.
pub(super) struct FaultSetup {
    /// The cluster to start, its nodes' hooks chained into its `prepare`.
    pub cluster: ClusterSpec,
    /// What every fault of the workload needs of the run (the clients' proxies).
    pub needs: Needs,
    /// What each worker starts with for the faults (the clock interposer).
    pub workers: Vec<WorkerEnv>,
}

/// The workload's cluster with each fault's hooks, the faults' needs and the
/// workers' environment.
pub(super) fn faults(run: &Prepared) -> FaultSetup {
    let (w, dir) = (&run.w, run.dir.as_path());
    let mut spec = ClusterSpec::new(w.backend.kind, dir);
    spec.nodes = w.backend.nodes;
    spec.lease = Some(w.backend.lease.ttl);
    spec.options = w.backend.options.clone();
    spec.network = w.backend.network;
    let needs = Needs::of(w.faults.iter().map(|f| &*f.spec));
    let mut setup = Setup::new(&mut spec, w.runtime, dir, run.seed);
    for f in &w.faults {
        f.spec.prepare_run(&mut setup);
    }
    let (mut hooks, workers) = (
        std::mem::take(&mut setup.nodes),
        std::mem::take(&mut setup.workers),
    );
    // Nodes with a monotonic offset start in a time namespace.
    if !w.backend.monotonic_offsets.is_empty() {
        let offsets = w.backend.monotonic_offsets.clone();
        hooks.push(cluster::timens::monotonic_hook(offsets));
    }
    // What a fault puts in place under each node itself, by its own code.
    hooks.extend(w.faults.iter().filter_map(|f| f.spec.prepare_nodes(dir)));
    spec.prepare = cluster::Prepare::chain(hooks);
    FaultSetup {
        cluster: spec,
        needs,
        workers,
    }
}
