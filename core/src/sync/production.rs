//! The production half of the facade: portable-atomic's atomics (the integers' layout), a spin
//! lock, CPU hints, and raw memory for the host's payload scratch. Its twin under loom is
//! `model.rs`, item for item.

use crate::lane::{Payload, LANES, SLOT_WORDS};
use core::mem::MaybeUninit;
pub use portable_atomic::{fence, AtomicU32, AtomicU64, Ordering};

const _: () = assert!(
    AtomicU64::is_always_lock_free() && AtomicU32::is_always_lock_free(),
    "hostcall-core needs lock-free AtomicU64 and AtomicU32: portable-atomic's lock-based fallback \
     is not atomic against the GPU"
);

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
    word: AtomicU64,
}

impl PayloadWord {
    /// A word holding `value`.
    pub fn new(value: u64) -> Self {
        Self { word: AtomicU64::new(value) }
    }

    /// Reads the word. The caller must own the packet (see the ownership tables of
    /// [`crate::stack`] and [`crate::phase`]) for the value to mean anything; in production a
    /// racing write yields some value, never undefined behaviour.
    #[inline]
    pub fn read(&self) -> u64 {
        // Relaxed: the packet protocol orders this read after the owner's writes.
        self.word.load(Ordering::Relaxed)
    }

    /// Writes the word (same ownership rule as [`PayloadWord::read`]).
    #[inline]
    pub fn write(&self, value: u64) {
        // Relaxed: the packet protocol publishes the write (Release push or Release clear).
        self.word.store(value, Ordering::Relaxed);
    }
}

/// The word's value, read like [`PayloadWord::read`] (Relaxed); under loom only the type's name,
/// since a read from `Debug` would count as an access the protocol does not order.
impl core::fmt::Debug for PayloadWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("PayloadWord").field(&self.read()).finish()
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
/// Raw memory: the words are written and zeroed in place, and all-zero bytes are a valid
/// `Payload` (its words are atomics with the representation of `u64`). Under loom, whose cells
/// have no valid all-zero value, it is a whole `Payload::default()` built at the first access.
pub(crate) struct PayloadMemory {
    memory: MaybeUninit<Payload>,
}

impl PayloadMemory {
    /// Memory with no slot initialised (no work).
    #[inline]
    pub(crate) const fn new() -> Self {
        Self { memory: MaybeUninit::uninit() }
    }

    /// Writes word `k` of lane `lane`'s slot.
    ///
    /// # Panics
    /// If `lane >= LANES` or `k >= SLOT_WORDS`.
    #[inline]
    pub(crate) fn write(&mut self, lane: usize, k: usize, value: u64) {
        assert!(lane < LANES && k < SLOT_WORDS, "word {k} of lane {lane} is outside the payload");
        let words = self.memory.as_mut_ptr().cast::<u64>();
        // SAFETY: in bounds (checked above): `Payload` is `LANES * SLOT_WORDS` words, slot by slot
        // (`repr(C)`, each word a `repr(transparent)` atomic with the representation of a `u64`,
        // see `PayloadWord`). `&mut self` makes this the only access to the memory: any `&Payload`
        // handed out earlier is no longer borrowed.
        unsafe { words.add(lane * SLOT_WORDS + k).write(value) };
    }

    /// Where lane `lane`'s slot starts, for the vector decode's stores of whole slots (a slot
    /// written through it is initialised, as by [`PayloadMemory::write`]; only outside loom,
    /// where that decode runs).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(miri))), allow(dead_code))]
    #[inline]
    pub(crate) fn slot_mut(&mut self, lane: usize) -> *mut [u64; SLOT_WORDS] {
        assert!(lane < LANES, "lane {lane} is outside the payload");
        // In bounds: `Payload` is `LANES` slots of `SLOT_WORDS` words (see `write`).
        self.memory.as_mut_ptr().cast::<[u64; SLOT_WORDS]>().wrapping_add(lane)
    }

