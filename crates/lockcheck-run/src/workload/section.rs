//! What a holder does while it holds the lock: shared by the workload and an
//! election's leaders.

use std::time::Duration;

/// What a holder does while it holds the lock.
#[derive(Debug, Clone)]
pub struct CriticalSection {
    /// Time from acquire to release, spread evenly after each write.
    pub hold: Duration,
    /// Writes to the protected resource per critical section, each carrying the token.
    pub writes: u32,
    /// Pause between a release and the next acquire.
    pub think: Duration,
}
