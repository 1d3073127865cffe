//! The stack-protocol buffer as ROCm's device code sees it (PROTOCOL.md section 1).
//!
//! The picture of the buffer and the table of who writes which word are in the
//! [module docs](super).
//!
//! Every field is one of the [`crate::sync`] facade's types (the payload is the [`Payload`] both
//! protocols share), which in production have the exact representation of the integer they hold,
//! so a buffer written by device code is viewed in place.
//! The `const` assertions below pin every offset and size to the ABI; they are compiled out under
//! loom, whose atomics are larger.

use crate::lane::Payload;
use crate::sync::{AtomicU32, AtomicU64};
use crate::view::MIN_ALIGN;

/// Bit 0 of [`Header::control`]: the packet holds a request the host has not answered.
pub const CONTROL_READY: u32 = 1;
/// Bit 1 of [`Header::control`], an extension of this project: the host answered at least
/// one lane of this packet with an error reply. ROCm's device code ignores reserved bits and
/// overwrites `control` on its next submit, so the bit is invisible to it.
pub const CONTROL_HOST_ERROR: u32 = 1 << 1;

/// The start of the buffer: the fields device code reads (PROTOCOL.md section 1).
#[repr(C)]
#[derive(Debug)]
pub struct Prefix {
    /// Device address of `Header[num_packets]`. Written by the host at init; the host
    /// itself never reads it back (it uses its own copy of the address).
    pub headers: AtomicU64,
    /// Device address of `Payload[num_packets]`. Same rule as `headers`.
    pub payloads: AtomicU64,
    /// Doorbell handle (an HSA signal on ROCm) the device increments after a push.
    pub doorbell: AtomicU64,
    /// Tagged pointer to the top of the free-list.
    pub free_stack: AtomicU64,
    /// Tagged pointer to the top of the ready-stack.
    pub ready_stack: AtomicU64,
    /// `next_power_of_two(num_packets) - 1`. Written by the host; the host never reads it back.
    pub index_mask: AtomicU64,
}

/// Per-packet header (24 bytes).
#[repr(C)]
#[derive(Debug)]
pub struct Header {
    /// Tagged pointer to the next packet of whichever stack holds this one.
    pub next: AtomicU64,
    /// Bit `i` set: lane `i`'s slot holds a request.
    pub activemask: AtomicU64,
    /// Service id (see [`crate::PRINTF`] and its siblings).
    pub service: AtomicU32,
    /// Bit 0 = READY ([`CONTROL_READY`]); bit 1 = host error ([`CONTROL_HOST_ERROR`]).
    pub control: AtomicU32,
}

impl Default for Header {
    fn default() -> Self {
        Self {
            next: AtomicU64::new(0),
            activemask: AtomicU64::new(0),
            service: AtomicU32::new(0),
            control: AtomicU32::new(0),
        }
    }
}

impl Default for Prefix {
    fn default() -> Self {
        Self {
            headers: AtomicU64::new(0),
            payloads: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
            free_stack: AtomicU64::new(0),
            ready_stack: AtomicU64::new(0),
            index_mask: AtomicU64::new(0),
        }
    }
}

/// Byte offset of the header array from the start of the buffer.
pub const HEADERS_OFFSET: usize = align8(core::mem::size_of::<Prefix>());

/// Byte offset of the payload array for `num_packets` packets.
pub const fn payloads_offset(num_packets: usize) -> usize {
    align8(HEADERS_OFFSET + num_packets * core::mem::size_of::<Header>())
}

/// Bytes a buffer of `num_packets` packets needs (ROCm's `getHostcallBufferSize`).
///
/// Returns `None` when the size overflows `usize`.
///
/// ```
/// assert_eq!(hostcall_core::stack::buffer_size(2), Some(48 + 2 * 24 + 2 * 4096));
/// ```
pub const fn buffer_size(num_packets: u32) -> Option<usize> {
    let num_packets = num_packets as usize;
    let headers = match num_packets.checked_mul(core::mem::size_of::<Header>()) {
        Some(b) => b,
        None => return None,
    };
    let payloads = match num_packets.checked_mul(core::mem::size_of::<Payload>()) {
        Some(b) => b,
        None => return None,
    };
    match HEADERS_OFFSET.checked_add(headers) {
        Some(end_of_headers) => match align8_checked(end_of_headers) {
            Some(start) => start.checked_add(payloads),
            None => None,
        },
        None => None,
    }
}

/// Alignment the buffer needs (ROCm's `getHostcallBufferAlignment`).
pub const fn buffer_align() -> usize {
    MIN_ALIGN
}

const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

const fn align8_checked(n: usize) -> Option<usize> {
    match n.checked_add(7) {
        Some(m) => Some(m & !7),
        None => None,
    }
}

crate::sync::abi_checks! {
    use super::*;
    use crate::sync::assert_abi;
    use core::mem::size_of;

    assert_abi!(Prefix {
        size: 48,
        align: 8,
        headers: 0,
        payloads: 8,
        doorbell: 16,
        free_stack: 24,
        ready_stack: 32,
        index_mask: 40,
    });
    assert_abi!(Header { size: 24, align: 8, next: 0, activemask: 8, service: 16, control: 20 });

    const _: () = assert!(size_of::<Payload>() == 4096);

    const _: () = assert!(HEADERS_OFFSET == 48);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_protocol_formula() {
        for n in [2usize, 3, 7, 64, 1000] {
            let expected = align8(align8(48) + n * 24) + n * 4096;
            assert_eq!(buffer_size(n as u32), Some(expected));
            assert_eq!(payloads_offset(n), align8(48 + n * 24));
        }
        assert!(buffer_size(u32::MAX).is_some(), "a u32 count never overflows a 64-bit size");
        assert_eq!(buffer_align(), 8);
    }
}
