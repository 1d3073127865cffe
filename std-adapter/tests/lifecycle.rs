//! ROCm's buffer lifecycle (`hostcall::enable`, `hostcall::disable`): every misuse refused with its error, enable
//! and disable racing with live waves, runtimes starting and stopping their listeners, and a
//! process that exits with buffers still enabled.

use common::raw_memory::RawMemory;
use hostcall::{
    buffer_align, buffer_size, is_enabled, EmulatedWave, Error, HostcallRuntime, Protocol, QueueId,
};
use hostcall_core::stack::View;
use hostcall_core::{GeometryError, LayoutError};

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

mod common;

// The racing tests, beside this file (a test crate's root finds its modules through `path`).
#[path = "lifecycle/races.rs"]
mod races;

const ADD: u32 = 100;
const PACKETS: u32 = 8;

fn runtime() -> HostcallRuntime {
    let runtime = HostcallRuntime::new();
    runtime.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    runtime
}

/// One ADD call with `mask` on the enabled buffer at `buffer`, every lane's reply checked.
fn add_call(buffer: *mut u8, packets: u32, mask: u64, tag: u64) {
    // SAFETY: callers keep the buffer enabled and allocated while calling.
    let wave =
        unsafe { EmulatedWave::new(buffer, packets, mask) }.unwrap().with_timeout(Duration::from_secs(20));
    let reply = wave.call(ADD, |lane| [tag, lane as u64, !tag, 0, 0, 0, 0, 0]).unwrap();
    assert!(!reply.host_error());
    for lane in (0..64).filter(|l| mask >> l & 1 == 1) {
        assert_eq!(reply.lane(lane), [tag + lane as u64, !tag], "lane {lane} of call {tag:#x}");
    }
}

fn free_stack(buffer: *mut u8, packets: u32) -> u64 {
    // SAFETY: the buffer is allocated and initialised; the load is atomic.
    let view = unsafe { View::from_raw(buffer, buffer_size(packets).unwrap(), packets) };
    view.unwrap().prefix().free_stack.load(Ordering::Acquire)
}

#[test]
fn sizes_and_counts() {
    assert_eq!(buffer_size(2), Ok(48 + 2 * 24 + 2 * 4096));
    assert_eq!(buffer_size(PACKETS).ok(), hostcall_core::stack::buffer_size(PACKETS));
    assert_eq!(buffer_align(), 8);
    for refused in [0, 1] {
        assert_eq!(
            buffer_size(refused),
            Err(Error::Layout(LayoutError::Geometry(GeometryError::TooFewPackets(refused.into()))))
        );
    }
    assert_eq!(
        buffer_size(u32::MAX),
        Err(Error::Layout(LayoutError::Geometry(GeometryError::TooManyPackets(u32::MAX.into()))))
    );
}