    /// Zeroes the slots of lanes `first..first + run`.
    ///
    /// # Panics
    /// If those lanes are not all below `LANES`.
    #[inline]
    pub(crate) fn zero_lanes(&mut self, first: usize, run: usize) {
        assert!(first <= LANES && run <= LANES - first, "lanes {first}.. ({run}) are outside the payload");
        let words = self.memory.as_mut_ptr().cast::<u64>();
        // SAFETY: lanes `first..first + run` exist (checked above), so the words zeroed lie inside
        // the payload; `&mut self` makes this the only access to it.
        unsafe { words.add(first * SLOT_WORDS).write_bytes(0, run * SLOT_WORDS) };
    }

    /// The payload, with its slots as plain words ([`PlainSlots`]; `&mut self` makes the memory
    /// this thread's alone for as long as either is borrowed).
    ///
    /// # Safety
    /// Every slot has been initialised: written whole with [`PayloadMemory::write`] or zeroed with
    /// [`PayloadMemory::zero_lanes`] (once is enough: writes store only initialised words).
    #[inline]
    pub(crate) unsafe fn assume_init(&mut self) -> (&Payload, Option<PlainSlots<'_>>) {
        // SAFETY: every slot is initialised (the caller's contract), and initialised words are a
        // valid `Payload` (atomic words with the representation of plain integers).
        let payload = unsafe { self.memory.assume_init_ref() };
        // SAFETY: the memory is borrowed mutably for the slots' lifetime: no one else reaches it.
        (payload, Some(unsafe { PlainSlots::new(payload) }))
    }
}

/// The slots of a [`Payload`] that lives in memory of the host's own (the line host's scratch, a
/// [`PayloadMemory`]), read and written as plain words: a service's lane reads its request from
/// the slot itself, with no copy, and the compiler drops the loads of words it does not use.
/// Under loom there is none (the type has no value): a loom payload's words are cells whose
/// accesses the models must see, so the lane loop reads them one by one.
#[derive(Clone, Copy)]
pub(crate) struct PlainSlots<'a> {
    slots: core::ptr::NonNull<[u64; SLOT_WORDS]>,
    payload: core::marker::PhantomData<&'a Payload>,
}

impl<'a> PlainSlots<'a> {
    /// The slots of `payload`.
    ///
    /// # Safety
    /// For `'a` the payload's memory is this thread's alone: no other thread and no device reads
    /// or writes it (its owner lends it to one packet's service).
    #[inline]
    pub(crate) unsafe fn new(payload: &'a Payload) -> Self {
        // A pointer with the payload's provenance: its words are atomics, whose `UnsafeCell`
        // lets a pointer from a shared reference write them.
        Self { slots: core::ptr::NonNull::from(payload).cast(), payload: core::marker::PhantomData }
    }

    /// Lane `lane`'s request words, in place.
    ///
    /// # Safety
    /// `lane < LANES`, and nothing writes the slot while the reference lives.
    #[inline]
    pub(crate) unsafe fn request(&self, lane: usize) -> &[u64; SLOT_WORDS] {
        // SAFETY: `lane` is a slot of the payload (the caller's contract), whose `LANES * SLOT_WORDS`
        // words have the representation of `u64`s (`PayloadWord`, `repr(transparent)` over an
        // atomic of that representation), all initialised (a `&Payload` exists); no other thread
        // reaches them (`new`'s contract) and nothing writes this slot while it is borrowed.
        unsafe { &*self.slots.as_ptr().add(lane) }
    }

    /// Where lane `lane`'s slot starts (its words are read through it only while no reference
    /// from [`PlainSlots::request`] to the slot is alive and nothing writes it).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(miri))), allow(dead_code))]
    #[inline]
    pub(crate) fn slot(&self, lane: usize) -> *const u64 {
        assert!(lane < LANES, "lane {lane} is outside the payload");
        self.slots.as_ptr().wrapping_add(lane).cast()
    }

    /// Writes `words` into the first `K` words of lane `lane`'s slot.
    ///
    /// # Safety
    /// `lane < LANES`, and no reference from [`PlainSlots::request`] to this slot lives.
    #[inline]
    pub(crate) unsafe fn write<const K: usize>(&self, lane: usize, words: [u64; K]) {
        const { assert!(K <= SLOT_WORDS) };
        // SAFETY: as in `request`; the pointer derives from the payload's shared reference, whose
        // words are `UnsafeCell`s, and no reference to the slot is alive (the caller's contract).
        unsafe { self.slots.as_ptr().add(lane).cast::<[u64; K]>().write(words) }
    }
}

