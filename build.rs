//! Builds native/clockshim.c, lockcheck's clock interposer, into a shared object
//! that the binary embeds (include_bytes!) and writes into each run directory:
//! an LD_PRELOAD library must be a file, and shipping it inside the binary keeps
//! `lockcheck` a single file to install. native/clockset.c, the writer of a clock
//! page on another host (the ssh runtime copies both there), likewise.
//!
//! It also records the commit the binary is built from and whether the sources
//! differed from it, for the audit's scorecard to say where it came from
//! (`audit::provenance`): LOCKCHECK_GIT_COMMIT and LOCKCHECK_GIT_TREE.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is made of: a change here makes a scorecard's tree "dirty".
const SOURCES: [&str; 7] = [
    "src",
    "crates",
    "native",
    "clients",
    "build.rs",
    "Cargo.toml",
    "Cargo.lock",
];

fn main() {
    git_provenance();
    for dep in [
        "native/clockpage.h",
        "native/clockshim.c",
        "native/clockset.c",
    ] {
        println!("cargo:rerun-if-changed={dep}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The cc crate finds the same C compiler (and honours CC) as any C build;
    // we only need it as a linker driver for a shared object, which cc::Build
    // itself does not produce.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    compile(
        &compiler,
        "native/clockshim.c",
        &["-shared", "-fPIC"],
        &out.join("libclockshim.so"),
        &["-ldl"],
    );
    compile(
        &compiler,
        "native/clockset.c",
        &[],
        &out.join("lockcheck-clockset"),
        &[],
    );
}

fn compile(compiler: &cc::Tool, src: &str, kind: &[&str], out: &Path, libs: &[&str]) {
    let status = compiler
        .to_command()
        .args(kind)
        .args(["-O2", "-Wall", "-Wextra", "-o"])
        .arg(out)
        .arg(src)
        .args(libs)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("compiling {src} failed ({s}); a C compiler (gcc or clang) is needed"),
        Err(e) => panic!("cannot run the C compiler for {src}: {e}"),
    }
}

/// `git rev-parse HEAD` and whether SOURCES differ from it (untracked files
/// among them included), or "unknown" for both outside a git checkout of this
/// crate. Re-run when HEAD, its branch, the index or any source changes, so
/// that the tree is never said to be clean after an edit.
fn git_provenance() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
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
        println!("cargo:rerun-if-changed={source}");
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
