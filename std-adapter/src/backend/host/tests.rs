//! The host doorbell against ROCm's device steps, done through raw pointers as device code does.

use super::ParkingDoorbell;
use crate::doorbell::signal::{AMD_SIGNAL_KIND_USER, EVENT_ID_OFFSET, EVENT_MAILBOX_OFFSET, VALUE_OFFSET};
use crate::doorbell::{Doorbell, INIT};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use std::time::Instant;

/// ROCm's device-side ring (`__ockl_hsa_signal_add(signal, 1, release)` and its mailbox update),
/// step for step, on nothing but the handle. ROCm's loads of the mailbox pointer and the event id
/// are plain loads; Relaxed atomic loads are the same instructions and keep this free of races.
///
/// # Safety
/// `handle` is the address of a live `amd_signal_t`; its mailbox word is 0 or the address of a
/// live `u64`.
unsafe fn rocm_device_ring(handle: u64) {
    let signal = handle as *const u8;
    // SAFETY: the caller's contract: a live `amd_signal_t`, 64-aligned, so its value word at +8
    // is an aligned `i64` in it.
    let value = unsafe { &*signal.add(VALUE_OFFSET).cast::<AtomicI64>() };
    // Release: as ROCm's device code adds (pairs with the host's Acquire load of the value).
    value.fetch_add(1, Ordering::Release);
    // SAFETY: as above, the mailbox pointer at +16.
    let mailbox = unsafe { &*signal.add(EVENT_MAILBOX_OFFSET).cast::<AtomicU64>() }.load(Ordering::Relaxed);
    if mailbox != 0 {
        // SAFETY: as above, the event id at +24.
        let event_id = unsafe { &*signal.add(EVENT_ID_OFFSET).cast::<AtomicU32>() }.load(Ordering::Relaxed);
        // SAFETY: the caller's contract: a non-zero mailbox is a live `u64`.
        unsafe { &*(mailbox as *const AtomicU64) }.store(u64::from(event_id), Ordering::Release);
        // (Here the device raises an interrupt with `s_sendmsg`; a CPU has none to raise.)
    }
}

/// Runs `f` on a thread and fails the test if it has not returned within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|e| panic!("did not return within {limit:?}: {e}"))
}

#[test]
fn the_handle_is_a_user_signal_of_rocm_layout() {
    let bell = ParkingDoorbell::new();
    let handle = bell.handle();
    assert_eq!(handle % 64, 0);
    // SAFETY: the handle is the address of the doorbell's live signal.
    let (kind, value, mailbox) = unsafe {
        let base = handle as *const u8;
        (
            (*base.cast::<AtomicI64>()).load(Ordering::Relaxed),
            (*base.add(VALUE_OFFSET).cast::<AtomicI64>()).load(Ordering::Relaxed),
            (*base.add(EVENT_MAILBOX_OFFSET).cast::<AtomicU64>()).load(Ordering::Relaxed),
        )
    };
    assert_eq!((kind, value, mailbox), (AMD_SIGNAL_KIND_USER, INIT as i64, 0));
    let moved = Box::new(bell);
    assert_eq!(moved.handle(), handle, "the signal does not move with its doorbell");
}

#[test]
fn a_ring_wakes_a_sleeping_host() {
    let bell = Arc::new(ParkingDoorbell::new());
    let host = {
        let bell = bell.clone();
        std::thread::spawn(move || bell.wait(INIT, Duration::from_secs(30)))
    };
    std::thread::sleep(Duration::from_millis(20));
    bell.ring();
    assert_eq!(within(Duration::from_secs(10), move || host.join().unwrap()), INIT + 1);
}

#[test]
fn rocm_device_steps_from_another_thread_wake_a_waiting_host() {
    let bell = Arc::new(ParkingDoorbell::new());
    let handle = bell.handle();
    let host = {
        let bell = bell.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            (bell.wait(INIT, Duration::from_secs(30)), started.elapsed())
        })
    };
    let device = std::thread::spawn(move || {
        // Long enough for the host to be past its spin and asleep, woken by nobody.
        std::thread::sleep(Duration::from_millis(50));
        let rung = Instant::now();
        // SAFETY: `bell` (held by this test) keeps the signal alive; its mailbox is 0.
        unsafe { rocm_device_ring(handle) };
        rung
    });
    let rung = device.join().unwrap();
    let (value, waited) = within(Duration::from_secs(10), move || host.join().unwrap());
    assert_eq!(value, INIT + 1);
    assert!(waited >= Duration::from_millis(40), "the host returned before the ring: {waited:?}");
    println!("a raw device add was noticed {:?} after it happened", rung.elapsed());
}

#[test]
fn the_mailbox_store_happens_when_the_mailbox_is_set() {
    let bell = ParkingDoorbell::new();
    let mailbox = Box::new(AtomicU64::new(0));
    // SAFETY: `mailbox` outlives every ring below and is cleared before it is dropped.
    unsafe { bell.set_event_mailbox(&*mailbox, 42) };
    // SAFETY: the signal is alive and its mailbox is the live `mailbox`.
    unsafe { rocm_device_ring(bell.handle()) };
    assert_eq!(mailbox.load(Ordering::Acquire), 42, "the device's mailbox store");
    mailbox.store(0, Ordering::Relaxed);
    bell.ring();
    assert_eq!(mailbox.load(Ordering::Acquire), 42, "the host ring's mailbox store");
    assert_eq!(bell.value(), INIT + 2);

    bell.clear_event_mailbox();
    mailbox.store(0, Ordering::Relaxed);
    // SAFETY: the mailbox word is 0 again.
    unsafe { rocm_device_ring(bell.handle()) };
    bell.ring();
    assert_eq!(mailbox.load(Ordering::Acquire), 0, "no mailbox, no store");
    assert_eq!(bell.value(), INIT + 4);
}

#[test]
fn a_host_ring_ignores_a_mailbox_it_did_not_set() {
    let bell = ParkingDoorbell::new();
    let forged = Box::new(AtomicU64::new(7));
    // What a hostile device could do: write an address of its choosing at +16.
    bell.signal().event_mailbox_ptr.store(&*forged as *const AtomicU64 as u64, Ordering::Release);
    bell.ring();
    assert_eq!(forged.load(Ordering::Acquire), 7, "the host stores only to a mailbox it set");
    assert_eq!(bell.value(), INIT + 1, "the ring itself still happened");
}

#[test]
fn wait_returns_on_timeout() {
    let bell = ParkingDoorbell::new();
    let started = Instant::now();
    assert_eq!(bell.wait(INIT, Duration::from_millis(20)), INIT);
    assert!(started.elapsed() >= Duration::from_millis(20));
    assert_eq!(bell.wait(INIT + 5, Duration::ZERO), INIT);
}

/// CPU time of the calling thread.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` to the valid out-pointer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD measures the calling thread.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

#[test]
#[cfg(target_os = "linux")]
fn an_idle_wait_does_not_burn_a_core() {
    let bell = ParkingDoorbell::new();
    let (cpu, wall) = (thread_cpu_time(), Instant::now());
    assert_eq!(bell.wait(INIT, Duration::from_millis(300)), INIT);
    let (cpu, wall) = (thread_cpu_time() - cpu, wall.elapsed());
    println!("waited {wall:?} using {cpu:?} of CPU");
    assert!(cpu < wall / 10, "an idle wait used {cpu:?} of CPU in {wall:?}");
}
