//! MariaDB's named locks: `GET_LOCK(name, timeout)` waits up to the acquire timeout
//! on the server; `RELEASE_LOCK(name)` frees it; the server frees it by itself when
//! the session ends. One session per client, never a pool: the lock belongs to the
//! session that took it. The session sets `wait_timeout` to the workload's lease
//! (whole seconds), as deployments do so that a dead client's locks do not stay
//! held for ever.
//!
//! **Token.** None: `GET_LOCK` hands out nothing a resource could check.
//!
//! **Known break.** A holder paused past `wait_timeout` loses its session, and the
//! lock with it, to the server; another session takes the lock; the first wakes up
//! still believing it holds it (it learns otherwise only at its next statement).

use crate::backend::client::{Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, NoOptions};
use crate::backend::preset::LeasePreset;
use crate::backend::service::{single, About, LockService};
use anyhow::Context;
use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder};
use std::net::SocketAddr;
use std::time::Duration;

// MariaDB server system variables, wait_timeout: default 28800 s (8 h)
// (mariadb.com/docs/server/ref/mdb/system-variables/wait_timeout).
/// MariaDB's default wait_timeout.
pub const WAIT_TIMEOUT: LeasePreset = LeasePreset {
    name: "mariadb-wait-timeout",
    ttl: Duration::from_secs(28800),
    renew_every: None,
    source: "MariaDB default wait_timeout 28800 s: an idle session (and its GET_LOCK locks) ends after 8 h",
};

// The same page: SkySQL's Replicated Transactions services (10.4 to 10.6)
// default wait_timeout to 600 s.
/// SkySQL's wait_timeout.
pub const SKYSQL_WAIT_TIMEOUT: LeasePreset = LeasePreset {
    name: "skysql-wait-timeout",
    ttl: Duration::from_secs(600),
    renew_every: None,
    source: "MariaDB SkySQL Replicated Transactions service default wait_timeout 600 s",
};

// github.com/sanketplus/go-mysql-lock (locker_client.go): GET_LOCK on a
// dedicated connection, pinged every DefaultRefreshInterval = time.Second; it
// leaves wait_timeout at the server's default (28800 s).
/// go-mysql-lock's session.
pub const GO_MYSQL_LOCK: LeasePreset = LeasePreset {
    name: "go-mysql-lock",
    ttl: Duration::from_secs(28800),
    renew_every: Some(Duration::from_secs(1)),
    source: "sanketplus/go-mysql-lock: GET_LOCK session pinged every 1 s, server default wait_timeout 28800 s",
};

/// A client of MariaDB's `GET_LOCK`.
pub struct GetLock {
    opts: OptsBuilder,
    cfg: LockConfig,
    timeout: Duration,
    conn: Option<Conn>,
    held: bool,
}

impl GetLock {
    pub async fn connect(endpoint: &str, cfg: &LockConfig) -> anyhow::Result<Self> {
        let addr: SocketAddr = endpoint
            .parse()
            .with_context(|| format!("bad mariadb address {endpoint:?}"))?;
        let wait = cfg.lease.as_secs_f64().ceil().max(1.0) as u64;
        let opts = OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some("root"))
            .prefer_socket(false)
            .init(vec![format!("SET SESSION wait_timeout = {wait}")]);
        let mut lock = GetLock {
            opts,
            cfg: cfg.clone(),
            timeout: cfg.request_timeout(),
            conn: None,
            held: false,
        };
        lock.session()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("connecting to mariadb at {endpoint}"))?;
        Ok(lock)
    }

    /// The open session, opening one if there is none (a failure sent nothing).
    async fn session(&mut self) -> Result<&mut Conn, LockError> {
        if self.conn.is_none() {
            let open = Conn::new(self.opts.clone());
            let conn = match tokio::time::timeout(self.timeout * 2, open).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(LockError::Denied(format!("connecting: {e}"))),
                Err(_) => return Err(LockError::Denied("connecting: timed out".into())),
            };
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("opened above"))
    }

    /// Runs `SELECT f(?, ...)` returning one nullable integer, within `wait`. An
    /// error the server reports did not happen; any other closes the session (and
    /// with it any lock it held) and may have happened.
    async fn ask(
        &mut self,
        what: &str,
        sql: &str,
        params: mysql_async::Params,
        wait: Duration,
    ) -> Result<Option<i64>, LockError> {
        let conn = self.session().await?;
        let outcome =
            tokio::time::timeout(wait, conn.exec_first::<Option<i64>, _, _>(sql, params)).await;
        match outcome {
            Ok(Ok(row)) => Ok(row.flatten()),
            Ok(Err(mysql_async::Error::Server(e))) => {
                Err(LockError::Denied(format!("{what}: {e}")))
            }
            Ok(Err(e)) => {
                self.conn = None;
                Err(LockError::Indeterminate(format!("{what}: {e}")))
            }
            Err(_) => {
                self.conn = None;
                Err(LockError::Indeterminate(format!(
                    "{what}: no reply within {}ms",
                    wait.as_millis()
                )))
            }
        }
    }

    /// The session that held the lock is gone (the server ended it): so is the lock.
    fn session_gone(&mut self, e: LockError) -> LockError {
        self.held = false;
        match e {
            LockError::Indeterminate(why) => LockError::Denied(format!(
                "not-held: the session ended, and its lock with it ({why})"
            )),
            denied => denied,
        }
    }
}

