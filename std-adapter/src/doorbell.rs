//! The doorbell: the device rings it after pushing a packet; the host waits on it.
//!
//! Signal values follow ROCm's listener: [`DONE`] (0) tells the listener to stop, [`INIT`] (1) is
//! the starting value, and each ring adds 1. The host waits for "value != last seen" with a
//! timeout, and polls its buffers on every timeout anyway, so a missed ring costs at most one
//! timeout, never a hang.

use std::time::Duration;

/// The value that tells the listener to stop.
pub const DONE: u64 = 0;
/// The value a doorbell starts at.
pub const INIT: u64 = 1;

/// A doorbell both sides can reach.
pub trait Doorbell: Send + Sync + std::fmt::Debug {
    /// The word stored in the buffer's `doorbell` field (an HSA signal handle on ROCm; for
    /// emulated waves anything that identifies this doorbell).
    fn handle(&self) -> u64;
    /// Device side: add 1 (with Release ordering) and wake a waiting host.
    fn ring(&self);
    /// The current value.
    fn value(&self) -> u64;
    /// Host side: wait until the value differs from `last_seen` or `timeout` passes, and return
    /// the value then. Must not burn a core while waiting for long.
    fn wait(&self, last_seen: u64, timeout: Duration) -> u64;
    /// Store [`DONE`] and wake the host.
    fn stop(&self);
}

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// The default doorbell: an atomic counter, with a condition variable for a host that sleeps.
///
/// A ring costs one atomic add and one load when nobody sleeps; the mutex is taken only to wake a
/// sleeping host. The host spins nowhere in here: `wait` sleeps on the condition variable.
#[derive(Debug)]
pub struct ParkingDoorbell {
    value: AtomicU64,
    sleepers: AtomicU32,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Default for ParkingDoorbell {
    fn default() -> Self {
        Self {
            value: AtomicU64::new(INIT),
            sleepers: AtomicU32::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        }
    }
}

impl ParkingDoorbell {
    /// A doorbell at [`INIT`].
    pub fn new() -> Self {
        Self::default()
    }

    fn wake_sleepers(&self) {
        // SeqCst fence: with the one in `wait`, either the sleeper sees the new value before it
        // sleeps, or we see its `sleepers` increment here (the store-load pattern needs SeqCst).
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            // Taking the lock orders the notify after the sleeper's check of the value (it checks
            // under the lock), so the wake cannot fall between its check and its sleep.
            let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.wake.notify_all();
        }
    }
}

impl Doorbell for ParkingDoorbell {
    fn handle(&self) -> u64 {
        self as *const Self as u64
    }

    fn ring(&self) {
        // Release: pairs with the Acquire load in `wait`. (The packet itself is published by the
        // ready-stack push; the doorbell only says "look".)
        self.value.fetch_add(1, Ordering::Release);
        self.wake_sleepers();
    }

    fn value(&self) -> u64 {
        // Acquire: pairs with the Release add in `ring` and store in `stop`.
        self.value.load(Ordering::Acquire)
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        let now = self.value();
        if now != last_seen || timeout.is_zero() {
            return now;
        }
        let deadline = Instant::now() + timeout;
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        // SeqCst fence: pairs with the fence in `wake_sleepers` (see there).
        fence(Ordering::SeqCst);
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let seen = loop {
            let now = self.value();
            let left = deadline.saturating_duration_since(Instant::now());
            if now != last_seen || left.is_zero() {
                break now;
            }
            guard = self.wake.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
        };
        drop(guard);
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        seen
    }

    fn stop(&self) {
        // Release: pairs with the Acquire load in `value`.
        self.value.store(DONE, Ordering::Release);
        self.wake_sleepers();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_ring_wakes_a_sleeping_host() {
        let bell = Arc::new(ParkingDoorbell::new());
        let host = {
            let bell = bell.clone();
            std::thread::spawn(move || bell.wait(INIT, Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(20));
        bell.ring();
        assert_eq!(host.join().unwrap(), INIT + 1);
    }

    #[test]
    fn wait_returns_on_timeout_and_stop_reads_done() {
        let bell = ParkingDoorbell::new();
        assert_eq!(bell.wait(INIT, Duration::from_millis(5)), INIT);
        bell.stop();
        assert_eq!(bell.wait(INIT, Duration::from_secs(30)), DONE);
    }
}
