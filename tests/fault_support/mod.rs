//! Shared by the tests/fault_*.rs files: real servers on free ports, stopped
//! (and resumed first, if paused) whatever happens to the test.
// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released for the server to take).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding 127.0.0.1:0")
        .port()
}

/// A redis-server on a free port, killed on drop.
pub struct Redis {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Redis {
    pub fn start(dir: &Path, env: &[(OsString, OsString)]) -> Redis {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting redis-server (Debian package redis-server)");
        let redis = Redis {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while redis.cmd(&["PING"]).as_deref() != Ok("PONG") {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING within 5 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        redis
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// One command on a fresh connection, through `addr` (a proxy link or the
    /// server itself), with a 1 s timeout.
    pub fn cmd(&self, args: &[&str]) -> Result<String, String> {
        redis_cmd(self.addr, args, Duration::from_secs(1))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid());
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one command over a fresh connection and returns the reply as text
/// ("(nil)" for a nil reply), or the error in words.
pub fn redis_cmd(addr: SocketAddr, args: &[&str], timeout: Duration) -> Result<String, String> {
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(|e| e.to_string())?;
    let mut conn = client
        .get_connection_with_timeout(timeout)
        .map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    conn.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: redis::Value = cmd.query(&mut conn).map_err(|e| e.to_string())?;
    Ok(match v {
        redis::Value::Nil => "(nil)".to_string(),
        redis::Value::SimpleString(s) => s,
        redis::Value::Okay => "OK".to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}

/// Leaves the clock page at `path` as a controller killed with -9 in the middle
/// of a change does: the sequence odd (its first store done, not its second),
/// and the first field of the new skew, an offset of `new_offset`, written.
/// The layout is `struct lc_page` (crates/lockcheck-fault/native/clockshim.c): magic, seq, offset_ns.
pub fn tear(path: &Path, new_offset: i64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut seq = [0u8; 8];
    f.read_exact_at(&mut seq, 8).unwrap();
    let seq = u64::from_le_bytes(seq);
    assert_eq!(seq % 2, 0, "a whole page before the tear");
    f.write_all_at(&(seq + 1).to_le_bytes(), 8).unwrap();
    f.write_all_at(&new_offset.to_le_bytes(), 16).unwrap();
}
