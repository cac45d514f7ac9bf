//! The lease a workload's holders get: a duration, or a preset its backend's users
//! run (the presets are the backends', `backend::preset`).

pub use lockcheck_servers::backend::{lease_presets, LeasePreset};
use std::time::Duration;

/// The lease a holder gets, and how often a holder renews it during a long hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub ttl: Duration,
    pub renew_every: Option<Duration>,
    /// The preset this came from, with the settings it stands for, for reports.
    pub preset: Option<&'static LeasePreset>,
}
