//! The guides name files and items of this repository; this test fails when one of those names
//! no longer exists, so a rename cannot leave a guide pointing at nothing.
//!
//! It reads the Markdown guides ([`GUIDES`]) and checks every inline code span (`` `...` ``)
//! outside fenced blocks that has one of two shapes:
//!
//! - **a file path**: no spaces, ending in `.rs`, `.h`, `.cuh`, `.cu`, `.c`, `.sh` or `.toml`
//!   (`foo/bar.rs`, `hostcall.h`). It passes when a file of the tree (`.git` and `target`
//!   excepted) has that path or ends with `/` and that path, so a guide may name a file relative
//!   to the folder it is describing (`layout.rs` in a code map of `core/src/stack/`).
//! - **a Rust path**: identifiers joined by `::`, optionally followed by `(...)` or `<...>`
//!   (`hostcall::Listener`, `phase::Host::drain`, `Listener::start()`). Each step is checked
//!   against the crates' sources, read as text (grep-level, rustfmt's layout):
//!   - a step into a module (`phase::` ...) needs a module of that name (a file `phase.rs`, a
//!     folder `phase/` or a `mod phase`), and the next name must be declared in it (an item, a
//!     `pub use` of that name, or a module below it); `hostcall::`, `hostcall_core::` and
//!     `crate::` are the crates' roots, where any item of the crate counts;
//!   - a step into a type or trait (a capitalised name: `Host::drain`) needs the next name to be
//!     declared in an `impl` or `trait` block of that name (a method, constant or associated
//!     type), or to be one of its enum variants or fields (types of one name in several modules,
//!     like each protocol's `Host`, count as one: `phase::Host::x` passes if any `Host` has `x`);
//!   - the first name must be declared somewhere in the sources.
//!
//!   A path that fails at a name the Rust sources declare nowhere still passes when every one of
//!   its names is a word of the C and CUDA sources ([`C_SOURCES`]): the guides name C++ items the same way
//!   (`hostcall::tuning`, `variants::pipelined`), and for those the check is only that the words
//!   are there.
//!
//! Two more checks of the same kind: the Rust items the C and CUDA headers name in comments as
//! ordering partners (`phase::Host::serve_packet`: every `stack|phase|line|rpc::Type::item`
//! there), and the count of ignored CUDA tests that `docs/gpu.md` gives.
//!
//! Names of other projects are allowed by [`ALLOWED`]: a span equal to one of its entries, or
//! starting with one that ends in `::`, is not checked (LLVM's `rpc_server.h`, `std::`, ...).
//! Add to it only names of other projects; a name of ours that fails is a stale guide.

#![cfg(hostcall_workspace)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "docs_names/declared.rs"]
mod declared;
use declared::{check_path, read_sources};

/// The guides checked, relative to the repository root.
const GUIDES: [&str; 11] = [
    "README.md",
    "PROTOCOL.md",
    "docs/guide.md",
    "docs/gpu.md",
    "docs/performance.md",
    "docs/cache-lines.md",
    "capi/README.md",
    "core/README.md",
    "std-adapter/README.md",
    "fuzz/README.md",
    "std-adapter/hsa-sys/README.md",
];

/// The crates' sources whose items a guide may name.
const SOURCES: [&str; 6] = [
    "core/src",
    "std-adapter/src",
    "std-adapter/hsa-sys/src",
    "capi/src",
    "fuzz-targets/src",
    "std-adapter/examples",
];

/// The C and CUDA sources whose names a guide may give as `a::b`.
const C_SOURCES: [&str; 2] = ["include", "std-adapter/examples/cuda"];

/// The C and CUDA source files (`.h`, `.cuh`, `.cu`) under [`C_SOURCES`], each with its text.
fn c_sources(root: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for dir in C_SOURCES {
        walk(&root.join(dir), &mut files);
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "h" || e == "cuh" || e == "cu"));
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file, text)
        })
        .collect()
}

/// Every identifier-like word of the C and CUDA sources.
fn c_words(root: &Path) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for (_, text) in c_sources(root) {
        words.extend(
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| is_ident(w))
                .map(str::to_owned),
        );
    }
    words
}

