//! The stack protocol's producer handles: the packet state machine as the stack records it.
//!
//! The handles walk the cycle drawn in the [module docs](super).
//!
//! [`PacketState`](crate::lane::PacketState) states the machine as pure transitions, shared with
//! the phase protocol; [`Claimed`], [`Submitted`] and [`Completed`] make the producer's half of it
//! a type error to misuse: only a `Claimed` packet can be filled and submitted (once: `submit`
//! consumes it), only a `Submitted` one waited on, only a `Completed` one read and released.
//! Dropping a `Claimed` or `Completed` handle releases the packet; dropping a `Submitted` one leaks
//! the packet (the host still owns it), never corrupts it. The three implement the producer traits
//! of [`crate::lane`], as the phase protocol's handles do.

use super::layout::{CONTROL_HOST_ERROR, CONTROL_READY};
use super::tagged::TaggedPtr;
use super::view::View;
use crate::lane::{poll_until, Payload, SubmittedPacket, REPLY_WORDS, SLOT_WORDS};
use crate::sync::Ordering;

/// A packet popped from the free-list: fill its lanes, then [`Claimed::submit`] it.
#[derive(Debug)]
#[must_use = "dropping a claimed packet returns it to the free-list unsent"]
pub struct Claimed<'a> {
    buffer: View<'a>,
    ptr: TaggedPtr,
}

/// A packet on the ready-stack: wait for the host to serve it.
#[derive(Debug)]
#[must_use = "dropping a submitted packet leaks it: the host owns it until it answers"]
pub struct Submitted<'a> {
    buffer: View<'a>,
    ptr: TaggedPtr,
}

/// A served packet: read the replies, then drop or [`Completed::release`] it.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<'a> {
    buffer: View<'a>,
    ptr: TaggedPtr,
    host_error: bool,
}

impl<'a> Claimed<'a> {
    pub(super) fn new(buffer: View<'a>, ptr: TaggedPtr) -> Self {
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
        self.payload().write_lane(lane, words);
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
    pub fn wait(self, backoff: impl FnMut()) -> Completed<'a> {
        SubmittedPacket::wait(self, backoff)
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
    /// (see [`ErrorCode`](crate::ErrorCode)): the [`CONTROL_HOST_ERROR`] bit.
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
        self.buffer.payload(self.ptr.index()).read_lane(lane)
    }

    /// Returns the packet to the free-list, its tag advanced (dropping does the same).
    pub fn release(self) {}
}

impl Drop for Completed<'_> {
    fn drop(&mut self) {
        self.buffer.release(self.ptr);
    }
}

crate::lane::forward_producer_traits!(Claimed, Submitted, Completed);
