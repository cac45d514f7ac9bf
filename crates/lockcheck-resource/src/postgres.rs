//! PostgreSQL as the protected resource: the fenced write as users write it, judged
//! on a real database.
//!
//! The run starts a private PostgreSQL server for the resource (one node of
//! [`LocalCluster`], files under `<run>/resource/`, its data where
//! `cluster::home` puts them when the run directory is out of the server's reach), even when the lock service is
//! PostgreSQL too: node faults hit the lock service's servers, and a resource that
//! shared them would be paused or killed with them, so the stale write could not
//! land when it should; production keeps the two apart as well. It creates one row,
//! and every worker writes it with one statement:
//!
//! ```sql
//! WITH applied AS (
//!     UPDATE lockcheck_resource SET value = $1, token = $2, seq = seq + 1
//!     WHERE id = $3 AND token <= $2          -- or `<`, or no token condition
//!     RETURNING seq)
//! INSERT INTO lockcheck_applied (seq, process, token, data)
//! SELECT seq, $4::bigint, $2, $1 FROM applied
//! RETURNING seq
//! ```
//!
//! The `UPDATE` is the conditional write users write; the fence is its `WHERE`, sent
//! by the client as in production. 0 rows = the fence rejected it (`stale-token`).
//!
//! **The applied order is the database's own.** Concurrent `UPDATE`s of one row are
//! serialised by its row lock: a second writer waits until the first commits, then
//! (READ COMMITTED) re-reads the row and re-checks its `WHERE` against the committed
//! token. `seq = seq + 1` is computed under that lock, so `seq` is the row's version
//! number: dense, in the order the writes took effect, which is also their commit
//! order, and a rejected or rolled-back write takes none. The same statement appends
//! the write to `lockcheck_applied` under that `seq`, in the same transaction, so the
//! log holds exactly the committed writes. Since commits happen in `seq` order, any
//! snapshot of the log is a prefix of it.
//!
//! The controller tails that log into `resource.jsonl` while the run goes (the live
//! status line counts from it) and once more at the end, after ending every other
//! session so that no write can commit after the last read; an interrupted run does
//! the same when the resource is dropped.

use super::fence::{Fence, Stats, StatsHandle, WriteOutcome};
use anyhow::{anyhow, Context, Result};
use lockcheck_history::error::{MISSING_TOKEN, STALE_TOKEN};
use lockcheck_history::AppliedWrite;
use lockcheck_servers::backend::BackendKind;
use lockcheck_servers::cluster::{ClusterSpec, LocalCluster};
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres::{NoTls, Statement};

/// The resource's row and the log of applied writes. `token` starts at 0 (every
/// backend's tokens start at 1) and may be NULL after an unfenced write without one.
pub const SCHEMA: &str = "
CREATE TABLE lockcheck_resource (
    id integer PRIMARY KEY,
    value text,
    token bigint DEFAULT 0,
    seq bigint NOT NULL DEFAULT 0
);
CREATE TABLE lockcheck_applied (
    seq bigint PRIMARY KEY,
    process bigint NOT NULL,
    token bigint,
    data text NOT NULL
);
INSERT INTO lockcheck_resource (id) VALUES (1);
";

/// The id of the one row the workers write.
pub const RESOURCE_ID: i32 = 1;

/// How often the controller reads the new rows of the applied log.
const TAIL_EVERY: Duration = Duration::from_millis(250);

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The conditional write for `fence`: `$1` value, `$2` token, `$3` row id, `$4`
/// process. Returns the write's `seq`, or no row when the fence rejected it.
pub fn write_sql(fence: Fence) -> String {
    let condition = match fence {
        Fence::Off => "",
        Fence::NotBelow => " AND token <= $2",
        Fence::Above => " AND token < $2",
    };
    format!(
        "WITH applied AS (
    UPDATE lockcheck_resource SET value = $1, token = $2, seq = seq + 1
    WHERE id = $3{condition}
    RETURNING seq)
INSERT INTO lockcheck_applied (seq, process, token, data)
SELECT seq, $4::bigint, $2, $1 FROM applied
RETURNING seq"
    )
}

const READ_SQL: &str = "SELECT seq, value FROM lockcheck_resource WHERE id = $1";

const TAIL_SQL: &str =
    "SELECT seq, process, token, data FROM lockcheck_applied WHERE seq > $1 ORDER BY seq";

/// Ends every other client session and waits (up to 1 s each) until they are gone:
/// a write in flight either committed before or never will.
const END_SESSIONS_SQL: &str = "SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity
    WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";

