//! `lockcheck doctor`: what this machine can run — backends (server found, version),
//! faults and runtimes — and the command that installs what is missing. Each
//! backend also says where its fencing token comes from, its known break, the
//! shipped workloads that show the break (and where it has a token, the one where
//! fencing stops it), and the lease presets its users run.

use crate::cluster;
use anyhow::Result;
use std::path::Path;
use std::process::Command;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON object instead of words.
    #[arg(long)]
    pub json: bool,
}

/// One thing lockcheck may need, and whether it is here.
#[derive(Debug, Default, serde::Serialize)]
struct Item {
    area: &'static str,
    name: String,
    ok: bool,
    /// The version or what was found; why not, when missing.
    detail: String,
    /// For a backend: where its fencing token comes from, and its known break.
    #[serde(skip_serializing_if = "Option::is_none")]
    about: Option<String>,
    /// For a backend: the shipped workloads (`workloads/<name>.toml`) that show its
    /// known break, then the fenced one where it has a token.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    workloads: Vec<&'static str>,
    /// For a backend: the lease presets that fit it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    presets: Vec<&'static str>,
    /// The Debian package that provides it, when missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<&'static str>,
}

/// Each check of this machine, one function each, in the order they are printed.
const CHECKS: &[fn() -> Vec<Item>] = &[
    backends,
    faults,
    || vec![local_processes()],
    || vec![docker()],
    || vec![ssh()],
    || vec![external()],
];

pub fn main(args: Args) -> Result<u8> {
    let items: Vec<Item> = CHECKS.iter().flat_map(|check| check()).collect();
    let mut packages: Vec<&str> = items.iter().filter_map(|i| i.install).collect();
    packages.sort();
    packages.dedup();
    let install = (!packages.is_empty()).then(|| {
        format!(
            "apt-get install {}   (or scripts/setup, which installs everything the tests use)",
            packages.join(" ")
        )
    });
    if args.json {
        let out = serde_json::json!({ "items": items, "install": install });
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print_words(&items, install.as_deref());
    }
    Ok(closing(&items, install.as_deref()).0)
}

/// The exit code and the closing line. A MISSING line no package fixes (root, a
/// delegated cgroup) still means something lockcheck offers cannot run here:
/// never the all-clear.
fn closing(items: &[Item], install: Option<&str>) -> (u8, String) {
    let missing = items.iter().filter(|i| !i.ok).count();
    let line = match install {
        Some(cmd) => format!("to install what is missing: {cmd}"),
        None if missing > 0 => format!(
            "{missing} MISSING that no package installs (each line says why): not everything lockcheck knows how to run can run here"
        ),
        None => "everything lockcheck knows how to run is here".to_string(),
    };
    (u8::from(missing > 0), line)
}

/// The items in words, by area, and the command that installs what is missing.
fn print_words(items: &[Item], install: Option<&str>) {
    // Presets not tied to one service fit every backend.
    let generic: Vec<&str> = crate::backend::preset::ANY.iter().map(|p| p.name).collect();
    let mut area = "";
    for i in items {
        if i.area != area {
            area = i.area;
            println!("{area}s:");
        }
        let mark = if i.ok { "ok     " } else { "MISSING" };
        println!("  {mark} {:<17} {}", i.name, i.detail);
        if let Some(about) = &i.about {
            println!("  {:<25} {about}", "");
        }
        if !i.presets.is_empty() {
            println!(
                "  {:<25} lease presets: {} (on any backend: {})",
                "",
                i.presets.join(", "),
                generic.join(", ")
            );
        }
    }
    println!("{}", closing(items, install).1);
}

/// Each backend: its server program and version, or the package that installs it;
/// its token, known break, the workloads that show it and its lease presets.
fn backends() -> Vec<Item> {
    cluster::available_backends().iter().map(backend).collect()
}

fn backend(a: &cluster::Availability) -> Item {
    let kind = a.kind;
    let about = Some(format!(
        "token: {}; known break: {}; shown by: {}{}",
        kind.token().unwrap_or("none"),
        kind.known_break(),
        kind.shown_by().join(", "),
        kind.fenced_by()
            .map(|f| format!("; fenced: {f}"))
            .unwrap_or_default(),
    ));
    let workloads: Vec<&'static str> = kind
        .shown_by()
        .iter()
        .copied()
        .chain(kind.fenced_by())
        .collect();
    let presets: Vec<&'static str> = kind.lease_presets().iter().map(|p| p.name).collect();
    let (ok, detail, install) = match &a.found {
        Ok(path) => (
            true,
            format!(
                "{} {} ({})",
                a.binary.name,
                version_of(path),
                path.display()
            ),
            None,
        ),
        Err(e) => (false, e.to_string(), Some(a.binary.package)),
    };
    Item {
        area: "backend",
        name: kind.name().to_string(),
        ok,
        detail,
        install,
        about,
        workloads,
        presets,
    }
}

