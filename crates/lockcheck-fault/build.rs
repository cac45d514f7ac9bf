//! Builds native/clockshim.c, lockcheck's clock interposer, into a shared object
//! that the fault crate embeds (include_bytes!) and writes into each run directory:
//! an LD_PRELOAD library must be a file, and shipping it inside the binary keeps
//! `lockcheck` a single file to install. native/clockset.c, the writer of a clock
//! page on another host (the ssh runtime copies both there), likewise.

use std::path::{Path, PathBuf};

fn main() {
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
