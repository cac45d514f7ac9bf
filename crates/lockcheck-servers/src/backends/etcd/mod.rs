//! etcd: the lease lock and the election ([`client`]), a cluster of members
//! ([`server`]).

pub mod client;
pub mod server;
