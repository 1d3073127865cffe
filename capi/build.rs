//! Gives the shared library a SONAME on ELF targets, so that programs linked against it record
//! the ABI they were linked with, not the file name `libhostcall_capi.so`.
//!
//! The SONAME follows Cargo's compatibility rule: `libhostcall_capi.so.MAJOR` from 1.0 on, and
//! `libhostcall_capi.so.0.MINOR` before (where a minor release may break the ABI). capi/README.md's
//! install instructions and `capi/install.sh` make the file of that name; `tests/c_program.rs`
//! checks that the library carries it.
//!
//! Also sets `cfg(hostcall_workspace)` where the crate is built inside the repository (the
//! workspace README beside it), for the test that builds the README's C snippet.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(hostcall_workspace)");
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    if std::path::Path::new(&manifest_dir).join("../README.md").exists() {
        println!("cargo:rustc-cfg=hostcall_workspace");
    }
    let elf = matches!(
        std::env::var("CARGO_CFG_TARGET_OS").as_deref(),
        Ok("linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "solaris" | "illumos")
    );
    if elf {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap();
        let abi = if major == "0" { format!("0.{minor}") } else { major };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhostcall_capi.so.{abi}");
    }
}
