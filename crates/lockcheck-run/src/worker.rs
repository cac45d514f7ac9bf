//! One lock client in its own OS process (`lockcheck worker`), so that a SIGSTOP to
//! it stops exactly that client: its lock connection, its keep-alive, its writes.
//!
//! Protocol, JSON lines: the controller writes one [`Request`] to the worker's stdin,
//! the worker answers one [`Reply`] on stdout, in order. The worker's first line is
//! the reply with id 0: `ok` once it is connected, or `fail` with the reason. The
//! worker's own clock stamps nothing: the controller times every op itself.
//!
//! A self-fencing worker (`[clients] self_fencing_margin`) also keeps its own view of
//! its lease, as Kubernetes' leader election does: the deadline is its own clock at
//! the acquire or renew request plus the granted lease, less the margin; past it, the
//! worker refuses to write. That view is only as good as the worker's clock, and a
//! pause between the check and the write still lets a stale write through.

use anyhow::{Context, Result};
use lockcheck_history::OpType;
use lockcheck_resource::{self as resource, WriteOutcome};
use lockcheck_servers::backend::{
    self, adapter, BackendKind, Grant, LockClient, LockConfig, LockError,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// What a worker is started with (one JSON argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    pub backend: BackendKind,
    pub endpoints: Vec<String>,
    pub lock: LockConfig,
    pub resource: resource::Endpoint,
    /// Self-fencing: the safety margin taken off the lease before each write; none
    /// means the worker writes whatever its lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_fencing_margin_ms: Option<u64>,
    /// `mode = "election"`: the client campaigns (the backend's election recipe)
    /// instead of taking the lock.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub election: bool,
    /// The workload's `[client]`: an adapter program instead of the built-in recipe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<adapter::Spec>,
    /// `backend.renew = "background"`: the client renews its lease on its own this
    /// often while it holds the lock, as a library's watchdog does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_renew_ms: Option<u64>,
}

/// The error of a write a self-fencing worker refused: the controller ends the
/// critical section on it, as on a refused renew.
pub use lockcheck_history::error::SELF_FENCED;

/// A holder's own view of its lease, on its own clock.
struct Lease {
    margin: Duration,
    /// The configured lease, for a backend whose grant does not say.
    fallback: Duration,
    /// When the worker stops trusting its lease; none when it holds nothing.
    deadline: Option<Instant>,
}

impl Lease {
    /// Counts the lease from the moment the request was sent (`sent`), not from the
    /// reply: the server started its TTL somewhere in between.
    fn granted(&mut self, sent: Instant, g: &Grant) {
        let lease = g.lease_ms.map_or(self.fallback, Duration::from_millis);
        self.deadline = sent.checked_add(lease.saturating_sub(self.margin));
    }

    fn lost(&mut self) {
        self.deadline = None;
    }

    fn expired(&self) -> bool {
        self.deadline.is_none_or(|d| Instant::now() >= d)
    }
}

/// The lock client and what the worker knows of its lease: shared between the
/// requests and, with `renew = "background"`, the renewer. The view is never held
/// across a request, so a renewal waiting on a cut link holds up no write.
struct Holder {
    lock: Mutex<Box<dyn LockClient>>,
    view: std::sync::Mutex<View>,
    /// A leader acts on the lock service's own node before it writes (Patroni);
    /// the holder of a lock never does.
    acts: bool,
}

/// What the worker knows of its lease.
struct View {
    /// The self-fencing worker's view of its lease.
    lease: Option<Lease>,
    /// As far as this client knows, it holds the lock: what the renewer renews.
    holding: bool,
    /// The last grant, or the last renewal tried: the renewer's next is due
    /// `background_renew_ms` after it.
    renewed: Instant,
}

impl View {
    /// Records a grant (acquire or renew) or its refusal; `sent`: when the
    /// request left.
    fn granted(&mut self, sent: Instant, r: &Result<Grant, LockError>) {
        self.renewed = sent;
        match r {
            Ok(g) => {
                self.holding = true;
                if let Some(l) = self.lease.as_mut() {
                    l.granted(sent, g);
                }
            }
            Err(_) => self.lost(),
        }
    }

    fn lost(&mut self) {
        self.holding = false;
        if let Some(l) = self.lease.as_mut() {
            l.lost();
        }
    }
}

