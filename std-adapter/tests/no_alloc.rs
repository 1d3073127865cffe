//! The hot path allocates nothing: once warm, a hostcall through a lane service costs no heap
//! allocation on any thread (the wave, the listener, the doorbell), with the listener spinning
//! or sleeping on its doorbell, for waves of 1 and of 64 lanes.
//!
//! A counting global allocator wraps `System` and counts every allocation of the process; the
//! test reads the count around a window of hostcalls. This file holds a single test so that no
//! other test's allocations fall into the window.

use hostcall::prelude::*;

use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// `System`, counting allocations (`alloc`, `alloc_zeroed` and `realloc`; frees are not counted).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// The size of the last allocation, for the failure message.
static LAST_SIZE: AtomicUsize = AtomicUsize::new(0);

fn count(layout: Layout) {
    // Relaxed: counters only; the test reads them after joining or synchronising with the
    // threads whose allocations matter (each hostcall's reply is an Acquire/Release edge).
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    LAST_SIZE.store(layout.size(), Ordering::Relaxed);
}

// SAFETY: forwards every call to `System` unchanged; counting touches only atomics and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: the caller's contract for `alloc` is forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const ADD: u32 = 100;
const WARMUP: u64 = 100;
const CALLS: u64 = 1_000;

/// Allocations during `CALLS` hostcalls by a warm wave of `lanes` lanes, and the size of the last
/// allocation in the window (if any).
fn allocations_per_window(config: ListenerConfig, lanes: u32) -> (u64, usize) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).unwrap();
    listener.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer, lanes);
    let call = |i: u64| {
        let reply = wave.call(ADD, |lane| [i, lane as u64, !i, 0, 0, 0, 0, 0]).unwrap();
        for lane in 0..lanes as usize {
            assert_eq!(reply.lane(lane), [i + lane as u64, !i]);
        }
    };
    for i in 0..WARMUP {
        call(i);
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for i in 0..CALLS {
        call(i);
    }
    let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let last_size = LAST_SIZE.load(Ordering::Relaxed);
    let stats = listener.shutdown();
    assert_eq!(stats.total().packets, WARMUP + CALLS);
    (during, last_size)
}

#[test]
fn warm_hostcalls_allocate_nothing() {
    for (name, config) in [("spinning", ListenerConfig::spinning()), ("blocking", ListenerConfig::default())]
    {
        for lanes in [1, 64] {
            let (n, last_size) = allocations_per_window(config.clone(), lanes);
            assert_eq!(
                n, 0,
                "{n} allocations during {CALLS} hostcalls of {lanes} lanes, {name} listener \
                 (the last of {last_size} bytes)"
            );
        }
    }
}
