//! The interposer (native/clockshim.c, embedded in this binary) and who it
//! reaches: installing it in a run directory, the environment it needs, and the
//! binaries it cannot reach.

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The environment variable naming the shared page (read by the interposer).
pub const CLOCK_FILE_ENV: &str = "LOCKCHECK_CLOCK_FILE";

/// The interposer, built by build.rs from native/clockshim.c.
pub(super) static SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libclockshim.so"));
pub(super) const SHIM_NAME: &str = "libclockshim.so";

pub(super) fn child_env(shim: &Path, file: &Path) -> [(OsString, OsString); 2] {
    [
        ("LD_PRELOAD".into(), shim.as_os_str().to_owned()),
        (CLOCK_FILE_ENV.into(), file.as_os_str().to_owned()),
    ]
}

/// Writes the interposer into `dir` (once) and returns its path.
pub fn install_shim(dir: &Path) -> Result<PathBuf> {
    let path = dir.join(SHIM_NAME);
    let same = File::open(&path)
        .and_then(|mut f| {
            let mut v = Vec::with_capacity(SHIM.len());
            f.read_to_end(&mut v).map(|_| v == SHIM)
        })
        .unwrap_or(false);
    if !same {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Written aside and renamed: a process loading it never sees half a file.
        let tmp = dir.join(format!(".{SHIM_NAME}.{}", std::process::id()));
        std::fs::write(&tmp, SHIM).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("installing {}", path.display()))?;
    }
    Ok(path)
}

/// Whether a live clock fault can reach the processes of a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// It calls libc's clock functions: the interposer skews it live.
    Live,
    /// It does not; say so in the verdict instead of pretending.
    Unreachable(Unreachable),
}

/// A process a clock fault cannot reach, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreachable: {binary} is {why}")]
pub struct Unreachable {
    pub binary: String,
    pub why: String,
}

/// Tells whether the interposer can skew `binary`'s clock live: Go programs
/// (etcd, nats-server) read the vDSO directly, and statically linked programs
/// never load a preload library.
pub fn reach(binary: &Path) -> Result<Reach> {
    let mut head = Vec::with_capacity(HEAD_LEN);
    File::open(binary)
        .and_then(|f| f.take(HEAD_LEN as u64).read_to_end(&mut head))
        .with_context(|| format!("reading {}", binary.display()))?;
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| binary.display().to_string());
    Ok(reach_head(name, &head))
}

/// How much of a binary [`reach_head`] looks at. Both marks sit in an ELF's
/// first pages: the program interpreter (/lib64/ld-linux-*.so) and the Go
/// linker's build-id note (name "Go", type 4), which every Go binary carries.
pub(super) const HEAD_LEN: usize = 64 * 1024;

/// [`reach`] from the first [`HEAD_LEN`] bytes of binary `name` (read here, or
/// on a node's host).
pub(super) fn reach_head(name: String, bytes: &[u8]) -> Reach {
    let why = if contains(bytes, b"\x04\0\0\0Go\0\0") {
        Some("a Go binary reading the vDSO (it never calls libc's clock functions)")
    } else if !contains(bytes, b"ld-linux") {
        Some("statically linked (LD_PRELOAD never loads)")
    } else {
        None
    };
    match why {
        Some(why) => Reach::Unreachable(Unreachable {
            binary: name,
            why: why.to_string(),
        }),
        None => Reach::Live,
    }
}

/// The programs in process group `leader` other than the leader itself (a
/// worker's adapter and what it started) that the interposer cannot reach, by
/// pid. A worker's clock is this program's and always reached; its adapter
/// inherits the interposer's environment, but a Go library reads the vDSO and
/// its own timers run on real time. A process gone meanwhile is skipped.
pub fn group_out_of_reach(leader: i32) -> Vec<(i32, Unreachable)> {
    let mut out = Vec::new();
    for pid in lockcheck_journal::group_members(leader) {
        if pid == leader {
            continue;
        }
        // A process gone meanwhile has no program any more.
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        if let Ok(Reach::Unreachable(u)) = reach(&exe) {
            out.push((pid, u));
        }
    }
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
