//! One plain request to a server, and what its reply says: a ZooKeeper
//! four-letter word (`srvr`), an HTTP/1.0 request to etcd's gateway or Patroni's
//! API, Redis's `INFO`, a NATS `PUB`. Readiness checks, leader lookups and a
//! client's choice of node all ask so; each used to open, write and read its own
//! `TcpStream` with its own deadline. A base of `backend`: it imports no sibling.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `request` over a new connection to `addr` and reads the reply until
/// `answer` makes something of what has come so far. `answer` sees the reply
/// after each read, with `ended` true once the server has closed the connection
/// (its last chance: `None` then is no answer). Nothing (`None`) when the server
/// cannot be reached, or does not answer within `within`: a probe never hangs.
///
/// A server that keeps the connection open after its reply (a Sentinel after
/// `INFO`) is read only as far as `answer` needs: waiting for it to hang up
/// would wait out `within` every time.
pub async fn ask<T>(
    addr: SocketAddr,
    request: &[u8],
    within: Duration,
    mut answer: impl FnMut(&[u8], bool) -> Option<T>,
) -> Option<T> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream.write_all(request).await.ok()?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.ok()?;
            reply.extend_from_slice(&buf[..n]);
            if let Some(found) = answer(&reply, n == 0) {
                return Some(found);
            }
            if n == 0 {
                return None;
            }
        }
    };
    tokio::time::timeout(within, exchange).await.ok().flatten()
}

/// Whether the reply to `request` at `addr` contains `healthy` within a second.
pub async fn answers(addr: SocketAddr, request: &[u8], healthy: &str) -> bool {
    ask(addr, request, Duration::from_secs(1), |reply, _| {
        String::from_utf8_lossy(reply)
            .contains(healthy)
            .then_some(())
    })
    .await
    .is_some()
}

/// The whole reply to `request` at `addr`, read until the server hangs up (an
/// HTTP/1.0 server does once it has answered), within `within`.
pub async fn whole_reply(addr: SocketAddr, request: &[u8], within: Duration) -> Option<String> {
    ask(addr, request, within, |reply, ended| {
        ended.then(|| String::from_utf8_lossy(reply).into_owned())
    })
    .await
}

/// The body of an HTTP/1.0 reply (what follows its head's blank line).
pub fn http_body(reply: &str) -> Option<&str> {
    reply.split_once("\r\n\r\n").map(|(_, body)| body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers `reply` to whatever it is sent, then holds the
    /// connection open (`hang_up` false) or closes it.
    async fn server(reply: &'static [u8], hang_up: bool) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(reply).await;
                    if !hang_up {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn an_answer_is_read_as_far_as_it_needs_and_no_further() {
        let open = server(b"+PONG\r\n", false).await;
        let started = std::time::Instant::now();
        assert!(answers(open, b"PING\r\n", "+PONG").await);
        // Found before the server would hang up: no wait for the deadline.
        assert!(started.elapsed() < Duration::from_millis(900));
        // Not found, the connection held open: no answer, at the deadline.
        assert!(!answers(open, b"PING\r\n", "+OK").await);
    }

    #[tokio::test]
    async fn a_whole_reply_ends_when_the_server_hangs_up() {
        let closes = server(b"HTTP/1.0 200 OK\r\n\r\n{\"a\":1}", true).await;
        let reply = whole_reply(closes, b"GET / HTTP/1.0\r\n\r\n", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(http_body(&reply), Some("{\"a\":1}"));
        // A server that never hangs up gives no whole reply.
        let open = server(b"HTTP/1.0 200 OK\r\n\r\n", false).await;
        let within = Duration::from_millis(200);
        assert_eq!(whole_reply(open, b"GET /\r\n\r\n", within).await, None);
    }

    #[tokio::test]
    async fn nobody_listening_is_no_answer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        assert!(!answers(addr, b"srvr", "Mode: ").await);
    }
}