/// The lock the [`Poller`](crate::Poller) keeps its table and its poll state behind: a spin lock
/// (no OS to block on). Under loom, loom's mutex (a spin lock's loop never yields to loom's
/// scheduler, and loom must see the lock's ordering to check what it protects).
pub(crate) struct Lock<T> {
    inner: spin::Mutex<T>,
}

impl<T> Lock<T> {
    /// A lock holding `value` (`const` outside loom only, see `const_fn!`).
    pub(crate) const fn new(value: T) -> Self {
        Self { inner: spin::Mutex::new(value) }
    }

    /// Takes the lock, waiting for it.
    #[inline]
    pub(crate) fn lock(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.inner.lock()
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        self.inner.try_lock()
    }
}

/// A held [`Lock`], named so that a value can keep it (the poller's poll session does).
pub(crate) type LockGuard<'a, T> = spin::MutexGuard<'a, T>;

/// One spin of a busy-wait loop: a CPU hint (under loom, a yield to loom's scheduler, which must
/// see the spinning thread give way or it reports a livelock).
#[inline]
pub(crate) fn spin_hint() {
    core::hint::spin_loop();
}

/// Hints the CPU to fetch the cache line holding `value`, so that a miss the host knows is coming
/// overlaps the ones before it instead of following them (the protocols' hosts call it on the
/// request lines of a packet they have just seen submitted: docs/cache-lines.md). Not an access in
/// Rust's memory model: a prefetch reads nothing the program sees and checks nothing away. A
/// no-op off x86-64 and under loom.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `_mm_prefetch` is a hint with no memory-safety requirement (it never faults and
        // changes no value); the address is a live reference anyway. SSE, which it needs, is part
        // of the x86-64 baseline.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Declares a function that is `const` outside loom and a plain `fn` under loom, whose atomics
/// and locks have no `const` constructor, so that callers write the constructor once:
///
/// ```text
/// sync::const_fn! {
///     /// Every slot unpinned.
///     pub(super) const fn new() -> Self {
///         Self { pinned: sync::new_array![AtomicU32::new(0); N] }
///     }
/// }
/// ```
#[allow(unused_macros)]
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $args:tt -> $ret:ty $body:block) => {
        $(#[$attr])* $vis const fn $name $args -> $ret $body
    };
}
#[allow(unused_imports)]
pub(crate) use const_fn;

/// An array of `$n` values, each built by `$value`: `[const { $value }; $n]`, usable in a
/// `const fn` (under loom, built element by element, since loom's constructors are not `const`).
#[allow(unused_macros)]
macro_rules! new_array {
    ($value:expr; $n:expr) => {
        [const { $value }; $n]
    };
}
#[allow(unused_imports)]
pub(crate) use new_array;

/// The compile-time checks of a layout's ABI (its `size_of`, `align_of` and `offset_of` asserts,
/// [`assert_abi!`]), as the items of a module `abi`. Nothing under loom, whose atomics and cells
/// are larger than the integers they model.
macro_rules! abi_checks {
    ($($item:item)*) => {
        mod abi {
            $($item)*
        }
    };
}
pub(crate) use abi_checks;

/// `const` assertions pinning a `repr(C)` type to its ABI: its size, its alignment and the offset
/// of each field named (in an [`abi_checks!`] block).
///
/// ```text
/// assert_abi!(Header { size: 16, align: 8, activemask: 0, service: 8 });
/// ```
macro_rules! assert_abi {
    ($ty:ty { size: $size:expr, align: $align:expr $(, $field:ident: $offset:expr)* $(,)? }) => {
        const _: () = assert!(core::mem::size_of::<$ty>() == $size);
        const _: () = assert!(core::mem::align_of::<$ty>() == $align);
        $(const _: () = assert!(core::mem::offset_of!($ty, $field) == $offset);)*
    };
}
pub(crate) use assert_abi;
