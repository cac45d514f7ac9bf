//! Two PostgreSQL locks, as their users write them, each over one session of its own
//! (never through a pool: an advisory lock belongs to the session that took it).
//!
//! **Session advisory lock** ([`AdvisoryLock`]): `pg_try_advisory_lock(key)`, tried
//! again until the acquire timeout; `pg_advisory_unlock(key)` releases it; the
//! server releases it by itself when the session ends. The session sets
//! `idle_session_timeout` to the workload's lease, as deployments do so that a dead
//! client's locks do not stay held for ever. **Token:** none. **Known break:** a
//! holder paused past `idle_session_timeout` loses its session, and the lock with
//! it, to the server; another client acquires; the first wakes up still believing
//! it holds the lock (it learns otherwise only at its next statement).
//!
//! **Lease row** ([`LeaseRowLock`]): a row per lock with the holder, a token and
//! `locked_until`; acquire is ONE conditional `UPDATE` that takes the row only if it
//! is free or its lease has run out, adds 1 to the token and returns it; renew and
//! release act only while the row still names us and the lease runs. **Token:** the
//! row's token: every acquire adds 1 under the row lock, so a later grant always
//! carries a greater one. **Known break:** a holder paused past `locked_until`:
//! the next acquire takes the row; fencing by the token stops the stale writes.
//!
//! A statement's fate: an error the server reports (an SQLSTATE) means it did not
//! happen (`fail`); a timeout or a connection lost mid-statement may have
//! (`info`). A session found closed before a statement is opened again: nothing was
//! sent on it.

use crate::backend::client::{holder_id, retry_pause, Grant, LockClient, LockConfig, LockError};
use crate::backend::options::{reader, NoOptions};
use crate::backend::preset::LeasePreset;
use crate::backend::service::{single, About, LockService};
use anyhow::Context;
use async_trait::async_trait;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

// cirello.io/pglock (github.com/cirello-io/pglock, client.go):
// defaultLeaseDuration = 20 * time.Second, defaultHeartbeatFrequency =
// 5 * time.Second; a lease row per lock, renewed by the heartbeat.
/// cirello.io/pglock's lease row.
pub const PGLOCK: LeasePreset = LeasePreset {
    name: "pglock",
    ttl: Duration::from_secs(20),
    renew_every: Some(Duration::from_secs(5)),
    source: "cirello.io/pglock: lease row, lease 20 s, heartbeat every 5 s (its defaults)",
};

// An advisory lock lives as long as its session. PostgreSQL's defaults
// (idle_session_timeout = 0, tcp_keepalives_* = 0: the system's) leave the
// ending of a silent client's session to Linux's keepalive (tcp(7):
// tcp_keepalive_time 7200 s, tcp_keepalive_intvl 75 s, tcp_keepalive_probes 9):
// 7200 + 9 × 75 = 7875 s. lockcheck applies it as idle_session_timeout, which
// also ends a paused client's session (keepalives alone end only a client whose
// host stopped answering).
/// PostgreSQL's defaults for an advisory lock's session.
pub const POSTGRES_KEEPALIVE: LeasePreset = LeasePreset {
    name: "postgres-keepalive",
    ttl: Duration::from_secs(7875),
    renew_every: None,
    source: "PostgreSQL defaults: a silent client's session (and its advisory locks) ends after Linux's TCP keepalive, 7200 s + 9 probes × 75 s",
};

// Amazon RDS for PostgreSQL, "Dead connection handling in PostgreSQL"
// (docs.aws.amazon.com/AmazonRDS/latest/UserGuide/Appendix.PostgreSQL.
// CommonDBATasks.DeadConnectionHandling.html): defaults tcp_keepalives_idle 300,
// tcp_keepalives_interval 30, tcp_keepalives_count 2: 300 + 2 × 30 = 360 s.
/// Amazon RDS's defaults for an advisory lock's session.
pub const RDS_POSTGRES_KEEPALIVE: LeasePreset = LeasePreset {
    name: "rds-postgres-keepalive",
    ttl: Duration::from_secs(360),
    renew_every: None,
    source: "Amazon RDS for PostgreSQL defaults: tcp_keepalives_idle 300 s, interval 30 s, count 2: a silent client's session ends after 360 s",
};

