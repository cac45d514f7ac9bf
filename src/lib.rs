//! lockcheck: does a distributed lock keep two holders apart when processes pause,
//! clocks drift and networks split, and does the resource it protects reject the
//! stale writes that follow?
//!
//! One folder per concern; imports flow one way, down this list's layers (the
//! allowed edges are the table in `tests/layers.rs`, which fails on any other;
//! docs/architecture.md walks through them):
//! - `exit`: the process's exit codes (depends on nothing of ours; the crate
//!   `lockcheck-exit`);
//! - `history`: the operations of a run, the one currency (depends on nothing of
//!   ours; the crate `lockcheck-history`);
//! - `journal`: what a run changed outside itself, for `recover` (nothing of ours;
//!   the crate `lockcheck-journal`);
//! - `check`: the checker, a pure function of a history (depends only on `history`;
//!   the crate `lockcheck-check`);
//! - `rundir`: what a run directory's verdict.json records (the verdict, the run's
//!   figures and settings), written by `run` and read by everything above through
//!   the same types (depends only on `check`; the crate `lockcheck-rundir`);
//! - `backend`: what every lock client is, and the registry of lock services: the
//!   lock clients know no server process, fault or checker;
//! - `cluster`: starting and stopping the servers (local processes, docker); knows
//!   no fault;
//! - `backends`: one folder per lock service (Redis, etcd, ...), its lock client and
//!   its server recipe: no layer of its own, each file is in `backend`'s layer or,
//!   the server recipe, in `cluster`'s (these three: the crate `lockcheck-servers`);
//! - `fault`: what lockcheck breaks (pause, kill, clock, partition, latency; the
//!   crate `lockcheck-fault`);
//! - `resource`: the protected resource, fenced or not (the crate
//!   `lockcheck-resource`);
//! - `recover`: undoing what the journal says is still in effect (above `cluster`
//!   and `fault`, whose code the undos take; the crate `lockcheck-recover`);
//! - `report`: what people and CI read, rebuilt from a run directory alone
//!   (depends on `history`, `check` and `rundir`; the crate `lockcheck-report`);
//! - `run`: where they meet: workloads, workers, the controller (the crate
//!   `lockcheck-run`);
//! - `audit`: the battery of scenarios for one backend, run as `lockcheck run`
//!   children and added up into a scorecard with a verdict (the crate
//!   `lockcheck-audit`);
//! - `shrink`: the smallest workload that still breaks the lock as a stored run did,
//!   and replaying a stored run's faults as they happened (child runs, as `audit`;
//!   the crate `lockcheck-shrink`);
//! - `cli`: one file per subcommand, under a thin `main.rs`; nothing else names it.

// Every layer under the CLI is a crate of its own (crates/), each depending
// only on the crates of the layers under it, so Cargo keeps it there; under
// these names, the rest of lockcheck reaches them as it did when they were
// modules here. The history and the checker, which a user's test can take
// without the runner; the run directory's records, so that the report, below
// the runner, reads verdict.json through the types the runner writes it with;
// the report, which needs nothing of the runner; the journal, which knows none
// of the changes it records but by name; the lock services (`backend`,
// `cluster`, `backends`), which know no fault, resource or run; the faults,
// which know the servers they hit but not when (the run's); the protected
// resource; `recover`'s undo of what a journal says is still in effect; the
// exit codes; the runner, where they meet; the audit; and shrink.
pub use lockcheck_audit as audit;
pub use lockcheck_check as check;
pub use lockcheck_exit as exit;
pub use lockcheck_fault as fault;
pub use lockcheck_history as history;
pub use lockcheck_journal as journal;
pub use lockcheck_recover as recover;
pub use lockcheck_report as report;
pub use lockcheck_resource as resource;
pub use lockcheck_run as run;
pub use lockcheck_rundir as rundir;
// The lock services, their clients and their servers: the crate
// `lockcheck-servers`, whose modules keep their names here.
pub use lockcheck_servers::{backend, backends, cluster};
pub use lockcheck_shrink as shrink;

pub mod cli;
