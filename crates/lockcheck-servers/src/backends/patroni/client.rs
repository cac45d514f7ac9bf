//! Patroni: PostgreSQL nodes whose roles Patroni's agents decide through a leader key
//! with a TTL in a DCS (etcd here). There is no lock a client takes: the lock is the
//! primary role itself, and each client is one node's application ([`NodeLeadership`]),
//! which *leads* while its node accepts writes and *acts* by committing a write on
//! its own node. Two nodes accepting writes at once is two holders.
//!
//! - **acquire**: waits until its node is a read-write primary
//!   (`pg_is_in_recovery()` is false); the token is the node's PostgreSQL timeline,
//!   which every promotion increments.
//! - **renew**: asks again; a node found read-only again ends the leadership
//!   (refused: `not-held`).
//! - **act** (the history's `write`): `INSERT` into `lockcheck_acts` on its own node,
//!   with the timeline the node was on when it committed: the node's own record of
//!   what it accepted. A read-only node refuses it (SQLSTATE 25006: `fail`).
//! - **release**: forgets the leadership (Patroni has nothing a client resigns).
//!
//! **Known break**: the primary's Patroni paused past the leader key's TTL: the key
//! expires, a replica is promoted (a new timeline), and the old primary's PostgreSQL,
//! which nobody demoted, goes on committing writes until its Patroni wakes.
//!
//! [`PrimaryCheck::PatroniApi`] is the fix a deployment uses: writes go only to the
//! node whose Patroni REST API answers `GET /primary` with 200 (HAProxy's health
//! check), asked right before every act with a short timeout. A paused Patroni does
//! not answer, so its node gets no writes; a node whose agent does not name it the
//! primary is left at once ([`NOT_PRIMARY`]).

use crate::backend::client::{Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, OwnOptions};
use crate::backend::preset::LeasePreset;
use crate::backend::probe;
use crate::backend::service::{About, LockService};
use crate::backends::postgres::client::Conn;
use anyhow::Context;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub use lockcheck_history::error::NOT_PRIMARY;

// Patroni's documentation, "Dynamic Configuration Settings": ttl 30 (the
// leader key's TTL), loop_wait 10 (how often the leader renews it); Patroni
// 3.0's config.py defaults the same.
/// Patroni's own defaults.
pub const DEFAULTS: LeasePreset = LeasePreset {
    name: "patroni",
    ttl: Duration::from_secs(30),
    renew_every: Some(Duration::from_secs(10)),
    source: "Patroni defaults: leader key ttl 30 s, loop_wait 10 s",
};

/// patroni's own `[backend]` settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// How a node's application tells its node leads.
    #[serde(default)]
    pub primary_check: PrimaryCheck,
}

impl OwnOptions for Options {
    const KEYS: &'static [(&'static str, &'static str)] = &[(
        "primary_check",
        "only for kind = \"patroni\": how a node's application tells that its node is the primary",
    )];
}

/// How a node's application decides that its node is the primary
/// (`[backend] primary_check`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrimaryCheck {
    /// PostgreSQL says so: `pg_is_in_recovery()` is false. Asked at election and at
    /// every renewal; an act goes straight to the node.
    #[default]
    Postgres,
    /// Patroni's REST API says so (`GET /primary` answers 200, as HAProxy's health
    /// check asks), right before every act as well.
    PatroniApi,
}

/// A node's address as its clients are given it: its name, its PostgreSQL, its
/// Patroni REST API (`n1=127.0.0.1:5432+127.0.0.1:8008`).
pub fn endpoint(name: &str, postgres: SocketAddr, api: SocketAddr) -> String {
    format!("{name}={postgres}+{api}")
}

/// The parts of an [`endpoint`]: the node's name, its PostgreSQL, its REST API.
fn parse_endpoint(e: &str) -> anyhow::Result<(String, String, SocketAddr)> {
    let bad = || {
        format!("a patroni node's address is name=postgres+api (n1=127.0.0.1:5432+127.0.0.1:8008), found {e:?}")
    };
    let (name, rest) = e.split_once('=').with_context(bad)?;
    let (postgres, api) = rest.split_once('+').with_context(bad)?;
    Ok((
        name.to_string(),
        postgres.to_string(),
        api.parse().with_context(bad)?,
    ))
}

/// The node's timeline while it is a read-write primary; NULL on a replica (the
/// `CASE` never evaluates the WAL functions there, which a replica refuses).
const TIMELINE_IF_PRIMARY: &str = "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE \
     ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END";

/// The node's own record of the acts it accepted (replicated like any table).
const CREATE_ACTS: &str = "CREATE TABLE IF NOT EXISTS lockcheck_acts (
    token bigint, data text, timeline bigint, at timestamptz DEFAULT clock_timestamp())";

/// One act: a commit on the node, with the timeline it was accepted on.
const ACT: &str = "INSERT INTO lockcheck_acts (token, data, timeline) VALUES ($1, $2, \
     ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)";

/// One node's application: it leads while its node is a read-write primary.
pub struct NodeLeadership {
    name: String,
    conn: Conn,
    api: SocketAddr,
    check: PrimaryCheck,
    cfg: LockConfig,
    held: bool,
}

impl NodeLeadership {
    /// The application of the first of `endpoints`: its own node.
    pub async fn connect(endpoints: &[String], cfg: &LockConfig) -> anyhow::Result<Self> {
        let own = endpoints.first().context("no patroni node given")?;
        let (name, postgres, api) = parse_endpoint(own)?;
        Ok(NodeLeadership {
            conn: Conn::new(&postgres, cfg, Vec::new())?,
            name,
            api,
            check: Options::of(&cfg.options).primary_check,
            cfg: cfg.clone(),
            held: false,
        })
    }