/// The role lock clients log in as: the superuser the server's `initdb` creates
/// (with trust authentication, on loopback).
pub const SUPERUSER: &str = "postgres";

/// The connection string of a server's `postgres` database at `addr` (`host:port`).
pub fn conninfo(addr: &str, connect_timeout: Duration) -> anyhow::Result<String> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| anyhow::anyhow!("bad postgres address {addr:?}: {e}"))?;
    Ok(format!(
        "host={} port={} user={SUPERUSER} dbname=postgres connect_timeout={}",
        addr.ip(),
        addr.port(),
        connect_timeout.as_secs().max(1)
    ))
}

/// One session: the client and the task that drives its connection.
struct Session {
    /// Shared with the statement under way (the client is one connection's handle).
    client: Arc<Client>,
    driver: JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closing the socket ends the session on the server, and with it any
        // advisory lock this session may hold.
        self.driver.abort();
    }
}

/// A lazily (re)opened session to one server, with the request timeout.
pub(crate) struct Conn {
    info: String,
    timeout: Duration,
    /// Statements run at the start of every session.
    setup: Vec<String>,
    session: Option<Session>,
}

impl Conn {
    pub(crate) fn new(
        endpoint: &str,
        cfg: &LockConfig,
        setup: Vec<String>,
    ) -> anyhow::Result<Conn> {
        let timeout = cfg.request_timeout();
        Ok(Conn {
            info: conninfo(endpoint, timeout)?,
            timeout,
            setup,
            session: None,
        })
    }

    /// Whether the session this client had is gone (the server ended it, or the
    /// connection broke). Forgets it, so the next statement opens a new one.
    fn lost(&mut self) -> bool {
        let gone = self.session.as_ref().is_some_and(|s| s.client.is_closed());
        if gone {
            self.session = None;
        }
        gone
    }