#[async_trait]
impl LockClient for GetLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        if self.held {
            return Err(LockError::Denied("already held by this client".into()));
        }
        // A session the server ended while this client was idle: start afresh
        // rather than fail the acquire on the dead connection.
        if let Some(conn) = &mut self.conn {
            if tokio::time::timeout(self.timeout, conn.ping())
                .await
                .map_or(true, |r| r.is_err())
            {
                self.conn = None;
            }
        }
        let wait = self.cfg.acquire_timeout;
        let params = (self.cfg.name.clone(), wait.as_secs_f64()).into();
        match self
            .ask(
                "GET_LOCK",
                "SELECT GET_LOCK(?, ?)",
                params,
                wait + self.timeout,
            )
            .await?
        {
            Some(1) => {
                self.held = true;
                Ok(Grant {
                    token: None,
                    lease_ms: None,
                })
            }
            _ => Err(LockError::Denied("held by another session".into())),
        }
    }

    /// Asks the server whether this session still holds the lock.
    async fn renew(&mut self) -> Result<Grant, LockError> {
        if !self.held {
            return Err(LockError::Denied("not-held: nothing to renew".into()));
        }
        let params = (self.cfg.name.clone(),).into();
        let timeout = self.timeout;
        match self
            .ask(
                "IS_USED_LOCK",
                "SELECT IS_USED_LOCK(?) = CONNECTION_ID()",
                params,
                timeout,
            )
            .await
        {
            Ok(Some(1)) => Ok(Grant {
                token: None,
                lease_ms: None,
            }),
            Ok(_) => {
                self.held = false;
                Err(LockError::Denied(
                    "not-held: another session holds it".into(),
                ))
            }
            Err(e) => Err(self.session_gone(e)),
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        if !self.held {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        }
        let params = (self.cfg.name.clone(),).into();
        let timeout = self.timeout;
        let released = self
            .ask("RELEASE_LOCK", "SELECT RELEASE_LOCK(?)", params, timeout)
            .await;
        self.held = false;
        match released {
            Ok(Some(1)) => Ok(()),
            Ok(_) => Err(LockError::Denied(
                "not-held: this session holds no such lock".into(),
            )),
            Err(e) => Err(self.session_gone(e)),
        }
    }

    fn node(&self) -> Option<String> {
        Some("n1".into())
    }
}

/// MariaDB's named locks, as their clients see them.
pub struct MariadbService;

#[async_trait]
impl LockService for MariadbService {
    fn about(&self) -> About {
        About {
            name: "mariadb",
            token: None,
            known_break: "a holder paused past wait_timeout: the server ends its session, which \
                 releases the lock",
            shown_by: &["mariadb-pause"],
            fenced_by: None,
            options: reader::<NoOptions>(),
            presets: &[WAIT_TIMEOUT, SKYSQL_WAIT_TIMEOUT, GO_MYSQL_LOCK],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(
            GetLock::connect(single(self.about().name, endpoints)?, cfg).await?,
        ))
    }
}
