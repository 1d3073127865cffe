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
//! Under loom a payload's words are loom cells, for which all-zero bytes are no valid value, so
//! there the payload is built normally ([`Payload::default`]) at the first write.

use crate::lane::Payload;
use crate::lane::LANE_MASK;
#[cfg(not(loom))]
use crate::lane::{LANES, SLOT_WORDS};
#[cfg(not(loom))]
use core::mem::MaybeUninit;

/// Where a scan's scratch payload lives.
#[cfg(not(loom))]
type Memory = MaybeUninit<Payload>;
/// Where a scan's scratch payload lives: built at its first write under loom.
#[cfg(loom)]
type Memory = Option<Payload>;

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
        #[cfg(not(loom))]
        return Self { memory: MaybeUninit::uninit(), initialised: false };
        #[cfg(loom)]
        return Self { memory: None, initialised: false };
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

/// Where a scan keeps its scratch: a host's [`ScratchPayload`], or memory of the scan's own,
/// which it leaves uninitialised until it serves a packet.
pub(super) enum Place<'m> {
    /// A host's scratch, kept across scans.
    Kept(&'m mut ScratchPayload),
    /// Scratch of this drain only (separate locals: in one struct with the flag, LLVM zeroes the
    /// uninitialised memory along with the flag, 4 KB per drain even when idle).
    Own(&'m mut Memory, &'m mut bool),
}

impl Place<'_> {
    /// A scan's use of this place: ready at once if an earlier scan initialised it.
    #[inline]
    pub(super) fn scratch(&mut self) -> Scratch<'_> {
        let (memory, initialised) = match self {
            Place::Kept(kept) => (&mut kept.memory, &mut kept.initialised),
            Place::Own(memory, initialised) => (&mut **memory, &mut **initialised),
        };
        let ready = *initialised;
        Scratch { memory, initialised, whole: 0, ready }
    }
}

/// Memory for a drain's own scratch, nothing initialised (pass it to [`Place::Own`]).
#[inline]
pub(super) fn own_memory() -> Memory {
    #[cfg(not(loom))]
    return MaybeUninit::uninit();
    #[cfg(loom)]
    return None;
}

impl Scratch<'_> {
    /// Writes word `k` of lane `lane`'s slot.
    ///
    /// # Panics
    /// If `lane >= LANES` or `k >= SLOT_WORDS`.
    #[inline]
    pub(super) fn write(&mut self, lane: usize, k: usize, value: u64) {
        #[cfg(not(loom))]
        {
            assert!(lane < LANES && k < SLOT_WORDS, "word {k} of lane {lane} is outside the payload");
            let words = self.memory.as_mut_ptr().cast::<u64>();
            // SAFETY: in bounds (checked above): `Payload` is `LANES * SLOT_WORDS` words, slot by
            // slot (`repr(C)`, each word a `repr(transparent)` atomic with the representation of
            // a `u64`, see `sync::PayloadWord`). `&mut self` makes this the only access to the
            // memory: any `&Payload` handed out earlier is no longer borrowed.
            unsafe { words.add(lane * SLOT_WORDS + k).write(value) };
        }
        #[cfg(loom)]
        self.memory.get_or_insert_with(Payload::default).slots[lane][k].write(value);
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
    pub(super) fn payload(&mut self) -> &Payload {
        if !self.ready {
            self.zero_unwritten();
            self.ready = true;
            *self.initialised = true;
        }
        #[cfg(not(loom))]
        // SAFETY: every slot is initialised: `zero_unwritten` zeroed those no lane was written
        // into whole, now or at an earlier scan of this scratch (`initialised`: writes since
        // then store only initialised words), and all-zero bytes are a valid `Payload` (atomic
        // words with the representation of plain integers: what `Payload::default` builds).
        return unsafe { self.memory.assume_init_ref() };
        #[cfg(loom)]
        return self.memory.get_or_insert_with(Payload::default);
    }

    /// Zeroes the slots of the lanes not written whole.
    fn zero_unwritten(&mut self) {
        #[cfg(not(loom))]
        {
            let mut unwritten = !self.whole & LANE_MASK;
            let words = self.memory.as_mut_ptr().cast::<u64>();
            while unwritten != 0 {
                let first = unwritten.trailing_zeros() as usize;
                let run = (!(unwritten >> first)).trailing_zeros() as usize;
                // SAFETY: lanes `first..first + run` exist (`unwritten` is within `LANE_MASK`),
                // so the words zeroed lie inside the payload; `&mut self` makes this the only
                // access to it.
                unsafe { words.add(first * SLOT_WORDS).write_bytes(0, run * SLOT_WORDS) };
                unwritten &= !(run_mask(run) << first);
            }
        }
        #[cfg(loom)]
        let _ = self.memory.get_or_insert_with(Payload::default);
    }
}

/// The low `run` bits set (`run` up to 64).
#[cfg(not(loom))]
fn run_mask(run: usize) -> u64 {
    if run >= 64 {
        u64::MAX
    } else {
        (1 << run) - 1
    }
}