    /// The open session, opening one if there is none. Failing to open one is a
    /// definite failure: nothing was sent.
    async fn client(&mut self) -> Result<Arc<Client>, LockError> {
        self.lost();
        if self.session.is_none() {
            let open = async {
                let (client, conn) = tokio_postgres::connect(&self.info, NoTls).await?;
                let driver = tokio::spawn(async move {
                    let _ = conn.await;
                });
                let session = Session {
                    client: Arc::new(client),
                    driver,
                };
                for stmt in &self.setup {
                    session.client.batch_execute(stmt).await?;
                }
                Ok::<_, tokio_postgres::Error>(session)
            };
            let session = match tokio::time::timeout(self.timeout, open).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(LockError::Denied(format!("connecting: {e}"))),
                Err(_) => {
                    return Err(LockError::Denied(format!(
                        "connecting: no session within {}ms",
                        self.timeout.as_millis()
                    )))
                }
            };
            self.session = Some(session);
        }
        Ok(self.session.as_ref().expect("opened above").client.clone())
    }

    /// Runs one statement under the request timeout. A statement whose fate is
    /// unknown also drops the session: whatever it did, the server undoes what a
    /// session holds when the session ends.
    pub(crate) async fn run<T, F, Fut>(&mut self, what: &str, statement: F) -> Result<T, LockError>
    where
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let timeout = self.timeout;
        let client = self.client().await?;
        let outcome = tokio::time::timeout(timeout, statement(client)).await;
        match outcome {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if e.code().is_some() => {
                Err(LockError::Denied(format!("{what}: {}", describe(&e))))
            }
            Ok(Err(e)) => {
                self.session = None;
                Err(LockError::Indeterminate(format!(
                    "{what}: {}",
                    describe(&e)
                )))
            }
            Err(_) => {
                self.session = None;
                Err(LockError::Indeterminate(format!(
                    "{what}: no reply within {}ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}

/// The advisory lock's 64-bit key for a lock name: FNV-1a, so every client (and
/// anyone reading `pg_locks`) computes the same key.
fn advisory_key(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// A client of the session advisory lock.
pub struct AdvisoryLock {
    conn: Conn,
    key: i64,
    cfg: LockConfig,
    held: bool,
}

impl AdvisoryLock {
    pub async fn connect(endpoint: &str, cfg: &LockConfig) -> anyhow::Result<Self> {
        let idle = format!(
            "SET idle_session_timeout = {}",
            cfg.lease.as_millis().max(1)
        );
        let mut lock = AdvisoryLock {
            conn: Conn::new(endpoint, cfg, vec![idle])?,
            key: advisory_key(&cfg.name),
            cfg: cfg.clone(),
            held: false,
        };
        lock.conn
            .client()
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("connecting to postgres at {endpoint}"))?;
        Ok(lock)
    }

    /// The session ended under a holder: the lock went with it.
    fn session_gone(&mut self) -> LockError {
        self.held = false;
        LockError::Denied("not-held: the session ended, and its advisory lock with it".into())
    }
}

#[async_trait]
impl LockClient for AdvisoryLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        if self.held && !self.conn.lost() {
            // Advisory locks are re-entrant within a session: taking it again would
            // need two unlocks. A holder asking again already has it.
            return Err(LockError::Denied("already held by this client".into()));
        }
        self.held = false;
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        let key = self.key;
        loop {
            let taken = self
                .conn
                .run("pg_try_advisory_lock", |c| async move {
                    let row = c
                        .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                        .await?;
                    row.try_get::<_, bool>(0)
                })
                .await;
            let why = match taken {
                Ok(true) => {
                    self.held = true;
                    return Ok(Grant {
                        token: None,
                        lease_ms: None,
                    });
                }
                Ok(false) => "held by another session".to_string(),
                Err(LockError::Denied(why)) => why,
                // The session was dropped: if it took the lock, the lock went with it.
                Err(e @ LockError::Indeterminate(_)) => return Err(e),
            };
            if Instant::now() >= deadline {
                return Err(LockError::Denied(why));
            }
            retry_pause(deadline).await;
        }
    }

    /// Asks the server whether this session still holds the lock (`pg_locks`):
    /// there is no lease to extend, only a session to keep.
    async fn renew(&mut self) -> Result<Grant, LockError> {
        if !self.held {
            return Err(LockError::Denied("not-held: nothing to renew".into()));
        }
        if self.conn.lost() {
            return Err(self.session_gone());
        }
        // pg_locks shows a bigint advisory key as its high and low 32 bits.
        let (high, low) = ((self.key >> 32) as u32, self.key as u32);
        let holds = self
            .conn
            .run("pg_locks", |c| async move {
                let row = c
                    .query_one(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
                         AND pid = pg_backend_pid() AND granted \
                         AND classid = $1 AND objid = $2 AND objsubid = 1",
                        &[&high, &low],
                    )
                    .await?;
                row.try_get::<_, i64>(0)
            })
            .await;
        match holds {
            Ok(n) if n > 0 => Ok(Grant {
                token: None,
                lease_ms: None,
            }),
            Ok(_) => {
                self.held = false;
                Err(LockError::Denied(
                    "not-held: this session holds no such lock".into(),
                ))
            }
            Err(_) if self.conn.session.is_none() || self.conn.lost() => Err(self.session_gone()),
            Err(e) => Err(e),
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        if !self.held {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        }
        if self.conn.lost() {
            return Err(self.session_gone());
        }
        let key = self.key;
        let unlocked = self
            .conn
            .run("pg_advisory_unlock", |c| async move {
                let row = c
                    .query_one("SELECT pg_advisory_unlock($1)", &[&key])
                    .await?;
                row.try_get::<_, bool>(0)
            })
            .await;
        match unlocked {
            Ok(true) => {
                self.held = false;
                Ok(())
            }
            Ok(false) => {
                self.held = false;
                Err(LockError::Denied(
                    "not-held: this session holds no such lock".into(),
                ))
            }
            // The session was dropped (its fate unknown), which releases the lock.
            Err(e) => {
                self.held = false;
                Err(e)
            }
        }
    }

    fn node(&self) -> Option<String> {
        Some("n1".into())
    }
}

/// A driver error in words: the server's own message and SQLSTATE (the driver's
/// `Display` says only "db error"), or the error with its causes.
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    let mut words = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        words += &format!(": {c}");
        cause = c.source();
    }
    words
}

/// The table of lease rows, created by the first client that needs it.
const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS lockcheck_leases (
    name text PRIMARY KEY,
    holder text,
    token bigint NOT NULL DEFAULT 0,
    locked_until timestamptz
)";

/// Takes the row if it is free or its lease ran out; the token goes up by one. A
/// missing row is made, token 1: a server that lost its data (a wiped restart)
/// serves the lock again, as a self-initialising lease table does, and its
/// tokens start over, which is what a fenced resource then has to face.
const ACQUIRE: &str = "INSERT INTO lockcheck_leases AS l (name, holder, token, locked_until)
    VALUES ($1, $2, 1, clock_timestamp() + $3::float8 * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE
    SET holder = $2, token = l.token + 1,
        locked_until = clock_timestamp() + $3::float8 * interval '1 millisecond'
    WHERE l.holder IS NULL OR l.locked_until <= clock_timestamp()
    RETURNING token";

/// Extends the lease while the row still names us and the lease still runs.
const RENEW: &str = "UPDATE lockcheck_leases
    SET locked_until = clock_timestamp() + $3::float8 * interval '1 millisecond'
    WHERE name = $1 AND holder = $2 AND locked_until > clock_timestamp()
    RETURNING token";

/// Frees the row while it still names us and the lease still runs.
const RELEASE: &str = "UPDATE lockcheck_leases
    SET holder = NULL, locked_until = NULL
    WHERE name = $1 AND holder = $2 AND locked_until > clock_timestamp()";

/// What this client holds (or may hold, after an acquire with no reply).
struct Hold {
    holder: String,
    token: Option<u64>,
}

/// A client of the lease-row lock.
pub struct LeaseRowLock {
    conn: Conn,
    cfg: LockConfig,
    held: Option<Hold>,
}

impl LeaseRowLock {
    pub async fn connect(endpoint: &str, cfg: &LockConfig) -> anyhow::Result<Self> {
        let mut lock = LeaseRowLock {
            conn: Conn::new(endpoint, cfg, Vec::new())?,
            cfg: cfg.clone(),
            held: None,
        };
        let name = cfg.name.clone();
        // Several clients create the table at once: CREATE TABLE IF NOT EXISTS can
        // still fail on the catalog's unique index for the loser, which then finds
        // the table there on its next try.
        let mut tries = 0;
        loop {
            let name = name.clone();
            let made = lock
                .conn
                .run("creating the lease row", |c| async move {
                    c.batch_execute(CREATE_TABLE).await?;
                    c.execute(
                        "INSERT INTO lockcheck_leases (name) VALUES ($1) ON CONFLICT DO NOTHING",
                        &[&name],
                    )
                    .await
                })
                .await;
            match made {
                Ok(_) => return Ok(lock),
                Err(e) if tries < 5 => {
                    tries += 1;
                    tracing::debug!("creating the lease row, trying again: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => {
                    return Err(anyhow::anyhow!("{e}"))
                        .with_context(|| format!("creating the lease row at {endpoint}"))
                }
            }
        }
    }

    fn lease_ms(&self) -> f64 {
        self.cfg.lease.as_millis() as f64
    }

    fn grant(&self, token: Option<u64>) -> Grant {
        Grant {
            token: self.cfg.fencing_token.then_some(token).flatten(),
            lease_ms: Some(self.cfg.lease.as_millis() as u64),
        }
    }

    /// Runs a conditional `UPDATE ... RETURNING token` for our holder value.
    async fn update(
        &mut self,
        what: &str,
        sql: &'static str,
        holder: &str,
    ) -> Result<Option<u64>, LockError> {
        let (name, holder, ms) = (self.cfg.name.clone(), holder.to_string(), self.lease_ms());
        self.conn
            .run(what, |c| async move {
                let row = match c.query_opt(sql, &[&name, &holder, &ms]).await {
                    // The table went with the server's data: made again, as the
                    // first client made it (only an acquire makes its row).
                    Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                        c.batch_execute(CREATE_TABLE).await?;
                        c.query_opt(sql, &[&name, &holder, &ms]).await?
                    }
                    row => row?,
                };
                row.map(|r| r.try_get::<_, i64>(0)).transpose()
            })
            .await
            .map(|t| t.map(|t| t as u64))
    }
}

#[async_trait]
impl LockClient for LeaseRowLock {
    async fn acquire(&mut self) -> Result<Grant, LockError> {
        let holder = holder_id();
        let deadline = Instant::now() + self.cfg.acquire_timeout;
        loop {
            let why = match self.update("acquire", ACQUIRE, &holder).await {
                Ok(Some(token)) => {
                    self.held = Some(Hold {
                        holder,
                        token: Some(token),
                    });
                    return Ok(self.grant(Some(token)));
                }
                Ok(None) => "held by another client".to_string(),
                Err(LockError::Denied(why)) => why,
                Err(e @ LockError::Indeterminate(_)) => {
                    // The row may name us now: keep the holder value for a release.
                    self.held = Some(Hold {
                        holder,
                        token: None,
                    });
                    return Err(e);
                }
            };
            if Instant::now() >= deadline {
                return Err(LockError::Denied(why));
            }
            retry_pause(deadline).await;
        }
    }

    async fn renew(&mut self) -> Result<Grant, LockError> {
        let holder = match &self.held {
            Some(h) => h.holder.clone(),
            None => return Err(LockError::Denied("not-held: nothing to renew".into())),
        };
        match self.update("renew", RENEW, &holder).await? {
            Some(token) => {
                if let Some(h) = &mut self.held {
                    h.token = Some(token);
                }
                Ok(self.grant(Some(token)))
            }
            None => {
                self.held = None;
                Err(LockError::Denied(
                    "not-held: the lease ran out or the row names another holder".into(),
                ))
            }
        }
    }

    async fn release(&mut self) -> Result<(), LockError> {
        let Some(hold) = self.held.take() else {
            return Err(LockError::Denied("not-held: nothing to release".into()));
        };
        let (name, holder) = (self.cfg.name.clone(), hold.holder.clone());
        let released = self
            .conn
            .run("release", |c| async move {
                c.execute(RELEASE, &[&name, &holder]).await
            })
            .await;
        match released {
            Ok(1) => Ok(()),
            Ok(_) => Err(LockError::Denied(
                "not-held: the lease ran out or the row names another holder".into(),
            )),
            Err(e) => {
                self.held = Some(hold);
                Err(e)
            }
        }
    }

    fn node(&self) -> Option<String> {
        Some("n1".into())
    }
}

/// PostgreSQL's session advisory lock, as its clients see it.
pub struct PostgresAdvisoryService;

#[async_trait]
impl LockService for PostgresAdvisoryService {
    fn about(&self) -> About {
        About {
            name: "postgres-advisory",
            token: None,
            known_break: "a holder paused past idle_session_timeout: the server ends its session, \
                 which releases the lock",
            shown_by: &["postgres-advisory-pause"],
            fenced_by: None,
            options: reader::<NoOptions>(),
            presets: &[POSTGRES_KEEPALIVE, RDS_POSTGRES_KEEPALIVE],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(
            AdvisoryLock::connect(single(self.about().name, endpoints)?, cfg).await?,
        ))
    }
}

/// PostgreSQL's lease row, as its clients see it.
pub struct PostgresLeaseService;

#[async_trait]
impl LockService for PostgresLeaseService {
    fn about(&self) -> About {
        About {
            name: "postgres-lease",
            token: Some("the lease row's token column, +1 on every acquire"),
            known_break:
                "a holder paused past locked_until: the next conditional UPDATE takes the row",
            shown_by: &["postgres-lease-pause-unfenced"],
            fenced_by: Some("postgres-lease-pause-fenced"),
            options: reader::<NoOptions>(),
            presets: &[PGLOCK],
            durable: None,
        }
    }

    async fn connect(
        &self,
        endpoints: &[String],
        cfg: &LockConfig,
    ) -> anyhow::Result<Box<dyn LockClient>> {
        Ok(Box::new(
            LeaseRowLock::connect(single(self.about().name, endpoints)?, cfg).await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::advisory_key;

    #[test]
    fn the_advisory_key_is_stable_and_tells_names_apart() {
        assert_eq!(advisory_key("lockcheck"), advisory_key("lockcheck"));
        assert_ne!(advisory_key("lockcheck"), advisory_key("lockcheck2"));
        // FNV-1a of the empty string is its offset basis.
        assert_eq!(advisory_key("") as u64, 0xcbf2_9ce4_8422_2325);
    }
}
