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

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The SONAME `build.rs` gives the shared library.
fn soname() -> String {
    let (major, minor) = (env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
    let abi = if major == "0" { format!("0.{minor}") } else { major.to_owned() };
    format!("libhostcall_capi.so.{abi}")
}

/// A directory holding only the fresh shared library under its SONAME (the rpath of the programs).
fn soname_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = out_dir().join("soname");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(library_dir().join("libhostcall_capi.so"), dir.join(soname())).unwrap();
        dir
    })
}

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// The directory holding `libhostcall_capi.{so,a}` built for this test run.
fn library_dir() -> PathBuf {
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
fn out_dir() -> PathBuf {
    let dir = library_dir().join("hostcall-capi-c-tests").join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compiler(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

fn run_checked(command: &mut Command) -> Output {
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
enum Link {
    Shared,
    Static,
}

/// Compiles `source` (C11 or C++11; a name in `tests/c/`, or a path) and links it with the
/// library; once per test process.
fn build(source: &str, link: Link) -> PathBuf {
    build_as(source, link, if source.ends_with(".cpp") { "-std=c++11" } else { "-std=c11" })
}

/// [`build`] with the language standard given (`-std=...`).
fn build_as(source: &str, link: Link, std: &str) -> PathBuf {
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

fn c_test(link: Link) -> &'static Path {
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    static STATIC: OnceLock<PathBuf> = OnceLock::new();
    let cell = if let Link::Shared = link { &SHARED } else { &STATIC };
    cell.get_or_init(|| build("hostcall_test.c", link))
}

fn run_mode(exe: &Path, mode: &str) -> String {
    let output = run_checked(Command::new(exe).arg(mode));
    String::from_utf8(output.stdout).unwrap()
}

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

/// Every offset, size and constant the header defines, printed by the C program, equals the
/// Rust definition (or PROTOCOL.md's number where Rust has none in this crate).
#[test]
fn the_header_layout_matches_rust() {
    use hostcall_capi::options::{self, HostcallEnableOptions};
    use hostcall_rs::core::dispatch as service;
    use hostcall_rs::core::stack::{self as layout, Header, Prefix};
    use hostcall_rs::core::{line, phase, rpc};
    use hostcall_rs::core::{ErrorCode, ERROR_REPLY};
    use hostcall_rs::core::{Payload, LANES, REPLY_WORDS, SLOT_WORDS};
    use hostcall_rs::lifecycle::{buffer_align_for, buffer_size_for};
    use hostcall_rs::Protocol;
    use std::mem::{align_of, offset_of, size_of};

    let out = run_mode(c_test(Link::Shared), "layout");
    let c: std::collections::HashMap<&str, u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("layout "))
        .map(|l| {
            let (name, value) = l.split_once(' ').unwrap();
            (name, value.parse().unwrap())
        })
        .collect();
    let size = |n| layout::buffer_size(n).unwrap() as u64;
    let descriptor = |begin: u64, end: u64, len: u64, id: u64| begin | end << 1 | len << 5 | id << 8;
    let expected: Vec<(&str, u64)> = vec![
        ("prefix.size", size_of::<Prefix>() as u64),
        ("prefix.headers", offset_of!(Prefix, headers) as u64),
        ("prefix.payloads", offset_of!(Prefix, payloads) as u64),
        ("prefix.doorbell", offset_of!(Prefix, doorbell) as u64),
        ("prefix.free_stack", offset_of!(Prefix, free_stack) as u64),
        ("prefix.ready_stack", offset_of!(Prefix, ready_stack) as u64),
        ("prefix.index_mask", offset_of!(Prefix, index_mask) as u64),
        ("header.size", size_of::<Header>() as u64),
        ("header.next", offset_of!(Header, next) as u64),
        ("header.activemask", offset_of!(Header, activemask) as u64),
        ("header.service", offset_of!(Header, service) as u64),
        ("header.control", offset_of!(Header, control) as u64),
        ("payload.size", size_of::<Payload>() as u64),
        // PROTOCOL.md section 2 (the phase layout's Rust types live in another module).
        ("phase.size", 56),
        ("phase.device_phase", 0),
        ("phase.host_phase", 8),
        ("phase.occupied", 16),
        ("phase.headers", 24),
        ("phase.payloads", 32),
        ("phase.doorbell", 40),
        ("phase.num_packets", 48),
        ("phase_header.size", 16),
        ("phase_header.activemask", 0),
        ("phase_header.service", 8),
        ("headers_offset", layout::HEADERS_OFFSET as u64),
        ("payloads_offset.3", layout::payloads_offset(3) as u64),
        ("buffer_size.3", size(3)),
        ("buffer_size.1000", size(1000)),
        ("lib.buffer_size.3", size(3)),
        ("lib.buffer_size.1000", size(1000)),
        ("buffer_align", layout::buffer_align() as u64),
        ("lib.buffer_align", layout::buffer_align() as u64),
        ("max_packets", u64::from(hostcall_rs::core::MAX_PACKETS)),
        ("lanes", LANES as u64),
        ("slot_words", SLOT_WORDS as u64),
        ("reply_words", REPLY_WORDS as u64),
        ("service.function_call", u64::from(service::FUNCTION_CALL)),
        ("service.printf", u64::from(service::PRINTF)),
        ("service.devmem", u64::from(service::DEVMEM)),
        ("service.sanitizer", u64::from(service::SANITIZER)),
        ("control.ready", u64::from(layout::CONTROL_READY)),
        ("control.host_error", u64::from(layout::CONTROL_HOST_ERROR)),
        ("error.reply", ERROR_REPLY),
        ("error.unknown_service", ErrorCode::UnknownService as u64),
        ("error.service_panicked", ErrorCode::ServicePanicked as u64),
        ("error.bad_request", ErrorCode::BadRequest as u64),
        ("error.refused", ErrorCode::Refused as u64),
        ("error.shutting_down", ErrorCode::ShuttingDown as u64),
        // PROTOCOL.md section 4.
        ("msg.begin", 1),
        ("msg.end", 2),
        ("msg.reserved", 0b111 << 2),
        ("msg.descriptor", descriptor(1, 1, 7, 0xabcdef)),
        ("msg.len", 5),
        ("msg.id", (1 << 56) - 1),
        ("implicitarg.v4", hostcall_rs::IMPLICITARG_OFFSET_V4 as u64),
        ("implicitarg.v5", hostcall_rs::IMPLICITARG_OFFSET_V5 as u64),
        ("emulated_timeout_ms", hostcall_capi::emulated::EMULATED_TIMEOUT.as_millis() as u64),
        ("phase.buffer_align", phase::buffer_align() as u64),
        ("lib.phase.buffer_align", buffer_align_for(Protocol::Phase) as u64),
        ("lib.stack.buffer_align", buffer_align_for(Protocol::Stack) as u64),
        ("phase.occupied_words.33", phase::occupied_words(33) as u64),
        ("line.prefix.size", size_of::<line::Prefix>() as u64),
        ("line.prefix.requests", offset_of!(line::Prefix, requests) as u64),
        ("line.prefix.replies", offset_of!(line::Prefix, replies) as u64),
        ("line.prefix.device_seq", offset_of!(line::Prefix, device_seq) as u64),
        ("line.prefix.occupied", offset_of!(line::Prefix, occupied) as u64),
        ("line.prefix.served", offset_of!(line::Prefix, served) as u64),
        ("line.prefix.doorbell", offset_of!(line::Prefix, doorbell) as u64),
        ("line.prefix.num_packets", offset_of!(line::Prefix, num_packets) as u64),
        ("line.request.size", size_of::<line::Request>() as u64),
        ("line.request.align", align_of::<line::Request>() as u64),
        ("line.request.head", offset_of!(line::Request, head) as u64),
        ("line.request.mask", offset_of!(line::Request, mask) as u64),
        ("line.request.reserved", offset_of!(line::Request, reserved) as u64),
        ("line.request.lanes", offset_of!(line::Request, lanes) as u64),
        ("line.request.lane_words", line::REQUEST_LANE_WORDS as u64),
        ("line.reply.size", size_of::<line::Reply>() as u64),
        ("line.reply.align", align_of::<line::Reply>() as u64),
        ("line.reply.lanes", offset_of!(line::Reply, lanes) as u64),
        ("line.reply.lane_words", line::REPLY_LANE_WORDS as u64),
        ("line.seq_max", u64::from(line::SEQ_MAX)),
        ("line.seq_bits", u64::from(line::SEQ_BITS)),
        ("line.data_mask", line::DATA_MASK),
        ("line.word", line::word(0x1ff_dead_beef_cafe, 7)),
        ("line.word.max", line::word(u64::MAX, line::SEQ_MAX)),
        ("line.seq_of", u64::from(line::seq_of(0x1234_5678_9abc_def0))),
        ("line.data_of", line::data_of(0x1234_5678_9abc_def0)),
        ("line.buffer_align", line::buffer_align() as u64),
        ("protocol.stack", u64::from(options::HOSTCALL_PROTOCOL_STACK)),
        ("protocol.phase", u64::from(options::HOSTCALL_PROTOCOL_PHASE)),
        ("options.size", size_of::<HostcallEnableOptions>() as u64),
        ("options.field.size", offset_of!(HostcallEnableOptions, size) as u64),
        ("options.protocol", offset_of!(HostcallEnableOptions, protocol) as u64),
        ("options.occupied", offset_of!(HostcallEnableOptions, occupied) as u64),
        ("options.device_ordinal", offset_of!(HostcallEnableOptions, device_ordinal) as u64),
        ("options.reserved", offset_of!(HostcallEnableOptions, reserved) as u64),
        ("options.size_v1", u64::from(options::HOSTCALL_ENABLE_OPTIONS_SIZE_V1)),
        ("options.max_size", u64::from(options::HOSTCALL_ENABLE_OPTIONS_MAX_SIZE)),
        ("rpc.max_ports", u64::from(rpc::MAX_PORT_COUNT)),
        ("rpc.max_lanes", hostcall_rs::core::LANES as u64),
        ("rpc.client_size", rpc::CLIENT_OBJECT_SIZE as u64),
        ("rpc.buffer_align", rpc::buffer_align() as u64),
        ("version.major", env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap()),
        ("version.minor", env!("CARGO_PKG_VERSION_MINOR").parse().unwrap()),
        ("version.patch", env!("CARGO_PKG_VERSION_PATCH").parse().unwrap()),
    ];
    let mut expected: Vec<(String, u64)> = expected.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
    for n in [3usize, 1000] {
        let l = phase::Layout::new(n).unwrap();
        for (name, value) in [
            ("device_phase_offset", l.device_phase),
            ("occupied_offset", l.occupied),
            ("host_phase_offset", l.host_phase),
            ("headers_offset", l.headers),
            ("payloads_offset", l.payloads),
            ("buffer_size", l.size),
        ] {
            expected.push((format!("phase.{name}.{n}"), value as u64));
        }
        let lib = buffer_size_for(Protocol::Phase, n as u32).unwrap();
        expected.push((format!("lib.phase.buffer_size.{n}"), lib as u64));
    }
    // The line protocol's placement for the packet counts `hostcall_test.c` prints (its `counts`).
    assert_eq!(line::buffer_align(), line::MIN_ALIGN);
    assert_eq!(buffer_align_for(Protocol::Line), line::buffer_align());
    for n in [2usize, 3, 31, 32, 33, 64, 1000, 1 << 24] {
        let l = line::Layout::new(n).unwrap();
        for (name, value) in [
            ("occupied_words", n.div_ceil(32)),
            ("device_seq_offset", l.device_seq),
            ("occupied_offset", l.occupied),
            ("served_offset", l.served),
            ("requests_offset", l.requests),
            ("replies_offset", l.replies),
            ("buffer_size", l.size),
        ] {
            expected.push((format!("line.{name}.{n}"), value as u64));
        }
        assert_eq!(line::buffer_size(n), Some(l.size));
        assert_eq!(buffer_size_for(Protocol::Line, n as u32).unwrap(), l.size, "n = {n}");
    }
    // LLVM-RPC geometries `hostcall_test.c` prints.
    for (p, l) in [(1u32, 1u32), (3, 2), (64, 32), (4096, 64)] {
        let layout = rpc::Layout::new(p.into(), l.into()).unwrap();
        for (name, value) in [
            ("device_mailbox_offset", layout.device_mailbox),
            ("headers_offset", layout.headers),
            ("lanes_offset", layout.buffers),
            ("buffer_size", layout.size),
        ] {
            expected.push((format!("rpc.{name}.{p}.{l}"), value as u64));
        }
        expected.push((
            format!("lib.rpc.buffer_size.{p}.{l}"),
            hostcall_capi::hostcall_rpc_buffer_size(p, l) as u64,
        ));
    }
    use hostcall_capi::status::*;
    let statuses = [
        ("status.null", HOSTCALL_ERR_NULL),
        ("status.misaligned", HOSTCALL_ERR_MISALIGNED),
        ("status.packet_count", HOSTCALL_ERR_PACKET_COUNT),
        ("status.already_enabled", HOSTCALL_ERR_ALREADY_ENABLED),
        ("status.other_listener", HOSTCALL_ERR_OTHER_LISTENER),
        ("status.overlaps", HOSTCALL_ERR_OVERLAPS),
        ("status.queue_taken", HOSTCALL_ERR_QUEUE_TAKEN),
        ("status.not_enabled", HOSTCALL_ERR_NOT_ENABLED),
        ("status.wrong_queue", HOSTCALL_ERR_WRONG_QUEUE),
        ("status.packet_count_mismatch", HOSTCALL_ERR_PACKET_COUNT_MISMATCH),
        ("status.from_listener", HOSTCALL_ERR_FROM_LISTENER),
        ("status.service_taken", HOSTCALL_ERR_SERVICE_TAKEN),
        ("status.timed_out", HOSTCALL_ERR_TIMED_OUT),
        ("status.thread", HOSTCALL_ERR_THREAD),
        ("status.panic", HOSTCALL_ERR_PANIC),
        ("status.other", HOSTCALL_ERR_OTHER),
        ("status.options", HOSTCALL_ERR_OPTIONS),
        ("status.rpc_client_size", HOSTCALL_ERR_RPC_CLIENT_SIZE),
    ];
    let expected = expected.into_iter().chain(statuses.map(|(name, code)| (name.to_owned(), code as u64)));
    let mut compared = 0;
    for (name, value) in expected {
        assert_eq!(c.get(name.as_str()), Some(&value), "{name}: header vs Rust");
        compared += 1;
    }
    assert_eq!(compared, c.len(), "every line the C program prints is compared");
    let version = format!("version {}", env!("CARGO_PKG_VERSION"));
    assert!(out.lines().any(|l| l == version), "HOSTCALL_VERSION is not the crate's {version:?}:\n{out}");
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
    assert_eq!(hostcall_capi::hostcall_unregister_service(12345), HOSTCALL_ERR_OTHER);
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
