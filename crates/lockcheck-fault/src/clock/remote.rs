//! Clock faults on the nodes of other hosts (the `ssh` runtime), the way the
//! local runtime does them: each node the interposer reaches starts with it
//! preloaded and a clock page of its own, both in the node's directory on its
//! host ([`host_hook`]); a fault skews the page live from here, over SSH.
//!
//! This machine cannot map a file of another one, and the host's clocks are not
//! this machine's: the page's base (where a rate starts from) must be the
//! host's own "now". So the page is written there by lockcheck's page writer
//! (native/clockset.c, embedded in this binary like the interposer and copied
//! beside it), under the same seqlock as [`super::ClockControl`]'s: it folds the
//! drift of the rate in effect into the offset and sets the fields a change
//! gives ([`super::SkewUpdate`]), by the host's clock, at the moment it
//! publishes. A change is one SSH round trip per node (the nodes of a fault in
//! parallel), whatever the skew in effect: a jump on a majority lands on all of
//! it within a round trip of the nemesis's decision.
//!
//! Which servers a live skew reaches is decided as here ([`super::reach`]),
//! from the first bytes of the program the host runs: a Go server (etcd) starts
//! untouched, and a clock fault on it is reported unreachable with the same
//! reason as under the local runtime.
//!
//! A skewed page is journaled with its host ([`Effect::RemoteClockSkew`]) before
//! it is written, reset when the fault ends, when it is dropped (Ctrl-C,
//! SIGTERM, a panic), and by `lockcheck recover` ([`reset_remote`]); the files
//! go with the node's directory.

use super::shim::{reach_head, Reach, CLOCK_FILE_ENV, HEAD_LEN, SHIM, SHIM_NAME};
use super::skew::{ClockChange, SkewClock, SkewUpdate};
use anyhow::{bail, Context, Result};
use lockcheck_journal::Effect;
use lockcheck_servers::cluster::ssh::host::{quote, Host};
use lockcheck_servers::cluster::ssh::{HostPrepare, NodeHost};
use lockcheck_servers::cluster::NodeSpec;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The page writer, built by build.rs from native/clockset.c.
static SETTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lockcheck-clockset"));
const SETTER_NAME: &str = "lockcheck-clockset";
/// The node's clock page, in its directory on its host.
const PAGE_NAME: &str = "clock";

/// The page writer beside a page.
fn setter_of(page: &Path) -> PathBuf {
    page.with_file_name(SETTER_NAME)
}

/// A cluster hook (ssh runtime) that starts every node the interposer can reach
/// with it preloaded and its own clock page, both copied into its directory on
/// its host, the page created unskewed unless it is there (a restarted node
/// keeps the skew in effect). Nodes it cannot reach (Go servers) start
/// untouched; the clock fault says so when it hits them.
pub fn host_hook() -> HostPrepare {
    HostPrepare(Arc::new(
        |_node: &NodeSpec, cmd: &mut Command, host: &NodeHost| {
            // A program the host lacks is the start's to report.
            if reach_on(host)? != Some(Reach::Live) {
                return Ok(());
            }
            let put = host.put(&[(SHIM_NAME, SHIM), (SETTER_NAME, SETTER)])?;
            let page = host.home().join(PAGE_NAME);
            host.run(&format!(
                "{} {} >/dev/null",
                quote(&setter_of(&page).to_string_lossy()),
                quote(&page.to_string_lossy())
            ))
            .context("making the node's clock page")?;
            cmd.env("LD_PRELOAD", &put[0]).env(CLOCK_FILE_ENV, &page);
            Ok(())
        },
    ))
}

/// Whether a live skew reaches the program the node runs on its host; none if
/// the host has no such program.
fn reach_on(host: &NodeHost) -> Result<Option<Reach>> {
    Ok(host
        .program_head(HEAD_LEN)?
        .map(|head| reach_head(host.program_name(), &head)))
}

/// The controller's handle on the clock page of a node of another host.
/// Dropping it resets the clock, if it changed it.
pub struct RemoteClock {
    host: NodeHost,
    page: PathBuf,
    changed: AtomicBool,
}

/// A clock a live skew does not reach, and why (the words the history keeps).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutOfReach(pub String);

impl RemoteClock {
    /// The handle on node's page; whether the node has one, the first change
    /// finds out ([`OutOfReach`]).
    pub fn of(host: NodeHost) -> RemoteClock {
        let page = host.home().join(PAGE_NAME);
        RemoteClock {
            host,
            page,
            changed: AtomicBool::new(false),
        }
    }