impl Holder {
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `renew = "background"`: renews the lease `every` after the last grant or
/// renewal while the client holds the lock, as a lock library's watchdog does,
/// and tells the holder nothing. A renewal that succeeds moves a self-fencing
/// holder's deadline; one refused (the lease is gone) stops the renewals until
/// the next grant; one unanswered (the holder cut off from the servers) is tried
/// again `every` later, while the holder writes on.
async fn renew_in_background(holder: Arc<Holder>, every: Duration) {
    loop {
        let due = {
            let v = holder.view();
            v.holding.then_some(v.renewed + every)
        };
        match due {
            Some(due) if due <= Instant::now() => {
                let mut lock = holder.lock.lock().await;
                // Released or deposed while this waited for the lock client.
                if !holder.view().holding {
                    continue;
                }
                let sent = Instant::now();
                let r = lock.renew().await;
                let mut v = holder.view();
                match r {
                    Err(LockError::Indeterminate(why)) => {
                        v.renewed = sent;
                        tracing::info!("background renewal unanswered: {why}");
                    }
                    r => {
                        if let Err(e) = &r {
                            tracing::info!("background renewal refused: {e}");
                        }
                        v.granted(sent, &r);
                    }
                }
            }
            Some(due) => tokio::time::sleep_until(due.into()).await,
            // Nothing held: look again soon (a grant starts the count).
            None => tokio::time::sleep(every.min(Duration::from_millis(50))).await,
        }
    }
}

/// One op for the worker to perform, as logical process `process`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    pub process: u64,
    #[serde(flatten)]
    pub op: Command,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "lowercase")]
pub enum Command {
    Acquire,
    /// `token` is what the holder believes it holds (for the history; the lock
    /// client knows its own lock).
    Renew {
        token: Option<u64>,
    },
    Release {
        token: Option<u64>,
        /// The holder resigns because it learned that its lease is gone (a leader
        /// with `on_lease_loss = "exit"`): the history's release says so.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lease_lost: bool,
    },
    Write {
        token: Option<u64>,
        data: String,
    },
    Read,
    /// Asks the lock client whether it still believes it holds the lock (an adapter's
    /// `held`), before a write.
    Held,
}

impl Command {
    /// The history's `f`.
    pub fn f(&self) -> &'static str {
        use lockcheck_history::f;
        match self {
            Command::Acquire => f::ACQUIRE,
            Command::Renew { .. } => f::RENEW,
            Command::Release { .. } => f::RELEASE,
            Command::Write { .. } => f::WRITE,
            Command::Read => f::READ,
            Command::Held => f::HELD,
        }
    }
}

/// The outcome of one request, in the history's words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: OpType,
    #[serde(default)]
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Reply {
    fn ok(id: u64, value: Value) -> Reply {
        Reply {
            id,
            kind: OpType::Ok,
            value,
            node: None,
            error: None,
        }
    }

    fn failed(id: u64, kind: OpType, error: String) -> Reply {
        Reply {
            id,
            kind,
            value: Value::Null,
            node: None,
            error: Some(error),
        }
    }

    fn from_lock_error(id: u64, e: LockError) -> Reply {
        match e {
            LockError::Denied(m) => Reply::failed(id, OpType::Fail, m),
            LockError::Indeterminate(m) => Reply::failed(id, OpType::Info, m),
        }
    }
}

fn grant_value(g: Grant) -> Value {
    json!({ "token": g.token, "lease_ms": g.lease_ms })
}

/// Runs the worker until stdin closes.
pub async fn serve(config: Config) -> Result<()> {
    let mut out = tokio::io::stdout();
    let connected = async {
        // The first reply says what the adapter said about itself (library, ops).
        let (lock, hello): (Box<dyn LockClient>, Value) = match &config.adapter {
            Some(spec) => {
                let a = adapter::AdapterClient::start(
                    spec.clone(),
                    config.backend,
                    &config.endpoints,
                    &config.lock,
                )
                .await?;
                let hello = serde_json::to_value(a.hello())?;
                (Box::new(a), hello)
            }
            None if config.election => (
                backend::connect_election(config.backend, &config.endpoints, &config.lock)
                    .await
                    .context("connecting to the lock service's election")?,
                Value::Null,
            ),
            None => (
                backend::connect(config.backend, &config.endpoints, &config.lock)
                    .await
                    .context("connecting to the lock service")?,
                Value::Null,
            ),
        };
        let res = resource::Client::connect(&config.resource).await?;
        anyhow::Ok((lock, res, hello))
    }
    .await;
    let (lock, mut res) = match connected {
        Ok((lock, res, hello)) => {
            send(&mut out, &Reply::ok(0, hello)).await?;
            (lock, res)
        }
        Err(e) => {
            send(&mut out, &Reply::failed(0, OpType::Fail, format!("{e:#}"))).await?;
            return Err(e);
        }
    };
    let holder = Arc::new(Holder {
        lock: Mutex::new(lock),
        view: std::sync::Mutex::new(View {
            lease: config.self_fencing_margin_ms.map(|m| Lease {
                margin: Duration::from_millis(m),
                fallback: config.lock.lease,
                deadline: None,
            }),
            holding: false,
            renewed: Instant::now(),
        }),
        acts: config.election,
    });
    if let Some(every) = config.background_renew_ms {
        tokio::spawn(renew_in_background(
            holder.clone(),
            Duration::from_millis(every),
        ));
    }
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let req: Request = serde_json::from_str(&line)
            .with_context(|| format!("bad request from the controller: {line}"))?;
        let mut reply = perform(&holder, &mut res, &req).await;
        // Writes and reads go to the resource, not to a node of the lock service
        // (a write that acted on a node says which, in `perform`).
        if !matches!(req.op, Command::Write { .. } | Command::Read) {
            reply.node = holder.lock.lock().await.node();
        }
        send(&mut out, &reply).await?;
    }
    Ok(())
}

