//! The poller's registration table and the pins that let [`Poller::remove`](super::Poller::remove)
//! wait for a poll without the poll holding any lock while services run.
//!
//! # Who writes what
//!
//! | state | written by | when |
//! | --- | --- | --- |
//! | `Table::slots[i]` | `add` (`Free` -> `Serving`), `remove` (`Serving` -> `Retiring` -> `Free`) | under the table lock |
//! | `Pins::pinned[i]` | `poll_once`: set under the table lock, cleared without it | a poll pins every serving slot at its start and unpins each once it has drained it |
//! | `Slots::scopes[i]` | `poll_once` only | under the poll lock (the host-private drain state) |
//!
//! # Removal
//!
//! A poll takes the table lock once, copies every `Serving` registration and pins its slot, and
//! lets go of the lock before draining anything. `remove` takes the table lock, turns the slot
//! `Retiring` (no later poll copies it, no `add` reuses it), lets go of the lock, and spins until
//! the slot is unpinned; then it frees the slot. Either the poll took the lock first (then the
//! remover, taking the lock after it, sees the pin and waits for the Release unpin) or the remover
//! did (then the poll never sees the registration). So when `remove` returns, every access of a
//! poll to the buffer happens before it: the caller may free the memory.
//!
//! | poll | remove | |
//! | --- | --- | --- |
//! | lock; copy slot 3, pin 3; unlock | | |
//! | drain slot 3 (services run) | lock; slot 3 `Retiring`; unlock | |
//! | | load pin 3 (Acquire): set, spin | |
//! | unpin 3 (Release) | | |
//! | | load pin 3: clear; lock; slot 3 `Free`; unlock; return | buffer may be freed |

use crate::any::DrainScope;
use crate::host::Protocol;
use crate::sync::{AtomicU32, Ordering};

/// One registration: the buffer's geometry, checked once by `add`, and its initial drain scope.
#[derive(Clone, Copy)]
pub(super) struct Registered {
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) num_packets: u64,
    pub(super) protocol: Protocol,
    /// The scope a fresh registration starts with (a poll copies it into its own state once).
    pub(super) scope: DrainScope,
    /// Distinguishes this registration from earlier ones of the same slot.
    pub(super) generation: u64,
}

/// The state of one slot of the table.
#[derive(Clone, Copy)]
pub(super) enum Slot {
    /// Holds nothing; `add` may use it.
    Free,
    /// A registered buffer, served by every poll.
    Serving(Registered),
    /// Being removed: no poll copies it any more and no `add` may reuse it until the remover has
    /// seen it unpinned.
    Retiring,
}

/// The fixed-capacity registration table, behind the poller's table lock.
pub(super) struct Table<const N: usize> {
    pub(super) slots: [Slot; N],
    /// Number of `Serving` slots.
    pub(super) serving: usize,
    /// The generation the next registration gets.
    pub(super) next_generation: u64,
}

impl<const N: usize> Table<N> {
    pub(super) const fn new() -> Self {
        Self { slots: [Slot::Free; N], serving: 0, next_generation: 1 }
    }

    /// The slot serving the buffer at `base`.
    pub(super) fn find(&self, base: *mut u8) -> Option<usize> {
        self.slots.iter().position(|s| matches!(s, Slot::Serving(r) if r.base == base))
    }

    /// The registration serving the buffer at `base`.
    pub(super) fn get(&self, base: *mut u8) -> Option<&Registered> {
        self.find(base).and_then(|i| match &self.slots[i] {
            Slot::Serving(r) => Some(r),
            _ => None,
        })
    }
}

/// Per slot: whether the poll in progress still has to drain it.
pub(super) struct Pins<const N: usize> {
    pinned: [AtomicU32; N],
}

impl<const N: usize> Pins<N> {
    pub(super) const fn new() -> Self {
        Self { pinned: [const { AtomicU32::new(0) }; N] }
    }

    /// Pins `slot`. Called with the table lock held.
    pub(super) fn pin(&self, slot: usize) {
        // Relaxed: the store is made under the table lock; a remover reads it only after taking
        // that lock later, and the lock's release/acquire orders it before that read.
        self.pinned[slot].store(1, Ordering::Relaxed);
    }

    /// The poll is done with `slot`'s buffer.
    pub(super) fn unpin(&self, slot: usize) {
        // Release: pairs with the Acquire load in `wait_unpinned`: every access the poll made to
        // the buffer happens before the remover returns.
        self.pinned[slot].store(0, Ordering::Release);
    }

    /// Spins until no poll has `slot` pinned. Called without the table lock, after the slot
    /// was made `Retiring` under it.
    pub(super) fn wait_unpinned(&self, slot: usize) {
        // Acquire: pairs with the Release store in `unpin`.
        while self.pinned[slot].load(Ordering::Acquire) != 0 {
            crate::sync::spin_hint();
        }
    }
}