    /// Why the node has no page: the reason the local runtime gives.
    fn out_of_reach(&self) -> anyhow::Error {
        let why = match reach_on(&self.host) {
            Ok(Some(Reach::Unreachable(u))) => u.to_string(),
            Err(e) => return e,
            _ => format!(
                "unreachable: {} was started without lockcheck's clock interposer",
                self.host.node()
            ),
        };
        OutOfReach(why).into()
    }
}

impl SkewClock for RemoteClock {
    fn change(&self, change: ClockChange) -> Result<()> {
        let update = change.update()?;
        self.changed.store(true, Ordering::Relaxed);
        match set_page(self.host.host(), &self.page, update)? {
            Some(_) => Ok(()),
            None => {
                self.changed.store(false, Ordering::Relaxed);
                Err(self.out_of_reach())
            }
        }
    }

    fn reset(&self) -> Result<()> {
        if set_page(self.host.host(), &self.page, RESET)?.is_none() {
            bail!(
                "the clock page of {} on host {} is gone",
                self.host.node(),
                self.host.host_name()
            );
        }
        self.changed.store(false, Ordering::Relaxed);
        Ok(())
    }

    fn effect(&self, target: &str) -> Effect {
        Effect::RemoteClockSkew {
            host: self.host.remote().clone(),
            target: target.to_string(),
            file: self.page.clone(),
        }
    }
}

impl Drop for RemoteClock {
    /// A page gone with its node's directory (the cluster stopped first) has no
    /// reader left to skew.
    fn drop(&mut self) {
        if self.changed.load(Ordering::Relaxed) {
            if let Err(e) = set_page(self.host.host(), &self.page, RESET) {
                tracing::warn!("resetting the clock of {}: {e:#}", self.host.node());
            }
        }
    }
}

/// Back to real time, at real speed.
const RESET: SkewUpdate = SkewUpdate {
    offset_ns: Some(0),
    offset2_ns: Some(0),
    strobe_period_ns: Some(0),
    rate: Some(1.0),
};

/// Resets a clock page left skewed on a host (by `lockcheck recover`). Returns
/// whether it was skewed (a page torn by a writer that died mid-write counts),
/// or none if the page is gone (with the node's directory).
pub fn reset_remote(host: &Host, page: &Path) -> Result<Option<bool>> {
    if page.file_name().is_none_or(|n| n != PAGE_NAME) {
        bail!(
            "{} on host {} is no clock page lockcheck made: left alone",
            page.display(),
            host.name()
        );
    }
    set_page(host, page, RESET)
}

/// Applies `update` to `page` with the writer beside it; whether the page
/// held a skew before, or none if it is not there.
fn set_page(host: &Host, page: &Path, update: SkewUpdate) -> Result<Option<bool>> {
    let (p, s) = (
        quote(&page.to_string_lossy()),
        quote(&setter_of(page).to_string_lossy()),
    );
    let out = host.run(&format!(
        "[ -f {p} ] && [ -x {s} ] || {{ echo gone; exit 0; }}\n{s} {p} {}",
        setter_args(update)
    ))?;
    match out.trim() {
        "gone" => Ok(None),
        "skewed" => Ok(Some(true)),
        "unskewed" => Ok(Some(false)),
        other => bail!("the clock page writer said {other:?}"),
    }
}

/// The writer's fields for `update`: each set, or `-` (kept).
fn setter_args(update: SkewUpdate) -> String {
    fn field<T: std::fmt::Debug>(v: Option<T>) -> String {
        v.map_or("-".into(), |v| format!("{v:?}"))
    }
    [
        field(update.offset_ns),
        field(update.offset2_ns),
        field(update.strobe_period_ns),
        field(update.rate),
    ]
    .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_gives_the_writer_its_fields_and_keeps_the_rest() {
        let args = |c: ClockChange| setter_args(c.update().unwrap());
        assert_eq!(
            args(ClockChange::Jump {
                offset_ns: 20_000_000_000
            }),
            "20000000000 - 0 -"
        );
        assert_eq!(args(ClockChange::Rate { rate: 2.0 }), "- - - 2.0");
        assert_eq!(
            args(ClockChange::Strobe {
                offset_ns: -5,
                offset2_ns: 7,
                period: std::time::Duration::from_nanos(100)
            }),
            "-5 7 100 -"
        );
        assert_eq!(setter_args(RESET), "0 0 0 1.0");
    }
}
