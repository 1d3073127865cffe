//! The intrusive Treiber stack over packet headers, written once and used for both the free-list
//! and the ready-stack.
//!
//! The stack's top is one tagged-pointer word of the buffer prefix; each packet's `next` word links
//! it to the one below. Producers `pop` (free-list) and `push` (both stacks); the host only ever
//! `take_all`s the ready-stack, a single swap, so it never races a pop.
//!
//! Ordering story (each Release names its Acquire partner):
//! - `push` publishes the packet with a Release CAS on `top`. Everything its owner wrote before
//!   (the packet's `next`, header fields, payload slots) becomes visible to the thread that later
//!   reads that `top` value with Acquire: a `pop` (free-list) or `take_all` (ready-stack). Later
//!   pushes are read-modify-writes of the same word, so they continue the release sequence and one
//!   `take_all` acquires every packet of the chain it takes.
//! - `pop`'s Acquire load and Acquire CAS pair with the Release CAS of the `push` that put the
//!   packet there, so the popper sees `next` and, after success, owns the packet only after the
//!   previous owner's last reads of it.

use super::layout::Header;
use super::tagged::{Geometry, TaggedPtr};
use crate::host::ChainError;
use crate::sync::{retry_hint, AtomicU64, Ordering};

/// A view of one stack: its top word, the headers it links, and the viewer's private geometry.
#[derive(Clone, Copy, Debug)]
pub struct TaggedStack<'a> {
    top: &'a AtomicU64,
    headers: &'a [Header],
    geometry: Geometry,
}

impl<'a> TaggedStack<'a> {
    /// A stack whose top is `top`, linking `headers`.
    ///
    /// # Safety
    /// `headers.len()` must equal `geometry.num_packets()` (a buffer view's constructors check
    /// it): the walk indexes `headers` with indices the geometry checked, without checking them
    /// again.
    #[inline]
    pub(crate) unsafe fn new(top: &'a AtomicU64, headers: &'a [Header], geometry: Geometry) -> Self {
        debug_assert_eq!(headers.len(), geometry.num_packets() as usize);
        Self { top, headers, geometry }
    }

    /// Pops the top packet. `Ok(None)`: the stack is empty.
    #[inline(always)]
    pub fn pop(&self) -> Result<Option<TaggedPtr>, ChainError> {
        // Acquire: pairs with the Release CAS in `push` that stored this value, so the `next` we
        // read below is the one the pusher wrote.
        let mut top = self.top.load(Ordering::Acquire);
        loop {
            let Some(ptr) = self.decode(top)? else { return Ok(None) };
            // Relaxed: the Acquire that read `top` ordered the pusher's write of `next` before us.
            // If the packet was popped and reused meanwhile this value is stale, and the tag makes
            // the CAS below fail.
            let next = self.headers[ptr.index()].next.load(Ordering::Relaxed);
            // Acquire on success: we now own the packet, after every access of its previous owner
            // (pairs with the Release CAS of the `push` that made `top`). Acquire on failure:
            // the new top is read like the first one.
            match self.top.compare_exchange_weak(top, next, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Ok(Some(ptr)),
                Err(actual) => {
                    top = actual;
                    retry_hint();
                }
            }
        }
    }

    /// Pushes a packet the caller owns (the loom models' untagged push; a producer's handle pushes
    /// through [`push_onto`]).
    #[cfg(loom)]
    pub fn push(&self, ptr: TaggedPtr) {
        push_onto(self.top, &self.headers[ptr.index()], ptr.raw());
    }

