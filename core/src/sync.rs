//! The facade between the crate and the loom model checker: the only module that names atomics,
//! and the one place that says how the loom build (`--cfg loom`, the models of the `loom-tests`
//! crate) differs from production.
//!
//! Production builds use [`portable_atomic`], whose `AtomicU64`/`AtomicU32` have exactly the
//! in-memory representation of `u64`/`u32`, so a raw buffer written by device code can be viewed
//! through the `repr(C)` types of each protocol's layout ([`crate::stack::Prefix`],
//! [`crate::phase::Prefix`], [`crate::Payload`], ...). Under `--cfg loom` the same names resolve to
//! loom's model-checked atomics, and payload words become loom cells so that the models prove the
//! protocol orders a correct device's payload writes before the host reads them.
//!
//! What the facade gives the rest of the crate, alike in both builds:
//!
//! - the atomics, [`fence`] and [`Ordering`]; [`PayloadWord`], the payload's word; the lock the
//!   poller keeps its state behind (`Lock`); the CPU hints of wait loops and scans (`spin_hint`,
//!   `retry_hint`, `prefetch`); the host's uninitialised payload memory (`PayloadMemory`);
//! - one way to write a constructor that is `const` in production although loom's atomics and
//!   locks have no `const` constructor: `const_fn!` around the function, and `new_array!` for an
//!   array of atomics (`[const { .. }; N]` in production);
//! - the compile-time checks of the ABI, `abi_checks!`: the `size_of`/`offset_of` asserts of each
//!   layout, compiled outside loom only (loom's atomics and cells are larger than the integers
//!   they model, so there the layout arithmetic uses the ABI sizes written out);
//! - the sizes the models shrink (the wave's lanes, the line protocol's carried words, sequence
//!   wrap and stall counts), as named constants in one table below. The public constants
//!   ([`crate::LANES`], [`crate::line::SEQ_MAX`], ...) are defined from it.
//!
//! Outside this module `cfg(loom)` remains only where a build must lack or gain an item, which no
//! type can hide:
//!
//! - raw memory: each protocol's `View::from_raw` (and the poller's registration of raw memory,
//!   which builds on it) exists outside loom only, since only there do the buffer's types have
//!   the layout of the device's bytes;
//! - the models' access: the crate's `__internal` module (unstable internals the models call),
//!   the in-memory phase buffer they share with the unit tests (`phase::in_parts`) and its
//!   accessors, and the poller's model-only entry points.
//!
//! The crate's unit tests run outside loom only (they run their threads themselves, with no
//! model around them): a test build under loom is refused below; the models are the `loom-tests`
//! crate.

mod payload;

pub(crate) use payload::PayloadMemory;
pub use payload::PayloadWord;

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

#[cfg(all(test, loom))]
compile_error!(
    "hostcall-core's unit tests run outside loom (they run their own threads, outside any loom \
     model); the loom models are the loom-tests crate: RUSTFLAGS=\"--cfg loom\" cargo test -p \
     loom-tests --release"
);

/// Declares a function that is `const` in production and a plain `fn` under loom, whose atomics
/// and locks have no `const` constructor, so that callers write the constructor once:
///
/// ```text
/// const_fn! {
///     /// An empty table.
///     pub(crate) const fn new() -> Self { Self { pinned: new_array![AtomicU32::new(0); N] } }
/// }
/// ```
#[cfg(not(loom))]
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $args:tt -> $ret:ty $body:block) => {
        $(#[$attr])* $vis const fn $name $args -> $ret $body
    };
}
/// `const_fn!` under loom: the function without `const`.
#[cfg(loom)]
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $args:tt -> $ret:ty $body:block) => {
        $(#[$attr])* $vis fn $name $args -> $ret $body
    };
}
#[allow(unused_imports)] // the crate's constructors of atomics and locks may all live in this module
pub(crate) use const_fn;

