//! `lockcheck image build`: makes `lockcheck/host:latest`, a Docker image with no
//! programs of its own that runs this machine's installed servers (Redis, etcd,
//! ZooKeeper's JVM, ...) from read-only mounts, for the docker runtime on machines
//! that cannot pull the official images. The image is imported from a small
//! tarball (a root with /etc/passwd, /tmp and the usr-merge links) through the
//! Engine API; its `lockcheck.host-mounts` label lists what the runtime mounts.
//! Idempotent: an image already built with the same mounts is kept.

use crate::cluster::docker::{self, HOST_IMAGE, MOUNTS_LABEL};
use anyhow::{Context, Result};
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;
use std::path::Path;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Build lockcheck/host:latest from this machine's installed servers.
    Build {
        /// Build it again even if it is there.
        #[arg(long)]
        force: bool,
    },
}

pub fn main(args: Args) -> Result<u8> {
    let Command::Build { force } = args.command;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let built = rt.block_on(build(force)).map_err(|e| {
        anyhow::anyhow!(crate::cli::Exit {
            code: crate::cli::EXIT_ENVIRONMENT,
            message: format!("{e:#}"),
        })
    })?;
    println!(
        "{HOST_IMAGE}: {} (runs this machine's {})",
        if built { "built" } else { "already there" },
        host_layout().mounts.join(", ")
    );
    Ok(0)
}

/// What the image takes from this machine.
struct Layout {
    /// Directories mounted read-only at the same path.
    mounts: Vec<String>,
    /// Root entries that are links on this machine (usr-merge: /bin -> usr/bin).
    links: Vec<(String, String)>,
}

/// /usr always; /bin, /lib, /lib64, /sbin as links where this machine has merged
/// them into /usr, else mounted; the /etc directories installed programs follow
/// links into (alternatives, the JVM's configuration).
fn host_layout() -> Layout {
    let mut mounts = vec!["/usr".to_string()];
    let mut links = Vec::new();
    for top in ["bin", "lib", "lib64", "sbin"] {
        let p = Path::new("/").join(top);
        match std::fs::read_link(&p) {
            Ok(target) => links.push((top.to_string(), target.display().to_string())),
            Err(_) if p.is_dir() => mounts.push(p.display().to_string()),
            Err(_) => {}
        }
    }
    // Debian's alternatives for every program; each backend's own on top.
    let mut etc = vec!["alternatives"];
    for kind in crate::backend::BackendKind::ALL {
        for d in crate::cluster::recipe(kind).host_etc() {
            if !etc.contains(d) {
                etc.push(d);
            }
        }
    }
    mounts.extend(
        etc.iter()
            .map(|d| format!("/etc/{d}"))
            .filter(|p| Path::new(p).is_dir()),
    );
    Layout { mounts, links }
}

/// Builds the image unless it is there with the same mounts (or `force`).
/// Returns whether it built.
pub async fn build(force: bool) -> Result<bool> {
    let docker = docker::connect().await?;
    let layout = host_layout();
    let label = layout.mounts.join(":");
    if !force {
        if let Ok(have) = docker::image_mounts(&docker, HOST_IMAGE).await {
            if have.join(":") == label {
                return Ok(false);
            }
        }
    }
    let tar = root_tarball(&layout)?;
    let (repo, tag) = HOST_IMAGE.split_once(':').expect("the name has a tag");
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .changes(vec![
            format!("LABEL {MOUNTS_LABEL}={label}"),
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            "WORKDIR /tmp".into(),
        ])
        .build();
    let mut progress = docker.create_image(
        Some(options),
        Some(bollard::body_full(bytes::Bytes::from(tar))),
        None,
    );
    while let Some(step) = progress.next().await {
        step.context("importing the image")?;
    }
    Ok(true)
}

