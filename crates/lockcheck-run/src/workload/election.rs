//! `mode = "election"`: the clients campaign instead of taking turns. A leader
//! holds for the whole run, renewing its lease every `backend.renew_every` (a third
//! of the lease when not given), and acts (writes to the resource, with its token)
//! every `[leader] act_every`; faults depose it. `[clients] on_lease_loss` says what
//! a leader does when it learns it lost its lease:
//!
//! ```toml
//! mode = "election"             # optional: "lock" (the default) | "election"
//!
//! [leader]                      # optional, election only
//! act_every = "200ms"           # optional, 200ms: between two acts of the leader
//!
//! [clients]
//! on_lease_loss = "exit"        # optional, election only: "ignore" (the default:
//!                               #   the leader goes on acting whatever its renewals
//!                               #   say) | "exit" (it resigns at once when a renewal
//!                               #   fails, or, with self_fencing_margin, when its own
//!                               #   deadline has passed before an act)
//! ```
//!
//! An election workload has no `[critical_section]`: a leadership lasts as long as
//! the leader does.

use super::located::line_of;
use super::preset::Lease;
use super::raw::{self, LeaderTable, ModeKind, OnLeaseLoss};
use super::section::CriticalSection;
use anyhow::{anyhow, Result};
use lockcheck_servers::backend::{BackendKind, ELECTION_BACKENDS};
use std::time::Duration;

/// How the clients of a workload use the lock.
#[derive(Debug, Clone)]
pub enum ClientMode {
    Lock(CriticalSection),
    Election(Election),
}

impl ClientMode {
    /// The mode's name, as the workload and verdict.json spell it.
    pub fn name(&self) -> &'static str {
        match self {
            ClientMode::Lock(_) => "lock",
            ClientMode::Election(_) => lockcheck_rundir::ELECTION,
        }
    }

    /// The longest a client's turn may keep it after the run's end is called: a
    /// critical section's hold, or a leader's wait before its resignation.
    pub fn finishing(&self) -> Duration {
        match self {
            ClientMode::Lock(s) => s.hold,
            ClientMode::Election(e) => e.act_every,
        }
    }
}

/// A leader's rhythm and its reaction to a lost lease.
#[derive(Debug, Clone)]
pub struct Election {
    /// Between two acts (writes) of the leader.
    pub act_every: Duration,
    /// Between two renewals of its lease.
    pub renew_every: Duration,
    pub on_lease_loss: OnLeaseLoss,
}

/// The parts of a raw workload that say how its clients use the lock.
pub(super) struct RawMode {
    pub mode: Option<toml::Spanned<ModeKind>>,
    pub critical_section: Option<toml::Spanned<raw::CriticalSection>>,
    pub leader: Option<toml::Spanned<LeaderTable>>,
    pub on_lease_loss: Option<toml::Spanned<OnLeaseLoss>>,
}

/// Reads the mode and its table, refusing what the other mode's keys ask for, with
/// the file, the line and the key.
pub(super) fn mode(
    file: &dyn std::fmt::Display,
    text: &str,
    raw: RawMode,
    kind: BackendKind,
    lease: &Lease,
) -> Result<ClientMode> {
    let at = |span: std::ops::Range<usize>, key: &str, what: String| {
        anyhow!("{file}:{}: {key}: {what}", line_of(text, span.start))
    };
    let mode_span = raw.mode.as_ref().map(|m| m.span());
    let kind_of_mode = raw.mode.map(|m| m.into_inner()).unwrap_or_default();
    if kind_of_mode == ModeKind::Lock {
        if let Some(l) = raw.on_lease_loss {
            return Err(at(
                l.span(),
                "clients.on_lease_loss",
                "only for mode = \"election\": a lock holder already stops writing when a renewal fails"
                    .into(),
            ));
        }
        if let Some(l) = raw.leader {
            return Err(at(
                l.span(),
                "leader",
                "only for mode = \"election\"; a lock workload's clients take turns ([critical_section])"
                    .into(),
            ));
        }
        let Some(section) = raw.critical_section else {
            return Err(anyhow!(
                "{file}: critical_section: missing: a lock workload needs [critical_section] with hold and writes (or mode = \"election\")"
            ));
        };
        let span = section.span();
        let section = section.into_inner();
        if section.writes == 0 {
            return Err(at(
                span,
                "critical_section.writes",
                "expected at least 1 write per critical section".into(),
            ));
        }
        return Ok(ClientMode::Lock(CriticalSection {
            hold: section.hold.0,
            writes: section.writes,
            think: section.think.map_or(Duration::ZERO, |d| d.0),
        }));
    }
    let mode_span = mode_span.unwrap_or(0..0);
    if let Some(s) = raw.critical_section {
        return Err(at(
            s.span(),
            "critical_section",
            "a leader holds for the whole run: an election workload has no critical section; its acts are [leader] act_every"
                .into(),
        ));
    }
    if !ELECTION_BACKENDS.contains(&kind) {
        let able: Vec<&str> = ELECTION_BACKENDS.iter().map(|k| k.name()).collect();
        return Err(at(
            mode_span,
            "mode",
            format!(
                "{kind} has no leader-election recipe here; election runs on {}",
                able.join(", ")
            ),
        ));
    }
    let renew_every = lease.renew_every.unwrap_or(lease.ttl / 3);
    if renew_every >= lease.ttl {
        return Err(anyhow!(
            "{file}: backend.renew_every: a leader renews within its lease: expected less than {} ms, found {} ms",
            lease.ttl.as_millis(),
            renew_every.as_millis()
        ));
    }
    let act_every = match raw.leader.and_then(|l| l.into_inner().act_every) {
        None => DEFAULT_ACT_EVERY,
        Some(d) if d.get_ref().0.is_zero() => {
            return Err(at(
                d.span(),
                "leader.act_every",
                "expected a period longer than 0".into(),
            ))
        }
        Some(d) => d.into_inner().0,
    };
    Ok(ClientMode::Election(Election {
        act_every,
        renew_every,
        on_lease_loss: raw
            .on_lease_loss
            .map(|l| l.into_inner())
            .unwrap_or_default(),
    }))
}

/// Between two acts of a leader, when `[leader] act_every` is not given.
const DEFAULT_ACT_EVERY: Duration = Duration::from_millis(200);
