//! The device's typestate handles for the line protocol, as the other protocols have them: only a
//! [`Claimed`] packet can be filled and submitted, only a [`Submitted`] one waited on, only a
//! [`Completed`] one read and released, or kept for the wave's next call ([`Completed::keep`]).

use super::layout::{seq_of, tag, CARRIED_REQUEST_WORDS, REPLY_LINE_WORDS};
use super::view::View;
use crate::host::ErrorCode;
use crate::lane::{lanes, poll_until, SubmittedPacket, REPLY_WORDS, SLOT_WORDS};
use crate::sync::Ordering;

/// A packet whose `occupied` bit this wave set, with the sequence of its next call chosen: fill
/// its lanes, then [`Claimed::submit`] it. Dropping it frees the packet unsent and uses up the
/// sequence, so words it wrote can never be taken for a later call's.
#[derive(Debug)]
#[must_use = "dropping a claimed packet frees it unsent"]
pub struct Claimed<'a> {
    view: View<'a>,
    index: usize,
    seq: u32,
}

/// A submitted packet: wait until every active lane's reply words carry its sequence.
///
/// Dropping it leaks the packet (its `occupied` bit stays set), as the stack protocol's handle
/// does: the host owns it until it answers, and nothing on the device side could tell when that
/// is without waiting.
#[derive(Debug)]
#[must_use = "wait for the reply; dropping a submitted packet leaks it"]
pub struct Submitted<'a> {
    view: View<'a>,
    index: usize,
    seq: u32,
    activemask: u64,
}

/// An answered packet: read the replies, then drop or [`Completed::release`] it, or
/// [`Completed::keep`] it for the wave's next call.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<'a> {
    view: View<'a>,
    index: usize,
    seq: u32,
    activemask: u64,
}

impl<'a> Claimed<'a> {
    pub(super) fn new(view: View<'a>, index: usize, seq: u32) -> Self {
        Self { view, index, seq }
    }

    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The sequence this call will carry.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// Writes lane `lane`'s request words, each as two tagged words.
    ///
    /// Under loom only the first [`CARRIED_REQUEST_WORDS`] travel (the models' geometry, see
    /// there); in production that is every word.
    ///
    /// # Panics
    /// If `lane >= LANES`; under loom also if a word past [`CARRIED_REQUEST_WORDS`] is not zero
    /// (it would be lost).
    #[inline]
    pub fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        let (carried, not_carried) = words.split_at(CARRIED_REQUEST_WORDS);
        // Empty in production (every word is carried); a loom model must not lose data silently.
        assert!(
            not_carried.iter().all(|&w| w == 0),
            "request words past CARRIED_REQUEST_WORDS are not carried"
        );
        let slot = &self.view.request(self.index).lanes[lane];
        for (k, &value) in carried.iter().enumerate() {
            // Relaxed: the data travels with its sequence in one store; the host checks the
            // sequence of every word it takes.
            slot[2 * k].store(tag(value as u32, self.seq), Ordering::Relaxed);
            slot[2 * k + 1].store(tag((value >> 32) as u32, self.seq), Ordering::Relaxed);
        }
    }

    /// Writes the mask words and the head, handing the packet to the host. The caller rings the
    /// doorbell afterwards (or not: a polling host needs no ring).
    pub fn submit(self, service: u32, activemask: u64) -> Submitted<'a> {
        let (view, index, seq) = (self.view, self.index, self.seq);
        core::mem::forget(self);
        let request = view.request(index);
        // Relaxed (all three): tagged words, see `write_lane`. The head is written last only so
        // that a host on a TSO machine usually finds the packet complete at its first look.
        request.mask[0].store(tag(activemask as u32, seq), Ordering::Relaxed);
        request.mask[1].store(tag((activemask >> 32) as u32, seq), Ordering::Relaxed);
        request.head.store(tag(service, seq), Ordering::Relaxed);
        // Relaxed: device-only word, published to the next claimer by `release_occupied`.
        view.device_seq(index).store(seq, Ordering::Relaxed);
        Submitted { view, index, seq, activemask }
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        // Relaxed: as in `submit`. Using the sequence up keeps any word written under it from
        // matching the next claimer's call.
        self.view.device_seq(self.index).store(self.seq, Ordering::Relaxed);
        self.view.release_occupied(self.index);
    }
}

impl<'a> Submitted<'a> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Whether every active lane's reply words carry this call's sequence.
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
                let Self { view, index, seq, activemask } = self;
                Ok(Completed { view, index, seq, activemask })
            }
            None => Err(self),
        }
    }

    fn answered(&self) -> bool {
        let reply = self.view.reply(self.index);
        lanes(self.activemask).all(|lane| {
            // Acquire: pairs with the host's Release stores in `View::answer`, so the host's reads
            // of this call's request happen before our next call's writes. The reply data itself
            // is in the word.
            reply.lanes[lane].iter().all(|word| seq_of(word.load(Ordering::Acquire)) == self.seq)
        })
    }
}

impl Completed<'_> {
    /// The packet's index in the buffer.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The reply words of lane `lane` (the data halves of its tagged reply words).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        let words = &self.view.reply(self.index).lanes[lane];
        // Relaxed: the wait saw these very words carry our sequence; the host writes them again
        // only for a later call.
        let half = |k: usize| u64::from(words[k].load(Ordering::Relaxed) as u32);
        const _: () = assert!(REPLY_LINE_WORDS == 2 * REPLY_WORDS);
        core::array::from_fn(|k| half(2 * k + 1) << 32 | half(2 * k))
    }

    /// Lane `lane`'s reply decoded as an error reply, if it is one.
    pub fn error(&self, lane: usize) -> Option<ErrorCode> {
        ErrorCode::from_reply(self.reply(lane))
    }

    /// Whether the host answered at least one submitted lane with an error reply (there is no
    /// control word, as in the phase protocol).
    pub fn host_error(&self) -> bool {
        lanes(self.activemask).any(|lane| self.error(lane).is_some())
    }

    /// Clears the packet's `occupied` bit (dropping does the same).
    pub fn release(self) {}
}

impl<'a> Completed<'a> {
    /// Keeps the packet for this wave's next call, as a GPU wave with `keep_packet` does: the
    /// next sequence (with the wrap refresh when due), and no read-modify-write on `occupied`,
    /// neither the release nor the next claim's. The wave still holds the packet's bit; it hands
    /// the packet on when it drops or releases a later [`Completed`] (or drops the [`Claimed`]).
    ///
    /// No ordering is lost: the `occupied` hand-off orders one wave's accesses before the next
    /// owner's, and here the owner stays the same; the host's reads of this call's request are
    /// ordered before the next call's writes by the reply words' Release stores, which this
    /// call's wait read with Acquire, as after a claim.
    pub fn keep(self) -> Claimed<'a> {
        let (view, index, seq) = (self.view, self.index, self.seq);
        core::mem::forget(self);
        view.begin_call(index, seq)
    }
}

impl Drop for Completed<'_> {
    fn drop(&mut self) {
        self.view.release_occupied(self.index);
    }
}

crate::lane::forward_producer_traits!(Claimed, Submitted, Completed);
