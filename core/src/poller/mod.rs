//! The listener's logic without a thread: a fixed-capacity set of registered buffers behind a
//! spin lock, and [`Poller::poll_once`], which drains every buffer and dispatches each packet.
//!
//! Buffers of every protocol are served side by side: [`Poller::add`] takes a [`Registration`]
//! of a buffer of any [`Protocol`](crate::Protocol) (its memory, device, range and host state);
//! each is drained through the one protocol switch ([`AnyView`]) and every packet reaches the same
//! [`Dispatch`]. What a buffer's host keeps across drains lives in its registration: the
//! [`DrainScope`] (a [`ScanWindow`](crate::ScanWindow) for a buffer whose host scans) in the
//! poll's own state, and the buffer's [`Host::State`](crate::Host::State) as the owner's memory the
//! registration points to ([`Registration::with_state`]). This module's code names no protocol
//! (its docs name some, as examples): it drains every buffer the same way.
//!
//! A runtime without threads (firmware, a bare-metal loop) calls `poll_once` from its main loop;
//! the std crate's listener is a loop around it that waits on a doorbell in between.
//!
//! No lock is held while a service runs but the poll lock: a poll session
//! ([`Poller::session`]) keeps a copy of the registrations, their slots pinned, refreshed under
//! the table lock only when the table changed since its last poll, and drains without the table
//! lock; so a service may call every other method of its poller (and of whatever wraps it) from
//! inside a poll, and a poll in steady state takes no lock at all. [`Poller::remove`] waits until
//! no session has the buffer pinned, so once it returns the poller will not touch that buffer
//! (nor its state) again and the caller may free it (the protocol and its ordering:
//! `poller/table.rs`). Polls are serialised by the poll lock, which a session holds: a poll asked
//! while a session is held (on another thread, or from a service of this poller) returns at once
//! with nothing served. [`Poller::poll_once`] is a poll in a session of its own.
//!
//! One buffer of a range-capable protocol may be served by several pollers at once (one per host
//! thread), each registered for a disjoint range of packet indices ([`Registration::range`]): the
//! host writes only the per-packet host word and the reply words of the packets it serves, so
//! pollers with disjoint ranges never write the same word. A buffer whose host takes every
//! submitted packet at once is served by one poller only.

use crate::any::{HostScratch, Protocol};
#[cfg(doc)]
use crate::dispatch::Dispatch;
use crate::scan::DrainScope;
use crate::sync::{AtomicU64, Lock, Ordering};
use core::fmt;
use poll::PollState;
use table::{Pins, Table};

mod error;
#[cfg(loom)]
pub(crate) mod model;
mod poll;
mod registration;
mod table;

pub use error::PollerError;
pub use poll::PollSession;
pub use registration::Registration;

/// A fixed-capacity set of up to `N` buffers and the loop body that serves them.
pub struct Poller<const N: usize> {
    /// Which buffers are registered, in which slot. Taken briefly by every method, never held
    /// while a service runs.
    table: Lock<Table<N>>,
    /// Which slots a poll session has pinned (the removal protocol of `poller/table.rs`).
    pins: Pins<N>,
    /// The table's version, published for sessions to compare without the table lock: stored
    /// under the table lock by every `add` and `remove` that changes the table.
    published: AtomicU64,
    /// The host-private state of the polls. Held for a whole poll and taken only by `poll_once`:
    /// it serialises polls.
    polling: Lock<PollState<N>>,
}

// SAFETY: the buffers are only accessed through the `AnyView`s their `Registration` built, whose
// accesses are all atomic, and `Registration::new`'s contract keeps the memory valid until
// `remove` returns; `remove` waits until no poll has the buffer pinned (see `table`), so no poll
// can be using a buffer after it is removed. A registration's host state is touched by this
// poller's polls alone (`Registration::with_state`), one at a time (the poll lock).
unsafe impl<const N: usize> Send for Poller<N> {}
// SAFETY: as for `Send`: all shared state is behind the two spin locks or accessed atomically.
unsafe impl<const N: usize> Sync for Poller<N> {}

