//! Redis, three ways: the lock on one server ([`client`]), the same on the primary
//! Sentinel names ([`sentinel`]), and Redlock on independent servers
//! ([`redlock`]), all over one server's scripts ([`instance`]); their servers
//! ([`server`]).

pub mod client;
pub mod instance;
pub mod redlock;
pub mod sentinel;
pub mod server;
