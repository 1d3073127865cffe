//! What a device can make the host log, and remember: every device-triggered warning is
//! rate-limited per kind (10 lines per 10 s), and unknown service ids cost bounded memory.
//!
//! A capturing logger (`log::set_logger`) records every line of the process, and a counting
//! global allocator its live heap bytes; both are process-wide, so the tests of this file take
//! turns (`SERIAL`).

use hostcall::prelude::*;
use hostcall::{
    services::devmem::DevMemLimits, services::message::MessageLimits, services::printf::Streams, HostMemory,
    HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Wave,
};
use hostcall_core::ErrorCode;
use hostcall_core::{DEVMEM, PRINTF};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod common;

use common::logs;

/// The most lines one kind of warning may log in a burst (the crate's `WARNINGS_PER_WINDOW`;
/// written out so that the test does not depend on the constant it checks).
const LINES_PER_KIND: usize = 10;

/// Takes this file's turn, with the logger installed and the captured lines cleared.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    logs::install();
    let turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    logs::lines().clear();
    turn
}

/// The most lines `kinds` kinds of warning may log in a test that began at `started`: a burst per
/// kind per window the test can touch. The crate's windows are 10 s long and anchored at a kind's
/// first line (perhaps in an earlier test), so a test of `t` seconds touches at most `t / 10 + 2`
/// of them; on a loaded machine a test can take longer than one window.
fn burst_bound(started: Instant, kinds: usize) -> usize {
    let windows = started.elapsed().as_secs() as usize / 10 + 2;
    LINES_PER_KIND * kinds * windows
}

/// Captured lines containing `text`.
fn lines_with(text: &str) -> usize {
    logs::lines().iter().filter(|line| line.contains(text)).count()
}

// -- The counting allocator --

#[global_allocator]
static GLOBAL: common::counting::Counting = common::counting::Counting;

use common::counting::live_bytes;

// -- Setup --

fn listener_with(packets: u64, protocol: Protocol) -> (Listener, Arc<HostcallBuffer>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::spinning()).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    (listener, buffer)
}

/// Runs `f` on a thread and fails if it has not returned within 3 minutes (a hang, not a speed
/// check: on an idle machine the slowest test here takes about 45 s in a debug build).
fn within_minutes<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()).unwrap());
    match wait.recv_timeout(Duration::from_secs(180)) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what} did not return within 3 minutes"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

// -- The tests --

/// One store into the ready-stack of a 1,024-packet buffer (its free-list top: every packet is
/// visited, none READY) makes a poll find 1,024 malformed packets; twenty such stores log at
/// most one burst of lines, and every finding is still counted.
#[test]
fn a_ready_stack_store_logs_a_bounded_number_of_warnings() {
    let _turn = serial();
    let started = Instant::now();
    let (listener, buffer) = listener_with(1024, Protocol::Stack);
    let hostcall_core::AnyView::Stack(view) = buffer.view() else { unreachable!() };
    let prefix = view.prefix();
    for _ in 0..20 {
        prefix.ready_stack.store(prefix.free_stack.load(Ordering::Acquire), Ordering::Release);
        buffer.doorbell().ring();
        let deadline = Instant::now() + Duration::from_secs(10);
        while prefix.ready_stack.load(Ordering::Acquire) != 0 {
            assert!(Instant::now() < deadline, "the listener never drained the ready-stack");
            std::thread::yield_now();
        }
    }
    let stats = within_minutes("shutdown", move || listener.shutdown());
    assert!(stats.malformed >= 20 * 1024, "{} malformed packets counted", stats.malformed);
    let logged = lines_with(&format!("buffer {:#x}", buffer.as_ptr() as usize));
    assert!(
        (1..=burst_bound(started, 1)).contains(&logged),
        "{logged} lines for {} findings",
        stats.malformed
    );
}

/// 100,000 distinct unknown service ids: each answered with an error, a few lines logged, and the
/// registry's memory bounded (remembering every id cost ~11 bytes each).
#[test]
fn distinct_unknown_ids_cost_bounded_memory_and_log_lines() {
    let _turn = serial();
    let started = Instant::now();
    let (listener, buffer) = listener_with(2, Protocol::Stack);
    let wave = Wave::new(buffer, 1).with_spin_wait();
    let call = move |id: u32| wave.call(id, |_| [0; 8]).unwrap().lane(0);
    for id in 1_000_000..1_000_100 {
        assert_eq!(call(id), ErrorCode::UnknownService.reply());
    }
    let before = live_bytes();
    let call = within_minutes("100,000 calls", move || {
        // Ids past the built-in services' (DEVMEM's error reply differs).
        for id in 100..100_100 {
            assert_eq!(call(id), ErrorCode::UnknownService.reply());
        }
        call
    });
    let grown = live_bytes() - before;
    drop(call);
    assert!(grown < 16 << 10, "the heap grew by {grown} bytes over 100,000 unknown ids");
    let logged = lines_with("unknown service id");
    assert!(logged <= burst_bound(started, 1), "{logged} lines for 100,100 unknown ids");
    assert_eq!(listener.shutdown().unknown.packets, 100_100);
}

/// DEVMEM refusals and bad frees, a thousand each: a burst of lines each.
#[test]
fn devmem_refusals_log_a_bounded_number_of_warnings() {
    let _turn = serial();
    let started = Instant::now();
    let (listener, buffer) = listener_with(2, Protocol::Stack);
    listener
        .services()
        .enable_devmem(Arc::new(HostMemory), DevMemLimits::default().with_max_allocation(64))
        .unwrap();
    let wave = Wave::new(buffer, 64);
    for _ in 0..16 {
        let refused = wave.call(DEVMEM, |_| [0, 65, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(refused.lane(63), [0, ErrorCode::Refused as u64]);
        let bad_free = wave.call(DEVMEM, |lane| [0x1000 * (lane as u64 + 1), 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(bad_free.lane(63), [0, ErrorCode::BadRequest as u64]);
    }
    listener.shutdown();
    let logged = lines_with("devmem");
    assert!((2..=burst_bound(started, 2)).contains(&logged), "{logged} lines for 2,048 failures");
}

/// A device that begins messages and never ends them: past the bound, a thousand BEGINs are
/// refused (none evicts an open message) with a burst of lines.
#[test]
fn refused_begins_log_a_bounded_number_of_warnings() {
    let _turn = serial();
    let started = Instant::now();
    let (listener, buffer) = listener_with(2, Protocol::Stack);
    let limits = MessageLimits::default().with_max_open(64);
    listener
        .services()
        .enable_printf(Streams { stdout: std::io::sink(), stderr: std::io::sink() }, limits)
        .unwrap();
    let wave = Wave::new(buffer, 64);
    let begin = hostcall_core::message::Descriptor::new(true, false, 0, 0).unwrap().encode();
    for _ in 0..20 {
        wave.call(PRINTF, |_| [begin, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    }
    listener.shutdown();
    let logged = lines_with("message");
    assert!((1..=burst_bound(started, 1)).contains(&logged), "{logged} lines for 1,216 refused BEGINs");
}
