//! ZooKeeper: the lock recipe of ephemeral sequential znodes ([`client`]), an
//! ensemble ([`server`]).

pub mod client;
pub mod server;
