//! The scan's scratch payload: where the host copies a line request it took, so that services
//! read it and write their replies through a [`Payload`], as in the other protocols.
//!
//! It lives on the scan's stack and starts uninitialised: an idle scan costs nothing, and no
//! payload is built elsewhere and copied in. The scan's `take` writes the words of each active
//! lane's slot; the first time a packet is handed to a service, the slots of the lanes not written
//! whole are zeroed (only those: a 64-lane packet needs no zeroing, a 32-lane one 2 KB, where the
//! scan used to zero all 4 KB first). So every payload a service sees is initialised, and what
//! its inactive lanes hold is what the whole zeroing gave: zeroes, or the words of an earlier
//! packet of the same scan (requests taken or refused, replies), never memory the scan did not
//! write.
//!
//! Under loom a payload's words are loom cells, for which all-zero bytes are no valid value, so
//! there the payload is built normally ([`Payload::default`]) at the first write.

use crate::lane::Payload;
#[cfg(not(loom))]
use crate::lane::{LANES, LANE_MASK, SLOT_WORDS};
#[cfg(not(loom))]
use core::mem::MaybeUninit;

/// Where a scan's scratch payload lives: a local of the scan, apart from [`Scratch`]'s own state
/// (in one struct with it, LLVM zeroes the uninitialised memory with the state's zeroes, 4 KB
/// per scan).
#[cfg(not(loom))]
pub(super) type Memory = MaybeUninit<Payload>;
/// Where a scan's scratch payload lives: built at its first write under loom.
#[cfg(loom)]
pub(super) type Memory = Option<Payload>;

/// A scan's scratch payload (see the module docs).
pub(super) struct Scratch<'m> {
    memory: &'m mut Memory,
    /// The lanes whose slot has been written whole at least once (outside loom: is initialised).
    whole: u64,
    /// Whether every slot is initialised, which the first [`Scratch::payload`] makes so.
    ready: bool,
}

/// Memory for a scratch payload, nothing initialised.
#[inline]
pub(super) fn memory() -> Memory {
    #[cfg(not(loom))]
    return MaybeUninit::uninit();
    #[cfg(loom)]
    return None;
}

impl<'m> Scratch<'m> {
    /// A scratch payload in `memory`, nothing of it initialised yet.
    #[inline]
    pub(super) fn new(memory: &'m mut Memory) -> Self {
        Self { memory, whole: 0, ready: false }
    }

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

    /// Records that every word of lane `lane`'s slot has been written.
    #[inline]
    pub(super) fn written_whole(&mut self, lane: usize) {
        self.whole |= 1 << lane;
    }

    /// The payload, every slot initialised: the first call zeroes the slots of the lanes not
    /// written whole yet (in runs of adjacent lanes), later calls only hand it out.
    #[inline]
    pub(super) fn payload(&mut self) -> &Payload {
        if !self.ready {
            self.zero_unwritten();
            self.ready = true;
        }
        #[cfg(not(loom))]
        // SAFETY: every slot is initialised: `zero_unwritten` zeroed those no lane was written
        // into whole, and all-zero bytes are a valid `Payload` (atomic words with the
        // representation of plain integers: what `Payload::default` builds).
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
