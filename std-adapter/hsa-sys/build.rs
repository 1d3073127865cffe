//! Sets `cfg(hostcall_rocm_headers)` where ROCm's C headers are installed, so that the test that
//! compiles this crate's constants and layouts against them runs there, and is reported ignored
//! (with the reason) elsewhere instead of passing without checking anything. The library itself
//! does not use the cfg. Installing the headers after a first build: `cargo clean -p hsa-sys`.

/// The header the test compiles against (Debian's `libhsa-runtime-dev`; `.ci/install-deps`).
const HEADER: &str = "/usr/include/hsa/hsa.h";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(hostcall_rocm_headers)");
    if std::path::Path::new(HEADER).exists() {
        println!("cargo:rustc-cfg=hostcall_rocm_headers");
    }
}
