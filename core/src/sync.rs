//! The only module that names atomics.
//!
//! Production builds use [`portable_atomic`], whose `AtomicU64`/`AtomicU32` have exactly the
//! in-memory representation of `u64`/`u32`, so a raw buffer written by device code can be viewed
//! through the `repr(C)` types of each protocol's layout ([`crate::stack::Prefix`],
//! [`crate::phase::Prefix`], [`crate::Payload`], ...). Under `--cfg loom` the same names resolve to
//! loom's model-checked atomics, and payload words become loom cells so that the models prove the
//! protocol orders a correct device's payload writes before the host reads them.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use portable_atomic::{fence, AtomicU32, AtomicU64, Ordering};

// The target requirements (see the crate docs): the shared words must be atomic against the
// device, which only the CPU's own lock-free instructions are. portable-atomic falls back to a
// lock (its `fallback` feature, which any crate in the build may turn on) or to disabling
// interrupts where the target has no such instructions; the layout stays the same, but a lock the
// GPU never takes protects nothing. Refuse to build instead of breaking at run time.
#[cfg(not(target_has_atomic = "64"))]
compile_error!(
    "hostcall-core needs native 64-bit atomics (target_has_atomic = \"64\"): the buffer's words \
     are shared with a GPU, and only lock-free CPU atomics are atomic against it"
);
#[cfg(not(loom))]
const _: () = assert!(
    AtomicU64::is_always_lock_free() && AtomicU32::is_always_lock_free(),
    "hostcall-core needs lock-free AtomicU64 and AtomicU32: portable-atomic's lock-based fallback \
     is not atomic against the GPU"
);

/// One spin of a busy-wait loop: a CPU hint in production, a yield to the scheduler under loom
/// (loom must see the spinning thread give way, or it reports a livelock).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// The pause before retrying a lock-free compare-exchange loop that lost a race.
///
/// A CPU hint in every build: unlike [`spin_hint`] it never yields to loom's scheduler. A lost
/// compare-exchange means another thread made progress, and the retry (with the value the CAS
/// returned) needs no other thread to run, so loom terminates without a yield here. A yield would
/// hand loom a free context switch on every lost race, including every stale read of a stack's
/// top, and multiply the interleavings it explores past what the preemption bound allows (it
/// more than doubled the executions of the 2-wave end-to-end model in `loom-tests`).
#[inline]
pub(crate) fn retry_hint() {
    core::hint::spin_loop();
}

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

/// The lock the [`Poller`](crate::Poller) keeps its table and its poll state behind: a spin lock
/// in production (no OS to block on), loom's mutex under loom (a spin lock's loop never yields to
/// loom's scheduler, and loom must see the lock's ordering to check what it protects).
pub(crate) struct Lock<T> {
    #[cfg(not(loom))]
    inner: spin::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

impl<T> Lock<T> {
    /// A lock holding `value`.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        Self { inner: spin::Mutex::new(value) }
    }

    /// A lock holding `value` (not `const` under loom).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        Self { inner: loom::sync::Mutex::new(value) }
    }

    /// Takes the lock, waiting for it.
    #[inline]
    pub(crate) fn lock(&self) -> impl core::ops::DerefMut<Target = T> + '_ {
        #[cfg(not(loom))]
        return self.inner.lock();
        // A model thread that panicked while holding it fails the model anyway.
        #[cfg(loom)]
        return self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    }

    /// Takes the lock if it is free.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<impl core::ops::DerefMut<Target = T> + '_> {
        #[cfg(not(loom))]
        return self.inner.try_lock();
        #[cfg(loom)]
        return self.inner.try_lock().ok();
    }
}
