//! NATS: a JetStream key-value lease ([`client`]), one node or a JetStream cluster
//! ([`server`]).

pub mod client;
pub mod server;
