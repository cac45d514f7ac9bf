//! MariaDB: `GET_LOCK` in one session ([`client`]), a private server per node
//! ([`server`]).

pub mod client;
pub mod server;
