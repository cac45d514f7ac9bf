//! Records the commit lockcheck is built from and whether the sources differed
//! from it, for the audit's scorecard to say where it came from
//! (`provenance`): LOCKCHECK_GIT_COMMIT and LOCKCHECK_GIT_TREE. The sources are
//! the whole workspace's, from its root, two folders up from this crate's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is made of, from the workspace's root: a change here makes a
/// scorecard's tree "dirty".
const SOURCES: [&str; 5] = ["src", "crates", "clients", "Cargo.toml", "Cargo.lock"];

fn main() {
    git_provenance();
}

/// `git rev-parse HEAD` and whether SOURCES differ from it (untracked files
/// among them included), or "unknown" for both outside a git checkout of this
/// workspace. Re-run when HEAD, its branch, the index or any source changes, so
/// that the tree is never said to be clean after an edit.
fn git_provenance() {
    let crate_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    // crates/lockcheck-audit: the workspace's root is two folders up.
    let manifest = crate_dir.join("../..");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(&manifest)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // A crate unpacked inside some other repository is not built from its commit.
    let ours = git(&["rev-parse", "--show-toplevel"])
        .and_then(|top| Path::new(&top).canonicalize().ok())
        .is_some_and(|top| manifest.canonicalize().is_ok_and(|m| m == top));
    let commit = ours.then(|| git(&["rev-parse", "HEAD"])).flatten();
    let tree = commit.as_ref().and_then(|_| {
        // Without an index lock: refreshing the index (as `git status` does just
        // after a commit) would make it newer than this run, and cargo would run
        // this again, and compile lockcheck again, on the next build.
        let mut args = vec!["--no-optional-locks", "status", "--porcelain", "--"];
        args.extend(SOURCES);
        git(&args).map(|changes| if changes.is_empty() { "clean" } else { "dirty" })
    });
    println!(
        "cargo:rustc-env=LOCKCHECK_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo:rustc-env=LOCKCHECK_GIT_TREE={}",
        tree.unwrap_or("unknown")
    );
    for source in SOURCES {
        println!("cargo:rerun-if-changed={}", manifest.join(source).display());
    }
    if ours {
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        for name in ["HEAD", "index", "packed-refs"]
            .into_iter()
            .chain(branch.as_deref())
        {
            // A path that does not exist would make cargo run this every build.
            let path = git(&["rev-parse", "--git-path", name]).map(|p| manifest.join(p));
            if let Some(p) = path.filter(|p| p.exists()) {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
