//! The process's exit codes, shared by every subcommand and by the run below them,
//! and the error that carries its own. The bottom layer: it depends on nothing of
//! ours, so that `run` (or anything else below `cli`) can say "this is the
//! environment" without naming `cli`.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | valid: no anomaly (and, for a run, every planned fault started) |
//! | 1 | anomalies found |
//! | 2 | usage: a bad argument or workload (the message names file, line and key) |
//! | 3 | unknown: the checker gave up within its limits, or a run missed faults it planned (the test did not test what it claims) |
//! | 4 | malformed input (the message names file, line and field) |
//! | 5 | environment: this machine cannot do it (a server binary missing, too little memory, no root) |
//! | 6 | internal: an error lockcheck does not classify (a bug, or a failure nobody foresaw): report it |
//! | 130 | interrupted by a signal; everything the run started was stopped |

pub const VALID: u8 = 0;
pub const ANOMALIES: u8 = 1;
pub const USAGE: u8 = 2;
pub const UNKNOWN: u8 = 3;
pub const MALFORMED: u8 = 4;
pub const ENVIRONMENT: u8 = 5;
pub const INTERNAL: u8 = 6;
/// 128 + SIGINT, as shells report a command a Ctrl-C stopped.
pub const INTERRUPTED: u8 = 130;

/// An error that carries its own exit code (usage = 2, malformed input = 4,
/// environment = 5).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl Exit {
    /// A bad argument or workload: exit 2.
    pub fn usage(message: impl std::fmt::Display) -> anyhow::Error {
        Exit::with(USAGE, message)
    }

    /// Input that cannot be read as what it claims to be (the message names the
    /// file and field): exit 4.
    pub fn malformed(message: impl std::fmt::Display) -> anyhow::Error {
        Exit::with(MALFORMED, message)
    }

    /// Something this machine lacks: exit 5.
    pub fn environment(message: impl std::fmt::Display) -> anyhow::Error {
        Exit::with(ENVIRONMENT, message)
    }

    /// Stopped by a signal, after stopping what it started: exit 130.
    pub fn interrupted(message: impl std::fmt::Display) -> anyhow::Error {
        Exit::with(INTERRUPTED, message)
    }

    fn with(code: u8, message: impl std::fmt::Display) -> anyhow::Error {
        anyhow::Error::new(Exit {
            code,
            message: format!("{message:#}"),
        })
    }
}