/// An array of `$n` values, each built by `$value` (evaluated once per element): `[const { $value
/// }; $n]` in production, usable in a `const fn`; built element by element under loom.
#[cfg(not(loom))]
#[allow(unused_macros)]
macro_rules! new_array {
    ($value:expr; $n:expr) => {
        [const { $value }; $n]
    };
}
/// `new_array!` under loom, where `$value` is no constant.
#[cfg(loom)]
#[allow(unused_macros)]
macro_rules! new_array {
    ($value:expr; $n:expr) => {
        core::array::from_fn::<_, { $n }, _>(|_| $value)
    };
}
#[allow(unused_imports)]
pub(crate) use new_array;

/// The compile-time checks of a layout's ABI (its `size_of`, `align_of` and `offset_of` asserts),
/// as the items of a module `abi`, compiled outside loom only: loom's atomics and cells are
/// larger than the integers they model.
#[cfg(not(loom))]
macro_rules! abi_checks {
    ($($item:item)*) => {
        mod abi {
            $($item)*
        }
    };
}
/// `abi_checks!` under loom: nothing.
#[cfg(loom)]
macro_rules! abi_checks {
    ($($item:item)*) => {};
}
pub(crate) use abi_checks;

/// `const` assertions pinning a `repr(C)` type to its ABI: its size, its alignment and the offset
/// of each field named (in an `abi_checks!` block).
///
/// ```text
/// assert_abi!(Header { size: 16, align: 8, activemask: 0, service: 8 });
/// ```
#[cfg(not(loom))]
macro_rules! assert_abi {
    ($ty:ty { size: $size:expr, align: $align:expr $(, $field:ident: $offset:expr)* $(,)? }) => {
        const _: () = assert!(core::mem::size_of::<$ty>() == $size);
        const _: () = assert!(core::mem::align_of::<$ty>() == $align);
        $(const _: () = assert!(core::mem::offset_of!($ty, $field) == $offset);)*
    };
}
#[cfg(not(loom))]
pub(crate) use assert_abi;

// The sizes the loom models shrink, each named once; the public constants built from them say
// what they mean. Under loom they are as small as the models need to reach every case (a lane
// other than the first, the sequence wrap, a stall report) in few enough interleavings; Miri,
// which interprets every step, shrinks the stall counts too.

/// Lanes in a wave ([`crate::LANES`]): 2 under loom.
pub(crate) const LANES: usize = if cfg!(loom) { 2 } else { 64 };
/// Request words per lane the line transport carries ([`crate::line::CARRIED_REQUEST_WORDS`]):
/// under loom only the first, since each line word the host loads is a branch of loom's
/// exploration.
pub(crate) const LINE_CARRIED_REQUEST_WORDS: usize = if cfg!(loom) { 1 } else { crate::lane::SLOT_WORDS };
/// The line protocol's largest sequence number ([`crate::line::SEQ_MAX`]): 2 under loom, so the
/// models cross the wrap.
pub(crate) const LINE_SEQ_MAX: u32 = if cfg!(loom) { 2 } else { (1 << crate::line::SEQ_BITS) - 1 };
/// Looks at an incomplete line request before it is reported stalled
/// ([`crate::line::STALL_LOOKS`]): 2 under loom, so the models reach the report; 8 under Miri.
pub(crate) const LINE_STALL_LOOKS: u16 = if cfg!(loom) {
    2
} else if cfg!(miri) {
    8
} else {
    4096
};
/// Scans between looks at a line packet reported stalled ([`crate::line::STALLED_LOOK_PERIOD`]):
/// 2 under loom, 4 under Miri.
pub(crate) const LINE_STALLED_LOOK_PERIOD: u16 = if cfg!(loom) {
    2
} else if cfg!(miri) {
    4
} else {
    64
};

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

/// Hints the CPU to fetch the cache line holding `value`, so that a miss the host knows is coming
/// overlaps the ones before it instead of following them (the protocols' hosts call it on the
/// request lines of a packet they have just seen submitted: docs/cache-lines.md). Not an access in
/// Rust's memory model: a prefetch reads nothing the program sees and checks nothing away. A
/// no-op off x86-64 and under loom.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
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
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = value;
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
    const_fn! {
        /// A lock holding `value`.
        pub(crate) const fn new(value: T) -> Self {
            #[cfg(not(loom))]
            return Self { inner: spin::Mutex::new(value) };
            #[cfg(loom)]
            return Self { inner: loom::sync::Mutex::new(value) };
        }
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
