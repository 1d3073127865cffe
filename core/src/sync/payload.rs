//! The payload's words and the host's uninitialised payload memory: atomics with the layout of
//! integers in production, loom cells under loom.

#[cfg(not(loom))]
use super::{AtomicU64, Ordering};
use crate::lane::Payload;
#[cfg(not(loom))]
use crate::lane::{LANES, SLOT_WORDS};
#[cfg(not(loom))]
use core::mem::MaybeUninit;

/// One 64-bit payload word shared between a lane and the host.
///
/// In production it is an atomic accessed with `Relaxed` loads and stores: a buggy or hostile
/// device may write a word while the host reads it, and a plain access would then be undefined
/// behaviour. Ordering between a lane's payload writes and the host's reads is the job of the
/// packet protocol (the Release push / Acquire `take_all` pair, and the Release clear of READY /
/// Acquire wait pair), never of this type.
///
/// Under loom it is a loom `UnsafeCell`, so a protocol that forgot one of those pairs shows up as
/// a data race in the models.
#[repr(transparent)]
pub struct PayloadWord {
    #[cfg(not(loom))]
    word: AtomicU64,
    #[cfg(loom)]
    word: loom::cell::UnsafeCell<u64>,
}

impl PayloadWord {
    /// A word holding `value`.
    pub fn new(value: u64) -> Self {
        Self {
            #[cfg(not(loom))]
            word: AtomicU64::new(value),
            #[cfg(loom)]
            word: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Reads the word. The caller must own the packet (see the ownership tables of
    /// [`crate::stack`] and [`crate::phase`]) for the value to mean anything; in production a
    /// racing write yields some value, never undefined behaviour.
    #[inline]
    pub fn read(&self) -> u64 {
        // Relaxed: the packet protocol orders this read after the owner's writes.
        #[cfg(not(loom))]
        return self.word.load(Ordering::Relaxed);
        #[cfg(loom)]
        // SAFETY: loom checks this claim: it reports any write that is not ordered before
        // this read by the protocol's happens-before edges.
        return self.word.with(|p| unsafe { *p });
    }

    /// Writes the word (same ownership rule as [`PayloadWord::read`]).
    #[inline]
    pub fn write(&self, value: u64) {
        // Relaxed: the packet protocol publishes the write (Release push or Release clear).
        #[cfg(not(loom))]
        self.word.store(value, Ordering::Relaxed);
        #[cfg(loom)]
        // SAFETY: loom checks that no access to this cell races with this write.
        self.word.with_mut(|p| unsafe { *p = value });
    }
}

/// The word's value, read like [`PayloadWord::read`] (Relaxed); under loom only the type's name,
/// since a read from `Debug` would count as an access the protocol does not order.
impl core::fmt::Debug for PayloadWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        #[cfg(not(loom))]
        return f.debug_tuple("PayloadWord").field(&self.read()).finish();
        #[cfg(loom)]
        return f.write_str("PayloadWord(..)");
    }
}

impl Default for PayloadWord {
    fn default() -> Self {
        Self::new(0)
    }
}

/// Memory for a [`Payload`] that starts uninitialised, and whose slots become initialised as the
/// host writes or zeroes them (the line protocol's scratch: `line/scratch.rs` keeps the account
/// of which slots are).
///
/// In production it is raw memory: the words are written and zeroed in place, and all-zero bytes
/// are a valid `Payload` (its words are atomics with the representation of `u64`). Under loom a
/// payload's words are loom cells, for which all-zero bytes are no valid value, so there the
/// memory is a whole [`Payload::default`], built at the first access: every slot is initialised
/// from then on, and [`PayloadMemory::zero_lanes`] has nothing left to do.
pub(crate) struct PayloadMemory {
    #[cfg(not(loom))]
    memory: MaybeUninit<Payload>,
    #[cfg(loom)]
    memory: Option<Payload>,
}

impl PayloadMemory {
    /// Memory with no slot initialised (no work; `const` in both builds).
    #[inline]
    pub(crate) const fn new() -> Self {
        #[cfg(not(loom))]
        return Self { memory: MaybeUninit::uninit() };
        #[cfg(loom)]
        return Self { memory: None };
    }

    /// Writes word `k` of lane `lane`'s slot.
    ///
    /// # Panics
    /// If `lane >= LANES` or `k >= SLOT_WORDS`.
    #[inline]
    pub(crate) fn write(&mut self, lane: usize, k: usize, value: u64) {
        #[cfg(not(loom))]
        {
            assert!(lane < LANES && k < SLOT_WORDS, "word {k} of lane {lane} is outside the payload");
            let words = self.memory.as_mut_ptr().cast::<u64>();
            // SAFETY: in bounds (checked above): `Payload` is `LANES * SLOT_WORDS` words, slot by
            // slot (`repr(C)`, each word a `repr(transparent)` atomic with the representation of
            // a `u64`, see `PayloadWord`). `&mut self` makes this the only access to the memory:
            // any `&Payload` handed out earlier is no longer borrowed.
            unsafe { words.add(lane * SLOT_WORDS + k).write(value) };
        }
        #[cfg(loom)]
        self.memory.get_or_insert_with(Payload::default).slots[lane][k].write(value);
    }

    /// Zeroes the slots of lanes `first..first + run`, which must exist (`first + run <= LANES`).
    #[inline]
    pub(crate) fn zero_lanes(&mut self, first: usize, run: usize) {
        #[cfg(not(loom))]
        {
            assert!(
                first <= LANES && run <= LANES - first,
                "lanes {first}.. (+{run}) are outside the payload"
            );
            let words = self.memory.as_mut_ptr().cast::<u64>();
            // SAFETY: lanes `first..first + run` exist (checked above), so the words zeroed lie
            // inside the payload; `&mut self` makes this the only access to it.
            unsafe { words.add(first * SLOT_WORDS).write_bytes(0, run * SLOT_WORDS) };
        }
        #[cfg(loom)]
        let _ = (first, run, self.memory.get_or_insert_with(Payload::default));
    }

    /// The payload.
    ///
    /// # Safety
    /// Every slot has been initialised: written whole with [`PayloadMemory::write`] or zeroed
    /// with [`PayloadMemory::zero_lanes`] (once is enough: writes store only initialised words).
    #[inline]
    pub(crate) unsafe fn assume_init(&mut self) -> &Payload {
        #[cfg(not(loom))]
        // SAFETY: every slot is initialised (the caller's contract), and initialised words are
        // a valid `Payload` (atomic words with the representation of plain integers).
        return unsafe { self.memory.assume_init_ref() };
        #[cfg(loom)]
        return self.memory.get_or_insert_with(Payload::default);
    }
}