/// A tarball of the image's root: the directories programs expect to exist, the
/// usr-merge links, and the user and group root and nobody.
fn root_tarball(layout: &Layout) -> Result<Vec<u8>> {
    let mut tar = Vec::new();
    for dir in [
        "etc", "tmp", "var", "var/tmp", "run", "root", "data", "proc", "sys", "dev",
    ] {
        let mode = if dir.ends_with("tmp") { 0o1777 } else { 0o755 };
        tar_entry(&mut tar, &format!("{dir}/"), b'5', mode, b"", "")?;
    }
    for m in &layout.mounts {
        let rel = m.trim_start_matches('/');
        // Parents first (etc/ is above); the mount point itself.
        tar_entry(&mut tar, &format!("{rel}/"), b'5', 0o755, b"", "")?;
    }
    for (name, target) in &layout.links {
        tar_entry(&mut tar, name, b'2', 0o777, b"", target)?;
    }
    let files: [(&str, &[u8]); 4] = [
        (
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        ),
        ("etc/group", b"root:x:0:\nnogroup:x:65534:\n"),
        ("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n"),
        ("etc/os-release", b"NAME=\"lockcheck host image\"\nID=lockcheck\n"),
    ];
    for (name, data) in files {
        tar_entry(&mut tar, name, b'0', 0o644, data, "")?;
    }
    // Two empty blocks end the archive.
    tar.extend_from_slice(&[0u8; 1024]);
    Ok(tar)
}

/// Appends one ustar entry: a directory (`5`), a symbolic link (`2`) or a file (`0`).
fn tar_entry(
    tar: &mut Vec<u8>,
    name: &str,
    kind: u8,
    mode: u32,
    data: &[u8],
    link: &str,
) -> Result<()> {
    anyhow::ensure!(
        name.len() < 100 && link.len() < 100,
        "tar name too long: {name}"
    );
    let mut h = [0u8; 512];
    let put =
        |h: &mut [u8; 512], at: usize, bytes: &[u8]| h[at..at + bytes.len()].copy_from_slice(bytes);
    let octal = |width: usize, v: u64| format!("{v:0w$o}\0", w = width - 1).into_bytes();
    put(&mut h, 0, name.as_bytes());
    put(&mut h, 100, &octal(8, u64::from(mode)));
    put(&mut h, 108, &octal(8, 0));
    put(&mut h, 116, &octal(8, 0));
    put(&mut h, 124, &octal(12, data.len() as u64));
    put(&mut h, 136, &octal(12, 0));
    h[156] = kind;
    put(&mut h, 157, link.as_bytes());
    put(&mut h, 257, b"ustar\x0000");
    // The checksum is computed with its own field as spaces.
    put(&mut h, 148, b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    tar.extend_from_slice(&h);
    tar.extend_from_slice(data);
    let pad = (512 - data.len() % 512) % 512;
    tar.extend_from_slice(&vec![0u8; pad]);
    Ok(())
}

/// The docker runtime's line in `lockcheck doctor`: whether the Engine answers,
/// and for each image the runtime uses by default, the backends that use it and
/// whether it is here.
pub fn doctor_line() -> (bool, String) {
    match images_present() {
        Err(e) => (false, format!("{e:#}")),
        Ok(images) => {
            let listed: Vec<String> = images
                .iter()
                .map(|(image, kinds, here)| {
                    format!(
                        "{image} ({}): {}",
                        kinds.join(", "),
                        if *here { "here" } else { "not here" }
                    )
                })
                .collect();
            let host_here = images.iter().any(|(n, _, h)| n == HOST_IMAGE && *h);
            let hint = if host_here {
                String::new()
            } else {
                "; `lockcheck image build` makes lockcheck/host:latest from this machine's servers"
                    .into()
            };
            (
                true,
                format!("Docker Engine answers; images: {}{hint}", listed.join("; ")),
            )
        }
    }
}

/// Each image the docker runtime uses by default (the host image always), the
/// backends that use it by their workload names, and whether it is here. `Err`
/// when Docker cannot be reached.
fn images_present() -> Result<Vec<(String, Vec<String>, bool)>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let docker = docker::connect().await?;
        let mut images: Vec<(String, Vec<String>)> = Vec::new();
        // A backend the docker runtime refuses uses no image.
        for kind in crate::backend::BackendKind::ALL
            .into_iter()
            .filter(|&k| docker::refuses(k).is_none())
        {
            let image = docker::default_image(kind);
            let name = kind.name().to_string();
            match images.iter_mut().find(|(i, _)| i == image) {
                Some((_, kinds)) => kinds.push(name),
                None => images.push((image.to_string(), vec![name])),
            }
        }
        if !images.iter().any(|(i, _)| i == HOST_IMAGE) {
            images.push((HOST_IMAGE.to_string(), Vec::new()));
        }
        let mut out = Vec::new();
        for (image, kinds) in images {
            let here = docker.inspect_image(&image).await.is_ok();
            out.push((image, kinds, here));
        }
        Ok(out)
    })
}
