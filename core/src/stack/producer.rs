//! The stack protocol's side of the producer's skeleton ([`crate::producer`]): the packet state
//! machine as the stack records it, walking the cycle drawn in the [module docs](super).
//!
//! [`PacketState`](crate::lane::PacketState) states the machine as pure transitions, shared with
//! the other protocols; the shared handles [`Claimed`], [`Submitted`] and [`Completed`] make the
//! producer's half of it a type error to misuse. Dropping a `Claimed` or `Completed` handle
//! releases the packet; dropping a `Submitted` one leaks the packet (the host still owns it),
//! never corrupts it.

use super::layout::{Header, Prefix, CONTROL_HOST_ERROR, CONTROL_READY};
use super::tagged::TaggedPtr;
use super::treiber::push_onto;
use super::view::View;
use crate::lane::{Payload, REPLY_WORDS, SLOT_WORDS};
use crate::producer::{self, Wire};
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

/// The words of one claimed stack packet, which its handles' steps touch: the prefix (both stacks'
/// tops), the packet's header and payload, the tagged pointer it was popped with and the view's tag
/// step (the packet goes back on the free-list with its tag advanced).
#[derive(Clone, Copy, Debug)]
pub struct PacketWords<'a> {
    prefix: &'a Prefix,
    header: &'a Header,
    payload: &'a Payload,
    ptr: TaggedPtr,
    tag_step: u64,
}

impl<'a> PacketWords<'a> {
    /// Packet `ptr`'s words in `view` (`ptr` decoded by the view's geometry, so in range).
    #[inline(always)]
    pub(super) fn new(view: &View<'a>, ptr: TaggedPtr) -> Self {
        let (index, tag_step) = (ptr.index(), view.geometry().tag_step());
        Self {
            prefix: view.prefix(),
            header: view.header(index),
            payload: view.payload(index),
            ptr,
            tag_step,
        }
    }
}

/// The answer is the `control` word the wait read (READY clear, [`CONTROL_HOST_ERROR`] if the host
/// wrote an error reply).
impl Wire for PacketWords<'_> {
    type Answer = u32;

    #[inline(always)]
    fn index(&self) -> usize {
        self.ptr.index()
    }

    #[inline(always)]
    fn write_lane(&self, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.payload.write_lane(lane, words);
    }

    /// Sets the service id, the activemask and READY, and pushes the packet on the ready-stack.
    #[inline(always)]
    fn submit(&mut self, service: u32, activemask: u64) {
        let header = self.header;
        // Relaxed: the three stores are published by the Release CAS of the push below.
        header.activemask.store(activemask, Ordering::Relaxed);
        header.service.store(service, Ordering::Relaxed);
        header.control.store(CONTROL_READY, Ordering::Relaxed);
        push_onto(&self.prefix.ready_stack, header, self.ptr.raw());
    }

    /// Whether READY reads 0.
    #[inline(always)]
    fn answered(&self, _activemask: u64) -> Option<u32> {
        // Acquire: pairs with the host's Release store of `control` in `Host::drain`, so the
        // reply words it wrote before are visible once READY reads 0.
        let control = self.header.control.load(Ordering::Acquire);
        (control & CONTROL_READY == 0).then_some(control)
    }

    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.payload.read_lane(lane)
    }

    /// The [`CONTROL_HOST_ERROR`] bit of the `control` word the wait read.
    #[inline(always)]
    fn host_error(&self, _activemask: u64, control: u32) -> bool {
        control & CONTROL_HOST_ERROR != 0
    }

    #[inline(always)]
    fn drop_unsent(&self) {
        self.push_free();
    }

    /// Leaks the packet (see [`Submitted`]).
    #[inline(always)]
    fn drop_submitted(&self) {}

    #[inline(always)]
    fn release(&self) {
        self.push_free();
    }
}

impl PacketWords<'_> {
    /// Pushes the packet, which the handle owns, back on the free-list with its tag advanced.
    #[inline(always)]
    fn push_free(&self) {
        push_onto(&self.prefix.free_stack, self.header, self.ptr.advanced(self.tag_step).raw());
    }
}

impl Completed<'_> {
    /// The tagged pointer the packet was claimed with (its tag advances on release).
    pub fn tagged(&self) -> TaggedPtr {
        self.wire.ptr
    }
}
