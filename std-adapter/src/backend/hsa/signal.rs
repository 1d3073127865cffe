//! [`HsaDoorbell`]: an HSA signal as the doorbell a GPU kernel rings.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hsa_sys::{HsaSignal, SignalCondition, SignalValue, WaitState};

use super::error::HsaError;
use super::runtime::HsaRuntime;
use crate::doorbell::{Doorbell, INIT};

/// The shortest nap [`HsaDoorbell`] takes in `hsa_signal_wait_scacquire` (shorter ones would be
/// ROCr's busy poll throughout): its 200 µs of polling, then at least one whole millisecond of
/// sleep, and the rest.
pub(crate) const BLOCKING_NAP: Duration = Duration::from_millis(2);

/// Converts a timeout to HSA timestamp units (`frequency` per second), saturating.
pub(super) fn timeout_ticks(timeout: Duration, frequency: u64) -> u64 {
    let ticks = timeout.as_nanos().saturating_mul(u128::from(frequency)) / 1_000_000_000;
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

/// A doorbell that is an HSA signal: what a GPU kernel rings. Create one per listener (or
/// [`ListenerPool`](crate::ListenerPool)) and give it to all the buffers it serves, as ROCm does;
/// the signal is destroyed when the last owner drops it.
///
/// Its handle is the address of ROCr's own `amd_signal_t`, which ROCm's device code rings by its
/// atomic add at +8 (and, where ROCr made it an interrupt signal, the mailbox store and
/// interrupt that wake a host blocked in `hsa_signal_wait_scacquire`).
///
/// **Napping.** ROCr's wait on an interrupt signal busy-polls its first 200 µs and then sleeps
/// in whole milliseconds, polling again whatever is left under one: a wait shorter than about
/// 1.2 ms never sleeps at all. So [`Doorbell::nap`] (a listener between two polls)
/// sleeps shorter naps with the OS's sleep and reads the value after it (a ring is then seen at
/// the end of the nap, which the listener's [`crate::WaitPolicy`] bounds), and only naps of 2 ms or more
/// go through `hsa_signal_wait_scacquire`, where a ring wakes the host at once.
pub struct HsaDoorbell {
    runtime: Arc<HsaRuntime>,
    signal: HsaSignal,
    frequency: u64,
}

impl fmt::Debug for HsaDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaDoorbell").field("signal", &self.signal).finish()
    }
}

impl HsaDoorbell {
    /// Creates a signal as ROCm's listener does, `hsa_signal_create(1, 0, NULL, &signal)`: at
    /// [`INIT`], with no specific consumers (so any agent may wait on it).
    pub fn new(runtime: Arc<HsaRuntime>) -> Result<Self, HsaError> {
        let frequency = runtime.timestamp_frequency().unwrap_or(1_000_000_000).max(1);
        let mut signal = HsaSignal::default();
        // SAFETY: no consumer list (0, null) is allowed; `signal` is a valid out-pointer.
        let status =
            unsafe { (runtime.lib.hsa_signal_create)(INIT as SignalValue, 0, std::ptr::null(), &mut signal) };
        runtime.check("hsa_signal_create", status)?;
        Ok(Self { runtime, signal, frequency })
    }

    /// The signal.
    pub fn signal(&self) -> HsaSignal {
        self.signal
    }
}

impl Doorbell for HsaDoorbell {
    fn handle(&self) -> u64 {
        self.signal.handle
    }

    fn ring(&self) {
        // SAFETY: the signal is live until drop. Release (`screlease`): the caller's earlier writes
        // (the ready-stack push) are ordered before the ring, as with the device's `signal_add`.
        unsafe { (self.runtime.lib.hsa_signal_add_screlease)(self.signal, 1) }
    }

    fn value(&self) -> u64 {
        // SAFETY: the signal is live until drop.
        unsafe { (self.runtime.lib.hsa_signal_load_scacquire)(self.signal) as u64 }
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        if timeout.is_zero() {
            return self.value();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // SAFETY: the signal is live until drop. The wait may return early (the HSA spec
            // allows spurious wake-ups); the loop waits out the rest of the timeout.
            let value = unsafe {
                (self.runtime.lib.hsa_signal_wait_scacquire)(
                    self.signal,
                    SignalCondition::NE,
                    last_seen as SignalValue,
                    timeout_ticks(left, self.frequency),
                    WaitState::BLOCKED,
                )
            } as u64;
            if value != last_seen || Instant::now() >= deadline {
                return value;
            }
        }
    }

    fn nap(&self, last_seen: u64, timeout: Duration) -> u64 {
        if timeout >= BLOCKING_NAP {
            return self.wait(last_seen, timeout);
        }
        let now = self.value();
        if now != last_seen || timeout.is_zero() {
            return now;
        }
        std::thread::sleep(timeout);
        self.value()
    }
}

impl Drop for HsaDoorbell {
    fn drop(&mut self) {
        // SAFETY: the signal was created by `new` and is destroyed once, here.
        let status = unsafe { (self.runtime.lib.hsa_signal_destroy)(self.signal) };
        if let Err(error) = self.runtime.check("hsa_signal_destroy", status) {
            log::warn!("{error}");
        }
    }
}
