//! Opening a history once: a file, a FIFO, `/dev/stdin`, `<(...)`, or `-` for standard
//! input, gzip or zstd undone on the way (told by their magic bytes, so a compressed
//! pipe works too). Every reader goes front to back through one `Input` and never
//! rewinds: a pipe can be read only once (spec v1.1, "Reading rules").
//!
//! Lines are read with a bound (`MAX_LINE`), so one hostile line (`/dev/zero`, a
//! 50 MB line) costs at most that much memory before it is refused with its number.

use super::malformed::HistoryError;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The longest line any reader accepts (spec v1.1), without its newline.
pub const MAX_LINE: usize = 16 << 20;

/// The deepest nesting any reader accepts (spec v1.1): arrays and objects in a JSON
/// line (the line's own object counts as one), collections in an EDN file.
pub const MAX_DEPTH: usize = 128;

/// How much of the (decompressed) start of an input format detection looks at.
pub const PREFIX: usize = 64 << 10;

/// The name standard input goes by in messages.
pub const STDIN_NAME: &str = "<stdin>";

/// An input opened for one pass.
pub struct Input {
    /// What messages call it: the path as given, or `<stdin>`.
    pub name: String,
    reader: Box<dyn BufRead>,
    /// The first `PREFIX` bytes (fewer if the input is shorter), already read and
    /// handed out again by `reader` first.
    prefix: Vec<u8>,
}

impl Input {
    /// Opens `path` (`-` = standard input) for one pass.
    pub fn open(path: &Path) -> Result<Input, HistoryError> {
        if path.as_os_str() == "-" {
            return Input::from_reader(STDIN_NAME, std::io::stdin());
        }
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|reason| HistoryError::Io {
            file: name.clone(),
            reason,
        })?;
        Input::from_reader(&name, file)
    }

    /// An input over any reader (text, gzip or zstd); `name` only names it in messages.
    pub fn from_reader(name: &str, raw: impl Read + 'static) -> Result<Input, HistoryError> {
        let io = |reason| HistoryError::Io {
            file: name.to_string(),
            reason,
        };
        // The magic bytes are read, not peeked (a pipe may hand over fewer than four
        // at first), and put back in front of the rest.
        let mut raw = BufReader::with_capacity(1 << 16, raw);
        let magic = fill(&mut raw, 4).map_err(io)?;
        let compressed = std::io::Cursor::new(magic.clone()).chain(raw);
        let decoded: Box<dyn Read> = if magic.starts_with(&[0x1f, 0x8b]) {
            // Multi-member, as `cat a.gz b.gz` or `gzip -c` appends make them.
            Box::new(flate2::bufread::MultiGzDecoder::new(compressed))
        } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Box::new(ZstdFrames::new(compressed).map_err(io)?)
        } else {
            Box::new(compressed)
        };
        let mut reader = BufReader::with_capacity(1 << 20, decoded);
        let prefix = fill(&mut reader, PREFIX).map_err(io)?;
        Ok(Input {
            name: name.to_string(),
            reader: Box::new(std::io::Cursor::new(prefix.clone()).chain(reader)),
            prefix,
        })
    }

    /// The first bytes of the input (up to `PREFIX`, after decompression), for
    /// telling its format; they are still read by `lines`.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The input's lines, one at a time, each at most `MAX_LINE` long.
    pub fn lines(self) -> LineReader {
        LineReader {
            name: self.name,
            reader: self.reader,
            buf: Vec::new(),
            line: 0,
        }
    }

    /// The whole input as text (for the importers, which read a file whole), each
    /// line held to `MAX_LINE` as it comes, so a stream without newlines cannot
    /// grow it past that.
    pub fn read_text(self) -> Result<(String, String), HistoryError> {
        let mut lines = self.lines();
        let mut text = String::new();
        while let Some(line) = lines.next_line()? {
            text.push_str(line.text);
            if line.terminated {
                text.push('\n');
            }
        }
        Ok((lines.name, text))
    }
}

/// Reads from `r` until `n` bytes or the end, and returns what it read (a pipe
/// hands over data in pieces, so one `read` is not enough). The caller puts the
/// bytes back in front of the rest.
fn fill(r: &mut impl BufRead, n: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(n.min(PREFIX));
    r.take(n as u64).read_to_end(&mut out)?;
    Ok(out)
}

/// One line as read: its text without the newline (a CR before the newline is
/// still there), and whether a newline ended it (only the last line may lack one).
pub struct Line<'a> {
    pub number: usize,
    pub text: &'a str,
    pub terminated: bool,
}

/// Lines of an input, held to `MAX_LINE` and to UTF-8.
pub struct LineReader {
    pub name: String,
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    line: usize,
}

impl LineReader {
    /// The next line, or `None` at the end. A line longer than `MAX_LINE` or not
    /// UTF-8 is an error naming it; it is refused before more than `MAX_LINE + 1`
    /// bytes of it are held.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, HistoryError> {
        self.buf.clear();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|reason| HistoryError::Io {
                file: self.name.clone(),
                reason,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let terminated = self.buf.last() == Some(&b'\n');
        if terminated {
            self.buf.pop();
        } else if self.buf.len() > MAX_LINE {
            return Err(self.bad(format!(
                "longer than {} MiB (the limit of spec v1.1); nothing past it was read",
                MAX_LINE >> 20
            )));
        }
        let line = self.line;
        match std::str::from_utf8(&self.buf) {
            Ok(text) => Ok(Some(Line {
                number: line,
                text,
                terminated,
            })),
            Err(e) => Err(HistoryError::Malformed {
                file: self.name.clone(),
                line,
                field: "line".into(),
                reason: format!("not UTF-8 (at byte {})", e.valid_up_to()),
            }),
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> usize {
        self.line
    }

    fn bad(&self, reason: String) -> HistoryError {
        HistoryError::Malformed {
            file: self.name.clone(),
            line: self.line,
            field: "line".into(),
            reason,
        }
    }
}

/// Zstandard frames one after another (`zstd` writes one; `cat a.zst b.zst` makes
/// two), decoded as one stream.
struct ZstdFrames<R: BufRead> {
    frame: Option<ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>>,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(source: R) -> std::io::Result<Self> {
        Ok(ZstdFrames {
            frame: Some(ruzstd::decoding::StreamingDecoder::new(source).map_err(zstd_error)?),
        })
    }
}

fn zstd_error(e: impl std::error::Error + Send + Sync + 'static) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("zstd: {e}"))
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let Some(frame) = self.frame.as_mut() else {
                return Ok(0);
            };
            let n = frame.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(frame) = self.frame.take() else {
                return Ok(0);
            };
            let mut source = frame.into_inner();
            if !source.fill_buf()?.is_empty() {
                self.frame =
                    Some(ruzstd::decoding::StreamingDecoder::new(source).map_err(zstd_error)?);
            }
        }
    }
}
