//! The line protocol's side of the producer's skeleton ([`crate::producer`]): requests and the
//! head stored as line words, the wait polling the replies themselves, and a packet a wave may
//! keep for its next call ([`Completed::keep`]).

use super::layout::{next_seq, refreshes, Reply, Request, CARRIED_REQUEST_WORDS};
use super::view::{refresh, View};
use super::word::{carries, decode_reply, encode_head, encode_mask, encode_request};
use crate::lane::{lanes, REPLY_WORDS, SLOT_WORDS};
use crate::producer::{self, Wire};
use crate::sync::{AtomicU32, Ordering};

/// The words of one claimed line packet, which its handles' steps touch: its request and reply
/// blocks, its `device_seq` and `occupied` words, its index and the call's sequence.
#[derive(Clone, Copy, Debug)]
pub struct PacketWords<'a> {
    request: &'a Request,
    reply: &'a Reply,
    pub(super) device_seq: &'a AtomicU32,
    pub(super) occupied: &'a AtomicU32,
    index: u32,
    pub(super) seq: u32,
}

impl<'a> PacketWords<'a> {
    /// Packet `index`'s words in `view`, after the call with sequence `previous` (0: none since
    /// `init`).
    ///
    /// # Panics
    /// If `index >= num_packets`.
    #[inline(always)]
    pub(super) fn new(view: &View<'a>, index: usize, previous: u32) -> Self {
        Self {
            request: view.request(index),
            reply: view.reply(index),
            device_seq: view.device_seq(index),
            occupied: view.occupied_word(index),
            index: index as u32,
            seq: previous,
        }
    }

    /// Device: the next call on the packet, which this wave holds, after the call of the words'
    /// sequence: its sequence, and the wrap refresh when due. Shared by a claim and by
    /// [`Completed::keep`].
    #[inline(always)]
    pub(super) fn begin_call(mut self) -> Claimed<'a> {
        let previous = self.seq;
        self.seq = next_seq(previous);
        if refreshes(previous, self.seq) {
            refresh(self.request, self.reply);
        }
        Claimed::new(self)
    }

    /// Clears the packet's bit in `occupied`, handing it to the next claimer.
    #[inline(always)]
    fn release_occupied(&self) {
        // The hand-off (Release, pairing with `try_claim` of the next claimer).
        crate::occupied::release(self.occupied, self.index as usize);
    }
}

impl Wire for PacketWords<'_> {
    type Answer = ();

    #[inline(always)]
    fn index(&self) -> usize {
        self.index as usize
    }

    /// The lane's request as its line words ([`encode_request`]). Under loom only the first
    /// [`CARRIED_REQUEST_WORDS`] travel (the models' geometry, see there), and a non-zero word past
    /// them panics (it would be lost); in production every word travels.
    #[inline(always)]
    fn write_lane(&self, lane: usize, words: &[u64; SLOT_WORDS]) {
        // Empty in production (every word is carried); a loom model must not lose data silently.
        assert!(
            words[CARRIED_REQUEST_WORDS..].iter().all(|&w| w == 0),
            "request words past CARRIED_REQUEST_WORDS are not carried"
        );
        let slot = &self.request.lanes[lane];
        for (word, value) in slot.iter().zip(encode_request(words, self.seq)) {
            // Relaxed: the data travels with its sequence in one store; the host checks the
            // sequence of every word it takes.
            word.store(value, Ordering::Relaxed);
        }
    }

    /// Writes the mask word and the head, handing the packet to the host.
    #[inline(always)]
    fn submit(&mut self, service: u32, activemask: u64) {
        let (request, seq) = (self.request, self.seq);
        // Relaxed (both): line words, see `write_lane`. The head is written last only so that a
        // host on a TSO machine usually finds the packet complete at its first look.
        request.mask.store(encode_mask(activemask, seq), Ordering::Relaxed);
        request.head.store(encode_head(service, activemask, seq), Ordering::Relaxed);
        // Relaxed: device-only word, published to the next claimer by `release_occupied`.
        self.device_seq.store(seq, Ordering::Relaxed);
    }

    /// Whether every active lane's reply words carry this call's sequence.
    #[inline(always)]
    fn answered(&self, activemask: u64) -> Option<()> {
        let (reply, seq) = (self.reply, self.seq);
        lanes(activemask)
            .all(|lane| {
                // Acquire: pairs with the host's Release stores in `Host::answer`, so the host's
                // reads of this call's request happen before our next call's writes. The reply
                // data itself is in the word.
                reply.lanes[lane].iter().all(|word| carries(word.load(Ordering::Acquire), seq))
            })
            .then_some(())
    }

    /// Lane `lane`'s reply, out of its line words ([`decode_reply`]).
    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        let words = &self.reply.lanes[lane];
        // Relaxed: the wait saw these very words carry our sequence; the host writes them again
        // only for a later call.
        decode_reply(&core::array::from_fn(|k| words[k].load(Ordering::Relaxed)))
    }

    #[inline(always)]
    fn drop_unsent(&self) {
        // Relaxed: as in `submit`. Using the sequence up keeps any word written under it from
        // matching the next claimer's call.
        self.device_seq.store(self.seq, Ordering::Relaxed);
        self.release_occupied();
    }

    /// Leaks the packet: its `occupied` bit stays set (see [`Submitted`]).
    #[inline(always)]
    fn drop_submitted(&self) {}

    #[inline(always)]
    fn release(&self) {
        self.release_occupied();
    }
}

impl Claimed<'_> {
    /// The sequence this call will carry.
    pub fn seq(&self) -> u32 {
        self.wire.seq
    }
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
        self.into_words().begin_call()
    }
}

producer::handles! {
    /// A packet whose `occupied` bit this wave set, with the sequence of its next call chosen: fill
    /// its lanes, then submit it. Dropping it frees the packet unsent and uses up the sequence, so
    /// words it wrote can never be taken for a later call's.
    Claimed,
    /// A submitted packet: wait until every active lane's reply words carry its sequence.
    ///
    /// Dropping it leaks the packet (its `occupied` bit stays set), as the stack protocol's handle
    /// does: the host owns it until it answers, and nothing on the device side could tell when that
    /// is without waiting.
    Submitted,
    /// An answered packet: read the replies, then drop or release it, or [`Completed::keep`] it for
    /// the wave's next call.
    Completed,
}
