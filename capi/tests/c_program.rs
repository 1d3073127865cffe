//! The C ABI from C and C++: `capi/tests/c/hostcall_test.c` and `header_check.cpp` compiled with
//! the system compilers against `capi/include/hostcall.h` (the package's copy of the repository's
//! `include/hostcall.h`) and the library cargo built for this test.
//!
//! Where the library is: `cargo test` builds this package's library with all its crate types
//! (cdylib, staticlib, rlib) in the same `deps` directory as this test executable, so the test
//! finds `libhostcall_capi.so` and `libhostcall_capi.a` next to `current_exe()`, always as fresh as the test.
//!
//! The shared library's SONAME: programs linked with `-lhostcall_capi` record the SONAME
//! (`libhostcall_capi.so.0.MINOR`, see `build.rs`), not the file name, so the loader looks for a file
//! of that name. The test gives it one, a copy of the fresh library in a directory of its own, and
//! points the programs' rpath only there: a library without that SONAME would not be found.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// The build steps and the layout test, beside this file (a test crate's root finds its modules
// through `path`).
#[path = "c_program/compile.rs"]
mod compile;
#[path = "c_program/layout.rs"]
mod layout;

use compile::*;

#[test]
fn the_c_program_runs_the_lifecycle_against_the_shared_library() {
    let out = run_mode(c_test(Link::Shared), "run");
    assert!(out.contains("hostcall_test: ok"), "{out}");
    assert!(out.contains("lanes served: 14040, expected 14040"), "{out}");
}

#[test]
fn the_c_program_runs_the_lifecycle_against_the_static_library() {
    let out = run_mode(c_test(Link::Static), "run");
    assert!(out.contains("hostcall_test: ok"), "{out}");
}