#[test]
fn every_misuse_is_an_error_and_breaks_nothing() {
    let (one, two) = (runtime(), runtime());
    let memory = RawMemory::new(2 * buffer_size(PACKETS).unwrap(), buffer_align());
    let size = buffer_size(PACKETS).unwrap();
    let (a, b) = (memory.at(0), memory.at(size)); // adjacent: allowed
    let (qa, qb, qc) = (QueueId(0x0100_0001), QueueId(0x0100_0002), QueueId(0x0100_0003));

    // SAFETY (every `enable` below): `memory` outlives both runtimes' use of it.
    unsafe {
        assert_eq!(one.enable(std::ptr::null_mut(), PACKETS, qa), Err(Error::Layout(LayoutError::Null)));
        let odd = memory.at(4);
        assert_eq!(
            one.enable(odd, PACKETS, qa),
            Err(Error::Layout(LayoutError::Misaligned { address: odd as usize }))
        );
        assert!(matches!(
            one.enable(a, 1, qa),
            Err(Error::Layout(LayoutError::Geometry(GeometryError::TooFewPackets(1))))
        ));
        assert!(matches!(
            one.enable(a, u32::MAX, qa),
            Err(Error::Layout(LayoutError::Geometry(GeometryError::TooManyPackets(_))))
        ));
        assert!(!one.is_running(), "refused enables start nothing");

        one.enable(a, PACKETS, qa).unwrap();
        one.enable(b, PACKETS, qb).unwrap();
    }
    for tag in 0..3 {
        add_call(a, PACKETS, u64::MAX, tag << 8);
    }
    let before = free_stack(a, PACKETS);
    assert_ne!(before, u64::from(PACKETS) - 1, "calls advanced the free-list's tags");

    let (ua, ub) = (a as usize, b as usize);
    // SAFETY: as above.
    unsafe {
        // Twice; for a second queue; on a second listener.
        assert_eq!(one.enable(a, PACKETS, qa), Err(Error::AlreadyEnabled { buffer: ua, queue: qa.0 }));
        assert_eq!(one.enable(a, PACKETS, qc), Err(Error::AlreadyEnabled { buffer: ua, queue: qa.0 }));
        assert_eq!(two.enable(a, PACKETS, qc), Err(Error::EnabledOnOtherListener { buffer: ua }));
        // Overlapping an enabled buffer, from either side.
        let inside = memory.at(size - 8);
        assert_eq!(two.enable(inside, 2, qc), Err(Error::Overlaps { buffer: inside as usize, enabled: ua }));
        // The same queue for another buffer, on this or another listener.
        let other = RawMemory::buffer(Protocol::Stack, PACKETS);
        assert_eq!(one.enable(other.at(0), PACKETS, qa), Err(Error::QueueTaken { queue: qa.0, buffer: ua }));
        assert_eq!(two.enable(other.at(0), PACKETS, qb), Err(Error::QueueTaken { queue: qb.0, buffer: ub }));
    }
    assert_eq!(free_stack(a, PACKETS), before, "a refused enable must not re-initialise the buffer");

    // Disabling: not enabled, wrong queue, wrong listener, null.
    let never = RawMemory::buffer(Protocol::Stack, PACKETS);
    assert_eq!(one.disable(never.at(0), qc), Err(Error::NotEnabled { buffer: never.at(0) as usize }));
    assert_eq!(one.disable(a, qb), Err(Error::WrongQueue { buffer: ua, enabled_for: qa.0, given: qb.0 }));
    assert_eq!(two.disable(a, qa), Err(Error::EnabledOnOtherListener { buffer: ua }));
    assert_eq!(one.disable(std::ptr::null_mut(), qa), Err(Error::Layout(LayoutError::Null)));

    // An emulated wave on a buffer that is not enabled, or with the wrong packet count.
    // SAFETY: the memory is allocated; nothing is called on it.
    unsafe {
        assert!(matches!(EmulatedWave::new(never.at(0), PACKETS, 1), Err(Error::NotEnabled { .. })));
        assert!(matches!(
            EmulatedWave::new(a, PACKETS + 1, 1),
            Err(Error::PacketCountMismatch { enabled_with: PACKETS, given, .. }) if given == PACKETS + 1
        ));
    }

    // Nothing broke: both buffers serve, then disable cleanly, and `a` moves to the other runtime.
    add_call(a, PACKETS, 0b1011, 0x77 << 8);
    add_call(b, PACKETS, u64::MAX, 0x78 << 8);
    one.disable(a, qa).unwrap();
    assert_eq!(one.disable(a, qa), Err(Error::NotEnabled { buffer: ua }), "twice");
    assert!(one.is_running(), "b is still enabled");
    one.disable(b, qb).unwrap();
    assert!(!one.is_running(), "the last disable stops the listener");
    assert!(!is_enabled(a) && !is_enabled(b));
    // SAFETY: as above.
    unsafe { two.enable(a, PACKETS, qb) }.unwrap();
    add_call(a, PACKETS, 1, 0x79 << 8);
    two.disable(a, qb).unwrap();
    assert_eq!(one.services().stats().total().errors + two.services().stats().total().errors, 0);
}