/// Performs one request. The holder's lease view (self-fencing) moves with every
/// grant, every refusal or release drops it, and a write past it is refused here,
/// before it reaches the resource.
async fn perform(holder: &Holder, res: &mut resource::Client, req: &Request) -> Reply {
    let id = req.id;
    let sent = Instant::now();
    let granted = |r: Result<Grant, LockError>| {
        holder.view().granted(sent, &r);
        match r {
            Ok(g) => Reply::ok(id, grant_value(g)),
            Err(e) => Reply::from_lock_error(id, e),
        }
    };
    match &req.op {
        Command::Acquire => granted(holder.lock.lock().await.acquire().await),
        Command::Renew { .. } => granted(holder.lock.lock().await.renew().await),
        Command::Release { .. } => {
            let mut lock = holder.lock.lock().await;
            holder.view().lost();
            match lock.release().await {
                Ok(()) => Reply::ok(id, Value::Null),
                Err(e) => Reply::from_lock_error(id, e),
            }
        }
        Command::Write { .. } if holder.view().lease.as_ref().is_some_and(|l| l.expired()) => {
            Reply::failed(id, OpType::Fail, SELF_FENCED.into())
        }
        Command::Write { token, data } => {
            // A leadership that acts on the lock service's own node (Patroni) acts
            // there; the resource then records what the node accepted, in order.
            let acted_on_node = if holder.acts {
                let mut lock = holder.lock.lock().await;
                match lock.act(*token, data).await {
                    None => None,
                    Some(Ok(())) => lock.node(),
                    Some(Err(e)) => {
                        let mut reply = Reply::from_lock_error(id, e);
                        reply.node = lock.node();
                        return reply;
                    }
                }
            } else {
                None
            };
            let mut reply = match res.write(req.process, *token, data).await {
                Ok(WriteOutcome::Applied { seq }) => {
                    Reply::ok(id, json!({ "token": token, "data": data, "seq": seq }))
                }
                Ok(WriteOutcome::Rejected(why)) => Reply::failed(id, OpType::Fail, why),
                // The write may or may not have reached the resource.
                Err(e) => Reply::failed(id, OpType::Info, format!("{e:#}")),
            };
            reply.node = acted_on_node;
            reply
        }
        Command::Read => match res.read().await {
            Ok((seq, data)) => Reply::ok(id, json!({ "data": data, "seq": seq })),
            Err(e) => Reply::failed(id, OpType::Fail, format!("{e:#}")),
        },
        Command::Held => match holder.lock.lock().await.held().await {
            Some(Ok(held)) => Reply::ok(id, json!({ "held": held })),
            Some(Err(e)) => Reply::from_lock_error(id, e),
            None => Reply::failed(id, OpType::Fail, "held: this client cannot tell".into()),
        },
    }
}

async fn send(out: &mut tokio::io::Stdout, reply: &Reply) -> Result<()> {
    let mut line = serde_json::to_vec(reply)?;
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_are_one_json_line_each() {
        let req = Request {
            id: 4,
            process: 7,
            op: Command::Write {
                token: Some(3),
                data: "7:1".into(),
            },
        };
        let line = serde_json::to_string(&req).unwrap();
        assert_eq!(
            line,
            r#"{"id":4,"process":7,"f":"write","token":3,"data":"7:1"}"#
        );
        let back: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(back.op, req.op);
        let acquire: Request =
            serde_json::from_str(r#"{"id":1,"process":0,"f":"acquire"}"#).unwrap();
        assert_eq!(acquire.op.f(), "acquire");
        let reply = Reply::from_lock_error(5, LockError::Indeterminate("timed out".into()));
        let line = serde_json::to_string(&reply).unwrap();
        assert_eq!(
            line,
            r#"{"id":5,"type":"info","value":null,"error":"timed out"}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), reply);
    }
}