/// Names of other projects (and of the standard library), not checked.
const ALLOWED: &[&str] = &[
    // The Rust standard library and other crates.
    "std::",
    "core::",
    "alloc::",
    "portable_atomic::",
    "loom::",
    "libc::",
    "cargo ",
    "u8::",
    "u16::",
    "u32::",
    "u64::",
    "usize::",
    // LLVM libc's RPC (llvm-project `libc/shared/rpc.h`, `rpc_server.h`) and its offload plugins.
    "rpc_server.h",
    "libc/shared/rpc.h",
    "rpc.h",
    "rpc_opcodes.h",
    "rpc_util.h",
    "__llvm_libc::",
    "LIBC_NAMESPACE::",
    // ROCm's device library and runtime.
    "amd_hostcall.h",
    "hsa.h",
    "hsa_ext_amd.h",
    "hsa_ven_amd_loader.h",
    "amd_hsa_signal.h",
    "hostcall.cpp",
    "devicelibs.h",
    "ockl.h",
    "amd::",
    // CUDA.
    "cuda.h",
    "cuda_runtime.h",
    "cuda::",
    "std.h",
    // CMake's names for the installed library (`capi/cmake/hostcallConfig.cmake.in`).
    "hostcall::hostcall",
    "hostcall::hostcall_static",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != ".git" && name != "target" {
                walk(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// The inline code spans of a Markdown text outside fenced blocks, with their line numbers.
fn code_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for (number, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            spans.push((number + 1, span.to_owned()));
        }
        // An odd last part is an unclosed span: ignored.
    }
    spans
}

fn is_file_path(span: &str) -> bool {
    let exts = [".rs", ".h", ".cuh", ".cu", ".c", ".sh", ".toml"];
    !span.contains(' ')
        && !span.contains('*')
        && !span.contains('{')
        && !span.contains('$')
        && exts.iter().any(|ext| span.ends_with(ext) && span.len() > ext.len())
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The identifiers of a Rust path span (`a::B::c(x)` is `[a, B, c]`), or `None` if it is not one.
fn rust_path(span: &str) -> Option<Vec<&str>> {
    let path = span.split(['(', '<']).next().unwrap();
    let rest = &span[path.len()..];
    if !path.contains("::") || !(rest.is_empty() || rest.ends_with(')') || rest.ends_with('>')) {
        return None;
    }
    let steps: Vec<&str> = path.split("::").collect();
    steps.iter().all(|step| is_ident(step)).then_some(steps)
}

/// Every name the guides give that is not found, as `guide:line: span: why`.
fn stale_names(root: &Path) -> Vec<String> {
    let mut tree = Vec::new();
    walk(root, &mut tree);
    let tree: Vec<String> = tree
        .iter()
        .map(|path| path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"))
        .collect();
    let declared = read_sources(root);
    let c_words = c_words(root);
    let mut stale = Vec::new();
    for guide in GUIDES {
        let text = std::fs::read_to_string(root.join(guide)).unwrap();
        for (line, span) in code_spans(&text) {
            let span = span.trim();
            if ALLOWED.iter().any(|allowed| {
                span == *allowed || (allowed.ends_with([':', ' ']) && span.starts_with(allowed))
            }) {
                continue;
            }
            if is_file_path(span) {
                let relative = span.trim_start_matches("./");
                let suffix = format!("/{relative}");
                if !tree.iter().any(|file| file == relative || file.ends_with(&suffix)) {
                    stale.push(format!("{guide}:{line}: `{span}`: no such file in the tree"));
                }
            } else if let Some(steps) = rust_path(span) {
                let Some((failed, why)) = check_path(&declared, &steps) else { continue };
                let rust_name = declared.names.contains(failed) || declared.modules.contains_key(failed);
                if !rust_name && steps.iter().all(|step| c_words.contains(*step)) {
                    continue;
                }
                {
                    stale.push(format!("{guide}:{line}: `{span}`: {why}"));
                }
            }
        }
    }
    stale
}

#[test]
fn every_name_a_guide_gives_exists() {
    let stale = stale_names(&root());
    assert!(
        stale.is_empty(),
        "names in the guides that name nothing (rename them, or add another project's name to ALLOWED):\n{}",
        stale.join("\n")
    );
}

#[test]
fn a_renamed_item_is_found_stale() {
    let declared = read_sources(&root());
    assert_eq!(check_path(&declared, &["phase", "Host", "drain"]), None);
    assert!(check_path(&declared, &["phase", "View", "drain"]).is_some());
    assert!(check_path(&declared, &["phase", "Hots"]).is_some());
    assert!(check_path(&declared, &["hostcall", "Listener", "start"]).is_none());
    assert!(check_path(&declared, &["hostcall", "Listener", "begin"]).is_some());
}

/// `docs/gpu.md` says how many CUDA tests a run without a GPU reports ignored: the count of
/// `#[ignore` attributes in `tests/cuda.rs` and `tests/cuda/`.
#[test]
fn gpu_guide_counts_the_ignored_cuda_tests() {
    let root = root();
    let mut files = vec![root.join("std-adapter/tests/cuda.rs")];
    walk(&root.join("std-adapter/tests/cuda"), &mut files);
    let ignored: usize = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter(|l| l.trim_start().starts_with("#[ignore"))
                .count()
        })
        .sum();
    let guide = std::fs::read_to_string(root.join("docs/gpu.md")).unwrap();
    let line = guide
        .lines()
        .find(|l| l.contains("--test cuda ") && l.contains("ignored without a GPU"))
        .expect("the line in docs/gpu.md");
    let said: usize = line.split('#').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(said, ignored, "docs/gpu.md: {line}");
}

/// The C and CUDA headers name Rust items in their comments as ordering partners
/// (`phase::Host::serve_packet`): every `module::Type::item` there whose module is one of the
/// core's protocol modules must exist, by the rule of the guides' Rust paths.
#[test]
fn c_comments_name_rust_items_that_exist() {
    let root = root();
    let declared = read_sources(&root);
    let mut stale = Vec::new();
    for (file, text) in c_sources(&root) {
        for (number, line) in text.lines().enumerate() {
            for token in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
                let steps: Vec<&str> = token.trim_matches(':').split("::").collect();
                let protocol_module = ["stack", "phase", "line", "rpc"].contains(&steps[0]);
                let names_a_member =
                    steps.len() >= 3 && steps[1].starts_with(|c: char| c.is_ascii_uppercase());
                if protocol_module && names_a_member && steps.iter().all(|s| is_ident(s)) {
                    if let Some((_, why)) = check_path(&declared, &steps) {
                        stale.push(format!(
                            "{}:{}: `{token}`: {why}",
                            file.strip_prefix(&root).unwrap().display(),
                            number + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(stale.is_empty(), "Rust names in C and CUDA comments that name nothing:\n{}", stale.join("\n"));
}