async fn connect(
    addr: SocketAddr,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
    let info = lockcheck_servers::backends::postgres::client::conninfo(
        &addr.to_string(),
        CONNECT_TIMEOUT,
    )?;
    let (client, conn) =
        tokio::time::timeout(CONNECT_TIMEOUT, tokio_postgres::connect(&info, NoTls))
            .await
            .map_err(|_| anyhow!("no answer within {CONNECT_TIMEOUT:?}"))?
            .with_context(|| format!("connecting to the resource's PostgreSQL at {addr}"))?;
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((client, task))
}

fn to_i64(what: &str, n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| anyhow!("{what} {n} does not fit PostgreSQL's bigint"))
}

fn to_u64(what: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| anyhow!("negative {what} {n} in the resource's log"))
}

/// A worker's connection, made again at the next op after an error.
pub struct Client {
    addr: SocketAddr,
    fence: Fence,
    conn: Option<Conn>,
}

struct Conn {
    client: tokio_postgres::Client,
    write: Statement,
    read: Statement,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Client {
    pub async fn connect(addr: SocketAddr, fence: Fence) -> Result<Client> {
        let mut c = Client {
            addr,
            fence,
            conn: None,
        };
        c.conn().await?;
        Ok(c)
    }

    async fn conn(&mut self) -> Result<&Conn> {
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let (client, task) = connect(self.addr).await?;
            let write = client
                .prepare(&write_sql(self.fence))
                .await
                .context("preparing the conditional write")?;
            let read = client.prepare(READ_SQL).await?;
            self.conn = Some(Conn {
                client,
                write,
                read,
                task,
            });
        }
        Ok(self.conn.as_ref().expect("connected just above"))
    }

    /// The conditional write. `Err` (an error or a lost connection): the write may or
    /// may not have committed; the next op connects again.
    pub async fn write(
        &mut self,
        process: u64,
        token: Option<u64>,
        data: &str,
    ) -> Result<WriteOutcome> {
        let token_param = token.map(|t| to_i64("token", t)).transpose()?;
        let process = to_i64("process", process)?;
        let conn = self.conn().await?;
        let rows = conn
            .client
            .query(&conn.write, &[&data, &token_param, &RESOURCE_ID, &process])
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                self.conn = None;
                return Err(e).context("the conditional write");
            }
        };
        match rows.first() {
            Some(row) => Ok(WriteOutcome::Applied {
                seq: to_u64("seq", row.try_get(0)?)?,
            }),
            // `token <= NULL` holds for no row: a fenced write needs a token.
            None if token.is_none() && self.fence != Fence::Off => {
                Ok(WriteOutcome::Rejected(MISSING_TOKEN.into()))
            }
            None => Ok(WriteOutcome::Rejected(STALE_TOKEN.into())),
        }
    }

    /// The row's `seq` (0 before any write) and value.
    pub async fn read(&mut self) -> Result<(u64, Option<String>)> {
        let conn = self.conn().await?;
        let row = conn.client.query_one(&conn.read, &[&RESOURCE_ID]).await;
        let row = match row {
            Ok(row) => row,
            Err(e) => {
                self.conn = None;
                return Err(e).context("reading the resource's row");
            }
        };
        Ok((to_u64("seq", row.try_get(0)?)?, row.try_get(1)?))
    }
}

/// What the controller has copied from the applied log into `resource.jsonl`.
struct Tail {
    file: File,
    last_seq: u64,
    highest: Option<u64>,
    stats: Stats,
}

impl Tail {
    /// Appends the rows after `last_seq` (a row already copied is skipped, so two
    /// readers racing copy each row once).
    fn append(&mut self, rows: &[AppliedWrite]) -> Result<()> {
        for w in rows {
            if w.seq <= self.last_seq {
                continue;
            }
            let mut line = serde_json::to_vec(w)?;
            line.push(b'\n');
            self.file
                .write_all(&line)
                .context("appending to resource.jsonl")?;
            self.stats.applied += 1;
            if matches!((w.token, self.highest), (Some(t), Some(h)) if t < h) {
                self.stats.stale_accepted += 1;
            }
            self.highest = self.highest.max(w.token);
            self.last_seq = w.seq;
        }
        Ok(())
    }
}

fn lock(tail: &Mutex<Tail>) -> std::sync::MutexGuard<'_, Tail> {
    tail.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copies the applied log's new rows into `resource.jsonl`.
