//! What LLVM-RPC refusals that lose device output log: a stream past `RpcLimits::stream_bytes`,
//! an `fopen` past `RpcLimits::open_files`, and a printf stopped by a width or precision past
//! `PrintfLimits::max_field` each log a WARN line (rate-limited, as every device-triggered
//! warning), besides their counters.
//!
//! The capturing logger records every line of the process, so the tests of this file take turns
//! (`SERIAL`).

use hostcall::services::printf::Streams;
use hostcall::services::rpc::client::{one_lane, printf, printf_opcode, CArg};
use hostcall::services::rpc::{RpcCounters, RpcHost, RpcLimits, RpcPolicy};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, Header, LaneBuffer, Parts, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::ServiceTable;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

mod common;

use common::logs;

/// Takes this file's turn, with the logger installed and the captured lines cleared.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    logs::install();
    let turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    logs::lines().clear();
    turn
}

/// Captured lines containing `text`.
fn lines_with(text: &str) -> usize {
    logs::lines().iter().filter(|line| line.contains(text)).count()
}

/// The most lines one kind of warning may log in a test that began at `started`: 10 per 10 s
/// window (the crate's rate limit, written out), a window anchored at the kind's first line, so a
/// test of `t` seconds touches at most `t / 10 + 2` of them.
fn burst_bound(started: Instant) -> usize {
    10 * (started.elapsed().as_secs() as usize / 10 + 2)
}

/// One port of one lane and its host, driven on the test's thread: each wait of the client takes
/// the host's turn. `calls` runs the device's side; returns the host's counters and its output.
fn with_host(
    policy: RpcPolicy,
    limits: RpcLimits,
    calls: impl FnOnce(&Client<'_>, &mut dyn FnMut(u32) -> bool),
) -> (RpcCounters, Vec<u8>) {
    let (host_mailbox, device_mailbox, lock) =
        ([AtomicU32::new(0)], [AtomicU32::new(0)], [AtomicU32::new(0)]);
    let (headers, buffers) = ([Header::default()], [LaneBuffer::default()]);
    let parts = Parts {
        lanes: 1,
        host_mailbox: &host_mailbox,
        device_mailbox: &device_mailbox,
        headers: &headers,
        buffers: &buffers,
    };
    let view = View::from_parts(parts).unwrap();
    let client = Client::new(view, &lock).unwrap();
    let mut host = RpcHost::new(1, policy, limits);
    let mut out = Streams { stdout: Vec::new(), stderr: Vec::new() };
    let services = ServiceTable::<1>::new();
    // Bounded: a client that is never answered fails (`Stalled`) instead of hanging.
    let mut take_the_hosts_turn = |polls: u32| {
        host.drain(&view, &mut out, &services);
        polls < 10_000
    };
    calls(&client, &mut take_the_hosts_turn);
    (host.counters(), out.stdout)
}

/// A console write longer than the stream budget: dropped, answered 0, counted, and logged.
#[test]
fn a_stream_past_the_budget_is_logged() {
    let _turn = serial();
    let started = Instant::now();
    let limits = RpcLimits::default().with_stream_bytes(16);
    let (counters, stdout) = with_host(RpcPolicy::default(), limits, |client, wait| {
        for _ in 0..30 {
            let mut polls = 0;
            let mut port = loop {
                if let Some(port) = client.try_open(libc::WRITE_TO_STDOUT, 1, 0) {
                    break port;
                }
                polls += 1;
                assert!(wait(polls), "the port was never free");
            };
            port.send_n(|_| &[b'x'; 100][..], &mut &mut *wait).unwrap();
            let mut written = u64::MAX;
            port.recv(|_, words| written = words[0], &mut &mut *wait).unwrap();
            port.close();
            assert_eq!(written, 0);
        }
    });
    assert!(stdout.is_empty());
    assert_eq!(counters.over_limit_lanes, 30);
    let lines = lines_with("RpcLimits::stream_bytes (16 bytes)");
    assert!((1..=burst_bound(started)).contains(&lines), "{lines} lines: {:?}", logs::lines());
}

/// `fopen` past the open-file budget: answered NULL, counted, and logged.
#[test]
fn an_fopen_past_the_budget_is_logged() {
    let _turn = serial();
    let started = Instant::now();
    let limits = RpcLimits::default().with_open_files(0);
    let (counters, _) =
        with_host(RpcPolicy::default().with_files(std::env::temp_dir()), limits, |client, wait| {
            for _ in 0..30 {
                let file = one_lane::fopen(client, 0, b"rpc_warnings_budget", b"w", &mut *wait).unwrap();
                assert_eq!(file, 0);
            }
        });
    assert_eq!(counters.open_files_refused, 30);
    let lines = lines_with("RpcLimits::open_files (0)");
    assert!((1..=burst_bound(started)).contains(&lines), "{lines} lines: {:?}", logs::lines());
}

/// A printf whose width is past `PrintfLimits::max_field`: printed up to there with the marker,
/// answered the count before it, and logged as the other protocols' PRINTF logs it.
#[test]
fn a_printf_field_past_the_limit_is_marked_and_logged() {
    let _turn = serial();
    let args = [CArg::Int(1), CArg::Int(2)];
    let (_, stdout) = with_host(RpcPolicy::default(), RpcLimits::default(), |client, wait| {
        let call = |_| (&b"x=%5000d y=%d\n"[..], &args[..]);
        let result = printf(client, 0, printf_opcode(0, false), 1, None, &call, &mut &mut *wait).unwrap();
        assert_eq!(result[0], 2);
    });
    assert_eq!(String::from_utf8(stdout).unwrap(), "x=<hostcall: width or precision above 4096>");
    assert_eq!(
        lines_with("printf: message stopped after 2 bytes: width or precision above 4096"),
        1,
        "{:?}",
        logs::lines()
    );
}
