//! Appending to `history.jsonl` while a run goes: one `write` per line on an
//! unbuffered file, so a kill -9 of the controller loses at most the line being written.

use super::op::Op;
use std::fs::{File, OpenOptions};
use std::io::{self, Result, Write};
use std::path::{Path, PathBuf};

pub struct HistoryWriter {
    path: PathBuf,
    file: File,
    next_index: u64,
    last_time: u64,
}

impl HistoryWriter {
    pub fn create(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .map_err(|e| in_words(e, format!("creating {}", path.display())))?;
        Ok(HistoryWriter {
            path: path.to_path_buf(),
            file,
            next_index: 0,
            last_time: 0,
        })
    }

    /// Appends one op, giving it the next index (whatever `op.index` says). `time`
    /// is clamped so it never decreases: callers stamp on one monotonic clock, and the
    /// clamp guards against two stamps racing to the writer. Returns the index given.
    pub fn append(&mut self, mut op: Op) -> Result<u64> {
        op.index = self.next_index;
        op.time = op.time.max(self.last_time);
        let mut line = serde_json::to_vec(&op)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|e| in_words(e, format!("appending to {}", self.path.display())))?;
        self.next_index += 1;
        self.last_time = op.time;
        Ok(op.index)
    }

    /// Forces what was written to disk (the OS already has every line).
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| in_words(e, "syncing the history".into()))
    }
}

/// `e` with what was being done in front, as `anyhow`'s context would print it
/// (`creating DIR/history.jsonl: No space left on device`), its kind kept.
fn in_words(e: io::Error, doing: String) -> io::Error {
    io::Error::new(e.kind(), format!("{doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::super::op::{OpType, Process};
    use super::*;
    use serde_json::Value;

    #[test]
    fn written_history_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let mut w = HistoryWriter::create(&path).unwrap();
        let op = |time, kind, value, node| Op {
            index: 0,
            time,
            process: Process::Client(0),
            kind,
            f: "acquire".into(),
            value,
            node,
            error: None,
        };
        w.append(op(10, OpType::Invoke, Value::Null, None)).unwrap();
        // A stamp that raced behind the previous one is clamped, never written backwards.
        let ok = op(
            5,
            OpType::Ok,
            serde_json::json!({"token": 7, "lease_ms": 1000}),
            Some("n1".into()),
        );
        w.append(ok).unwrap();
        let h = super::super::read::read_jsonl(&path).unwrap();
        assert_eq!(h.ops.len(), 2);
        assert_eq!(h.ops[1].time, 10);
        assert_eq!(h.ops[1].token(), Some(7));
    }
}
