//! [`DeferredFree`] under a listener: DEVMEM's frees never run on a serving thread; a side thread
//! held up in a free neither stalls the listener nor lets the memory held grow past the bound.

use super::DeferredFree;
use crate::backend::host::{HostMemory, ParkingDoorbell};
use crate::buffer::{HostcallBuffer, Protocol};
use crate::device::Wave;
use crate::doorbell::Doorbell;
use crate::memory::{DeviceMemory, MemoryError};
use crate::services::devmem::DevMemLimits;
use crate::threads::listener::{listener_of_this_thread, Listener, ListenerConfig};
use hostcall_core::DEVMEM;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Host memory that records, for each free, whether it ran on a listener's thread (a serving
/// thread), and can hold its frees until told to go on (a free that waits for a kernel).
#[derive(Debug, Default)]
struct Recording {
    frees: AtomicUsize,
    frees_on_serving_thread: AtomicUsize,
    /// While true, a free waits (on `released`) before it frees.
    hold: Mutex<bool>,
    released: Condvar,
    waiting: AtomicBool,
}

impl Recording {
    fn release(&self) {
        *self.hold.lock().unwrap() = false;
        self.released.notify_all();
    }
}

impl DeviceMemory for Arc<Recording> {
    fn name(&self) -> &'static str {
        "recording"
    }
    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        HostMemory.allocate(size, align)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        // Relaxed (all three): counts and a flag read by the test after bounded waits.
        if listener_of_this_thread() != 0 {
            self.frees_on_serving_thread.fetch_add(1, Ordering::Relaxed);
        }
        let mut hold = self.hold.lock().unwrap();
        while *hold {
            self.waiting.store(true, Ordering::Relaxed);
            hold = self.released.wait_timeout(hold, Duration::from_secs(60)).unwrap().0;
        }
        drop(hold);
        // SAFETY: forwarded from this function's contract.
        unsafe { HostMemory.free(ptr, size, align) };
        self.frees.fetch_add(1, Ordering::Relaxed);
    }
    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

/// A listener serving DEVMEM from `memory`, one phase buffer, and a wave of one lane on it.
fn devmem_listener(memory: Arc<dyn DeviceMemory>) -> (Listener, Wave) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    listener.services().enable_devmem(memory, DevMemLimits::default()).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, Protocol::Phase).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer, 1).with_timeout(Duration::from_secs(30));
    (listener, wave)
}

fn allocate(wave: &Wave, size: u64) -> u64 {
    wave.call(DEVMEM, |_| [0, size, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)[0]
}

fn free(wave: &Wave, address: u64) -> [u64; 2] {
    wave.call(DEVMEM, |_| [address, 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)
}

/// Waits (60 s at most: a watchdog, not a timing bound) until `done`.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn devmem_frees_run_on_the_side_thread_not_the_listener() {
    let recording = Arc::new(Recording::default());
    let memory = Arc::new(DeferredFree::new(recording.clone()).unwrap());
    let (listener, wave) = devmem_listener(memory.clone());
    for round in 0..10u64 {
        let address = allocate(&wave, 4096 * (round + 1));
        assert_ne!(address, 0);
        assert_eq!(free(&wave, address), [0, 0]);
    }
    // Relaxed: counts, read after the side thread has freed everything (bounded wait).
    wait_until("ten frees", || recording.frees.load(Ordering::Relaxed) == 10);
    assert_eq!(recording.frees_on_serving_thread.load(Ordering::Relaxed), 0, "a free ran on the listener");
    assert_eq!(memory.pending_bytes(), 0);
    listener.shutdown();
}

/// The control: the same fake given to DEVMEM directly is freed on the listener's thread (what a
/// backend whose free waits for the device would deadlock on), so the count above means what it says.
#[test]
fn without_deferral_the_listener_runs_the_free() {
    let recording = Arc::new(Recording::default());
    let (listener, wave) = devmem_listener(Arc::new(recording.clone()));
    let address = allocate(&wave, 4096);
    assert_eq!(free(&wave, address), [0, 0]);
    // Relaxed: counts, read after the free was answered (the listener freed before replying).
    assert_eq!(recording.frees.load(Ordering::Relaxed), 1);
    assert_eq!(recording.frees_on_serving_thread.load(Ordering::Relaxed), 1);
    listener.shutdown();
}

/// A free that waits (as `cuMemFreeHost` waits for the kernels) holds up the side thread only:
/// the listener answers the free at once and keeps serving; once more than `max_pending` bytes
/// wait, allocations are refused (null), not stalled; when the free goes on, they succeed again.
#[test]
fn a_held_up_free_neither_stalls_the_listener_nor_grows_past_the_bound() {
    let recording = Arc::new(Recording::default());
    *recording.hold.lock().unwrap() = true;
    let memory = Arc::new(DeferredFree::with_max_pending(recording.clone(), 8192).unwrap());
    let (listener, wave) = devmem_listener(memory.clone());
    let blocks: Vec<u64> = (0..3).map(|_| allocate(&wave, 4096)).collect();
    assert!(blocks.iter().all(|&b| b != 0));
    for &block in &blocks {
        assert_eq!(free(&wave, block), [0, 0], "the free is answered while the side thread waits");
    }
    // Relaxed: a flag, read after a bounded wait.
    wait_until("the side thread holds a free", || recording.waiting.load(Ordering::Relaxed));
    assert_eq!(memory.pending_bytes(), 3 * 4096);
    assert_eq!(allocate(&wave, 4096), 0, "12 KiB wait to be freed, more than 8 KiB: refused");
    recording.release();
    wait_until("the frees", || memory.pending_bytes() == 0);
    assert_ne!(allocate(&wave, 4096), 0);
    // Relaxed: a count read after the bounded wait above.
    assert_eq!(recording.frees_on_serving_thread.load(Ordering::Relaxed), 0);
    listener.shutdown();
}

#[test]
fn dropping_frees_what_is_queued_and_joins_the_side_thread() {
    let recording = Arc::new(Recording::default());
    let memory = DeferredFree::new(recording.clone()).unwrap();
    for _ in 0..5 {
        let block = memory.allocate(64, 8).unwrap();
        // SAFETY: allocated just above with this size and alignment, not used afterwards.
        unsafe { memory.free(block, 64, 8) };
    }
    drop(memory);
    // Relaxed: the join in drop ordered the side thread's counts before this load.
    assert_eq!(recording.frees.load(Ordering::Relaxed), 5);
}
