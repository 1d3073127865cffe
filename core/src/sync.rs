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
//!   `retry_hint`, `prefetch`); the host's uninitialised payload memory (`PayloadMemory`, raw
//!   memory written in place, or a whole loom payload built at its first access) and its slots
//!   as plain words (`PlainSlots`, which the lane loop serves from in place; none under loom,
//!   whose cells are read one by one);
//! - one way to write a constructor that is `const` in production although loom's atomics and
//!   locks have no `const` constructor: `const_fn!` around the function (a plain `fn` under loom),
//!   and `new_array!` for an array of atomics in it (`[const { .. }; N]` in production);
//! - the compile-time checks of the ABI: `abi_checks! { .. }` holds a layout's `size_of`,
//!   `offset_of` and `assert_abi!` asserts, compiled outside loom only (loom's atomics and cells
//!   are larger than the integers they model, which is also why the layout arithmetic uses the
//!   ABI sizes written out);
//! - the sizes the models shrink (the wave's lanes, the line protocol's carried words, sequence
//!   wrap and stall counts), as named constants in one table below. The public constants
//!   ([`crate::LANES`], [`crate::line::SEQ_MAX`], ...) are defined from it.
//!
//! Outside this module `cfg(loom)` remains only where a build must lack or gain an item, which no
//! type can hide:
//!
//! - raw memory: each protocol's `View::from_raw`, `AnyView::from_raw` and the poller's
//!   registration of raw memory (`Poller::add`, `add_on_device`, the range API), with what only
//!   they use (`view::raw`), exist outside loom only, since only there do the buffer's types have
//!   the layout of the device's bytes;
//! - the models' access, under loom only: the crate's `__internal` module (unstable internals the
//!   models call) and the poller's model-only entry points (`poller::model`); the in-memory phase
//!   buffer the models share with the unit tests (`phase::in_parts`, `cfg(any(test, loom))`);
//! - the line host's vector decode and answer (`line/decode.rs`, `line/answer.rs`), outside loom
//!   (and Miri) only: they load and store the production atomics' memory with inline assembly;
//!   the one-word-at-a-time decode and the one-lane-at-a-time answer run there.
//!
//! The crate's tests, unit and doc, run outside loom only: they run their threads themselves, with
//! no model around them. A unit-test build under loom is refused below; the models are the
//! `loom-tests` crate.
//!
//! The two halves, as tokio's `loom` module: `production.rs` (portable-atomic, a spin lock, raw
//! memory) and `model.rs` (loom's atomics, cells and mutex), item for item; this file picks one and
//! holds what both share.

#[cfg(loom)]
mod model;
#[cfg(not(loom))]
mod production;

// What users name (the types of the layouts' fields, and the payload's word) is re-exported by
// name; the rest of each half is the crate's own.
#[cfg(loom)]
pub(crate) use model::*;
#[cfg(loom)]
pub use model::{fence, AtomicU32, AtomicU64, Ordering, PayloadWord};
#[cfg(not(loom))]
pub(crate) use production::*;
#[cfg(not(loom))]
pub use production::{fence, AtomicU32, AtomicU64, Ordering, PayloadWord};

// The target requirements (see the crate docs): the shared words must be atomic against the
// device, which only the CPU's own lock-free instructions are. portable-atomic falls back to a
// lock (its `fallback` feature, which any crate in the build may turn on) or to disabling
// interrupts where the target has no such instructions; the layout stays the same, but a lock the
// GPU never takes protects nothing. Refuse to build instead of breaking at run time (the lock-free
// assert is in `production.rs`).
#[cfg(not(target_has_atomic = "64"))]
compile_error!(
    "hostcall-core needs native 64-bit atomics (target_has_atomic = \"64\"): the buffer's words \
     are shared with a GPU, and only lock-free CPU atomics are atomic against it"
);

#[cfg(all(test, loom))]
compile_error!(
    "hostcall-core's unit tests run outside loom (they run their own threads, outside any loom \
     model); the loom models are the loom-tests crate: RUSTFLAGS=\"--cfg loom\" cargo test -p \
     loom-tests --release"
);

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
