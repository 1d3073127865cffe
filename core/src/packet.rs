//! The packet state machine and the producer's typestate handles.
//!
//! ```text
//!            claim (pop free-list)          submit (READY, push ready-stack)
//!   Free ─────────────────────────▶ Claimed ─────────────────────────────▶ Ready
//!    ▲                                 │ drop / release                       │ host: serve lanes,
//!    │◀────────────────────────────────┘                                      │ clear READY (Release)
//!    │          release (push free-list, tag + 1 step)                         ▼
//!    └──────────────────────────────────────────────────────────────────── Served
//! ```
//!
//! [`PacketState`] states the machine as pure transitions (used by the models and the fuzz
//! target); [`Claimed`], [`Submitted`] and [`Completed`] make the producer's half of it a type
//! error to misuse: only a `Claimed` packet can be filled and submitted (once: `submit` consumes
//! it), only a `Submitted` one waited on, only a `Completed` one read and released. Dropping a
//! `Claimed` or `Completed` handle releases the packet; dropping a `Submitted` one leaks the packet
//! (the host still owns it), never corrupts it.

use crate::buffer::BufferView;
use crate::layout::{Payload, CONTROL_HOST_ERROR, CONTROL_READY, LANES, REPLY_WORDS, SLOT_WORDS};
use crate::sync::{spin_hint, Ordering};
use crate::tagged::TaggedPtr;
use core::fmt;

/// Where a packet is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketState {
    /// On the free-list.
    Free,
    /// Popped by a producer, being filled.
    Claimed,
    /// On the ready-stack or being served; READY is set.
    Ready,
    /// READY cleared by the host; the reply is in the payload.
    Served,
}

/// Something that happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// A producer pops it from the free-list.
    Claim,
    /// The producer sets READY and pushes it on the ready-stack.
    Submit,
    /// The host serves it and clears READY.
    Serve,
    /// The producer pushes it back on the free-list.
    Release,
}

/// An event that is not allowed in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTransition {
    /// The state the packet was in.
    pub from: PacketState,
    /// The event that was refused.
    pub event: PacketEvent,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not allowed for a packet in state {:?}", self.event, self.from)
    }
}

impl PacketState {
    /// The state after `event`, or why it is refused.
    ///
    /// ```
    /// use hostcall_core::packet::{PacketEvent::*, PacketState::*};
    /// assert_eq!(Free.apply(Claim), Ok(Claimed));
    /// assert!(Ready.apply(Submit).is_err(), "a packet cannot be submitted twice");
    /// ```
    pub fn apply(self, event: PacketEvent) -> Result<Self, InvalidTransition> {
        use PacketEvent::*;
        use PacketState::*;
        match (self, event) {
            (Free, Claim) => Ok(Claimed),
            (Claimed, Submit) => Ok(Ready),
            (Ready, Serve) => Ok(Served),
            (Claimed | Served, Release) => Ok(Free),
            (from, event) => Err(InvalidTransition { from, event }),
        }
    }
}

/// A packet popped from the free-list: fill its lanes, then [`Claimed::submit`] it.
#[must_use = "dropping a claimed packet returns it to the free-list unsent"]
pub struct Claimed<'a> {
    buffer: BufferView<'a>,
    ptr: TaggedPtr,
}

/// A packet on the ready-stack: wait for the host to serve it.
#[must_use = "dropping a submitted packet leaks it: the host owns it until it answers"]
pub struct Submitted<'a> {
    buffer: BufferView<'a>,
    ptr: TaggedPtr,
}

/// A served packet: read the replies, then drop or [`Completed::release`] it.
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<'a> {
    buffer: BufferView<'a>,
    ptr: TaggedPtr,
    host_error: bool,
}

impl<'a> Claimed<'a> {
    pub(crate) fn new(buffer: BufferView<'a>, ptr: TaggedPtr) -> Self {
        Self { buffer, ptr }
    }

    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.ptr.index()
    }

    /// Writes lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        write_words(self.payload(), lane, words);
    }

    /// Sets the service id and the activemask, sets READY and pushes the packet on the
    /// ready-stack. The caller rings the doorbell afterwards.
    pub fn submit(self, service: u32, activemask: u64) -> Submitted<'a> {
        let (buffer, ptr) = (self.buffer, self.ptr);
        core::mem::forget(self);
        let header = buffer.header(ptr.index());
        // Relaxed: the three stores are published by the Release CAS of the push below.
        header.activemask.store(activemask, Ordering::Relaxed);
        header.service.store(service, Ordering::Relaxed);
        header.control.store(CONTROL_READY, Ordering::Relaxed);
        buffer.ready_stack().push(ptr);
        Submitted { buffer, ptr }
    }

    #[inline]
    fn payload(&self) -> &'a Payload {
        self.buffer.payload(self.ptr.index())
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        self.buffer.release(self.ptr);
    }
}

