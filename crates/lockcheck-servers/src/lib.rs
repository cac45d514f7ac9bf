//! lockcheck's lock services: what every lock client is, the servers they talk to,
//! and one folder per service. Three modules, two layers (tests/layers.rs):
//! - `backend`: what every lock client is, and the registry of lock services: the
//!   lock clients know no server process, fault or checker;
//! - `cluster`: starting and stopping the servers (local processes, docker, hosts
//!   over ssh); knows no fault;
//! - `backends`: one folder per lock service (Redis, etcd, ...), its lock client,
//!   options, server recipe and packages: no layer of its own, each file is in
//!   `backend`'s layer or, the server recipe, in `cluster`'s.
//!
//! Below them only the history (the operations a lock client reports) and the
//! journal (what a server's start changed outside the run, for `recover`).

pub mod backend;
pub mod backends;
pub mod cluster;
