//! The loom half of the facade (`--cfg loom`): loom's atomics, cells and mutex, item for item the
//! twin of `production.rs` (whose docs say what each item is for); here only what differs.

use crate::lane::Payload;
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// One 64-bit payload word shared between a lane and the host: a loom `UnsafeCell`, so that a
/// protocol that does not order a lane's writes before the host's reads (or the host's reply
/// before the lane's reads) shows up as a data race in the models.
#[repr(transparent)]
pub struct PayloadWord {
    word: loom::cell::UnsafeCell<u64>,
}

impl PayloadWord {
    /// A word holding `value`.
    pub fn new(value: u64) -> Self {
        Self { word: loom::cell::UnsafeCell::new(value) }
    }

    /// Reads the word (the caller must own the packet).
    #[inline]
    pub fn read(&self) -> u64 {
        // SAFETY: loom checks this claim: it reports any write that is not ordered before this
        // read by the protocol's happens-before edges.
        self.word.with(|p| unsafe { *p })
    }

    /// Writes the word (the caller must own the packet).
    #[inline]
    pub fn write(&self, value: u64) {
        // SAFETY: loom checks that no access to this cell races with this write.
        self.word.with_mut(|p| unsafe { *p = value });
    }
}

/// Only the type's name: a read from `Debug` would count as an access the protocol does not
/// order.
impl core::fmt::Debug for PayloadWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PayloadWord(..)")
    }
}

impl Default for PayloadWord {
    fn default() -> Self {
        Self::new(0)
    }
}

/// Memory for a [`Payload`]: loom cells have no valid all-zero value, so it is a whole
/// `Payload::default()` built at the first access; every slot is initialised from then on, and
/// [`PayloadMemory::zero_lanes`] has nothing left to do.
pub(crate) struct PayloadMemory {
    memory: Option<Payload>,
}

impl PayloadMemory {
    /// Memory with nothing built yet.
    #[inline]
    pub(crate) const fn new() -> Self {
        Self { memory: None }
    }

    /// Writes word `k` of lane `lane`'s slot.
    #[inline]
    pub(crate) fn write(&mut self, lane: usize, k: usize, value: u64) {
        self.memory.get_or_insert_with(Payload::default).slots[lane][k].write(value);
    }

    /// Builds the payload if it is not yet (every slot initialised, zeroes where not written).
    #[inline]
    pub(crate) fn zero_lanes(&mut self, _first: usize, _run: usize) {
        let _ = self.memory.get_or_insert_with(Payload::default);
    }

    /// The payload, and no plain slots (loom's cells are read one by one).
    ///
    /// # Safety
    /// None under loom; the same contract as in production.
    #[inline]
    pub(crate) unsafe fn assume_init(&mut self) -> (&Payload, Option<PlainSlots<'_>>) {
        (self.memory.get_or_insert_with(Payload::default), None)
    }
}

/// None under loom: a loom payload's words are cells, read one by one (the type has no value, so
/// the lane loop's plain branch is dead code here).
#[derive(Clone, Copy)]
pub(crate) enum PlainSlots<'a> {
    #[doc(hidden)]
    _Never(core::convert::Infallible, core::marker::PhantomData<&'a Payload>),
}

impl<'a> PlainSlots<'a> {
    /// Never built under loom.
    #[allow(clippy::missing_safety_doc)]
    #[inline]
    pub(crate) unsafe fn request(&self, _lane: usize) -> &[u64; crate::lane::SLOT_WORDS] {
        match *self {
            Self::_Never(never, _) => match never {},
        }
    }

    /// Never built under loom.
    #[allow(dead_code)]
    #[inline]
    pub(crate) fn slot(&self, _lane: usize) -> *const u64 {
        match *self {
            Self::_Never(never, _) => match never {},
        }
    }

    /// Never built under loom.
    #[allow(clippy::missing_safety_doc)]
    #[inline]
    pub(crate) unsafe fn write<const K: usize>(&self, _lane: usize, _words: [u64; K]) {
        match *self {
            Self::_Never(never, _) => match never {},
        }
    }
}

/// The poller's lock: loom's mutex, whose ordering loom sees.
pub(crate) struct Lock<T> {
    inner: loom::sync::Mutex<T>,
}

impl<T> Lock<T> {
    /// A lock holding `value` (not `const`: loom's mutex is not).
    pub(crate) fn new(value: T) -> Self {
        Self { inner: loom::sync::Mutex::new(value) }
    }

    /// Takes the lock, waiting for it. A model thread that panicked while holding it fails the
    /// model anyway, so a poisoned lock is taken as it is.
    #[inline]
    pub(crate) fn lock(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<LockGuard<'_, T>> {
        self.inner.try_lock().ok()
    }
}

/// A held [`Lock`], named as in production.
pub(crate) type LockGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

/// One spin of a busy-wait loop: a yield to loom's scheduler (loom must see the spinning thread
/// give way, or it reports a livelock).
#[inline]
pub(crate) fn spin_hint() {
    loom::thread::yield_now();
}

/// No prefetch: the models check orderings, not cache misses.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    let _ = value;
}

/// The function without `const`: loom's atomics and locks have no `const` constructor.
#[allow(unused_macros)]
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $args:tt -> $ret:ty $body:block) => {
        $(#[$attr])* $vis fn $name $args -> $ret $body
    };
}
#[allow(unused_imports)]
pub(crate) use const_fn;

/// The array built element by element (`$value` is no constant under loom).
#[allow(unused_macros)]
macro_rules! new_array {
    ($value:expr; $n:expr) => {
        core::array::from_fn::<_, { $n }, _>(|_| $value)
    };
}
#[allow(unused_imports)]
pub(crate) use new_array;

/// No ABI checks: loom's atomics and cells are larger than the integers they model.
macro_rules! abi_checks {
    ($($item:item)*) => {};
}
pub(crate) use abi_checks;
