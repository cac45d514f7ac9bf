//! lockcheck's own resource: a small TCP server in the controller that the workers
//! write to directly.
//!
//! It applies writes in its own order (`seq` 1, 2, 3, ...). Fenced, it rejects a
//! write whose token its [`Fence`] does not admit (by default one lower than the
//! highest it has applied: Kleppmann's fencing token check); unfenced, it accepts
//! everything. It keeps `resource.jsonl`, its own log of applied writes, one
//! unbuffered line each.
//!
//! Protocol: one JSON object per line each way.
//! `{"op":"write","process":3,"token":7,"data":"3:12"}` → `{"seq":5}` or
//! `{"error":"stale-token"}`; `{"op":"read"}` → `{"seq":5,"data":"3:12"}`.

use super::fence::{Fence, Stats, StatsHandle, WriteOutcome};
use anyhow::{anyhow, bail, Context, Result};
use lockcheck_history::error::{MISSING_TOKEN, STALE_TOKEN};
use lockcheck_history::AppliedWrite;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Request {
    Write {
        process: u64,
        token: Option<u64>,
        data: String,
    },
    Read,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Reply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

struct State {
    fence: Fence,
    seq: u64,
    highest_token: Option<u64>,
    data: Option<String>,
    log: File,
    stats: Stats,
}

impl State {
    fn write(&mut self, process: u64, token: Option<u64>, data: String) -> Result<Reply> {
        let stale = matches!((token, self.highest_token), (Some(t), Some(h)) if t < h);
        if self.fence != Fence::Off {
            let rejected = match token {
                None => Some(MISSING_TOKEN),
                Some(t) if !self.fence.admits(t, self.highest_token) => Some(STALE_TOKEN),
                Some(_) => None,
            };
            if let Some(error) = rejected {
                return Ok(Reply {
                    error: Some(error.into()),
                    ..Reply::default()
                });
            }
        }
        self.seq += 1;
        let applied = AppliedWrite {
            seq: self.seq,
            process,
            token,
            data,
        };
        let mut line = serde_json::to_vec(&applied)?;
        line.push(b'\n');
        self.log
            .write_all(&line)
            .context("appending to resource.jsonl")?;
        self.stats.applied += 1;
        if stale {
            self.stats.stale_accepted += 1;
        }
        self.highest_token = self.highest_token.max(token);
        self.data = Some(applied.data);
        Ok(Reply {
            seq: Some(self.seq),
            ..Reply::default()
        })
    }

    fn handle(&mut self, line: &str) -> Reply {
        let outcome = serde_json::from_str::<Request>(line)
            .map_err(|e| anyhow!("bad request: {e}"))
            .and_then(|req| match req {
                Request::Write {
                    process,
                    token,
                    data,
                } => self.write(process, token, data),
                Request::Read => Ok(Reply {
                    seq: Some(self.seq),
                    data: self.data.clone(),
                    error: None,
                }),
            });
        outcome.unwrap_or_else(|e| Reply {
            error: Some(format!("{e:#}")),
            ..Reply::default()
        })
    }
}

/// The running resource. Dropping it stops accepting; `resource.jsonl` is complete
/// after every applied write.
pub struct Server {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Starts on a free loopback port, logging applied writes to `log_path`.
    pub async fn start(fence: Fence, log_path: &Path) -> Result<Server> {
        let log =
            File::create(log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the resource to a loopback port")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            fence,
            seq: 0,
            highest_token: None,
            data: None,
            log,
            stats: Stats::default(),
        }));
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Ok(Server {
            addr,
            state,
            accept,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> Stats {
        self.stats_handle().get()
    }

    /// A handle that reads the stats from elsewhere (the live status line).
    pub fn stats_handle(&self) -> StatsHandle {
        let state = self.state.clone();
        StatsHandle::new(move || state.lock().map(|s| s.stats).unwrap_or_default())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match state.lock() {
            Ok(mut s) => s.handle(&line),
            Err(_) => return,
        };
        let Ok(mut out) = serde_json::to_vec(&reply) else {
            return;
        };
        out.push(b'\n');
        if write.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// A worker's connection to the resource.
pub struct Client {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Result<Client> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to the resource at {addr}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Client {
            lines: BufReader::new(read).lines(),
            write,
        })
    }

    async fn call(&mut self, req: &Request) -> Result<Reply> {
        let mut line = serde_json::to_vec(req)?;
        line.push(b'\n');
        self.write.write_all(&line).await?;
        let reply = self
            .lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("the resource closed the connection"))?;
        Ok(serde_json::from_str(&reply)?)
    }

    pub async fn write(
        &mut self,
        process: u64,
        token: Option<u64>,
        data: &str,
    ) -> Result<WriteOutcome> {
        let reply = self
            .call(&Request::Write {
                process,
                token,
                data: data.to_string(),
            })
            .await?;
        match (reply.seq, reply.error) {
            (_, Some(e)) if e == STALE_TOKEN || e == MISSING_TOKEN => Ok(WriteOutcome::Rejected(e)),
            (_, Some(e)) => bail!("the resource failed: {e}"),
            (Some(seq), None) => Ok(WriteOutcome::Applied { seq }),
            (None, None) => bail!("the resource replied without a seq"),
        }
    }

    /// The last applied write: its `seq` (0 before any) and data.
    pub async fn read(&mut self) -> Result<(u64, Option<String>)> {
        let reply = self.call(&Request::Read).await?;
        if let Some(e) = reply.error {
            bail!("the resource failed: {e}");
        }
        Ok((reply.seq.unwrap_or(0), reply.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn applied_log(path: &Path) -> Vec<AppliedWrite> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn each_fence_rejects_what_its_comparison_says() {
        let dir = tempfile::tempdir().unwrap();
        for fence in [Fence::NotBelow, Fence::Above, Fence::Off] {
            let log = dir.path().join(format!("{fence:?}.jsonl"));
            let server = Server::start(fence, &log).await.unwrap();
            let mut a = Client::connect(server.addr()).await.unwrap();
            let mut b = Client::connect(server.addr()).await.unwrap();
            assert_eq!(
                a.write(0, Some(1), "0:1").await.unwrap(),
                WriteOutcome::Applied { seq: 1 }
            );
            assert_eq!(
                b.write(1, Some(2), "1:2").await.unwrap(),
                WriteOutcome::Applied { seq: 2 }
            );
            // The same holder writing again with its token: stale only to `<`.
            let again = b.write(1, Some(2), "1:3").await.unwrap();
            // The deposed holder wakes up and writes with its old token.
            let late = a.write(0, Some(1), "0:4").await.unwrap();
            let stale = WriteOutcome::Rejected(STALE_TOKEN.into());
            match fence {
                Fence::NotBelow | Fence::Above => {
                    let (again_expected, last) = if fence == Fence::Above {
                        (stale.clone(), (2, Some("1:2".into())))
                    } else {
                        (WriteOutcome::Applied { seq: 3 }, (3, Some("1:3".into())))
                    };
                    assert_eq!(again, again_expected);
                    assert_eq!(late, stale);
                    assert_eq!(
                        a.write(0, None, "0:5").await.unwrap(),
                        WriteOutcome::Rejected(MISSING_TOKEN.into())
                    );
                    assert_eq!(server.stats().stale_accepted, 0);
                    assert_eq!(b.read().await.unwrap(), last);
                }
                Fence::Off => {
                    assert_eq!(again, WriteOutcome::Applied { seq: 3 });
                    assert_eq!(late, WriteOutcome::Applied { seq: 4 });
                    assert_eq!(server.stats().stale_accepted, 1);
                    assert_eq!(b.read().await.unwrap(), (4, Some("0:4".into())));
                }
            }
            let log = applied_log(&log).await;
            assert_eq!(log.len() as u64, server.stats().applied);
            assert_eq!(
                log[1],
                AppliedWrite {
                    seq: 2,
                    process: 1,
                    token: Some(2),
                    data: "1:2".into()
                }
            );
        }
    }
}
