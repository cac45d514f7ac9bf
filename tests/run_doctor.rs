//! `lockcheck doctor`: what this machine can run, and how to install what is missing.

use serde_json::Value;
use std::process::Command;

fn doctor(env: &[(&str, &str)]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["doctor", "--json"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap();
    (out.status.code().unwrap_or(-1), json)
}

fn item<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {json}"))
}

#[test]
fn doctor_finds_the_installed_servers_with_their_versions() {
    let (code, json) = doctor(&[]);
    assert_eq!(code, 0, "{json}");
    for name in ["redis", "redlock", "etcd"] {
        let i = item(&json, name);
        assert_eq!(i["ok"], true, "{i}");
        let detail = i["detail"].as_str().unwrap();
        assert!(
            detail.chars().any(|c| c.is_ascii_digit()) && detail.contains('.'),
            "a version: {detail}"
        );
    }
    assert_eq!(item(&json, "pause")["ok"], true);
    assert!(json["install"].is_null());
}

#[test]
fn doctor_names_the_package_that_installs_a_missing_server() {
    let (code, json) = doctor(&[("LOCKCHECK_ETCD", "/nonexistent/etcd")]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(item(&json, "etcd")["ok"], false);
    assert_eq!(item(&json, "redis")["ok"], true);
    let install = json["install"].as_str().unwrap();
    assert!(install.contains("apt-get install etcd-server"), "{install}");
}

#[test]
fn doctor_names_the_tools_a_fault_and_a_runtime_run() {
    // A PATH with neither strace (the fsync stall) nor ssh (the ssh runtime) on it.
    let empty = tempfile::tempdir().unwrap();
    let (code, json) = doctor(&[("PATH", empty.path().to_str().unwrap())]);
    assert_eq!(code, 1, "{json}");
    let stall = item(&json, "fsync stall");
    assert_eq!(stall["ok"], false, "{stall}");
    assert!(
        stall["detail"].as_str().unwrap().contains("strace"),
        "{stall}"
    );
    assert_eq!(item(&json, "ssh")["ok"], false);
    let install = json["install"].as_str().unwrap();
    assert!(
        install.contains("strace") && install.contains("openssh-client"),
        "{install}"
    );
    // With this machine's PATH both are here.
    let (_, json) = doctor(&[]);
    assert_eq!(item(&json, "fsync stall")["ok"], true);
    assert_eq!(item(&json, "ssh")["ok"], true);
}

/// The faults' lines come from each kind's own `requires`, in the catalogue's
/// order: disk-full's says what it needs, and is ok exactly when this runs as
/// root (a tmpfs mount); the pause-node methods keep their lines.
#[test]
fn doctor_lists_what_each_fault_kind_needs_disk_full_root_and_the_local_runtime() {
    let (_, json) = doctor(&[]);
    let disk = item(&json, "disk-full");
    assert_eq!(disk["area"], "fault", "{disk}");
    assert_eq!(disk["ok"], nix::unistd::geteuid().is_root(), "{disk}");
    let detail = disk["detail"].as_str().unwrap();
    assert!(
        detail.contains("needs root and the local runtime"),
        "{detail}"
    );
    let faults: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["area"] == "fault")
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        faults,
        [
            "pause",
            "freezer",
            "fsync stall",
            "partition-nodes",
            "disk-full"
        ]
    );
}
