//! The wait policy from C: `capi/tests/c/wait_test.c` (presets, explicit times, refusals, a
//! policy reaching the running listener) compiled against the shared library as `c_program.rs`
//! builds its programs.

use std::path::Path;
use std::process::Command;

#[path = "c_program/compile.rs"]
#[allow(dead_code)] // this test uses only part of the build steps
mod compile;

use compile::{build, run_mode, Link};

#[test]
fn the_c_program_sets_and_reads_the_wait_policy() {
    let out = run_mode(&build("wait_test.c", Link::Shared), "");
    assert!(out.contains("wait_test: ok"), "{out}");
}
