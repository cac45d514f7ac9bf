//! Builds native/clockshim.c, lockcheck's clock interposer, into a shared object
//! that the binary embeds (include_bytes!) and writes into each run directory:
//! an LD_PRELOAD library must be a file, and shipping it inside the binary keeps
//! `lockcheck` a single file to install.

use std::path::PathBuf;

fn main() {
    let src = "native/clockshim.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("libclockshim.so");
    // The cc crate finds the same C compiler (and honours CC) as any C build;
    // we only need it as a linker driver for a shared object, which cc::Build
    // itself does not produce.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o"])
        .arg(&so)
        .arg(src)
        .arg("-ldl")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("compiling {src} failed ({s}); a C compiler (gcc or clang) is needed"),
        Err(e) => panic!("cannot run the C compiler for {src}: {e}"),
    }
}
