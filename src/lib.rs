//! lockcheck: does a distributed lock keep two holders apart when processes pause,
//! clocks drift and networks split, and does the resource it protects reject the
//! stale writes that follow?
//!
//! One folder per concern; imports flow one way:
//! - `exit`: the process's exit codes (depends on nothing of ours);
//! - `history`: the operations of a run, the one currency (depends on nothing of ours);
//! - `check`: the checker, a pure function of a history (depends only on `history`);
//! - `backend`: one file per lock service (Redis, Redlock, etcd, ...);
//! - `cluster`: starting and stopping the servers (local processes, docker);
//! - `fault`: what lockcheck breaks (pause, kill, clock, partition, latency);
//! - `resource`: the protected resource, fenced or not;
//! - `run`: where they meet: workloads, workers, the controller;
//! - `report`: what people and CI read (depends on `history` and `check`);
//! - `cli`: one file per subcommand, under a thin `main.rs`.

pub mod backend;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod exit;
pub mod fault;
pub mod history;
pub mod report;
pub mod resource;
pub mod run;
