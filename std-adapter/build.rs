//! Tells the tests what of ROCm this machine has, so that a test needing something absent is
//! reported ignored with the reason, and runs (and fails when broken) wherever it is present:
//!
//! - `cfg(hostcall_rocm_headers)`: ROCm's C headers (`/usr/include/hsa/hsa.h`, Debian's
//!   `libhsa-runtime-dev`);
//! - `cfg(hostcall_hsa_library)`: the HSA runtime library (`libhsa-runtime64.so.1`, Debian's
//!   `libhsa-runtime64-1`) in one of the usual library folders.
//!
//! - `cfg(hostcall_workspace)`: the crate is built inside the repository, beside the other
//!   crates' sources (for `tests/public_items.rs`).
//!
//! `.ci/install-deps` installs both, so `./run-tests` runs every such test. The library does not
//! use these cfgs. Installing either after a first build: `cargo clean -p hostcall`.

use std::path::Path;

const HEADER: &str = "/usr/include/hsa/hsa.h";
const LIBRARY: &str = "libhsa-runtime64.so.1";
const LIBRARY_DIRS: [&str; 6] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/opt/rocm/lib",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(hostcall_rocm_headers, hostcall_hsa_library, hostcall_workspace)");
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    if Path::new(&manifest_dir).join("../core/src/lib.rs").exists() {
        println!("cargo:rustc-cfg=hostcall_workspace");
    }
    if Path::new(HEADER).exists() {
        println!("cargo:rustc-cfg=hostcall_rocm_headers");
    }
    if LIBRARY_DIRS.iter().any(|dir| Path::new(dir).join(LIBRARY).exists()) {
        println!("cargo:rustc-cfg=hostcall_hsa_library");
    }
}
