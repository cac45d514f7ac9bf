//! `lockcheck doctor`: what this machine can run — backends (server found, version),
//! faults and runtimes — and the command that installs what is missing.

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
#[derive(Debug, serde::Serialize)]
struct Item {
    area: &'static str,
    name: String,
    ok: bool,
    /// The version or what was found; why not, when missing.
    detail: String,
    /// For a backend: where its fencing token comes from, and its known break.
    #[serde(skip_serializing_if = "Option::is_none")]
    about: Option<String>,
    /// The Debian package that provides it, when missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    install: Option<&'static str>,
}

pub fn main(args: Args) -> Result<u8> {
    let mut items = Vec::new();
    for a in cluster::available_backends() {
        // The name a workload's `backend.kind` uses.
        let name = serde_json::to_value(a.kind)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        let about = Some(format!(
            "token: {}; known break: {}",
            a.kind.token().unwrap_or("none"),
            a.kind.known_break()
        ));
        items.push(match &a.found {
            Ok(path) => Item {
                area: "backend",
                name,
                ok: true,
                detail: format!(
                    "{} {} ({})",
                    a.binary.name,
                    version_of(path),
                    path.display()
                ),
                install: None,
                about: about.clone(),
            },
            Err(e) => Item {
                area: "backend",
                name,
                ok: false,
                detail: e.to_string(),
                install: Some(a.binary.package),
                about,
            },
        });
    }
    // The pause signals the run's own children: it needs nothing but Linux.
    items.push(Item {
        area: "fault",
        name: "pause".into(),
        ok: true,
        detail: "SIGSTOP / SIGCONT of client processes".into(),
        install: None,
        about: None,
    });
    // `pause-node` with `method = "freezer"` on local nodes (containers are
    // paused by Docker): refused at load where this says why.
    let freezer = cluster::freezer::unavailable();
    items.push(Item {
        area: "fault",
        name: "freezer".into(),
        ok: freezer.is_none(),
        detail: freezer.unwrap_or_else(|| {
            "the cgroup freezer for pause-node of local nodes (method = \"freezer\")".into()
        }),
        install: None,
        about: None,
    });
    items.push(Item {
        area: "runtime",
        name: "local processes".into(),
        ok: true,
        detail: "servers run as local processes on loopback (the default)".into(),
        install: None,
        about: None,
    });
    let (ok, detail) = crate::cli::image::doctor_line();
    items.push(Item {
        area: "runtime",
        name: "docker".into(),
        ok,
        detail,
        install: (!ok).then_some("docker.io"),
        about: None,
    });
    items.push(Item {
        area: "runtime",
        name: "external".into(),
        ok: true,
        detail: "servers someone else runs, named by backend.endpoints".into(),
        install: None,
        about: None,
    });
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
        let mut area = "";
        for i in &items {
            if i.area != area {
                area = i.area;
                println!("{area}s:");
            }
            let mark = if i.ok { "ok     " } else { "MISSING" };
            println!("  {mark} {:<17} {}", i.name, i.detail);
            if let Some(about) = &i.about {
                println!("  {:<25} {about}", "");
            }
        }
        match &install {
            Some(cmd) => println!("to install what is missing: {cmd}"),
            None => println!("everything lockcheck knows how to run is here"),
        }
    }
    Ok(u8::from(install.is_some()))
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
