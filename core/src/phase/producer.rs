//! The phase protocol's side of the producer's skeleton ([`crate::producer`]): what claiming,
//! submitting, waiting and releasing do to its words. The handles are the shared ones: only a
//! [`Claimed`] packet can be filled and submitted (once), only a [`Submitted`] one waited on, only
//! a [`Completed`] one read and released.

use super::view::View;
use crate::lane::{REPLY_WORDS, SLOT_WORDS};
use crate::producer::{self, Ticket, Wire};
use crate::sync::Ordering;

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

/// The state of a call is its phase: bit 0 of `device_phase[index]` (equal to the host's) when
/// claimed, and of the value the submit stored once submitted.
impl Wire for View<'_> {
    type State = u32;
    type Answer = ();

    #[inline(always)]
    fn write_lane(&self, &Ticket { index, .. }: &Ticket<u32>, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.payload(index).write_lane(lane, words);
    }

    /// Sets the service id and the activemask and flips `device_phase`, handing the packet to the
    /// host.
    #[inline(always)]
    fn submit(&self, Ticket { index, state: phase }: &mut Ticket<u32>, service: u32, activemask: u64) {
        *phase ^= 1;
        let header = self.header(*index);
        // Relaxed: published by the Release store of `device_phase` below.
        header.activemask.store(activemask, Ordering::Relaxed);
        header.service.store(service, Ordering::Relaxed);
        // Release: publishes the header and the lanes' request words; pairs with the host's
        // Acquire fence in `Host::serve_packet`. A plain store of the flipped value, not a
        // `fetch_xor`: this wave is the word's only writer while it holds the packet.
        self.device_phase(*index).store(*phase, Ordering::Release);
    }

    #[inline(always)]
    fn answered(&self, &Ticket { index, state: phase }: &Ticket<u32>, _activemask: u64) -> Option<()> {
        // Acquire: pairs with the host's Release store of `host_phase` in `Host::serve_packet`,
        // so the reply words it wrote before are visible.
        (self.host_phase(index).load(Ordering::Acquire) & 1 == phase).then_some(())
    }

    #[inline(always)]
    fn reply(&self, &Ticket { index, .. }: &Ticket<u32>, lane: usize) -> [u64; REPLY_WORDS] {
        self.payload(index).read_lane(lane)
    }

    #[inline(always)]
    fn drop_unsent(&self, &Ticket { index, .. }: &Ticket<u32>) {
        self.release_occupied(index);
    }

    #[inline(always)]
    fn drop_submitted(&self, &Ticket { index, .. }: &Ticket<u32>) {
        // Safe to free early: `try_claim` refuses the packet until the phases agree.
        self.release_occupied(index);
    }

    #[inline(always)]
    fn release(&self, &Ticket { index, .. }: &Ticket<u32>) {
        self.release_occupied(index);
    }
}
