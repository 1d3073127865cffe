//! The device's typestate handles for the phase protocol, mirroring the stack protocol's
//! ([`crate::stack::Claimed`] and its siblings): only a [`Claimed`] packet can be filled and
//! submitted (once), only a [`Submitted`] one waited on, only a [`Completed`] one read and
//! released. The lane accessors, the wait loop and the producer traits are the ones of
//! [`crate::lane`], which the stack protocol's handles use too.

use super::view::View;
use crate::host::ErrorCode;
use crate::lane::{lanes, poll_until, Payload, SubmittedPacket, REPLY_WORDS, SLOT_WORDS};
use crate::sync::Ordering;

/// A packet whose `occupied` bit this wave set, with the phases equal: fill its lanes, then
/// [`Claimed::submit`] it. Dropping it clears the bit unsent.
#[derive(Debug)]
#[must_use = "dropping a claimed packet frees it unsent"]
pub struct Claimed<'a> {
    view: View<'a>,
    index: usize,
    /// Bit 0 of `device_phase[index]` (equal to the host's) when claimed.
    phase: u32,
}

/// A submitted packet (`device_phase` flipped): wait for the host to flip `host_phase` to match.
///
/// Dropping it clears the `occupied` bit without waiting. The packet is not reused early: a
/// claimer takes it only once the phases agree again, that is once the host has answered.
#[derive(Debug)]
#[must_use = "wait for the reply; dropping a submitted packet abandons it"]
pub struct Submitted<'a> {
    view: View<'a>,
    index: usize,
    /// Bit 0 of the `device_phase` value this submit stored.
    phase: u32,
    /// The lanes submitted (for [`Completed::host_error`]).
    activemask: u64,
}

/// An answered packet: read the replies, then drop or [`Completed::release`] it.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<'a> {
    view: View<'a>,
    index: usize,
    /// The lanes submitted.
    activemask: u64,
}

impl<'a> Claimed<'a> {
    pub(super) fn new(view: View<'a>, index: usize, phase: u32) -> Self {
        Self { view, index, phase }
    }

    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Writes lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.payload().write_lane(lane, words);
    }

    /// Sets the service id and the activemask and flips `device_phase`, handing the packet to the
    /// host. The caller rings the doorbell afterwards.
    pub fn submit(self, service: u32, activemask: u64) -> Submitted<'a> {
        let (view, index, phase) = (self.view, self.index, self.phase ^ 1);
        core::mem::forget(self);
        let header = view.header(index);
        // Relaxed: published by the Release store of `device_phase` below.
        header.activemask.store(activemask, Ordering::Relaxed);
        header.service.store(service, Ordering::Relaxed);
        // Release: publishes the header and the lanes' request words; pairs with the host's
        // Acquire fence in `View::serve_packet`. A plain store of the flipped value, not a
        // `fetch_xor`: this wave is the word's only writer while it holds the packet.
        view.device_phase(index).store(phase, Ordering::Release);
        Submitted { view, index, phase, activemask }
    }

    fn payload(&self) -> &'a Payload {
        self.view.payload(self.index)
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        self.view.release_occupied(self.index);
    }
}

impl<'a> Submitted<'a> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Whether the host has answered (`host_phase` matches in bit 0).
    pub fn is_served(&self) -> bool {
        self.answered()
    }

    /// Waits until the host answers, calling `backoff` between polls.
    pub fn wait(self, backoff: impl FnMut()) -> Completed<'a> {
        SubmittedPacket::wait(self, backoff)
    }

    /// Waits until the host answers, or until `keep_waiting(polls so far)` returns false, in
    /// which case the packet is handed back still submitted.
    pub fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<Completed<'a>, Self> {
        match poll_until(|| self.answered().then_some(()), keep_waiting) {
            Some(()) => {
                let (view, index, activemask) = (self.view, self.index, self.activemask);
                core::mem::forget(self);
                Ok(Completed { view, index, activemask })
            }
            None => Err(self),
        }
    }

    fn answered(&self) -> bool {
        // Acquire: pairs with the host's Release store of `host_phase` in
        // `View::serve_packet`, so the reply words it wrote before are visible.
        self.view.host_phase(self.index).load(Ordering::Acquire) & 1 == self.phase
    }
}

impl Drop for Submitted<'_> {
    fn drop(&mut self) {
        // Safe to free early: `try_claim` refuses the packet until the phases agree.
        self.view.release_occupied(self.index);
    }
}

impl Completed<'_> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The reply words of lane `lane`.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.view.payload(self.index).read_lane(lane)
    }

    /// Lane `lane`'s reply decoded as an error reply, if it is one. The phase protocol has no
    /// control word, so this is the only way the host signals an error.
    pub fn error(&self, lane: usize) -> Option<ErrorCode> {
        ErrorCode::from_reply(self.reply(lane))
    }

    /// Whether the host answered at least one submitted lane with an error reply (the
    /// [`Completed::error`] of every lane of the activemask; there is no control word).
    pub fn host_error(&self) -> bool {
        lanes(self.activemask).any(|lane| self.error(lane).is_some())
    }

    /// Clears the packet's `occupied` bit (dropping does the same).
    pub fn release(self) {}
}

impl Drop for Completed<'_> {
    fn drop(&mut self) {
        self.view.release_occupied(self.index);
    }
}

crate::lane::forward_producer_traits!(Claimed, Submitted, Completed);
