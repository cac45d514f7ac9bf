//! Undoing what a run left behind, from its journal: the other half of
//! [`lockcheck_journal`]. The journal, at the bottom, only writes down what was
//! applied; undoing an effect takes the code that applied it (docker cleanup and
//! the network namespaces in `cluster`, the freezer and the node link rules in
//! `fault`), so this lives above both, and `lockcheck recover` (`cli::recover`)
//! calls it. An effect of one fault kind's own ([`Effect::Fault`]) goes to that
//! kind's undo, and a clock page skewed (a variant of the journal's own, from
//! before kinds journaled theirs) to the kind that claims it, both found through
//! the catalogue: a new fault needs no arm here.
//!
//! Every undo is safe to repeat and safe after a clean end: a process is named by
//! pid and start time, so one that ended (and whose pid the kernel reused) is
//! "already gone", never signalled.

use anyhow::{bail, Context, Result};
use lockcheck_fault::catalogue;
use lockcheck_journal::{pending, Effect, Journal, Pending};
#[cfg(feature = "docker")]
use lockcheck_servers::cluster::docker;
use lockcheck_servers::cluster::ssh::host::{Host, Unreachable};
use lockcheck_servers::cluster::{detached_pid, freezer, home, netns};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::Serialize;
use std::path::Path;

/// What `recover` did about one effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undone {
    pub id: u64,
    pub effect: String,
    pub action: String,
}

/// What [`undo`] says of a process that no longer exists.
pub const ALREADY_GONE: &str = "already gone";

/// Undoes what `run_dir`'s journal says is still in effect, newest first, and
/// writes the undos down, so that a second recover finds nothing to do. Stopped
/// processes are resumed before the run's processes are killed, so that nothing
/// outside the run stays stopped even if it was stopped by mistake. Returns what
/// was undone and, as warnings, what could not be (and unreadable journal lines).
pub fn undo_pending(run_dir: &Path) -> Result<(Vec<Undone>, Vec<String>)> {
    let Pending {
        effects,
        mut warnings,
        ..
    } = pending(run_dir)?;
    let journal = Journal::for_run(run_dir)?;
    let mut done = Vec::new();
    let mut order: Vec<&(u64, Effect)> = effects.iter().rev().collect();
    // Resume, reset and heal first; then kill; the namespaces last, so that
    // they go at once, with no process left in them.
    order.sort_by_key(|(_, e)| match e {
        Effect::Process(_) | Effect::RemoteProcess { .. } => 1,
        // After the node that would start it again.
        Effect::Detached { .. } => 2,
        Effect::Network { .. } | Effect::RemoteDir { .. } => 3,
        _ => 0,
    });
    // A host found unreachable is tried once: each of its effects is named.
    let mut unreachable: Vec<String> = Vec::new();
    for (id, effect) in order {
        if let Some(host) = remote_host(effect).filter(|h| unreachable.iter().any(|u| u == h)) {
            warnings.push(format!(
                "{}: not undone: host {host} is unreachable over SSH",
                effect.describe()
            ));
            continue;
        }
        match undo(effect) {
            Ok(action) => {
                journal.undone(*id)?;
                done.push(Undone {
                    id: *id,
                    effect: effect.describe(),
                    action,
                });
            }
            Err(e) => {
                if let Some(u) = e.downcast_ref::<Unreachable>() {
                    unreachable.push(u.host.clone());
                }
                warnings.push(format!("{}: {e:#}", effect.describe()))
            }
        }
    }
    Ok((done, warnings))
}

/// The host an effect was made on, when it is not this machine.
fn remote_host(effect: &Effect) -> Option<&str> {
    match effect {
        Effect::RemoteProcess { host, .. }
        | Effect::RemoteStopped { host, .. }
        | Effect::RemoteDir { host, .. }
        | Effect::RemoteChain { host, .. }
        | Effect::RemoteClockSkew { host, .. } => Some(&host.name),
        _ => None,
    }
}

