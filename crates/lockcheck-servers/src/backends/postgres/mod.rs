//! PostgreSQL: the session advisory lock and the lease row ([`client`]), a private
//! server per node ([`server`]).

pub mod client;
pub mod server;
