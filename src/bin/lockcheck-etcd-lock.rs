//! lockcheck's adapter for etcd's own lock service (client.md v1, docs/clients.md):
//! the v3lock `Lock`/`Unlock` RPCs that Jepsen's 2020 etcd analysis tested, through
//! the etcd-client crate. It is not lockcheck's etcd recipe
//! (crates/lockcheck-servers/src/backends/etcd/client.rs): the server runs the lock (etcd's
//! `concurrency.Mutex` on a key `<name>/<lease>`, the lowest create revision
//! holds, the others wait for the keys before theirs to go).
//!
//! **Lease.** Each acquire grants a lease of the workload's TTL (etcd counts whole
//! seconds) and keeps it alive from this process every TTL/3, as etcd's own sessions
//! do; a pause of this process stops that keep-alive, which is the known break.
//! `renew` is one keep-alive round trip; `release` is `Unlock(key)` then a revoke of
//! the lease.
//!
//! **Token.** The create revision of the key `Lock` returned: revisions only grow, so
//! a later holder's key was created later.
//!
//! **held.** The lock service has no ownership call: the adapter asks etcd for its
//! lease's time to live and keys (`LeaseTimeToLive`), as redis-py's `owned()` GETs.
//!
//! Started by `clients/etcd-lock/run`; speaks JSON lines on stdin/stdout, logs on stderr.

use anyhow::{bail, Context};
use etcd_client::{Client, ConnectOptions, LeaseTimeToLiveOptions, LockOptions};
use lockcheck::backends::etcd::client::{keep_alive, lease_not_found};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinHandle;

/// The library version, for the init reply (Cargo.lock pins it).
const ETCD_CLIENT: &str = "etcd-client 0.21";

/// What one acquire took: the key `Lock` returned, its lease, and the lease's keeper.
struct Hold {
    key: Vec<u8>,
    lease: i64,
    keeper: JoinHandle<()>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// The adapter after `init`.
struct Adapter {
    client: Client,
    name: String,
    ttl_secs: i64,
    /// How long one request other than `Lock` may take: a quarter of the lease, as
    /// lockcheck's own clients allow.
    io: Duration,
    hold: Option<Hold>,
}

/// A reply without its id: `ok`, `fail` or `info` with its fields.
type Reply = Value;

fn fail(why: impl std::fmt::Display) -> Reply {
    json!({ "type": "fail", "error": why.to_string() })
}

fn info(why: impl std::fmt::Display) -> Reply {
    json!({ "type": "info", "error": why.to_string() })
}

/// Runs one etcd request within `limit`; a time-out is an error like the others.
async fn within<T>(
    limit: Duration,
    what: &str,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, request).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: no reply within {} ms", limit.as_millis())),
    }
}

impl Adapter {
    async fn init(req: &Value) -> anyhow::Result<(Adapter, Reply)> {
        let field = |name: &str| req.get(name).with_context(|| format!("init: no `{name}`"));
        let endpoints: Vec<String> = serde_json::from_value(field("endpoints")?.clone())
            .context("init: `endpoints` is not a list of host:port")?;
        let name = field("lock")?
            .as_str()
            .context("init: `lock` is not a string")?
            .to_string();
        let lease_ms = field("lease_ms")?
            .as_u64()
            .context("init: `lease_ms` is not a number")?;
        let io = (Duration::from_millis(lease_ms) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(2));
        let urls: Vec<String> = endpoints.iter().map(|e| format!("http://{e}")).collect();
        let options = ConnectOptions::new()
            .with_connect_timeout(io)
            .with_require_leader(true);
        let mut client = tokio::time::timeout(io * 4, Client::connect(&urls, Some(options)))
            .await
            .with_context(|| format!("connecting to {}: timed out", urls.join(",")))?
            .with_context(|| format!("connecting to {}", urls.join(",")))?;
        let server = within(io * 4, "status", client.status())
            .await
            .map_err(anyhow::Error::msg)?;
        let adapter = Adapter {
            client,
            name,
            ttl_secs: lease_ms.div_ceil(1000).max(1) as i64,
            io,
            hold: None,
        };
        let reply = json!({
            "type": "ok",
            "library": format!("etcd {} Lock/Unlock ({ETCD_CLIENT})", server.version()),
            "ops": ["renew", "held"],
        });
        Ok((adapter, reply))
    }

    async fn handle(&mut self, op: &str, req: &Value) -> Reply {
        match op {
            "acquire" => {
                let wait = req.get("timeout_ms").and_then(Value::as_u64).unwrap_or(0);
                self.acquire(Duration::from_millis(wait)).await
            }
            "renew" => self.renew().await,
            "release" => self.release().await,
            "held" => self.held().await,
            _ => fail(format!("unknown op {op}")),
        }
    }

