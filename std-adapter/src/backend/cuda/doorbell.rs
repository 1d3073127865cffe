//! [`MappedDoorbell`]: an `amd_signal_t` in mapped host memory whose value word the GPU stores to
//! and the host polls.

use crate::doorbell::signal::{AmdSignal, AMD_SIGNAL_KIND_USER};
use crate::doorbell::{Doorbell, INIT};
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A doorbell the GPU can ring: an [`AmdSignal`] (a user signal, no mailbox) in pinned, mapped
/// host memory, so the handle has the layout ROCm's device code expects on every backend.
/// `include/hostcall_cuda.cuh` stores the GPU's global timer into its value word at +8 (odd,
/// never 0), at most once per 10 us.
///
/// The host side polls: [`Doorbell::wait`] re-reads the value every 20 us until it changes or
/// the timeout passes (a device cannot wake a sleeping thread). A spinning listener never
/// waits on it. The device's stores and the host's [`Doorbell::ring`] are not atomic with each
/// other (no platform atomics): a ring may be lost, which the listener's poll on every timeout
/// covers, as for any missed ring.
pub struct MappedDoorbell {
    allocation: DeviceAllocation,
}

impl MappedDoorbell {
    /// A doorbell at [`INIT`] in `memory`: memory the host and the GPU both reach, such as
    /// [`CudaMemory`](super::CudaMemory).
    pub fn new(memory: Arc<dyn DeviceMemory>) -> Result<Self, Error> {
        // 128 bytes: the signal's line, and the adjacent one the prefetcher pairs with it.
        let allocation = DeviceAllocation::new(memory, 128, 128)?;
        let doorbell = Self { allocation };
        // Relaxed (both): published by the launch of any kernel that rings it. The rest of the
        // signal is zero (allocations are zeroed): no mailbox.
        doorbell.signal().kind.store(AMD_SIGNAL_KIND_USER, Ordering::Relaxed);
        doorbell.signal().value.store(INIT as i64, Ordering::Relaxed);
        Ok(doorbell)
    }

    /// The signal (host view; [`Doorbell::handle`] is its device address).
    pub fn signal(&self) -> &AmdSignal {
        // SAFETY: the allocation is 128 zeroed bytes, 128-aligned (so an `AmdSignal` fits, all
        // atomics, for which zero bytes are valid values), lives as long as `self`, and is only
        // accessed atomically (here, and by device code with system-scope stores).
        unsafe { &*self.allocation.as_ptr().cast::<AmdSignal>() }
    }
}

impl Doorbell for MappedDoorbell {
    fn handle(&self) -> u64 {
        self.allocation.device_address()
    }

    fn ring(&self) {
        // Release: pairs with the Acquire load in `value`. (The device's ring is a relaxed store:
        // the doorbell only says "look"; packets are published by their own phase stores.) No
        // mailbox to store to: this signal never has one.
        self.signal().value.fetch_add(2, Ordering::Release);
    }

    fn value(&self) -> u64 {
        // Acquire: pairs with the Release in `ring`.
        self.signal().value.load(Ordering::Acquire) as u64
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
}

impl fmt::Debug for MappedDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedDoorbell").field("handle", &self.handle()).finish()
    }
}