async fn copy_new_rows(client: &tokio_postgres::Client, tail: &Mutex<Tail>) -> Result<()> {
    let since = lock(tail).last_seq;
    let rows = client
        .query(TAIL_SQL, &[&to_i64("seq", since)?])
        .await
        .context("reading the resource's applied log")?;
    let writes = rows
        .iter()
        .map(|r| {
            Ok(AppliedWrite {
                seq: to_u64("seq", r.try_get(0)?)?,
                process: to_u64("process", r.try_get(1)?)?,
                token: r
                    .try_get::<_, Option<i64>>(2)?
                    .map(|t| to_u64("token", t))
                    .transpose()?,
                data: r.try_get(3)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    lock(tail).append(&writes)
}

/// The last copy: ends every other session first, so that nothing commits after it.
async fn copy_the_rest(client: &tokio_postgres::Client, tail: &Mutex<Tail>) -> Result<()> {
    client
        .batch_execute(END_SESSIONS_SQL)
        .await
        .context("ending the workers' sessions")?;
    copy_new_rows(client, tail).await
}

/// The running resource server, in the controller.
pub struct Resource {
    fence: Fence,
    addr: SocketAddr,
    tail: Arc<Mutex<Tail>>,
    /// The controller's own session and the task that tails the log with it.
    watcher: Option<Watcher>,
    cluster: Option<LocalCluster>,
}

struct Watcher {
    client: Arc<tokio_postgres::Client>,
    conn: tokio::task::JoinHandle<()>,
    poll: tokio::task::JoinHandle<()>,
}

/// The server program the resource runs: PostgreSQL's, as the postgres
/// backends' recipe starts it.
pub fn server() -> lockcheck_servers::cluster::ServerBinary {
    lockcheck_servers::cluster::server_binary(SERVER)
}

/// The backend whose server recipe starts the resource's PostgreSQL.
const SERVER: BackendKind = BackendKind::PostgresLease;

impl Resource {
    /// Starts the server with its files under `<run_dir>/resource/` (journaled in the
    /// run's journal), creates the tables, and starts copying applied writes to
    /// `<run_dir>/resource.jsonl`.
    pub async fn start(fence: Fence, run_dir: &Path) -> Result<Resource> {
        let log_path = &run_dir.join("resource.jsonl");
        let file =
            File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut spec = ClusterSpec::new(SERVER, run_dir.join("resource"));
        spec.journal_dir = run_dir.to_path_buf();
        spec.nodes = 1;
        let cluster = LocalCluster::start(spec).await?;
        let addr: SocketAddr = cluster.endpoints()[0]
            .parse()
            .context("the resource server's address")?;
        let (client, conn) = connect(addr).await?;
        client
            .batch_execute(SCHEMA)
            .await
            .context("creating the resource's tables")?;
        let client = Arc::new(client);
        let tail = Arc::new(Mutex::new(Tail {
            file,
            last_seq: 0,
            highest: None,
            stats: Stats::default(),
        }));
        let poll = {
            let (client, tail) = (client.clone(), tail.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(TAIL_EVERY).await;
                    if let Err(e) = copy_new_rows(&client, &tail).await {
                        tracing::warn!("{e:#}");
                    }
                }
            })
        };
        Ok(Resource {
            fence,
            addr,
            tail,
            watcher: Some(Watcher { client, conn, poll }),
            cluster: Some(cluster),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn fence(&self) -> Fence {
        self.fence
    }

    pub fn stats_handle(&self) -> StatsHandle {
        let tail = self.tail.clone();
        StatsHandle::new(move || lock(&tail).stats)
    }

    /// Copies the rest of the applied log and stops the server.
    pub async fn finish(mut self) -> Result<()> {
        let copied = match self.watcher.take() {
            Some(w) => {
                w.poll.abort();
                let _ = w.poll.await;
                let copied = copy_the_rest(&w.client, &self.tail).await;
                drop(w.client);
                // The session ends with its connection: the server then stops at once.
                let _ = w.conn.await;
                copied
            }
            None => Ok(()),
        };
        if let Some(mut c) = self.cluster.take() {
            c.stop().await;
        }
        copied
    }
}

impl Drop for Resource {
    /// An interrupted run: the runtime may not run again, so the last copy goes
    /// through a session of its own, on a thread with a runtime of its own, before
    /// the server stops.
    fn drop(&mut self) {
        let Some(w) = self.watcher.take() else {
            return;
        };
        w.poll.abort();
        w.conn.abort();
        let (addr, tail) = (self.addr, self.tail.clone());
        let copied = std::thread::spawn(move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let (client, conn) = connect(addr).await?;
                let copied =
                    tokio::time::timeout(Duration::from_secs(10), copy_the_rest(&client, &tail))
                        .await
                        .map_err(|_| anyhow!("no answer within 10 s"));
                drop(client);
                let _ = conn.await;
                copied?
            })
        })
        .join();
        match copied {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("resource.jsonl may lack the last writes: {e:#}"),
            Err(_) => tracing::warn!("resource.jsonl may lack the last writes: the copy panicked"),
        }
        // `cluster` drops after this and stops the server.
    }
}
