//! The poller's registration table and the pins that let [`Poller::remove`](super::Poller::remove)
//! wait for a poll without the poll holding any lock while services run.
//!
//! # Who writes what
//!
//! | state | written by | when |
//! | --- | --- | --- |
//! | `Table` (slot `i` `Free` / `Serving` / `Retiring`, and its `version`) | `add` (`Free` -> `Serving`), `remove` (`Serving` -> `Retiring` -> `Free`) | under the table lock |
//! | `Poller::published` (a copy of the table's `version`) | `add`, `remove` | under the table lock, after the change |
//! | `Pins::pinned[i]` | a poll session: set under the table lock by a refresh, or without it by a re-pin; cleared under it or at the session's end | a session's refresh pins the slots of its new copy and unpins those of its old one; a new session's first poll re-pins the copy the last one kept; its drop unpins them all |
//! | `Poller::polling` (the session's copy of the serving registrations, and each slot's drain state) | the session only | under the poll lock (host-private); the copy is refreshed under the table lock |
//!
//! # Removal
//!
//! A poll session keeps a copy of the `Serving` registrations, with the slot of every one of them
//! pinned, from one poll to the next. A poll reads the published `version`; if it changed since
//! the copy was made (an `add` or a `remove` since), the poll takes the table lock, unpins the old
//! copy's slots, copies the table's serving registrations and pins their slots, and lets go of the
//! lock before draining anything. Otherwise it drains its copy without any lock. The session's
//! drop unpins every slot of its copy; the copy stays (behind the poll lock) for the next
//! session. `remove` takes the table lock, turns the slot `Retiring` (no later refresh copies it,
//! no `add` reuses it) and bumps and publishes `version`, lets go of the lock, issues a SeqCst
//! fence, and spins until the slot is unpinned; then it frees the slot.
//!
//! A new session's first poll (the std listener's first after each nap: it drops its session
//! before napping) finds the kept copy unpinned. If the published version is still the copy's, it
//! re-pins the copy without the lock: it pins the copy's slots, issues a SeqCst fence and reads
//! the published version again; if it is still the copy's, the poll drains the copy; otherwise it
//! refreshes under the lock (unpinning what it just pinned).
//!
//! A pin set under the table lock is ordered by the lock: either the refresh took the lock before
//! the remover (then the remover, taking the lock after it, sees the pin and waits for the
//! Release unpin of a later refresh or of the session's drop) or the remover did (then the
//! refresh does not copy the slot and does not pin it). A pin set by a re-pin is not: it is a
//! store followed by a load of another word (the version), against the remover's store of the
//! version followed by its load of the pin, the store-buffering shape in which, without a full
//! fence on both sides, each load may read the other side's old value: the re-pin its copy's
//! version, the remover an unpinned slot, and `remove` returns while the poll drains the slot.
//! The two SeqCst fences (the re-pin's between its pins and its read, `remove`'s between its
//! publish and its read of the pin) are ordered one before the other: if the re-pin's comes first,
//! the remover's read sees the pin (or a later unpin, after the poll's drains); if the remover's
//! does, the re-pin reads the new version (or a later one) and does not drain the slot. Every
//! drain of the slot's buffer comes before the unpin in the session's thread. So when `remove`
//! returns, every access of a poll to the buffer happens before it: the caller may free the
//! memory. A steady-state poll (its copy pinned) writes nothing and needs no fence; a session
//! pays one fence a re-pin, `remove` one a removal.
//!
//! | session | remove | |
//! | --- | --- | --- |
//! | version changed: lock; copy, pin 3; unlock | | |
//! | drain slot 3 (services run) | lock; slot 3 `Retiring`, version + 1 published; unlock | |
//! | | fence; load pin 3 (Acquire): set, spin | |
//! | next poll: version unchanged (not yet seen): drain slot 3 again, pinned | | |
//! | next poll: version changed: lock; unpin 3 (Release); copy the rest, pin them; unlock | | |
//! | | load pin 3: clear; lock; slot 3 `Free`; unlock; return | buffer may be freed |
//!
//! And a re-pin against the same removal (the session was dropped after a poll, unpinning 3):
//!
//! | new session | remove | |
//! | --- | --- | --- |
//! | version unchanged: pin 3 (Relaxed) | lock; slot 3 `Retiring`, version + 1 published; unlock | |
//! | fence | fence | one of the two is first in their total order |
//! | read version: the copy's (fence first): drain slot 3; ... unpin 3 (Release) | load pin 3: set (its fence second), spin until the unpin | |
//! | or read version + 1 (its fence second): lock; unpin 3 (Release); copy the rest; unlock | or load pin 3: clear, free; or set, spin until that unpin | the slot not drained |
//!
//! The cost is the remover's wait: until the session's next poll, or its end. So a session is
//! dropped before its thread waits for anything but the device (the std crate's listener drops it
//! before each nap).

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
    /// The scope a fresh registration starts with; in a poll session's copy, the scope as of its
    /// last drain (the session carries it across refreshes).
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
    /// The version of an empty table (a session's copy at version 0 was never made).
    pub(super) const FIRST_VERSION: u64 = 1;

    pub(super) const fn new() -> Self {
        Self {
            serving: heapless::Vec::new(),
            taken: [false; N],
            next_generation: 1,
            version: Self::FIRST_VERSION,
        }
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

/// Per slot: whether a poll session's copy holds it.
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

    /// Pins `slot`: by a session's refresh under the table lock, or by a session's re-pin without
    /// it (`Poller::repin`), which a SeqCst fence follows.
    pub(super) fn pin(&self, slot: usize) {
        // Relaxed: under the table lock, a remover reads the pin only after taking that lock
        // later (the lock's release/acquire orders the store before that read) or, having taken
        // it earlier, retired the slot, which the refresh then does not copy. In the re-pin,
        // without the lock, the SeqCst fence that follows orders the store before the re-pin's
        // read of the published version; it pairs with the fence in `Poller::remove` between
        // its publish and its read of the pin.
        self.pinned[slot].store(1, Ordering::Relaxed);
    }

    /// The session is done with `slot`'s buffer (its refresh dropped it, or the session ended).
    pub(super) fn unpin(&self, slot: usize) {
        // Release: pairs with the Acquire load in `wait_unpinned`: every access the session's
        // polls made to the buffer happens before the remover returns.
        self.pinned[slot].store(0, Ordering::Release);
    }

    /// Whether `slot` is pinned (for the tests).
    #[cfg(test)]
    pub(super) fn is_pinned(&self, slot: usize) -> bool {
        // Relaxed: read by the thread that pinned or unpinned it, or after joining it.
        self.pinned[slot].load(Ordering::Relaxed) != 0
    }

    /// Spins until no poll has `slot` pinned. Called without the table lock, after the slot
    /// was made `Retiring` under it and a SeqCst fence after its version's publication.
    pub(super) fn wait_unpinned(&self, slot: usize) {
        // Acquire: pairs with the Release store in `unpin`. That the first load sees a pin set
        // before it (under the lock, or by a re-pin that read the old version) is the lock's
        // ordering or the two SeqCst fences' (`Poller::remove`, `Poller::repin`).
        while self.pinned[slot].load(Ordering::Acquire) != 0 {
            crate::sync::spin_hint();
        }
    }
}