/// Undoes one effect; says what it did.
pub fn undo(effect: &Effect) -> Result<String> {
    Ok(match effect {
        Effect::Process(p) if p.alive() => {
            // SIGKILL ends a stopped process too.
            p.signal(Signal::SIGKILL)?;
            "killed".into()
        }
        Effect::Stopped(p) if p.alive() => {
            p.signal(Signal::SIGCONT)?;
            "resumed".into()
        }
        Effect::Process(_) | Effect::Stopped(_) => ALREADY_GONE.into(),
        Effect::Detached {
            pid_file, owner, ..
        } => match detached_pid(pid_file, owner) {
            Some(pid) => {
                kill(Pid::from_raw(pid as i32), Signal::SIGKILL)
                    .with_context(|| format!("killing pid {pid}"))?;
                "killed".into()
            }
            None => ALREADY_GONE.into(),
        },
        Effect::Link { .. } => "healed when the controller's proxy ended".into(),
        Effect::Frozen { cgroup, .. } => match freezer::thaw_dir(cgroup)? {
            true => "thawed".into(),
            false => ALREADY_GONE.into(),
        },
        #[cfg(not(feature = "docker"))]
        Effect::Containers { run } => anyhow::bail!(
            "the run's containers (label lockcheck.run={run}) need a lockcheck built with its \
             `docker` feature; or remove them by hand: \
             docker rm -f $(docker ps -aq --filter label=lockcheck.run={run})"
        ),
        #[cfg(feature = "docker")]
        Effect::Containers { run } => {
            let r = docker::remove_run_blocking(run)?;
            format!(
                "removed {} containers, {} networks, {} volumes",
                r.containers.len(),
                r.networks.len(),
                r.volumes.len()
            )
        }
        Effect::NodeCut { namespace, rules } => lockcheck_fault::netns::undo(namespace, rules)?,
        Effect::StandIn { dir, link } => match home::remove(dir, link)? {
            true => "removed".into(),
            false => ALREADY_GONE.into(),
        },
        Effect::RemoteProcess { host, proc } => {
            match Host::new(host.clone()).signal(proc, "KILL")? {
                true => "killed".into(),
                false => ALREADY_GONE.into(),
            }
        }
        Effect::RemoteStopped { host, proc } => {
            match Host::new(host.clone()).signal(proc, "CONT")? {
                true => "resumed".into(),
                false => ALREADY_GONE.into(),
            }
        }
        Effect::RemoteChain { host, chain, table } => {
            match Host::new(host.clone()).remove_chain(table, chain)? {
                true => "removed".into(),
                false => "nothing left".into(),
            }
        }
        Effect::RemoteDir { host, dir } => match Host::new(host.clone()).remove_dir(dir)? {
            true => "removed".into(),
            false => "nothing left".into(),
        },
        // A kind's own effect: its own undo, found through the catalogue.
        Effect::Fault(f) => match catalogue::kind(&f.kind).and_then(|k| k.undo) {
            Some(undo) => undo(f)?,
            None => bail!(
                "no fault kind \"{}\" with an undo in this lockcheck: not undone",
                f.kind
            ),
        },
        // A clock page skewed, which the journal has variants of its own for:
        // the kind that writes them undoes them, found through the catalogue.
        Effect::ClockSkew { .. } | Effect::RemoteClockSkew { .. } => {
            match catalogue::undo_journaled(effect) {
                Some(r) => r?,
                None => bail!("no fault kind in this lockcheck undoes it: not undone"),
            }
        }
        Effect::Network { id } => {
            let r = netns::remove_run(id)?;
            if r.namespaces.is_empty() && !r.host_interface {
                "nothing left".into()
            } else {
                format!(
                    "removed {} namespace(s) ({}), their bridge and veths",
                    r.namespaces.len(),
                    r.namespaces.join(", ")
                )
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockcheck_journal::Proc;

    #[test]
    fn a_process_whose_pid_was_reused_is_already_gone_and_never_signalled() {
        let me = Proc::of("me", std::process::id() as i32).unwrap();
        let reused = Proc {
            start_time: me.start_time + 1,
            ..me
        };
        assert_eq!(undo(&Effect::Process(reused)).unwrap(), ALREADY_GONE);
    }

    #[test]
    fn a_data_stand_in_left_behind_is_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(format!("{}test", home::STAND_IN_PREFIX));
        std::fs::create_dir_all(dir.join("n1")).unwrap();
        std::fs::write(dir.join("n1/PG_VERSION"), "15").unwrap();
        let link = tmp.path().join("data");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let left = Effect::StandIn {
            dir: dir.clone(),
            link: link.clone(),
        };
        assert_eq!(undo(&left).unwrap(), "removed");
        assert!(!dir.exists() && !link.is_symlink());
        assert_eq!(undo(&left).unwrap(), ALREADY_GONE, "safe to repeat");
        let other = tmp.path().join("precious");
        std::fs::create_dir(&other).unwrap();
        let planted = Effect::StandIn {
            dir: other.clone(),
            link,
        };
        assert!(undo(&planted).is_err());
        assert!(
            other.exists(),
            "only a stand-in lockcheck names so is removed"
        );
    }
}