    /// Whether the stack looks empty now: the plain load [`TaggedStack::take_all`] starts with, for
    /// a host that returns at once from an idle stack (no walk built, no swap).
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        // Relaxed: as the first load of `take_all` (reading 0 is as if a concurrent push came
        // just after; the next poll takes it); nothing is read through it.
        self.top.load(Ordering::Relaxed) == 0
    }

    /// Takes the whole stack at once, leaving it empty, and returns a walk over what it held.
    ///
    /// An empty stack is seen with a plain load, not a swap: a host polling an idle stack then
    /// only shares the cache line, instead of taking it exclusive on every poll and making each
    /// producer's next push (and, on the free-list's neighbouring word, each claim and release)
    /// win it back.
    ///
    /// The loom models take through it; the host's drain looks first itself and then swaps with
    /// [`TaggedStack::take_all_seen`].
    #[inline]
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn take_all(&self) -> ChainWalk<'a> {
        // Relaxed: only decides whether to swap. Reading 0 is as if the swap below had run just
        // before a concurrent push (the next poll takes that push); nothing is read through it.
        let top = if self.looks_empty() {
            0
        } else {
            // Acquire: pairs with the Release CAS of every `push` in the release sequence of this
            // word, so each packet's `next`, header and payload writes are visible to the walk.
            self.top.swap(0, Ordering::Acquire)
        };
        ChainWalk { next: top, headers: self.headers, geometry: self.geometry, steps: 0 }
    }

    /// [`TaggedStack::take_all`] for a caller that just saw the stack not empty
    /// ([`TaggedStack::looks_empty`]): the swap without a second look.
    #[inline]
    pub(crate) fn take_all_seen(&self) -> ChainWalk<'a> {
        // Acquire: as in `take_all`.
        let top = self.top.swap(0, Ordering::Acquire);
        ChainWalk { next: top, headers: self.headers, geometry: self.geometry, steps: 0 }
    }

    /// The walk of a chain taken from this stack, resumed at the place another walk of it had
    /// reached ([`ChainWalk::place`]): the same bound, counted from where that walk was.
    #[inline(always)]
    pub(crate) fn resume(&self, (next, steps): (u64, u32)) -> ChainWalk<'a> {
        ChainWalk { next, headers: self.headers, geometry: self.geometry, steps }
    }

    #[inline(always)]
    fn decode(&self, raw: u64) -> Result<Option<TaggedPtr>, ChainError> {
        self.geometry.decode(raw).map_err(|index| ChainError::IndexOutOfRange { index })
    }
}

/// Pushes the packet whose header is `header` and whose tagged pointer is `raw` (a packet the
/// caller owns) on the stack whose top is `top`: [`TaggedStack::push`] for a producer's handle,
/// which holds its packet's header rather than the headers.
#[inline(always)]
pub(crate) fn push_onto(top: &AtomicU64, header: &Header, raw: u64) {
    // Relaxed: the value only seeds the CAS; a stale one makes the CAS fail and retry.
    let mut seen = top.load(Ordering::Relaxed);
    loop {
        // Relaxed: published by the Release CAS below.
        header.next.store(seen, Ordering::Relaxed);
        // Release: publishes `next` and all of the owner's writes to the packet; pairs with the
        // Acquire in `pop` and in `take_all`.
        match top.compare_exchange_weak(seen, raw, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => {
                seen = actual;
                retry_hint();
            }
        }
    }
}

/// A bounded walk down a chain taken by [`TaggedStack::take_all`].
///
/// Each packet's `next` is read when the packet is yielded, before the caller completes it:
/// after completion the producer owns the packet and may reuse its `next`. The walk ends after the
/// buffer's packet count, so a cycle written by a hostile device cannot hang the host; an index out
/// of range ends it too. Either is yielded once as an error.
#[derive(Debug)]
pub struct ChainWalk<'a> {
    next: u64,
    headers: &'a [Header],
    geometry: Geometry,
    steps: u32,
}

impl ChainWalk<'_> {
    /// The walk's place: the raw link it reads next (0: nothing left, the chain's end or a
    /// broken link) and the packets it has yielded, for [`TaggedStack::resume`].
    #[inline(always)]
    pub(crate) fn place(&self) -> (u64, u32) {
        (self.next, self.steps)
    }
}

impl Iterator for ChainWalk<'_> {
    type Item = Result<TaggedPtr, ChainError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let ptr = match self.geometry.decode(self.next) {
            Ok(None) => return None,
            Ok(Some(ptr)) => ptr,
            Err(index) => {
                self.next = 0;
                return Some(Err(ChainError::IndexOutOfRange { index }));
            }
        };
        if self.steps == self.geometry.num_packets() {
            self.next = 0;
            return Some(Err(ChainError::ChainTooLong { limit: self.geometry.num_packets() }));
        }
        self.steps += 1;
        // SAFETY: `decode` checked the index against the geometry's packet count, which is
        // `headers.len()` (the contract of `TaggedStack::new`, whose headers and geometry these
        // are): in bounds, so not checked a second time.
        let header = unsafe { self.headers.get_unchecked(ptr.index()) };
        // Relaxed: ordered by the Acquire swap in `take_all` (pairs with the pusher's Release CAS).
        self.next = header.next.load(Ordering::Relaxed);
        Some(Ok(ptr))
    }
}
