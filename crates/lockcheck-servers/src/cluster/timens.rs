//! Time namespaces: the one clock change that reaches a Go program (etcd,
//! nats-server), which reads the vDSO and never calls the clock fault's
//! interposer. A node's monotonic offset (`backend.monotonic_offset`) is how
//! the cluster starts it, not a fault, so it lives here; what a time namespace
//! can and cannot do is in the clock fault's module docs (`fault/clock`).

use super::{NodeSpec, Prepare};
use std::os::unix::process::CommandExt;
use std::sync::Arc;

/// Starts `cmd` in a new time namespace whose monotonic (and boot-time) clock
/// is `offset_ns` ahead (behind, if negative): the one clock change that reaches
/// a Go program. It is set once, before the program runs, and cannot change
/// afterwards; the program keeps its pid (the namespace is entered at exec, no
/// extra process). The realtime clock cannot be shifted this way (the kernel
/// offers no such namespace); the kernel refuses an offset that would take the
/// clock below zero, and `unshare` needs CAP_SYS_ADMIN.
pub fn time_namespace(
    cmd: &mut std::process::Command,
    offset_ns: i64,
) -> &mut std::process::Command {
    // The kernel takes seconds and a non-negative nanosecond part.
    let (secs, nanos) = (
        offset_ns.div_euclid(1_000_000_000),
        offset_ns.rem_euclid(1_000_000_000),
    );
    let offsets = format!("monotonic {secs} {nanos}\nboottime {secs} {nanos}\n");
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (unshare, open, write, close) on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWTIME) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::open(
                c"/proc/self/timens_offsets".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let n = libc::write(fd, offsets.as_ptr().cast(), offsets.len());
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n != offsets.len() as isize {
                return Err(err);
            }
            Ok(())
        })
    }
}

/// A cluster hook that starts each node of `offsets` (node, offset in ns) in a
/// time namespace of its own with its monotonic clock shifted, at every start,
/// restarts included (so a restarted node keeps its offset).
pub fn monotonic_hook(offsets: Vec<(String, i64)>) -> Prepare {
    Prepare(Arc::new(
        move |node: &NodeSpec, cmd: &mut std::process::Command| {
            if let Some((_, ns)) = offsets.iter().find(|(n, _)| *n == node.name) {
                time_namespace(cmd, *ns);
            }
            Ok(())
        },
    ))
}
