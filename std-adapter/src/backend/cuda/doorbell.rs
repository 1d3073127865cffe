//! [`MappedDoorbell`]: a word of mapped host memory the GPU stores to and the host polls.

use super::memory::CudaMemory;
use crate::doorbell::{Doorbell, DONE, INIT};
use crate::error::Error;
use crate::memory::DeviceAllocation;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A doorbell the GPU can ring: one `u64` in pinned, mapped host memory. `include/hostcall_cuda.cuh`
/// stores the GPU's global timer into it (odd, never [`DONE`]), at most once per 10 us.
///
/// The host side polls: [`Doorbell::wait`] re-reads the word every 20 us until it changes or
/// the timeout passes (a device cannot wake a sleeping thread). A spinning listener never
/// waits on it. The device's stores and the host's [`Doorbell::ring`]/[`Doorbell::stop`] are
/// not atomic with each other (no platform atomics): a ring may be lost, which the listener's
/// poll on every timeout covers, as for any missed ring.
pub struct MappedDoorbell {
    allocation: DeviceAllocation,
}

impl MappedDoorbell {
    /// A doorbell at [`INIT`] in `memory`.
    pub fn new(memory: Arc<CudaMemory>) -> Result<Self, Error> {
        let allocation = DeviceAllocation::new(memory, 128, 128)?;
        let doorbell = Self { allocation };
        // Relaxed: published by the launch of any kernel that rings it.
        doorbell.word().store(INIT, Ordering::Relaxed);
        Ok(doorbell)
    }

    fn word(&self) -> &AtomicU64 {
        // SAFETY: the allocation is 128 bytes, 128-aligned, lives as long as `self`, and is only
        // accessed atomically (here, and by device code with system-scope stores).
        unsafe { &*self.allocation.as_ptr().cast::<AtomicU64>() }
    }
}

impl Doorbell for MappedDoorbell {
    fn handle(&self) -> u64 {
        self.allocation.device_address()
    }

    fn ring(&self) {
        // Release: pairs with the Acquire load in `value`. (The device's ring is a relaxed store:
        // the doorbell only says "look"; packets are published by their own phase stores.)
        self.word().fetch_add(2, Ordering::Release);
    }

    fn value(&self) -> u64 {
        // Acquire: pairs with the Release in `ring` and `stop`.
        self.word().load(Ordering::Acquire)
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.value();
            if now != last_seen || Instant::now() >= deadline {
                return now;
            }
            std::thread::sleep(
                Duration::from_micros(20).min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }

    fn stop(&self) {
        // Release: pairs with the Acquire load in `value`.
        self.word().store(DONE, Ordering::Release);
    }
}

impl fmt::Debug for MappedDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedDoorbell").field("handle", &self.handle()).finish()
    }
}
