//! The scan's scratch payload: where the host copies a line request it took, so that services
//! read it and write their replies through a [`Payload`], as in the other protocols.
//!
//! Its memory is a [`ScratchPayload`], which starts uninitialised: an idle scan costs nothing, and
//! no payload is built elsewhere and copied in. The scan's `take` writes the words of each active
//! lane's slot; the first time a packet is handed to a service, the slots of the lanes not written
//! whole are zeroed (only those: a 64-lane packet needs no zeroing, a 32-lane one 2 KB). From then
//! on every slot of that memory is initialised, for good: a host that keeps one
//! [`ScratchPayload`] across scans (the [`Poller`](crate::Poller) keeps one per poller, passed to
//! [`Host::drain_scope`](crate::Host::drain_scope)) zeroes it once, not on every scan that finds
//! a packet (for a 1-lane packet that was 4,032 bytes, most of the host's instructions for it).
//! So every payload a service sees is initialised, and what its inactive lanes hold is zeroes, or
//! the words of an earlier packet this host took (requests or replies, of any buffer it serves),
//! never memory the host did not write. Services read only their active lanes; nothing of an
//! inactive slot goes back to a device.
//!
//! The payload is the host's alone while a service runs, so the packet it is handed lends its
//! slots as plain words too (`sync::PlainSlots`): the lane loop
//! ([`serve_lanes_from`](crate::serve_lanes_from)) gives each lane's service its request in place.
//!
//! The memory itself, written and zeroed in place, is the facade's (`sync::PayloadMemory`): under
//! loom a payload's words are loom cells, for which all-zero bytes are no valid value, so there the
//! payload is built normally ([`Payload::default`]) at the first write.

use crate::lane::{Payload, LANE_MASK, SLOT_WORDS};
use crate::sync::{PayloadMemory as Memory, PlainSlots};

/// Memory for the line protocol's host to copy requests into (a [`Payload`], 4 KB), kept by a
/// host across scans: zeroed once at its first use, never again (see [`Host::drain_scope`]).
///
/// [`Host::drain_scope`]: crate::Host::drain_scope
pub struct ScratchPayload {
    memory: Memory,
    /// Whether every slot of `memory` is initialised (set by the first scan that served a packet).
    initialised: bool,
}

impl ScratchPayload {
    /// Scratch memory, nothing of it initialised yet (no work: it is zeroed at its first use).
    pub const fn new() -> Self {
        Self { memory: Memory::new(), initialised: false }
    }
}

impl Default for ScratchPayload {
    fn default() -> Self {
        Self::new()
    }
}

/// Its size and state only: the words are the host's scratch.
impl core::fmt::Debug for ScratchPayload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScratchPayload").field("initialised", &self.initialised).finish_non_exhaustive()
    }
}

/// One scan's use of a [`ScratchPayload`] (see the module docs).
pub(super) struct Scratch<'m> {
    memory: &'m mut Memory,
    /// The payload's `initialised` flag, set once [`Scratch::payload`] has zeroed what was not.
    initialised: &'m mut bool,
    /// The lanes whose slot has been written whole at least once (outside loom: is initialised).
    whole: u64,
    /// Whether every slot is initialised: the scratch was, or [`Scratch::payload`] made it so.
    ready: bool,
}

/// Where a scan keeps its scratch: a host's [`ScratchPayload`] ([`Place::kept`]), or memory of
/// the drain's own, which it leaves uninitialised until it serves a packet ([`Place::own`]).
///
/// The memory and its flag, whichever the place (separate locals for a drain's own: in one struct
/// with the flag, LLVM zeroes the uninitialised memory along with the flag, 4 KB per drain even
/// when idle). Two words, handed to each scan by value ([`Place::reborrow`]): the scan has them in
/// two registers, with no place to look through and no choice between two kinds of place.
pub(super) struct Place<'m> {
    memory: &'m mut Memory,
    initialised: &'m mut bool,
}

impl<'m> Place<'m> {
    /// A host's scratch, kept across scans.
    #[inline]
    pub(super) fn kept(kept: &'m mut ScratchPayload) -> Self {
        Self { memory: &mut kept.memory, initialised: &mut kept.initialised }
    }

    /// Scratch of this drain only: `memory` from [`own_memory`], `initialised` false.
    #[inline]
    pub(super) fn own(memory: &'m mut Memory, initialised: &'m mut bool) -> Self {
        Self { memory, initialised }
    }

    /// The same place, for one scan.
    #[inline]
    pub(super) fn reborrow(&mut self) -> Place<'_> {
        Place { memory: self.memory, initialised: self.initialised }
    }

    /// A scan's use of this place: ready at once if an earlier scan initialised it.
    #[inline]
    pub(super) fn scratch(self) -> Scratch<'m> {
        let ready = *self.initialised;
        Scratch { memory: self.memory, initialised: self.initialised, whole: 0, ready }
    }
}

/// Memory for a drain's own scratch, nothing initialised (pass it to [`Place::Own`]).
#[inline]
pub(super) fn own_memory() -> Memory {
    Memory::new()
}

impl Scratch<'_> {
    /// Writes lane `lane`'s slot whole.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub(super) fn write_slot(&mut self, lane: usize, words: [u64; SLOT_WORDS]) {
        for (k, word) in words.into_iter().enumerate() {
            self.memory.write(lane, k, word);
        }
    }

    /// Where lane `lane`'s slot starts: the slots of the lanes after it follow (up to
    /// [`LANES`](crate::LANES)); a slot written whole through it is then as by
    /// [`Scratch::write_slot`] (the vector decode's stores).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    #[inline]
    pub(super) fn slot_mut(&mut self, lane: usize) -> *mut [u64; SLOT_WORDS] {
        self.memory.slot_mut(lane)
    }

    /// Records that every word of the slots of the lanes of `lanes` has been written (a mask of
    /// lanes that exist: only those have slots).
    #[inline]
    pub(super) fn written_whole(&mut self, lanes: u64) {
        self.whole |= lanes & LANE_MASK;
    }

    /// The payload, every slot initialised: the first call zeroes the slots of the lanes not
    /// written whole yet (in runs of adjacent lanes), later calls only hand it out.
    #[inline]
    pub(super) fn payload(&mut self) -> (&Payload, Option<PlainSlots<'_>>) {
        if !self.ready {
            self.zero_unwritten();
            self.ready = true;
            *self.initialised = true;
        }
        // SAFETY: every slot is initialised: `zero_unwritten` zeroed those no lane was written
        // into whole, now or at an earlier scan of this scratch (`initialised`: writes since
        // then store only initialised words).
        unsafe { self.memory.assume_init() }
    }

    /// Zeroes the slots of the lanes not written whole.
    fn zero_unwritten(&mut self) {
        // Lanes `first..first + run` exist: `unwritten` is within `LANE_MASK`.
        let mut unwritten = !self.whole & LANE_MASK;
        while unwritten != 0 {
            let first = unwritten.trailing_zeros() as usize;
            let run = (!(unwritten >> first)).trailing_zeros() as usize;
            self.memory.zero_lanes(first, run);
            unwritten &= !(run_mask(run) << first);
        }
    }
}

/// The low `run` bits set (`run` up to 64).
fn run_mask(run: usize) -> u64 {
    if run >= 64 {
        u64::MAX
    } else {
        (1 << run) - 1
    }
}