impl<'a> Submitted<'a> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.ptr.index()
    }

    /// Whether the host has served the packet (READY reads 0).
    pub fn is_served(&self) -> bool {
        self.control() & CONTROL_READY == 0
    }

    /// Waits until the host serves the packet, calling `backoff` between polls.
    pub fn wait(self, mut backoff: impl FnMut()) -> Completed<'a> {
        match self.wait_until(|_| {
            backoff();
            true
        }) {
            Ok(done) => done,
            Err(_) => unreachable!("the predicate never gives up"),
        }
    }

    /// Waits until the host serves the packet, or until `keep_waiting(polls so far)` returns false,
    /// in which case the packet is handed back still submitted. `keep_waiting` is the backoff: it
    /// may spin, yield or sleep.
    pub fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<Completed<'a>, Self> {
        let answered = poll_until(
            || {
                let control = self.control();
                (control & CONTROL_READY == 0).then_some(control)
            },
            keep_waiting,
        );
        match answered {
            // `Submitted` has no `Drop`: moving its fields out consumes it.
            Some(control) => Ok(Completed {
                buffer: self.buffer,
                ptr: self.ptr,
                host_error: control & CONTROL_HOST_ERROR != 0,
            }),
            None => Err(self),
        }
    }

    #[inline]
    fn control(&self) -> u32 {
        // Acquire: pairs with the host's Release store of `control` in `drain`, so the reply words
        // it wrote before are visible once READY reads 0.
        self.buffer.header(self.ptr.index()).control.load(Ordering::Acquire)
    }
}

impl<'a> Completed<'a> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.ptr.index()
    }

    /// The tagged pointer the packet was claimed with (its tag advances on release).
    pub fn tagged(&self) -> TaggedPtr {
        self.ptr
    }

    /// Whether the host answered at least one lane with an error reply
    /// (see [`crate::service::ErrorCode`]).
    #[inline]
    pub fn host_error(&self) -> bool {
        self.host_error
    }

    /// The reply words of lane `lane`.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        read_words(self.buffer.payload(self.ptr.index()), lane)
    }

    /// Returns the packet to the free-list, its tag advanced (dropping does the same).
    pub fn release(self) {}
}

impl Drop for Completed<'_> {
    fn drop(&mut self) {
        self.buffer.release(self.ptr);
    }
}

const _: () = assert!(LANES <= 64 && REPLY_WORDS <= SLOT_WORDS);

// Lane helpers shared by both protocols' producer handles and by the host's `PacketRequest`: a
// packet's payload is the same in both protocols, and so is the way a lane's slot is accessed.

/// Writes `words` into the first `K` words of lane `lane`'s slot (a request: `K = SLOT_WORDS`;
/// a reply: `K = REPLY_WORDS`). Ordering is the caller's protocol's job (see [`PayloadWord`]).
///
/// # Panics
/// If `lane >= LANES`.
///
/// [`PayloadWord`]: crate::sync::PayloadWord
pub(crate) fn write_words<const K: usize>(payload: &Payload, lane: usize, words: &[u64; K]) {
    const { assert!(K <= SLOT_WORDS) };
    let slot = &payload.slots[lane];
    for (cell, &word) in slot.iter().zip(words) {
        cell.write(word);
    }
}

/// Reads the first `K` words of lane `lane`'s slot (same rules as [`write_words`]).
///
/// # Panics
/// If `lane >= LANES`.
pub(crate) fn read_words<const K: usize>(payload: &Payload, lane: usize) -> [u64; K] {
    const { assert!(K <= SLOT_WORDS) };
    let slot = &payload.slots[lane];
    core::array::from_fn(|word| slot[word].read())
}

/// The producer's wait loop, shared by both protocols: calls `answered` until it returns
/// `Some`, or until `keep_waiting(polls so far)` returns false (then `None`). `answered` does the
/// protocol's Acquire load; `keep_waiting` is the backoff.
pub(crate) fn poll_until<T>(
    mut answered: impl FnMut() -> Option<T>,
    mut keep_waiting: impl FnMut(u32) -> bool,
) -> Option<T> {
    let mut polls = 0u32;
    loop {
        if let Some(done) = answered() {
            return Some(done);
        }
        if !keep_waiting(polls) {
            return None;
        }
        polls = polls.wrapping_add(1);
        spin_hint();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::PacketEvent::*;
    use super::PacketState::*;

    #[test]
    fn only_the_cycle_is_allowed() {
        let states = [Free, Claimed, Ready, Served];
        let events = [Claim, Submit, Serve, Release];
        let allowed =
            [(Free, Claim), (Claimed, Submit), (Ready, Serve), (Claimed, Release), (Served, Release)];
        for s in states {
            for e in events {
                assert_eq!(s.apply(e).is_ok(), allowed.contains(&(s, e)), "{s:?} {e:?}");
            }
        }
    }
}