/// What each kind of fault needs of this machine, as the kind says, in the
/// catalogue's order.
fn faults() -> Vec<Item> {
    crate::fault::catalogue::CATALOGUE
        .iter()
        .filter_map(|k| k.requires)
        .flat_map(|requires| requires())
        .map(|r| Item {
            area: "fault",
            name: r.name,
            ok: r.ok,
            detail: r.detail,
            install: r.install,
            ..Item::default()
        })
        .collect()
}

fn local_processes() -> Item {
    Item {
        area: "runtime",
        name: "local processes".into(),
        ok: true,
        detail: "servers run as local processes on loopback (the default)".into(),
        ..Item::default()
    }
}

fn docker() -> Item {
    #[cfg(feature = "docker")]
    let (ok, detail) = crate::cli::image::doctor_line();
    #[cfg(not(feature = "docker"))]
    let (ok, detail) = (false, crate::cluster::WITHOUT_DOCKER.to_string());
    Item {
        area: "runtime",
        name: "docker".into(),
        ok,
        detail,
        // A build without the feature needs lockcheck built again, not a package.
        install: (!ok && cfg!(feature = "docker")).then_some("docker.io"),
        ..Item::default()
    }
}

/// The ssh runtime runs the system's OpenSSH client, never an SSH library.
fn ssh() -> Item {
    let ssh = crate::fault::which("ssh".as_ref()).is_ok();
    Item {
        area: "runtime",
        name: "ssh".into(),
        ok: ssh,
        detail: if ssh {
            "servers on other hosts (backend.hosts) through the system's OpenSSH client".into()
        } else {
            "the ssh runtime runs the system's OpenSSH client: ssh is not on PATH".into()
        },
        install: (!ssh).then_some("openssh-client"),
        ..Item::default()
    }
}

fn external() -> Item {
    Item {
        area: "runtime",
        name: "external".into(),
        ok: true,
        detail: "servers someone else runs, named by backend.endpoints".into(),
        ..Item::default()
    }
}

/// The version `PROGRAM --version` prints (`Redis server v=7.0.15 ...` → `7.0.15`,
/// `etcd Version: 3.4.23` → `3.4.23`), or why there is none.
fn version_of(program: &Path) -> String {
    let out = match Command::new(program).arg("--version").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => return format!("(version unknown: {e})"),
    };
    out.split_whitespace()
        .map(|w| w.trim_start_matches("v=").trim_start_matches('v'))
        .find(|w| w.contains('.') && w.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or("(version unknown)")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::{closing, Item};
    use crate::backend::BackendKind;
    use crate::run::workload::Workload;
    use std::path::PathBuf;

    fn shipped(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("workloads")
            .join(format!("{name}.toml"))
    }

    /// Every workload doctor names exists, runs the backend it is named for, and
    /// is fenced exactly when named as the fenced one.
    #[test]
    fn the_workloads_named_for_each_backend_exist_and_run_that_backend() {
        for kind in BackendKind::ALL {
            assert!(!kind.shown_by().is_empty(), "{kind}");
            // Patroni's token (a node's timeline) fences nothing: its leaders act on
            // their own nodes, and its safe twin routes writes instead.
            assert_eq!(
                kind.fenced_by().is_some(),
                kind.token().is_some() && kind.has_lock(),
                "{kind}"
            );
            let all = kind.shown_by().iter().map(|b| (b, false));
            for (name, fenced) in all.chain(kind.fenced_by().iter().map(|f| (f, true))) {
                let w = Workload::load(&shipped(name)).unwrap_or_else(|e| panic!("{e:#}"));
                assert_eq!(w.backend.kind, kind, "{name}");
                assert_eq!(
                    w.resource.fence.mode() == crate::resource::Mode::Fenced,
                    fenced,
                    "{name}"
                );
            }
        }
    }

    /// A line MISSING for want of root, which no package installs, is not the
    /// all-clear: exit 1 and a closing line that says so.
    #[test]
    fn a_missing_line_no_package_fixes_is_not_the_all_clear() {
        let ok = Item {
            name: "redis".into(),
            ok: true,
            ..Item::default()
        };
        let root = Item {
            name: "disk-full".into(),
            ok: false,
            ..Item::default()
        };
        assert_eq!(closing(&[ok], None).0, 0);
        let ok = Item {
            name: "redis".into(),
            ok: true,
            ..Item::default()
        };
        let (code, line) = closing(&[ok, root], None);
        assert_eq!(code, 1);
        assert!(
            line.contains("1 MISSING that no package installs"),
            "{line}"
        );
    }
}
