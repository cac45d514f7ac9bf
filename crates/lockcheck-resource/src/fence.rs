//! What every resource shares: the fence a write's token must pass, what a write
//! came to, and the figures of what was applied. The base of `resource`: both
//! resources import it.

use std::sync::Arc;

// The fence and its mode are what verdict.json records of the resource: their
// type is the run directory's, below the runner.
pub use lockcheck_rundir::resource::{Fence, Mode};

/// What the resource has applied so far, for the live status line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub applied: u64,
    /// Applied although a higher token had been applied before.
    pub stale_accepted: u64,
}

/// Reads the stats from elsewhere (the live status line).
#[derive(Clone)]
pub struct StatsHandle(Arc<dyn Fn() -> Stats + Send + Sync>);

impl StatsHandle {
    pub fn new(f: impl Fn() -> Stats + Send + Sync + 'static) -> StatsHandle {
        StatsHandle(Arc::new(f))
    }

    pub fn get(&self) -> Stats {
        (self.0)()
    }
}

/// What a write came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    Applied {
        seq: u64,
    },
    /// The fence said no (`stale-token`, `missing-token`).
    Rejected(String),
}