    /// A lease, kept alive from now on; `Lock` with it, waiting at most `wait`; the
    /// key's create revision as the token. On no grant, the lease is revoked: whatever
    /// key the server made with it goes too, and nothing was taken.
    async fn acquire(&mut self, wait: Duration) -> Reply {
        self.hold = None;
        let lease = match within(
            self.io,
            "lease grant",
            self.client.lease_grant(self.ttl_secs, None),
        )
        .await
        {
            Ok(l) => l,
            Err(why) => return fail(why),
        };
        let ttl = Duration::from_secs(lease.ttl().max(1) as u64);
        let keeper = tokio::spawn(keep_alive(self.client.clone(), lease.id(), ttl, self.io));
        let mut hold = Hold {
            key: Vec::new(),
            lease: lease.id(),
            keeper,
        };
        let options = LockOptions::new().with_lease(lease.id());
        let locked = within(
            wait,
            "lock",
            self.client.lock(self.name.clone(), Some(options)),
        )
        .await;
        let key = match locked {
            Ok(r) => r.key().to_vec(),
            Err(why) => {
                hold.keeper.abort();
                return match self.revoke(lease.id()).await {
                    Ok(_) => fail(format!("{why} (held by another client); lease revoked")),
                    Err(e) => info(format!("{why}; and {e}")),
                };
            }
        };
        hold.key = key.clone();
        self.hold = Some(hold);
        match within(self.io, "get key", self.client.get(key, None)).await {
            Ok(r) => match r.kvs().first() {
                Some(kv) => json!({
                    "type": "ok",
                    "token": kv.create_revision(),
                    "lease_ms": lease.ttl() * 1000,
                }),
                None => info("Lock granted, but its key was gone at once (the lease expired)"),
            },
            Err(why) => info(format!("Lock granted; its create revision unknown: {why}")),
        }
    }

    /// Revokes `lease`: `Ok(true)` revoked, `Ok(false)` etcd no longer had it.
    async fn revoke(&mut self, lease: i64) -> Result<bool, String> {
        match tokio::time::timeout(self.io, self.client.lease_revoke(lease)).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) if lease_not_found(&e) => Ok(false),
            Ok(Err(e)) => Err(format!("lease revoke: {e}")),
            Err(_) => Err(format!(
                "lease revoke: no reply within {} ms",
                self.io.as_millis()
            )),
        }
    }

    /// One keep-alive round trip of the held lease.
    async fn renew(&mut self) -> Reply {
        let Some(lease) = self.hold.as_ref().map(|h| h.lease) else {
            return fail("not-held: nothing to renew");
        };
        let kept = within(self.io, "keep-alive", async {
            let (mut keeper, mut stream) = self.client.lease_keep_alive(lease).await?;
            keeper.keep_alive().await?;
            stream.message().await
        })
        .await;
        match kept {
            Ok(Some(r)) if r.ttl() > 0 => json!({ "type": "ok", "lease_ms": r.ttl() * 1000 }),
            Ok(_) => fail("not-held: the lease has expired"),
            Err(why) if why.contains("lease not found") => fail("not-held: the lease has expired"),
            Err(why) => info(why),
        }
    }

    /// `Unlock(key)`, then the lease revoked: `ok` when the lease was still there
    /// (the key was ours until Unlock), `fail` when etcd no longer had it (the key had
    /// gone with it: Unlock deleted nothing of ours).
    async fn release(&mut self) -> Reply {
        let Some(hold) = self.hold.take() else {
            return fail("not-held: nothing to release");
        };
        hold.keeper.abort();
        let unlocked = within(self.io, "unlock", self.client.unlock(hold.key.clone())).await;
        let revoked = self.revoke(hold.lease).await;
        match (unlocked, revoked) {
            (Ok(_), Ok(true)) => json!({ "type": "ok" }),
            (Ok(_), Ok(false)) => fail("not-held: the lease had expired, its key with it"),
            (Err(why), _) | (_, Err(why)) => info(why),
        }
    }

    /// Whether etcd still has our lease, with our key attached.
    async fn held(&mut self) -> Reply {
        let Some((lease, key)) = self.hold.as_ref().map(|h| (h.lease, h.key.clone())) else {
            return json!({ "type": "ok", "held": false });
        };
        let options = LeaseTimeToLiveOptions::new().with_keys();
        match within(
            self.io,
            "lease time-to-live",
            self.client.lease_time_to_live(lease, Some(options)),
        )
        .await
        {
            Ok(r) => json!({ "type": "ok", "held": r.ttl() > 0 && r.keys().contains(&key) }),
            Err(why) if why.contains("lease not found") => json!({ "type": "ok", "held": false }),
            Err(why) => info(why),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let mut adapter: Option<Adapter> = None;
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        let req: Value = serde_json::from_str(&line)
            .with_context(|| format!("a request that is not JSON: {line}"))?;
        let Some(id) = req.get("id").cloned() else {
            bail!("a request without an id: {line}");
        };
        let op = req.get("op").and_then(Value::as_str).unwrap_or("");
        let mut reply = match (op, adapter.as_mut()) {
            ("init", _) => match Adapter::init(&req).await {
                Ok((a, reply)) => {
                    adapter = Some(a);
                    reply
                }
                Err(e) => {
                    eprintln!("init: {e:#}");
                    fail(format!("{e:#}"))
                }
            },
            (op, Some(a)) => a.handle(op, &req).await,
            (op, None) => fail(format!("`{op}` before init")),
        };
        if reply["type"] == "info" {
            eprintln!("{op}: {}", reply["error"]);
        }
        reply["id"] = id;
        let mut text = serde_json::to_vec(&reply).context("a reply serializes")?;
        text.push(b'\n');
        out.write_all(&text).await.context("writing stdout")?;
        out.flush().await.context("writing stdout")?;
    }
    Ok(())
}