/// The capacity and the buffers served (base, packets, protocol, device, scope); `<locked>` while
/// another thread holds the table lock, rather than waiting for it.
impl<const N: usize> fmt::Debug for Poller<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Serving<'t, const N: usize>(&'t Table<N>);
        impl<const N: usize> fmt::Debug for Serving<'_, N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.0.serving.iter().map(|(_, registered)| registered)).finish()
            }
        }
        let mut s = f.debug_struct("Poller");
        s.field("capacity", &N);
        match self.table.try_lock() {
            Some(table) => s.field("buffers", &Serving(&table)),
            None => s.field("buffers", &format_args!("<locked>")),
        };
        s.finish()
    }
}

impl<const N: usize> Default for Poller<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The fields of an empty poller, for both builds of [`Poller::new`].
macro_rules! empty_poller {
    () => {
        Self {
            table: Lock::new(Table::new()),
            pins: Pins::new(),
            published: AtomicU64::new(Table::<N>::FIRST_VERSION),
            polling: Lock::new(PollState {
                version: 0,
                pinned: 0,
                serving: heapless::Vec::new(),
                scopes: [(0, DrainScope::Whole); N],
                scratch: HostScratch::new(),
            }),
        }
    };
}

impl<const N: usize> Poller<N> {
    crate::sync::const_fn! {
        /// An empty poller (`const`, so a poller can be a `static`; not under loom, whose locks
        /// and atomics have no `const` constructor).
        pub const fn new() -> Self {
            empty_poller!()
        }
    }

    /// The protocol of the buffer registered at `base`, if any.
    pub fn protocol(&self, base: *mut u8) -> Option<Protocol> {
        self.table.lock().get(base).map(|r| r.protocol)
    }

    /// The device ordinal of the buffer registered at `base`, if any.
    pub fn device(&self, base: *mut u8) -> Option<u32> {
        self.table.lock().get(base).map(|r| r.device)
    }

    /// Deregisters the buffer at `base`. When this returns no poll is using it.
    ///
    /// It waits for a poll session that has the buffer pinned: until that session's next poll or
    /// its end. Called from a service inside a session of this poller, it would wait for itself
    /// (the std crate's listener refuses removals from its own thread).
    pub fn remove(&self, base: *mut u8) -> Result<(), PollerError> {
        let slot = self.retire(base)?;
        // SeqCst: pairs with the SeqCst fence of a session's lock-free re-pin (`Poller::repin`,
        // between its pin stores and its read of the published version): this fence orders the
        // publish in `retire` before the read of the pin in `wait_unpinned`, so either the re-pin
        // reads the new version (and does not drain the slot) or the read below sees its pin
        // (and waits for the unpin after its drains). A pin set by a refresh, under the table
        // lock, is ordered by the lock instead (`poller/table.rs`).
        crate::sync::fence(Ordering::SeqCst);
        self.free_unpinned(slot);
        Ok(())
    }

    /// `remove`'s first half: turns the slot serving `base` `Retiring` and publishes the table's
    /// new version, under the table lock; returns the slot.
    fn retire(&self, base: *mut u8) -> Result<usize, PollerError> {
        let mut table = self.table.lock();
        let slot = table.retire(base).ok_or(PollerError::NotRegistered { base: base as usize })?;
        self.publish(&table);
        Ok(slot)
    }

    /// `remove`'s second half: waits until no session has `slot` pinned, then frees it.
    fn free_unpinned(&self, slot: usize) {
        self.pins.wait_unpinned(slot);
        self.table.lock().free(slot);
    }

    /// Publishes the table's version for sessions (called with the table lock held, after a
    /// change).
    fn publish(&self, table: &Table<N>) {
        // Relaxed: a session that reads a new version takes the table lock before it reads the
        // table, and that lock orders this change before its refresh (`PollSession::poll_once`).
        // A session's lock-free re-pin that reads it is ordered against `remove`'s read of the
        // pin by the two SeqCst fences (`Poller::remove`, `Poller::repin`), not by this store.
        self.published.store(table.version, Ordering::Relaxed);
    }

    /// Whether a buffer is registered at `base`.
    pub fn contains(&self, base: *mut u8) -> bool {
        self.table.lock().get(base).is_some()
    }

    /// Number of registered buffers.
    pub fn len(&self) -> usize {
        self.table.lock().serving.len()
    }

    /// Whether no buffer is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
