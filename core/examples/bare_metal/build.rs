//! Puts `link.x` where the linker finds it (`-Tlink.x` in `.cargo/config.toml`).
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-search={dir}");
    println!("cargo:rerun-if-changed=link.x");
}
