//! The stack protocol's side of the producer's skeleton ([`crate::producer`]): the packet state
//! machine as the stack records it, walking the cycle drawn in the [module docs](super).
//!
//! [`PacketState`](crate::lane::PacketState) states the machine as pure transitions, shared with
//! the other protocols; the shared handles [`Claimed`], [`Submitted`] and [`Completed`] make the
//! producer's half of it a type error to misuse. Dropping a `Claimed` or `Completed` handle
//! releases the packet; dropping a `Submitted` one leaks the packet (the host still owns it),
//! never corrupts it.

use super::layout::{CONTROL_HOST_ERROR, CONTROL_READY};
use super::tagged::TaggedPtr;
use super::view::View;
use crate::lane::{REPLY_WORDS, SLOT_WORDS};
use crate::producer::{self, Ticket, Wire};
use crate::sync::Ordering;

producer::handles! {
    /// A packet popped from the free-list: fill its lanes, then submit it. Dropping it returns it to
    /// the free-list unsent.
    Claimed,
    /// A packet on the ready-stack: wait for the host to serve it. Dropping it leaks the packet: the
    /// host owns it until it answers.
    Submitted,
    /// A served packet: read the replies, then drop or release it (back on the free-list, its tag
    /// advanced).
    Completed,
}

/// The state of a call is the tagged pointer the packet was popped with; the answer is the `control` word
/// the wait read (READY clear, [`CONTROL_HOST_ERROR`] if the host wrote an error reply).
impl Wire for View<'_> {
    type State = TaggedPtr;
    type Answer = u32;

    #[inline(always)]
    fn write_lane(
        &self,
        &Ticket { state: ptr, .. }: &Ticket<TaggedPtr>,
        lane: usize,
        words: &[u64; SLOT_WORDS],
    ) {
        self.payload(ptr.index()).write_lane(lane, words);
    }

    /// Sets the service id, the activemask and READY, and pushes the packet on the ready-stack.
    #[inline(always)]
    fn submit(&self, &mut Ticket { state: ptr, .. }: &mut Ticket<TaggedPtr>, service: u32, activemask: u64) {
        let header = self.header(ptr.index());
        // Relaxed: the three stores are published by the Release CAS of the push below.
        header.activemask.store(activemask, Ordering::Relaxed);
        header.service.store(service, Ordering::Relaxed);
        header.control.store(CONTROL_READY, Ordering::Relaxed);
        self.ready_stack().push(ptr);
    }

    /// Whether READY reads 0.
    #[inline(always)]
    fn answered(&self, &Ticket { state: ptr, .. }: &Ticket<TaggedPtr>, _activemask: u64) -> Option<u32> {
        // Acquire: pairs with the host's Release store of `control` in `Host::drain`, so the
        // reply words it wrote before are visible once READY reads 0.
        let control = self.header(ptr.index()).control.load(Ordering::Acquire);
        (control & CONTROL_READY == 0).then_some(control)
    }

    #[inline(always)]
    fn reply(&self, &Ticket { state: ptr, .. }: &Ticket<TaggedPtr>, lane: usize) -> [u64; REPLY_WORDS] {
        self.payload(ptr.index()).read_lane(lane)
    }

    /// The [`CONTROL_HOST_ERROR`] bit of the `control` word the wait read.
    #[inline(always)]
    fn host_error(&self, _: &Ticket<TaggedPtr>, _activemask: u64, control: u32) -> bool {
        control & CONTROL_HOST_ERROR != 0
    }

    #[inline(always)]
    fn drop_unsent(&self, &Ticket { state: ptr, .. }: &Ticket<TaggedPtr>) {
        self.push_free(ptr);
    }

    /// Leaks the packet (see [`Submitted`]).
    #[inline(always)]
    fn drop_submitted(&self, _: &Ticket<TaggedPtr>) {}

    #[inline(always)]
    fn release(&self, &Ticket { state: ptr, .. }: &Ticket<TaggedPtr>) {
        self.push_free(ptr);
    }
}

impl Completed<'_> {
    /// The tagged pointer the packet was claimed with (its tag advances on release).
    pub fn tagged(&self) -> TaggedPtr {
        self.ticket.state
    }
}