/// The C program enables two buffers, makes calls, leaves a thread calling in a loop, and
/// returns from `main` without disabling: it must exit with 0 promptly. On a quiet machine it
/// takes well under a second; the bound is 3 s so that a loaded machine does not fail it, still far
/// below the 10 s after which the test calls it a hang.
#[test]
fn a_c_program_exits_promptly_with_buffers_still_enabled() {
    let exe = c_test(Link::Shared);
    let started = Instant::now();
    let mut child = Command::new(exe).arg("exit").stdout(Stdio::piped()).spawn().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("the C program hangs at exit");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = started.elapsed();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    eprintln!("the C program exited with {status} after {elapsed:?}");
    assert!(status.success(), "{status}: {out}");
    assert!(out.contains("exiting with two buffers enabled"), "{out}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

/// ROCm's device printf, device malloc and function calls through the C ABI, in both protocols:
/// the C program chunks each lane's printf into the message stream itself, checks each lane's
/// reply (characters printed), DEVMEM's addresses and null failure replies, and FUNCTION_CALL
/// refused before `hostcall_enable_function_calls_unsafe()` and served after; here what reached
/// the program's stdout and stderr is checked line by line.
#[test]
fn the_c_program_uses_the_builtin_services_in_both_protocols() {
    let output = run_checked(Command::new(c_test(Link::Shared)).arg("builtins"));
    let (out, err) = (String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap());
    assert!(out.contains("hostcall_test: ok"), "{out}\n{err}");
    for protocol in ["stack", "phase"] {
        for lane in 0..64usize {
            let tail = "x".repeat(if lane == 7 { 100 } else { lane });
            let line = format!("printf {protocol} lane {lane:2}: {:5.2} {tail}|\n", lane as f64 / 4.0);
            assert_eq!(out.matches(&line).count(), 1, "{line:?} once in:\n{out}");
        }
        let line = format!("printf {protocol} to stderr: -5%\n");
        assert_eq!(err.matches(&line).count(), 1, "{line:?} once in stderr:\n{err}");
        assert!(!out.contains(&line), "stderr's line went to stdout");
    }
}

/// The phase protocol through `hostcall_enable_ex`: sizes and alignments per protocol, every bad
/// option refused with its code, a bitmap passed in (the prefix points at it, claims go through
/// it) and a null one (allocated outside the buffer, freed at disable), both protocols on one
/// listener.
#[test]
fn the_c_program_enables_phase_buffers_with_and_without_a_bitmap() {
    let out = run_mode(c_test(Link::Shared), "phase");
    assert!(out.contains("hostcall_test: ok"), "{out}");
    let per_round: u64 = (0..50u64)
        .map(|c| if c % 3 != 0 { 64 } else { u64::from((0x8000_0000_0000_0001u64 | c << 4).count_ones()) })
        .sum();
    let expected = 2 * per_round + 2 * 8;
    assert!(out.contains(&format!("phase lanes served: {expected}\n")), "{out}");
}

/// `observe_test.c`: a log callback gets the warning of a DEVMEM budget refusal, the stats
/// structs count it by reason, status strings, and the last error cleared by a good call.
#[test]
fn the_c_program_sees_logs_stats_and_status_strings() {
    for link in [Link::Shared, Link::Static] {
        let out = run_mode(&build("observe_test.c", link), "");
        assert!(out.contains("observe_test: ok"), "{out}");
    }
}

/// `log_callback_test.c`, one process per mode (the logger is set up once a process): a callback
/// that calls the library from a line logged during the runtime's set-up or under an enable's
/// locks; `hostcall_set_log_callback` refused inside a callback, and returning only when the old
/// callback can no longer run; the DEBUG and TRACE lines; a C service naming its refusal's
/// reason. A deadlock ends the program by its alarm, which fails the test. `LOG_CALLBACK_MODES`
/// (words) runs only those modes.
#[test]
fn the_log_callback_may_call_the_library_and_is_swapped_safely() {
    let exe = build("log_callback_test.c", Link::Shared);
    let modes = std::env::var("LOG_CALLBACK_MODES")
        .unwrap_or("setup enable inside swap nested levels listener reason".into());
    for mode in modes.split_whitespace() {
        let output = Command::new(&exe).arg(mode).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "mode {mode}: {}\n{out}\n{err}", output.status);
        assert!(out.contains("log_callback_test: ok"), "mode {mode}: {out}\n{err}");
    }
}

#[test]
fn the_header_compiles_as_cpp_and_links_with_c_linkage() {
    let out = run_mode(&build("header_check.cpp", Link::Shared), "");
    assert!(out.contains("header_check: ok"), "{out}");
}

/// The header from C99 (`-std=c99 -pedantic -Werror`): the line protocol's 64-byte alignments hold
/// without C11's `_Alignas`, and a struct laid out by hand matches the placement macros.
#[test]
fn the_header_compiles_as_c99() {
    let out = run_mode(&build_as("header_c99.c", Link::Shared, "-std=c99"), "");
    assert!(out.contains("header_c99: ok"), "{out}");
}

/// The entry points called directly (the rlib): null pointers and bad counts are refused with
/// their codes and a message, never a crash.
#[test]
fn entry_points_refuse_bad_arguments() {
    use hostcall_capi::status::*;
    use std::ffi::CStr;
    let last_error = || {
        // SAFETY: `hostcall_last_error` returns a NUL-terminated string valid until the next
        // failing call on this thread.
        unsafe { CStr::from_ptr(hostcall_capi::hostcall_last_error()) }.to_str().unwrap().to_owned()
    };
    assert_eq!(hostcall_capi::getHostcallBufferSize(1), 0);
    assert!(last_error().contains("at least 2"), "{}", last_error());
    assert_eq!(hostcall_capi::hostcall_buffer_size(2), hostcall_rs::buffer_size(2).unwrap());
    // SAFETY: null is refused before anything is touched.
    unsafe {
        assert_eq!(
            hostcall_capi::hostcall_enable(std::ptr::null_mut(), 4, std::ptr::null()),
            HOSTCALL_ERR_NULL
        );
        assert!(!hostcall_capi::enableHostcalls(std::ptr::null_mut(), 4, std::ptr::null()));
        assert_eq!(
            hostcall_capi::hostcall_register_service(5, None, std::ptr::null_mut()),
            HOSTCALL_ERR_NULL
        );
        assert_eq!(
            hostcall_capi::hostcall_emulated_call(
                std::ptr::null_mut(),
                4,
                1,
                1,
                std::ptr::null(),
                std::ptr::null_mut()
            ),
            HOSTCALL_ERR_NULL
        );
    }
    assert!(last_error().contains("null"), "{}", last_error());
    assert_eq!(hostcall_capi::hostcall_disable(std::ptr::null_mut(), std::ptr::null()), HOSTCALL_ERR_NULL);
    assert_eq!(hostcall_capi::hostcall_unregister_service(12345), HOSTCALL_ERR_NOT_REGISTERED);
}

/// The first C block of a README, as it is, built against the shared library and run: it must
/// print the sum its emulated call got back.
fn readme_c_block_builds_and_runs(name: &str, readme: &str) {
    let start = readme.find("```c\n").expect("a ```c block in the README") + "```c\n".len();
    let snippet = &readme[start..start + readme[start..].find("```").expect("the block's end")];
    let source = out_dir().join(format!("{name}_snippet.c"));
    std::fs::write(&source, snippet).unwrap();
    let exe = build(source.to_str().unwrap(), Link::Shared);
    assert_eq!(run_mode(&exe, ""), "40 + 2 = 42\n");
}

/// The workspace README's C snippet. Its file lies outside this package, so the test exists only
/// in the repository (`build.rs` sets `hostcall_workspace` where `../README.md` is there).
#[test]
#[cfg_attr(not(hostcall_workspace), ignore = "the workspace README is not in a packaged crate")]
fn the_workspace_readme_c_snippet_builds_and_runs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    readme_c_block_builds_and_runs("workspace_readme", &readme);
}

/// The C guide's complete program (this crate's README), with both of ROCm's protocols.
#[test]
fn the_c_guide_program_builds_and_runs() {
    readme_c_block_builds_and_runs("capi_readme", include_str!("../README.md"));
}
