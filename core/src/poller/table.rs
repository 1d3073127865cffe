//! The poller's registration table and the pins that let [`Poller::remove`](super::Poller::remove)
//! wait for a poll without the poll holding any lock while services run.
//!
//! # Who writes what
//!
//! | state | written by | when |
//! | --- | --- | --- |
//! | `Table` (slot `i` `Free` / `Serving` / `Retiring`, and its `version`) | `add` (`Free` -> `Serving`), `remove` (`Serving` -> `Retiring` -> `Free`) | under the table lock |
//! | `Pins::pinned[i]` | `poll_once`: set under the table lock, cleared without it | a poll pins every serving slot at its start and unpins each once it has drained it |
//! | `Poller::polling` (the poll's copy of the serving registrations, and each slot's drain state) | `poll_once` only | under the poll lock (host-private); the copy is refreshed under the table lock |
//!
//! # Removal
//!
//! A poll takes the table lock once; if the table's `version` changed since its last poll
//! (an `add` or a `remove` since) it refreshes its own copy of the `Serving` registrations (the
//! copy lives in the poll lock's state, so an unchanged table costs no copy); it pins the slot of
//! every registration of that copy and lets go of the lock before draining anything. `remove`
//! takes the table lock, turns the slot `Retiring` (no later poll copies it, no `add` reuses it)
//! and bumps `version` (the next poll drops it from its copy), lets go of the lock, and spins
//! until the slot is unpinned; then it frees the slot. Either the poll took the lock first (then
//! the remover, taking the lock after it, sees the pin and waits for the Release unpin) or the
//! remover did (then the poll sees the new `version` and drops the registration before pinning).
//! So when `remove` returns, every access of a poll to the buffer happens before it: the caller
//! may free the memory. The poll's copy may still hold the removed registration's view until the
//! next poll refreshes it, but nothing reads through it: a poll drains only what it refreshed and
//! pinned under the table lock.
//!
//! | poll | remove | |
//! | --- | --- | --- |
//! | lock; version unchanged: pin 3; unlock | | |
//! | drain slot 3 (services run) | lock; slot 3 `Retiring`, version + 1; unlock | |
//! | | load pin 3 (Acquire): set, spin | |
//! | unpin 3 (Release) | | |
//! | | load pin 3: clear; lock; slot 3 `Free`; unlock; return | buffer may be freed |
//! | lock; version changed: refresh the copy (slot 3 gone); pin the rest; unlock | | |

use crate::any::{AnyState, AnyView, Protocol};
use crate::scan::DrainScope;
use crate::sync::{AtomicU32, Ordering};
use core::fmt;

/// One registration: the buffer's geometry and the view its `Registration` checked and built, its
/// initial drain scope and its host state.
#[derive(Clone, Copy)]
pub(super) struct Registered {
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) num_packets: u64,
    pub(super) protocol: Protocol,
    /// The checked view of `base..base + len`, built once by `add`. Its `'static` is a lie the
    /// removal protocol makes safe: a poll reads through it only while the slot is pinned, and
    /// `remove` (after which the caller may free the memory) returns only once it is unpinned.
    pub(super) view: AnyView<'static>,
    /// The device ordinal its packets report ([`PacketRequest::device`](crate::PacketRequest::device)).
    pub(super) device: u32,
    /// The scope a fresh registration starts with (a poll copies it into its own state once).
    pub(super) scope: DrainScope,
    /// The buffer's host state (`Registration::with_state`): the owner's memory, used only by
    /// this poller's polls while registered.
    pub(super) state: AnyState,
    /// Distinguishes this registration from earlier ones of the same slot.
    pub(super) generation: u64,
}

/// Everything but the view (which would repeat the base and the packet count).
impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("num_packets", &self.num_packets)
            .field("protocol", &self.protocol)
            .field("device", &self.device)
            .field("scope", &self.scope)
            .field("state", &self.state)
            .field("generation", &self.generation)
            .finish()
    }
}

/// The fixed-capacity registration table, behind the poller's table lock. A slot is `Free`,
/// `Serving` (in `serving`) or `Retiring` (taken, but no longer in `serving`: being removed; no
/// poll copies it any more and no `add` reuses it until the remover has seen it unpinned).
pub(super) struct Table<const N: usize> {
    /// The serving registrations, each with its slot (dense: a poll walks only these).
    pub(super) serving: heapless::Vec<(usize, Registered), N>,
    /// Per slot: whether it is taken (serving or retiring).
    taken: [bool; N],
    /// The generation the next registration gets.
    next_generation: u64,
    /// Changes whenever `serving` does: a poll refreshes its copy of `serving` only when this
    /// differs from the version it copied last.
    pub(super) version: u64,
}

impl<const N: usize> Table<N> {
    pub(super) const fn new() -> Self {
        Self { serving: heapless::Vec::new(), taken: [false; N], next_generation: 1, version: 1 }
    }

    /// The position in `serving` of the buffer at `base`.
    fn position(&self, base: *mut u8) -> Option<usize> {
        self.serving.iter().position(|(_, r)| r.base == base)
    }

    /// The registration serving the buffer at `base`.
    pub(super) fn get(&self, base: *mut u8) -> Option<&Registered> {
        self.position(base).map(|at| &self.serving[at].1)
    }

    /// Registers `registered` (its generation assigned here) in a free slot; `None` if every
    /// slot is taken.
    pub(super) fn insert(&mut self, mut registered: Registered) -> Option<()> {
        let slot = self.taken.iter().position(|taken| !taken)?;
        registered.generation = self.next_generation;
        self.next_generation += 1;
        self.serving.push((slot, registered)).ok()?;
        self.taken[slot] = true;
        self.version += 1;
        Some(())
    }

    /// Turns the slot serving `base` `Retiring`; returns it.
    pub(super) fn retire(&mut self, base: *mut u8) -> Option<usize> {
        let at = self.position(base)?;
        self.version += 1;
        Some(self.serving.swap_remove(at).0)
    }

    /// Frees a retired slot (its remover saw it unpinned).
    pub(super) fn free(&mut self, slot: usize) {
        self.taken[slot] = false;
    }
}

/// Per slot: whether the poll in progress still has to drain it.
pub(super) struct Pins<const N: usize> {
    pinned: [AtomicU32; N],
}

impl<const N: usize> Pins<N> {
    crate::sync::const_fn! {
        /// Every slot unpinned.
        pub(super) const fn new() -> Self {
            Self { pinned: crate::sync::new_array![AtomicU32::new(0); N] }
        }
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