#[test]
fn enable_or_disable_from_a_service_is_refused() {
    const REENTER: u32 = 7;
    let runtime = runtime();
    runtime
        .services()
        .register_lane(REENTER, "reenter", |r| {
            let refused = hostcall::disable(r[0] as *mut u8, QueueId(r[1])) == Err(Error::CalledFromListener);
            // SAFETY: refused before anything is touched (or the test fails on the reply).
            let refused_too = unsafe { hostcall::enable(r[0] as *mut u8, PACKETS, QueueId(r[1] + 1)) }
                == Err(Error::CalledFromListener);
            Ok([u64::from(refused), u64::from(refused_too)])
        })
        .unwrap();
    let memory = RawMemory::buffer(Protocol::Stack, PACKETS);
    let queue = QueueId(0x0200_0001);
    // SAFETY: `memory` outlives the enablement.
    unsafe { runtime.enable(memory.at(0), PACKETS, queue) }.unwrap();
    // SAFETY: enabled until the end of the test.
    let wave = unsafe { EmulatedWave::new(memory.at(0), PACKETS, 1) }.unwrap();
    let reply = wave.call(REENTER, |_| [memory.at(0) as u64, queue.0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(reply.lane(0), [1, 1]);
    runtime.disable(memory.at(0), queue).unwrap();
}

#[test]
fn dropping_a_runtime_releases_its_buffers() {
    let memory = RawMemory::buffer(Protocol::Stack, PACKETS);
    let queue = QueueId(0x0300_0001);
    {
        let doomed = runtime();
        // SAFETY: `memory` outlives the runtime.
        unsafe { doomed.enable(memory.at(0), PACKETS, queue) }.unwrap();
        add_call(memory.at(0), PACKETS, 3, 1 << 8);
    }
    assert!(!is_enabled(memory.at(0)));
    let next = runtime();
    // SAFETY: as above.
    unsafe { next.enable(memory.at(0), PACKETS, queue) }.unwrap();
    add_call(memory.at(0), PACKETS, 3, 2 << 8);
    next.disable(memory.at(0), queue).unwrap();
}

/// A listener serves at most `MAX_BUFFERS`; one more is refused (and changes nothing), and a
/// second runtime serves it.
#[test]
fn a_full_listener_refuses_and_a_second_runtime_serves() {
    use hostcall::MAX_BUFFERS;
    use hostcall_core::PollerError;
    let (one, two) = (runtime(), runtime());
    let memory: Vec<RawMemory> = (0..=MAX_BUFFERS).map(|_| RawMemory::buffer(Protocol::Stack, 2)).collect();
    let queue = |i: usize| QueueId(0x0900_0000 + i as u64);
    for (i, m) in memory[..MAX_BUFFERS].iter().enumerate() {
        // SAFETY: `memory` outlives both runtimes' use of it.
        unsafe { one.enable(m.at(0), 2, queue(i)) }.unwrap();
    }
    let last = memory[MAX_BUFFERS].at(0);
    assert_eq!(
        // SAFETY: as above.
        unsafe { one.enable(last, 2, queue(MAX_BUFFERS)) },
        Err(Error::Poller(PollerError::Full { capacity: MAX_BUFFERS }))
    );
    assert!(!is_enabled(last), "a refused enable leaves no trace");
    // SAFETY: as above.
    unsafe { two.enable(last, 2, queue(MAX_BUFFERS)) }.unwrap();
    add_call(last, 2, 1, 1 << 8);
    add_call(memory[0].at(0), 2, 1, 2 << 8);
    two.disable(last, queue(MAX_BUFFERS)).unwrap();
    for (i, m) in memory[..MAX_BUFFERS].iter().enumerate() {
        one.disable(m.at(0), queue(i)).unwrap();
    }
    assert!(!one.is_running() && !two.is_running());
}

#[test]
fn the_default_runtime_starts_with_the_first_buffer_and_stops_after_the_last() {
    let global = HostcallRuntime::global();
    let _ = global.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]]));
    let (a, b) = (RawMemory::buffer(Protocol::Stack, 4), RawMemory::buffer(Protocol::Stack, 4));
    let (qa, qb) = (QueueId(0x0400_0001), QueueId(0x0400_0002));
    assert!(!global.is_running());
    // SAFETY: both outlive their enablement.
    unsafe {
        hostcall::enable(a.at(0), 4, qa).unwrap();
        hostcall::enable(b.at(0), 4, qb).unwrap();
    }
    assert!(global.is_running());
    assert_eq!(global.buffer_count(), 2);
    add_call(a.at(0), 4, u64::MAX, 1 << 8);
    add_call(b.at(0), 4, 1 << 63, 2 << 8);
    hostcall::disable(a.at(0), qa).unwrap();
    assert!(global.is_running());
    hostcall::disable(b.at(0), qb).unwrap();
    assert!(!global.is_running(), "the thread was joined after the last disable");
}

const EXIT_CHILD: &str = "HOSTCALL_LIFECYCLE_EXIT_CHILD";

/// Runs this test binary again, as a child that enables two buffers on the default runtime,
/// makes calls, leaves a thread calling in a loop, and returns without disabling anything. The
/// child must exit with 0 within a second.
#[test]
fn a_process_exits_promptly_with_buffers_still_enabled() {
    if std::env::var_os(EXIT_CHILD).is_some() {
        return exit_child();
    }
    let started = Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["a_process_exits_promptly_with_buffers_still_enabled", "--exact", "--test-threads=1"])
        .env(EXIT_CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::watchdog::exits_within(&mut child, "the child", Duration::from_secs(10));
    let elapsed = started.elapsed();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    eprintln!("child exited with {status} after {elapsed:?}");
    assert!(status.success(), "child failed: {status}\n{out}");
    assert!(out.contains("1 passed"), "the child test did not run:\n{out}");
    assert!(elapsed < Duration::from_secs(1), "the child took {elapsed:?} to exit");
}

fn exit_child() {
    let global = HostcallRuntime::global();
    global.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    // Leaked: still enabled at exit, so the listener may read them until the process is gone.
    let buffers: Vec<&'static RawMemory> =
        (0..2).map(|_| &*Box::leak(Box::new(RawMemory::buffer(Protocol::Stack, PACKETS)))).collect();
    for (i, memory) in buffers.iter().enumerate() {
        // SAFETY: leaked, so valid until the process ends.
        unsafe { hostcall::enable(memory.at(0), PACKETS, QueueId(0x0800_0000 + i as u64)) }.unwrap();
        for call in 0..10 {
            add_call(memory.at(0), PACKETS, u64::MAX, call << 8);
        }
    }
    let busy = buffers[1];
    thread::spawn(move || {
        // Still calling when the process exits: the listener is mid-drain then.
        for call in 0.. {
            add_call(busy.at(0), PACKETS, 0b101, call << 8);
        }
    });
    thread::sleep(Duration::from_millis(5));
    assert!(global.is_running());
}