    /// Whether the node is the primary, by [`PrimaryCheck`]: its timeline if so,
    /// else why not. Asking changes nothing, so an unanswered question is a no.
    async fn primary(&mut self) -> Result<u64, String> {
        if self.check == PrimaryCheck::PatroniApi {
            self.agent_names_primary().await?;
        }
        let asked = self
            .conn
            .run("pg_is_in_recovery", |c| async move {
                let row = c.query_one(TIMELINE_IF_PRIMARY, &[]).await?;
                row.try_get::<_, Option<i64>>(0)
            })
            .await;
        match asked {
            Ok(Some(timeline)) => Ok(timeline as u64),
            Ok(None) => Err(format!("not-held: {} is read-only (a replica)", self.name)),
            Err(e) => Err(format!("not-held: {e}")),
        }
    }

    /// Whether the node's Patroni answers `GET /primary` with 200 within the
    /// request timeout.
    async fn agent_names_primary(&self) -> Result<(), String> {
        let within = self.cfg.request_timeout();
        let head = |reply: &[u8], _| {
            let head = reply.get(..12)?;
            Some(String::from_utf8_lossy(head).into_owned())
        };
        match probe::ask(self.api, b"GET /primary HTTP/1.0\r\n\r\n", within, head).await {
            Some(head) if head.ends_with(" 200") => Ok(()),
            Some(head) => Err(format!("{NOT_PRIMARY} ({} answered {head})", self.name)),
            None => Err(format!(
                "{NOT_PRIMARY} ({}'s Patroni did not answer within {} ms)",
                self.name,
                within.as_millis()
            )),
        }
    }

    fn grant(&self, timeline: u64) -> Grant {
        Grant {
            token: self.cfg.fencing_token.then_some(timeline),
            lease_ms: Some(self.cfg.lease.as_millis() as u64),
        }
    }
}

#[async_trait]
impl LockClient for NodeLeadership {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        loop {
            match self.primary().await {
                Ok(timeline) => {
                    // The first leader makes the table; the replicas receive it.
                    let made = self
                        .conn
                        .run("creating lockcheck_acts", |c| async move {
                            c.batch_execute(CREATE_ACTS).await
                        })
                        .await;
                    if let Err(e) = made {
                        tracing::debug!("creating lockcheck_acts: {e}");
                    }
                    self.held = true;
                    return Ok(self.grant(timeline));
                }
                Err(why) if Instant::now() >= deadline => return Err(LockError::Denied(why)),
                Err(_) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    tokio::time::sleep(POLL.min(left)).await;
                }
            }
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        if !self.held {
            return Err(LockError::Denied("not-held: nothing to renew".into()));
        }
        // A node no longer the primary ends the leadership; the application
        // resigns (releases) next, which forgets it.
        self.primary()
            .await
            .map(|timeline| self.grant(timeline))
            .map_err(LockError::Denied)
    }

    async fn release(&mut self) -> Result<(), LockError> {
        if !std::mem::take(&mut self.held) {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        }
        Ok(())
    }

    async fn act(&mut self, token: Option<u64>, data: &str) -> Option<Result<(), LockError>> {
        if self.check == PrimaryCheck::PatroniApi {
            if let Err(why) = self.agent_names_primary().await {
                return Some(Err(LockError::Denied(why)));
            }
        }
        let (token, data) = (token.map(|t| t as i64), data.to_string());
        let committed = self
            .conn
            .run(
                "act",
                |c| async move { c.execute(ACT, &[&token, &data]).await },
            )
            .await;
        Some(committed.map(|_| ()))
    }

    fn node(&self) -> Option<String> {
        Some(self.name.clone())
    }
}

/// Between two looks at a node that is not the primary yet.
const POLL: Duration = Duration::from_millis(100);

/// Patroni, as its nodes' applications see it.
pub struct PatroniService;

#[async_trait]
impl LockService for PatroniService {
    fn about(&self) -> About {
        About {
            name: "patroni",
            token: Some("the node's PostgreSQL timeline, which every promotion increments"),
            known_break: "the primary's Patroni paused past the leader key's TTL: a replica is \
                 promoted while the old primary's PostgreSQL still commits writes",
            shown_by: &["incidents/patroni-split-brain"],
            fenced_by: None,
            options: reader::<Options>(),
            presets: &[DEFAULTS],
            durable: None,
        }
    }

    async fn connect(
        &self,
        _endpoints: &[String],
        _cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        anyhow::bail!(
            "the patroni backend has no lock to take: its clients lead while their node is the primary (mode = \"election\")"
        )
    }

    async fn connect_election(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(NodeLeadership::connect(endpoints, cfg).await?))
    }

    /// The primary role is the lock: clients only lead.
    fn has_lock(&self) -> bool {
        false
    }

    /// Each client is its node's application, leading while its node accepts writes.
    fn client_per_node(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_names_the_node_its_postgres_and_its_agent() {
        let e = endpoint(
            "n2",
            "127.0.0.1:5432".parse().unwrap(),
            "127.0.0.1:8008".parse().unwrap(),
        );
        assert_eq!(e, "n2=127.0.0.1:5432+127.0.0.1:8008");
        let (name, pg, api) = parse_endpoint(&e).unwrap();
        assert_eq!((name.as_str(), pg.as_str()), ("n2", "127.0.0.1:5432"));
        assert_eq!(api.port(), 8008);
        let err = parse_endpoint("127.0.0.1:5432").unwrap_err().to_string();
        assert!(err.contains("name=postgres+api"), "{err}");
    }
}
