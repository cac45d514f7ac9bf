//! Redis with Sentinel, as Redis's docs set it up for high availability: a primary
//! (n1 at first), two replicas (n2, n3) and three Sentinels (n4 .. n6) that watch it
//! and, once a majority of them find it down, promote a replica. The lock is the
//! single-instance recipe of [`super::client`] (`SET key holder NX PX ttl`, renew and
//! release by compare-and-act scripts, the token an `INCR` in the same script) on the
//! server the Sentinels name as primary (`SENTINEL get-master-addr-by-name`), asked
//! afresh at every acquire, so that clients follow a failover. Renew and release go
//! to the server that granted, over the connection already open to it, as a pooled
//! client's would.
//!
//! **Known break** (Redis's distributed-lock page: "SAFETY VIOLATION!"): replication
//! is asynchronous, and a primary cut off from its replicas and the Sentinels goes on
//! granting and renewing for the clients that still reach it. The Sentinels promote
//! a replica whose copy of the key was never renewed: it runs out there, and a second
//! client acquires on the new primary while the first still renews on the old one.
//!
//! **`replica_acks`**: after a `SET` or a renewal the client sends `WAIT n timeout`
//! and counts it only once `n` replicas acknowledged it (else an acquire deletes its
//! key again and is refused, a renewal is refused). Redis's docs say what this is
//! not: `WAIT` does not make Redis strongly consistent; an acknowledged write can
//! still be lost by a failover that promotes a replica which had not received it (one
//! of fewer than `n`), or one restarted without persistence.
//!
//! **Token.** The `INCR` counter replicates like the key, asynchronously: a grant on
//! a primary cut off from its replicas takes a number the promoted replica never saw,
//! and hands out again.

use super::instance::Instance;
use crate::backend::client::LockError;
use crate::backend::options::{OptionError, OwnOptions};
use serde::Deserialize;
use std::collections::HashMap;
use std::time::Duration;

/// redis-sentinel's own `[backend]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// A grant or renewal counts once this many replicas acknowledged it (`WAIT`).
    pub replica_acks: Option<u32>,
}

impl OwnOptions for Options {
    const KEYS: &'static [(&'static str, &'static str)] = &[(
        "replica_acks",
        "only redis-sentinel waits for its replicas (WAIT)",
    )];

    fn check(&self) -> Result<(), OptionError> {
        let replicas = SERVERS - 1;
        match self.replica_acks {
            Some(n) if n == 0 || n as usize > replicas => Err(OptionError::value(
                "replica_acks",
                format!("expected 1 to {replicas} (the replicas), found {n}"),
            )),
            _ => Ok(()),
        }
    }
}

/// The Redis servers: n1 (the first primary), then its replicas.
pub const SERVERS: usize = 3;
/// The Sentinels, after the servers: n4 .. n6.
pub const SENTINELS: usize = 3;
/// The name the Sentinels monitor the primary under.
pub const MASTER_NAME: &str = "lockcheck";

/// The primary's address (`host:port`) as `sentinel` names it
/// (`SENTINEL get-master-addr-by-name`); none where it knows no primary.
pub(crate) async fn primary_named_by(sentinel: &Instance) -> Result<Option<String>, LockError> {
    let ask = ::redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(MASTER_NAME)
        .clone();
    let named: Option<(String, u16)> = sentinel.query(&ask).await?;
    Ok(named.map(|(host, port)| format!("{host}:{port}")))
}

/// The Sentinels a client asks for the primary, and the servers it has reached.
pub(crate) struct Sentinels {
    sentinels: Vec<Instance>,
    /// The servers' client addresses, n1 first: what names a primary's node.
    servers: Vec<String>,
    /// One connection per server the Sentinels named, kept across failovers.
    connected: HashMap<String, Instance>,
    timeout: Duration,
    /// `WAIT` for this many replicas after each grant and renewal.
    replica_acks: Option<u32>,
    /// The server last named primary, as a node (n1 .. n3).
    node: Option<String>,
}

impl Sentinels {
    /// `endpoints`: the servers' addresses then the Sentinels', in node order.
    pub(crate) fn new(
        endpoints: &[String],
        timeout: Duration,
        replica_acks: Option<u32>,
    ) -> anyhow::Result<Sentinels> {
        anyhow::ensure!(
            endpoints.len() == SERVERS + SENTINELS,
            "the redis-sentinel backend is {SERVERS} servers and {SENTINELS} Sentinels; got {} endpoints",
            endpoints.len()
        );
        Ok(Sentinels {
            sentinels: endpoints[SERVERS..]
                .iter()
                .map(|a| Instance::new(a, timeout))
                .collect::<anyhow::Result<_>>()?,
            servers: endpoints[..SERVERS].to_vec(),
            connected: HashMap::new(),
            timeout,
            replica_acks,
            node: None,
        })
    }

    /// The server the first Sentinel that answers names as primary; why there is
    /// none otherwise.
    pub(crate) async fn primary(&mut self) -> Result<Instance, String> {
        let mut why = Vec::new();
        let mut named = None;
        for s in &self.sentinels {
            match primary_named_by(s).await {
                Ok(Some(addr)) => {
                    named = Some(addr);
                    break;
                }
                Ok(None) => why.push(format!("{}: knows no primary", s.addr())),
                Err(e) => why.push(e.to_string()),
            }
        }
        let Some(addr) = named else {
            return Err(format!("no Sentinel named the primary: {}", why.join("; ")));
        };
        self.node = self
            .servers
            .iter()
            .position(|s| *s == addr)
            .map(|i| format!("n{}", i + 1));
        if let Some(server) = self.connected.get(&addr) {
            return Ok(server.clone());
        }
        let server = Instance::new(&addr, self.timeout).map_err(|e| format!("{e:#}"))?;
        self.connected.insert(addr, server.clone());
        Ok(server)
    }

    /// With `replica_acks`, whether that many replicas acknowledged what `server`
    /// just did (`WAIT`); why not, in words.
    pub(crate) async fn acknowledged(&self, server: &Instance) -> Result<(), String> {
        let Some(n) = self.replica_acks else {
            return Ok(());
        };
        // Within the request's own timeout, so that the reply comes back.
        let wait_ms = (self.timeout / 2).as_millis().max(1) as u64;
        let wait = ::redis::cmd("WAIT").arg(n).arg(wait_ms).clone();
        match server.query::<i64>(&wait).await {
            Ok(acks) if acks >= i64::from(n) => Ok(()),
            Ok(acks) => Err(format!(
                "{}: {acks} of {n} replicas acknowledged within {wait_ms} ms (WAIT)",
                server.addr()
            )),
            Err(LockError::Denied(e) | LockError::Indeterminate(e)) => {
                Err(format!("WAIT got no answer: {e}"))
            }
        }
    }

    /// The server last named primary.
    pub(crate) fn node(&self) -> Option<String> {
        self.node.clone()
    }
}
