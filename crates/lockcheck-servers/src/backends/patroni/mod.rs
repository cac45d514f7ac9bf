//! Patroni: each client leads while its node is the primary ([`client`]);
//! PostgreSQL nodes under Patroni, with etcd as its DCS ([`server`]).

pub mod client;
pub mod server;
