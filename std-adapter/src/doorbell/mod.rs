//! The doorbell: the device rings it after pushing a packet; the host waits on it.
//!
//! On every backend the doorbell is an object of ROCm's `amd_signal_t` layout ([`AmdSignal`]),
//! because ROCm's device code treats the handle a buffer carries as the address of one: it adds
//! 1 to the word at +8 and, if the word at +16 is set, stores an event id there
//! ([`signal`] describes it). [`ParkingDoorbell`](crate::ParkingDoorbell) (in
//! [`crate::backend::host`]) owns such an object in host memory; the HSA
//! backend's doorbell is a real HSA signal (ROCr's own `amd_signal_t`); the CUDA backend's keeps
//! the layout in mapped memory.
//!
//! Values follow ROCm's listener: [`INIT`] (1) is the starting value and each ring adds 1. The
//! host waits for "value != last seen" with a timeout, and polls its buffers on every timeout
//! anyway, so a missed ring costs at most one timeout, never a hang.
//!
//! A listener stops by a flag of its own and a [`Doorbell::ring`] to wake itself: the other
//! listeners sleeping on the same doorbell see one spurious ring, poll once and sleep again.
//! (ROCm's listener stores [`DONE`] into its signal instead; with a doorbell that several
//! listeners share that would leave the others seeing "changed" at every wait, so nothing here
//! stores it.)

pub mod signal;

use std::time::Duration;

/// The value ROCm's listener stores into its signal to stop. This crate never stores it (see the
/// module docs); to the listener it is a value like any other.
pub const DONE: u64 = 0;
/// The value a doorbell starts at.
pub const INIT: u64 = 1;

/// A doorbell both sides can reach.
///
/// One doorbell serves one listener (or one [`ListenerPool`](crate::ListenerPool)) and every
/// buffer it serves, as in ROCm: the device rings the doorbell of the buffer it used, and the
/// host sleeping on it wakes up and polls all its buffers.
pub trait Doorbell: Send + Sync + std::fmt::Debug {
    /// The word stored in the buffer's `doorbell` field: the address of an `amd_signal_t` (an
    /// HSA signal handle on ROCm).
    fn handle(&self) -> u64;
    /// Rings as ROCm's device code does (add 1 to the value, release; the mailbox store where
    /// there is one) and wakes a waiting host. Host code rings too: emulated waves after a push,
    /// a stopping listener to wake itself.
    fn ring(&self);
    /// The current value.
    fn value(&self) -> u64;
    /// Host side: wait until the value differs from `last_seen` or `timeout` passes, and return
    /// the value then. Must notice an add by device code that wakes nobody, and must not burn a
    /// core while waiting for long.
    fn wait(&self, last_seen: u64, timeout: Duration) -> u64;
    /// Host side, for a caller that polls on a schedule of its own (a listener between two
    /// polls, [`crate::WaitPolicy`]): as [`Doorbell::wait`], in as few wake-ups as the doorbell
    /// can manage and without a spin first (the caller spun already). A ring that can wake a
    /// sleeper ends it at once; one that cannot may be seen only when `timeout` ends. The
    /// default is [`Doorbell::wait`].
    fn nap(&self, last_seen: u64, timeout: Duration) -> u64 {
        self.wait(last_seen, timeout)
    }
}
