//! Target 4: the whole host, driven by device bytes.
//!
//! A buffer of the stack, phase or line protocol (2..=9 packets, in guarded host memory; LLVM-RPC
//! buffers have their own target, `rpc_exchange`) is served by the core's
//! [`Poller`] through the std crate's [`Services`] registry holding the built-in services: PRINTF
//! writing into an in-memory sink and DEVMEM over guarded host memory, both with small budgets,
//! and (if the input says so) SANITIZER reporting into a counter; FUNCTION_CALL is not enabled. The fuzz bytes play the device:
//! valid-looking requests (printf message streams, in one chunk or several, continued with the
//! ids the host answered; DEVMEM allocations and frees of live, nearly live and bogus addresses;
//! unknown ids) and arbitrary writes anywhere in the buffer (headers, prefix, phase words,
//! payload slots, the ready-stack; line: heads, mask and lane words, `device_seq`, `served`),
//! interleaved with host rounds. On request the remaining
//! rounds are served by a [`Listener`] thread instead, one registration per round (each removal
//! makes the services forget the buffer: its open messages dropped, its DEVMEM blocks owned by no
//! buffer, so the model drops and orphans them).
//!
//! Input: byte 0 the shape (bit 0 the protocol, stack or phase, unless bit 5 asks for a line
//! buffer; bits 1..=3 the packet count less 2; bit 4 whether the listener may take over), byte 1 the message limits, byte 2 the DEVMEM limits
//! (see [`Budgets`]), then operations ([`device`]).
//!
//! Checked after every host round, against a prediction of which packets the round serves (the
//! stack protocol's chain walk, every packet whose phases differ, or every line packet whose
//! whole request carries a sequence not served yet, in index order) and a model
//! of every built-in service ([`model`]):
//! - no panic, no hang (the listener must serve within a deadline);
//! - the served packets are the predicted ones, in order, each at most once; the drain report's
//!   counts agree (packets, lane calls, malformed);
//! - every served lane's reply is the service's valid reply or its error reply: unknown ids
//!   `[u64::MAX, UnknownService]`; DEVMEM never `u64::MAX` in word 0, `[0, code]` on failure,
//!   aligned addresses never handed out twice, frees only of live blocks, refusals exactly when
//!   a budget says so; PRINTF continuations with the message's id, BEGINs refused while the
//!   open-message bound is reached, completed messages answered and printed (the sink's bytes)
//!   exactly as the formatter says;
//! - budgets: DEVMEM's live bytes (pages and bookkeeping) and allocation count within limits and
//!   equal to what its memory holds; PRINTF's open messages within the bound; unknown ids
//!   remembered within their table;
//! - nothing written but the ready-stack top (stack protocol), the served packets' `control`
//!   (READY cleared, the host-error flag exactly when a lane failed), `host_phase` (the device's
//!   value) or `served` (the call's sequence), and the served lanes' reply words (line: each
//!   tagged with the call's sequence); nothing outside the buffer (guard bytes);
//! - after the last round, one more drains everything (no packet left pending), and dropping
//!   the registry frees every DEVMEM block.

mod device;
mod guarded;
mod host;
mod model;
mod words;

use crate::input::Input;
use hostcall::services::devmem::{DevMemLimits, ALLOCATION_OVERHEAD, SLAB_BYTES};
use hostcall::services::message::{MessageLimits, OPEN_MESSAGE_OVERHEAD};

#[cfg(test)]
pub(crate) use device::op;

/// Bit of byte 0: the listener may take over (operation [`op::LISTENER`]).
pub(crate) const LISTENER_ALLOWED: u8 = 0x10;
/// Bit of byte 0: a line-protocol buffer (else bit 0 picks stack or phase).
pub(crate) const LINE: u8 = 0x20;

/// The budgets of one run.
pub(crate) struct Budgets {
    pub(crate) messages: MessageLimits,
    pub(crate) devmem: DevMemLimits,
    /// Whether SANITIZER is registered (else id 4 is an unknown id).
    pub(crate) sanitizer: bool,
}

impl Budgets {
    /// Byte 1: open messages 1..=8 (bits 0..=2), held bytes (bits 3..=4: room for one small
    /// message, 1 KiB, 16 KiB, the default), message size 8 << bits 5..=7 bytes.
    /// Byte 2: DEVMEM's total (bits 0..=1: none, 16 KiB, 64 KiB, 5 MiB), largest allocation
    /// (bits 2..=3: 1 byte, 4 KiB, 64 KiB, a 2 MiB slab), live allocations (bits 4..=5: 0, 1, 2, 16);
    /// bit 6: SANITIZER registered.
    fn decode(messages: u8, devmem_byte: u8) -> Self {
        let devmem = devmem_byte;
        let held = [OPEN_MESSAGE_OVERHEAD + 64, 1 << 10, 16 << 10, MessageLimits::default().max_held_bytes];
        let messages = MessageLimits::default()
            .with_max_open(1 + usize::from(messages & 7))
            .with_max_held_bytes(held[usize::from(messages >> 3 & 3)])
            .with_max_message_bytes(8 << (messages >> 5));
        let total = [0, 16 << 10, 64 << 10, 5 << 20];
        let largest = [1, 4 << 10, 64 << 10, SLAB_BYTES];
        let count = [0, 1, 2, 16];
        // One buffer here: its own budgets are the registry's defaults, never the bound.
        let devmem = DevMemLimits::default()
            .with_max_total(total[usize::from(devmem & 3)] + 2 * ALLOCATION_OVERHEAD)
            .with_max_allocation(largest[usize::from(devmem >> 2 & 3)])
            .with_max_allocations(count[usize::from(devmem >> 4 & 3)]);
        Self { messages, devmem, sanitizer: devmem_byte & 0x40 != 0 }
    }
}

/// Target 4: plays the device with `data` against the whole host (see the module docs of the
/// source for the format and the invariants). Panics if the host breaks an invariant.
pub fn whole_host(data: &[u8]) {
    let mut input = Input::new(data);
    let shape = input.u8();
    let budgets = Budgets::decode(input.u8(), input.u8());
    let mut host = host::Host::new(shape, budgets);
    device::run(&mut host, &mut input, shape & LISTENER_ALLOWED != 0);
    host.finish();
}
