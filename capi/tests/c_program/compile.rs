//! How the C programs are built and run: the system compilers, the headers, and the library cargo
//! built for this test (shared, under its SONAME, or static).

use super::*;
use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;

pub(crate) fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The SONAME `build.rs` gives the shared library.
pub(crate) fn soname() -> String {
    let (major, minor) = (env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
    let abi = if major == "0" { format!("0.{minor}") } else { major.to_owned() };
    format!("libhostcall_capi.so.{abi}")
}

/// A directory holding only the fresh shared library under its SONAME (the rpath of the programs).
pub(crate) fn soname_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = out_dir().join("soname");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(library_dir().join("libhostcall_capi.so"), dir.join(soname())).unwrap();
        dir
    })
}

pub(crate) fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// The directory holding `libhostcall_capi.{so,a}` built for this test run.
pub(crate) fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        if dir.join("libhostcall_capi.a").exists() && dir.join("libhostcall_capi.so").exists() {
            return dir.to_path_buf();
        }
    }
    panic!("libhostcall_capi.a / libhostcall_capi.so not found next to {}", exe.display());
}

/// Where compiled C programs go (inside the target directory): one directory per test process.
/// nextest runs each test in a process of its own, so a shared path would let one process's
/// linker rewrite a program (or the SONAME copy of the library) while another runs it ("Text
/// file busy", or a torn file).
pub(crate) fn out_dir() -> PathBuf {
    let dir = library_dir().join("hostcall-capi-c-tests").join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn compiler(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

pub(crate) fn run_checked(command: &mut Command) -> Output {
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[derive(Clone, Copy)]
pub(crate) enum Link {
    Shared,
    Static,
}

/// Compiles `source` (C11 or C++11; a name in `tests/c/`, or a path) and links it with the
/// library; once per test process.
pub(crate) fn build(source: &str, link: Link) -> PathBuf {
    build_as(source, link, if source.ends_with(".cpp") { "-std=c++11" } else { "-std=c11" })
}

/// [`build`] with the language standard given (`-std=...`).
pub(crate) fn build_as(source: &str, link: Link, std: &str) -> PathBuf {
    let cpp = source.ends_with(".cpp");
    let name = format!(
        "{}-{}",
        Path::new(source).file_stem().unwrap().to_str().unwrap(),
        if let Link::Shared = link { "shared" } else { "static" }
    );
    let exe = out_dir().join(name);
    let mut command = Command::new(if cpp { compiler("CXX", "c++") } else { compiler("CC", "cc") });
    command
        .arg(std)
        .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", "-g"])
        .arg("-I")
        .arg(include_dir())
        .arg(sources().join(source))
        .arg("-o")
        .arg(&exe);
    let lib = library_dir();
    match link {
        Link::Shared => {
            command.arg(format!("-L{}", lib.display())).arg("-lhostcall_capi");
            command.arg(format!("-Wl,-rpath,{}", soname_dir().display()));
        }
        Link::Static => {
            // The native libraries the static library needs, as capi/README.md lists them (from
            // `cargo rustc -p hostcall-capi --crate-type staticlib -- --print native-static-libs`).
            command.arg(lib.join("libhostcall_capi.a"));
            command.args(["-ldl", "-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-lc"]);
        }
    }
    command.arg("-pthread");
    run_checked(&mut command);
    exe
}

pub(crate) fn c_test(link: Link) -> &'static Path {
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    static STATIC: OnceLock<PathBuf> = OnceLock::new();
    let cell = if let Link::Shared = link { &SHARED } else { &STATIC };
    cell.get_or_init(|| build("hostcall_test.c", link))
}

pub(crate) fn run_mode(exe: &Path, mode: &str) -> String {
    let output = run_checked(Command::new(exe).arg(mode));
    String::from_utf8(output.stdout).unwrap()
}
