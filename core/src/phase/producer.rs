//! The phase protocol's side of the producer's skeleton ([`crate::producer`]): what claiming,
//! submitting, waiting and releasing do to its words. The handles are the shared ones: only a
//! [`Claimed`] packet can be filled and submitted (once), only a [`Submitted`] one waited on, only
//! a [`Completed`] one read and released.

use super::layout::Header;
use super::view::View;
use crate::lane::{Payload, REPLY_WORDS, SLOT_WORDS};
use crate::producer::{self, Wire};
use crate::sync::{AtomicU32, Ordering};

producer::handles! {
    /// A packet whose `occupied` bit this wave set, with the phases equal: fill its lanes, then
    /// submit it. Dropping it clears the bit unsent.
    Claimed,
    /// A submitted packet (`device_phase` flipped): wait for the host to flip `host_phase` to match.
    ///
    /// Dropping it clears the `occupied` bit without waiting. The packet is not reused early: a
    /// claimer takes it only once the phases agree again, that is once the host has answered.
    Submitted,
    /// An answered packet: read the replies, then drop or release it. The phase header has no control
    /// word, so a host error reaches the wave only as a lane's error reply (`Completed::error`,
    /// `Completed::host_error`).
    Completed,
}

/// The words of one claimed phase packet, which its handles' steps touch: its header, payload,
/// both phase words and its `occupied` word, its index and the call's phase (bit 0 of
/// `device_phase[index]`, equal to the host's, when claimed; of the value the submit stored once
/// submitted).
#[derive(Clone, Copy, Debug)]
pub struct PacketWords<'a> {
    header: &'a Header,
    payload: &'a Payload,
    pub(super) device_phase: &'a AtomicU32,
    pub(super) host_phase: &'a AtomicU32,
    pub(super) occupied: &'a AtomicU32,
    index: u32,
    pub(super) phase: u32,
}

impl<'a> PacketWords<'a> {
    /// Packet `index`'s words in `view`, for a call of phase `phase`.
    ///
    /// # Panics
    /// If `index >= num_packets`.
    #[inline(always)]
    pub(super) fn new(view: &View<'a>, index: usize, phase: u32) -> Self {
        Self {
            header: view.header(index),
            payload: view.payload(index),
            device_phase: view.device_phase(index),
            host_phase: view.host_phase(index),
            occupied: view.occupied_word(index),
            index: index as u32,
            phase,
        }
    }

    /// Clears the packet's bit in `occupied`, handing it to the next claimer.
    #[inline(always)]
    fn release_occupied(&self) {
        // The hand-off (Release, pairing with `try_claim` of the next claimer): our accesses to
        // the payload (request writes of an unsent claim, reply reads of a completed one) happen
        // before the next owner's.
        crate::occupied::release(self.occupied, self.index as usize);
    }
}

impl Wire for PacketWords<'_> {
    type Answer = ();

    #[inline(always)]
    fn index(&self) -> usize {
        self.index as usize
    }

    #[inline(always)]
    fn write_lane(&self, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.payload.write_lane(lane, words);
    }

    /// Sets the service id and the activemask and flips `device_phase`, handing the packet to the
    /// host.
    #[inline(always)]
    fn submit(&mut self, service: u32, activemask: u64) {
        self.phase ^= 1;
        // Relaxed: published by the Release store of `device_phase` below.
        self.header.activemask.store(activemask, Ordering::Relaxed);
        self.header.service.store(service, Ordering::Relaxed);
        // Release: publishes the header and the lanes' request words; pairs with the host's
        // Acquire fence in `Host::serve_packet`. A plain store of the flipped value, not a
        // `fetch_xor`: this wave is the word's only writer while it holds the packet.
        self.device_phase.store(self.phase, Ordering::Release);
    }

    #[inline(always)]
    fn answered(&self, _activemask: u64) -> Option<()> {
        // Acquire: pairs with the host's Release store of `host_phase` in `Host::serve_packet`,
        // so the reply words it wrote before are visible.
        (self.host_phase.load(Ordering::Acquire) & 1 == self.phase).then_some(())
    }

    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.payload.read_lane(lane)
    }

    #[inline(always)]
    fn drop_unsent(&self) {
        self.release_occupied();
    }

    #[inline(always)]
    fn drop_submitted(&self) {
        // Safe to free early: `try_claim` refuses the packet until the phases agree.
        self.release_occupied();
    }

    #[inline(always)]
    fn release(&self) {
        self.release_occupied();
    }
}
