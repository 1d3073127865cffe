//! The file, process and host-call opcodes against the core's client, each as LLVM's server
//! answers it (C stdio on the host) when its group is on, and refused (followed, answered with
//! C's failure value, counted) when it is off.

use super::client::one_lane::{exit, fopen, one_packet, read, strings};
use super::client::{printf, printf_opcode, CArg};
use super::tests::{patience, run, sink, write, Buffer};
use super::*;
use hostcall_core::rpc::opcode::libc;
use hostcall_core::ServiceTable;
use std::path::PathBuf;

const EOF: u64 = -1i64 as u64;

/// A fresh directory for one test's files.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hostcall-rpc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bytes(path: &std::path::Path) -> Vec<u8> {
    path.to_str().unwrap().as_bytes().to_vec()
}

#[test]
#[cfg_attr(miri, ignore = "opens, reads and removes files (the OS; Miri isolates the program from it)")]
fn files_as_llvm_serves_them() {
    let dir = temp_dir("files");
    let (a, b) = (dir.join("a.txt"), dir.join("b.txt"));
    let buffer = Buffer::new(2, 1);
    let limits = RpcLimits::default().with_open_files(2);
    let mut host = RpcHost::new(2, RpcPolicy::default().with_files(&dir), limits);
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let (pa, pb) = (b"a.txt".to_vec(), b"b.txt".to_vec()); // beneath `dir`
    let results = run(&buffer, &mut host, &mut out, &services, |client| {
        let w = &mut patience();
        let file = fopen(&client, 0, &pa, b"w", w).unwrap();
        let text = |_| b"hello\nworld\n".to_vec();
        let written = write(&client, libc::WRITE_TO_STREAM, 1, Some(&|_| file), &text)[0];
        let args = [CArg::Int(42)];
        let printed = printf(
            &client,
            0,
            printf_opcode(2, false),
            1,
            Some(&|_| file),
            &|_| (&b"n=%d\n"[..], &args[..]),
            w,
        );
        let flushed = one_packet(&client, 0, libc::FFLUSH, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let told = one_packet(&client, 0, libc::FTELL, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let closed = one_packet(&client, 0, libc::CLOSE_FILE, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let closed_again = one_packet(&client, 0, libc::CLOSE_FILE, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let file = fopen(&client, 0, &pa, b"r", w).unwrap();
        let second = fopen(&client, 0, &pa, b"r", w).unwrap();
        let over_budget = fopen(&client, 0, &pa, b"r", w).unwrap();
        let line = read(&client, 0, libc::READ_FGETS, 64, file, w).unwrap();
        let three = read(&client, 0, libc::READ_FROM_STREAM, 3, file, w).unwrap();
        let pushed =
            one_packet(&client, 0, libc::UNGETC, [u64::from(b'X'), file, 0, 0, 0, 0, 0, 0], w).unwrap();
        let two = read(&client, 0, libc::READ_FROM_STREAM, 2, file, w).unwrap();
        let at_eof_early = one_packet(&client, 0, libc::FEOF, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let rest = read(&client, 0, libc::READ_FROM_STREAM, 100, file, w).unwrap();
        let at_eof = one_packet(&client, 0, libc::FEOF, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        one_packet(&client, 0, libc::CLEARERR, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let after_clear = one_packet(&client, 0, libc::FEOF, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let sought = one_packet(&client, 0, libc::FSEEK, [file, 6, 0, 0, 0, 0, 0, 0], w).unwrap(); // SEEK_SET
        let again = read(&client, 0, libc::READ_FGETS, 64, file, w).unwrap();
        let error = one_packet(&client, 0, libc::FERROR, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap();
        let none = read(&client, 0, libc::READ_FGETS, 64, file, w).unwrap();
        for f in [file, second] {
            assert_eq!(one_packet(&client, 0, libc::CLOSE_FILE, [f, 0, 0, 0, 0, 0, 0, 0], w).unwrap(), 0);
        }
        let renamed = strings(&client, 0, libc::RENAME, &[&pa, &pb], 0, w).unwrap();
        let removed = strings(&client, 0, libc::REMOVE, &[&pb], 0, w).unwrap();
        let removed_again = strings(&client, 0, libc::REMOVE, &[&pb], 0, w).unwrap();
        (
            (file & 3, written, printed.unwrap()[0], flushed, told, closed, closed_again),
            (second != 0 && second != file, over_budget, line, three, pushed, two, at_eof_early),
            (rest, at_eof != 0, after_clear, sought, again, error, none, renamed, removed, removed_again),
        )
    });
    assert_eq!(results.0, (0, 12, 5, 0, 17, 0, EOF));
    let (second_ok, over_budget, line, three, pushed, two, at_eof_early) = results.1;
    assert!(second_ok);
    assert_eq!(over_budget, 0, "a third file is over the budget of 2");
    assert_eq!(line, (b"hello\n\0".to_vec(), None));
    assert_eq!(three, (b"wor".to_vec(), Some(3)));
    assert_eq!((pushed, two, at_eof_early), (u64::from(b'X'), (b"Xl".to_vec(), Some(2)), 0));
    let (rest, at_eof, after_clear, sought, again, error, none, renamed, removed, removed_again) = results.2;
    assert_eq!((rest, at_eof, after_clear, sought), ((b"d\nn=42\n".to_vec(), Some(7)), true, 0, 0));
    assert_eq!((again, error, none), ((b"world\n\0".to_vec(), None), 0, (b"n=42\n\0".to_vec(), None)));
    assert_eq!((renamed, removed, removed_again), (0, 0, EOF));
    assert!(!a.exists() && !b.exists());
    let counters = host.counters();
    assert_eq!((counters.open_files_refused, counters.refused_lanes, counters.over_limit_lanes), (1, 1, 0));
    assert_eq!(
        (counters.calls, counters.calls_done, host.calls_in_progress(), host.open_files()),
        (28, 28, 0, 0)
    );
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Off by default: every call followed and answered as failed, counted, the host process and
/// its files untouched; stdout and stderr still answer the stream calls as the console does.
#[test]
#[cfg_attr(
    miri,
    ignore = "opens files and a temporary directory (the OS; Miri isolates the program from it)"
)]
fn files_exit_abort_host_calls_and_system_are_refused_by_default() {
    let dir = temp_dir("refused");
    let path = dir.join("keep.txt");
    std::fs::write(&path, b"kept").unwrap();
    let p = bytes(&path);
    let buffer = Buffer::new(1, 1);
    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let answers = run(&buffer, &mut host, &mut out, &services, |client| {
        let w = &mut patience();
        let mut call = |opcode, words| one_packet(&client, 0, opcode, words, &mut *w).unwrap();
        let on_stream = [
            call(libc::FEOF, [4, 0, 0, 0, 0, 0, 0, 0]),
            call(libc::FERROR, [4, 0, 0, 0, 0, 0, 0, 0]),
            call(libc::FTELL, [1, 0, 0, 0, 0, 0, 0, 0]),
            call(libc::CLOSE_FILE, [2, 0, 0, 0, 0, 0, 0, 0]),
            call(libc::FFLUSH, [2, 0, 0, 0, 0, 0, 0, 0]),
            call(libc::FTELL, [3, 0, 0, 0, 0, 0, 0, 0]),
        ];
        let w = &mut patience();
        let opened = fopen(&client, 0, &p, b"w", w).unwrap();
        let fread = read(&client, 0, libc::READ_FROM_STREAM, 10, 1, w).unwrap();
        let removed = strings(&client, 0, libc::REMOVE, &[&p], 0, w).unwrap();
        let system = strings(&client, 0, libc::SYSTEM, &[b"exit 3"], 0, w).unwrap();
        let called =
            strings(&client, 0, libc::HOST_CALL, &[&[1, 2, 3]], add_one as *const () as u64, w).unwrap();
        exit(&client, 0, libc::EXIT, 7, w).unwrap();
        exit(&client, 0, libc::ABORT, 0, w).unwrap();
        (on_stream, opened, fread, removed, system, called)
    });
    // The abort's status packet: the client does not wait for the host to take it.
    host.drain(&buffer.view(), &mut out, &services);
    assert_eq!(
        answers.0,
        [0, 1, EOF, EOF, 0, EOF],
        "refused, refused, stdin refused, no fclose(stdout), console"
    );
    assert_eq!((answers.1, answers.2, answers.3, answers.4, answers.5), (0, (vec![], Some(0)), EOF, EOF, 0));
    assert_eq!(std::fs::read(&path).unwrap(), b"kept");
    let counters = host.counters();
    assert_eq!((counters.refused_lanes, counters.calls, counters.calls_done), (11, 13, 13));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The argument block's first byte plus one.
extern "C" fn add_one(args: *mut std::ffi::c_void) -> u64 {
    // SAFETY: the host passes the lane's argument block, at least 1 byte in these tests.
    u64::from(unsafe { args.cast::<u8>().read() }) + 1
}

#[test]
#[cfg_attr(
    miri,
    ignore = "runs a shell through system() (the OS) and calls a host function by address (FFI)"
)]
fn host_calls_and_system_through_their_unsafe_opt_ins() {
    let buffer = Buffer::new(1, 1);
    // SAFETY: the test's device names only `add_one`, and `exit 3` for the shell.
    let policy = unsafe { RpcPolicy::default().with_host_calls().with_system() };
    let mut host = RpcHost::new(1, policy, RpcLimits::default().with_stream_bytes(100));
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let long = vec![b'x'; 300];
    let answers = run(&buffer, &mut host, &mut out, &services, |client| {
        let w = &mut patience();
        let called = strings(&client, 0, libc::HOST_CALL, &[&[41]], add_one as *const () as u64, w).unwrap();
        let null = strings(&client, 0, libc::HOST_CALL, &[&[41]], 0, w).unwrap();
        let system = strings(&client, 0, libc::SYSTEM, &[b"exit 3"], 0, w).unwrap();
        let too_long = strings(&client, 0, libc::SYSTEM, &[&long], 0, w).unwrap();
        (called, null, system, too_long)
    });
    assert_eq!(answers, (42, 0, 3 << 8, EOF), "a wait status: exit code 3");
    let counters = host.counters();
    assert_eq!(
        (counters.refused_lanes, counters.over_limit_lanes),
        (1, 1),
        "the null function; the long command"
    );
}
