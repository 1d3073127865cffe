//! [`AmdSignal`]: ROCm's `amd_signal_t`, the object an HSA signal handle points to, and what
//! ROCm's device code does to it when it rings a doorbell.
//!
//! A hostcall buffer's `doorbell` field holds a signal handle, and ROCm's device code treats that
//! handle as the address of an `amd_signal_t` (ROCm's `amd_hsa_signal.h`; `PROTOCOL.md` at the
//! repository root, section 5). After pushing a packet it runs, on the wave's first active lane:
//!
//! 1. `fetch_add(&signal.value, 1)`, release ordering, system scope (the word at +8);
//! 2. if `signal.event_mailbox_ptr` (the word at +16, a plain load) is not 0: store
//!    `signal.event_id` (the `u32` at +24, zero-extended) to the `u64` at that address, release,
//!    then raise an interrupt (`s_sendmsg`) so that the runtime wakes threads waiting on the event.
//!
//! So whatever address a backend writes into a buffer's `doorbell` field must be a live,
//! 64-aligned object of this layout, or the device's add lands in someone else's memory. Who
//! writes which word:
//!
//! | offset | word | written by |
//! | --- | --- | --- |
//! | 0 | `kind` | its creator, once, before the handle is published (1: a user signal) |
//! | 8 | `value` | devices (atomic add), the host ([`crate::doorbell::Doorbell::ring`]) |
//! | 16 | `event_mailbox_ptr` | its creator (0: no mailbox, no interrupt) |
//! | 24 | `event_id` | its creator, before the mailbox pointer |
//! | 28.. | reserved, timestamps, queue | nobody, for a user signal (zero) |

use std::mem::{align_of, offset_of, size_of};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};

/// `AMD_SIGNAL_KIND_USER`: a signal that the host and devices change by software (as opposed to
/// a doorbell signal of a hardware queue).
pub const AMD_SIGNAL_KIND_USER: i64 = 1;

/// Byte offset of [`AmdSignal::value`], the word ROCm's device code adds 1 to.
pub const VALUE_OFFSET: usize = 8;
/// Byte offset of [`AmdSignal::event_mailbox_ptr`].
pub const EVENT_MAILBOX_OFFSET: usize = 16;
/// Byte offset of [`AmdSignal::event_id`].
pub const EVENT_ID_OFFSET: usize = 24;

/// ROCm's `amd_signal_t`: 64 bytes, 64-aligned. Every word is an atomic because device code may
/// touch it at any time (see the module docs for who writes what).
///
/// ```
/// use hostcall::amd_signal::{AmdSignal, AMD_SIGNAL_KIND_USER};
/// use std::sync::atomic::Ordering;
///
/// let signal = AmdSignal::user(1);
/// assert_eq!(signal.kind.load(Ordering::Relaxed), AMD_SIGNAL_KIND_USER);
/// assert_eq!(signal.value.load(Ordering::Relaxed), 1);
/// assert_eq!(signal.event_mailbox_ptr.load(Ordering::Relaxed), 0); // no interrupt
/// assert_eq!(std::mem::size_of::<AmdSignal>(), 64);
/// ```
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct AmdSignal {
    /// @0: the signal's kind ([`AMD_SIGNAL_KIND_USER`]).
    pub kind: AtomicI64,
    /// @8: the value; devices `fetch_add` 1 to it after each push.
    pub value: AtomicI64,
    /// @16: address of a `u64` that receives `event_id` after each device add (0: none).
    pub event_mailbox_ptr: AtomicU64,
    /// @24: what the device stores to the mailbox.
    pub event_id: AtomicU32,
    /// @28: reserved.
    pub reserved1: AtomicU32,
    /// @32: start timestamp (completion signals of dispatches; unused here).
    pub start_ts: AtomicU64,
    /// @40: end timestamp (likewise).
    pub end_ts: AtomicU64,
    /// @48: the queue of a doorbell signal (unused for user signals).
    pub queue_ptr: AtomicU64,
    /// @56: reserved.
    pub reserved3: [AtomicU32; 2],
}

const _: () = {
    assert!(size_of::<AmdSignal>() == 64);
    assert!(align_of::<AmdSignal>() == 64);
    assert!(offset_of!(AmdSignal, kind) == 0);
    assert!(offset_of!(AmdSignal, value) == VALUE_OFFSET);
    assert!(offset_of!(AmdSignal, event_mailbox_ptr) == EVENT_MAILBOX_OFFSET);
    assert!(offset_of!(AmdSignal, event_id) == EVENT_ID_OFFSET);
    assert!(offset_of!(AmdSignal, reserved1) == 28);
    assert!(offset_of!(AmdSignal, start_ts) == 32);
    assert!(offset_of!(AmdSignal, end_ts) == 40);
    assert!(offset_of!(AmdSignal, queue_ptr) == 48);
    assert!(offset_of!(AmdSignal, reserved3) == 56);
    // The atomics have the integers' layout, so device code sees plain `int64_t`/`uint64_t`.
    assert!(size_of::<AtomicI64>() == 8 && size_of::<AtomicU64>() == 8 && size_of::<AtomicU32>() == 4);
};

impl AmdSignal {
    /// A user signal at `value`, with no event mailbox.
    pub fn user(value: i64) -> Self {
        let signal = Self::default();
        // Relaxed (both): the signal is not shared yet; whoever publishes its address orders
        // these stores before the device's first access.
        signal.kind.store(AMD_SIGNAL_KIND_USER, std::sync::atomic::Ordering::Relaxed);
        signal.value.store(value, std::sync::atomic::Ordering::Relaxed);
        signal
    }

    /// The handle of this signal: its address, what a buffer's `doorbell` field holds.
    pub fn handle(&self) -> u64 {
        self as *const Self as u64
    }
}
