//! The stack-protocol buffer as ROCm's device code sees it (PROTOCOL.md section 1).
//!
//! ```text
//! offset 0                         align8(48)              + n * 24 (aligned to 8)
//! | BufferPrefix (48 bytes) | PacketHeader[n] (24 bytes each) | Payload[n] (4096 bytes each) |
//! ```
//!
//! Every field is one of the [`crate::sync`] facade's types, which in production have the exact
//! representation of the integer they hold, so a buffer written by device code is viewed in place.
//! The `const` assertions below pin every offset and size to the ABI; they are compiled out under
//! loom, whose atomics are larger.
//!
//! Ownership of the shared words (who may write what, and when):
//!
//! | word | written by |
//! | --- | --- |
//! | `BufferPrefix::{headers, payloads, index_mask}` | the host, once, in [`BufferView::init`](crate::buffer::BufferView::init) |
//! | `BufferPrefix::doorbell` | the host, once, before the buffer is handed to the device |
//! | `BufferPrefix::free_stack` | producers (pop on claim, push on release) |
//! | `BufferPrefix::ready_stack` | producers (push on submit), the host (`take_all`) |
//! | `PacketHeader::next` | the current owner of the packet, before pushing it on a stack |
//! | `PacketHeader::{activemask, service}` | the claiming producer, before submit |
//! | `PacketHeader::control` | the producer sets READY on submit; the host clears it on completion |
//! | `Payload` slots | the producer before submit; the host (reply words) before clearing READY |

use crate::sync::{AtomicU32, AtomicU64, PayloadWord};

/// Lanes in a wave, and so slots in a payload.
#[cfg(not(loom))]
pub const LANES: usize = 64;
/// Lanes in a wave, shrunk under loom to keep the models small.
#[cfg(loom)]
pub const LANES: usize = 2;

/// The activemask bits that name a lane that exists ([`LANES`] low bits).
pub const LANE_MASK: u64 = if LANES == 64 { u64::MAX } else { (1u64 << LANES) - 1 };

/// Request words per lane.
pub const SLOT_WORDS: usize = 8;
/// Reply words per lane (the first words of the lane's slot).
pub const REPLY_WORDS: usize = 2;

/// Bit 0 of [`PacketHeader::control`]: the packet holds a request the host has not answered.
pub const CONTROL_READY: u32 = 1;
/// Bit 1 of [`PacketHeader::control`], an extension of this project: the host answered at least
/// one lane of this packet with an error reply. ROCm's device code ignores reserved bits and
/// overwrites `control` on its next submit, so the bit is invisible to it.
pub const CONTROL_HOST_ERROR: u32 = 1 << 1;

/// The start of the buffer: the fields device code reads (PROTOCOL.md section 1).
#[repr(C)]
pub struct BufferPrefix {
    /// Device address of `PacketHeader[num_packets]`. Written by the host at init; the host
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
pub struct PacketHeader {
    /// Tagged pointer to the next packet of whichever stack holds this one.
    pub next: AtomicU64,
    /// Bit `i` set: lane `i`'s slot holds a request.
    pub activemask: AtomicU64,
    /// Service id (see [`crate::service`]).
    pub service: AtomicU32,
    /// Bit 0 = READY ([`CONTROL_READY`]); bit 1 = host error ([`CONTROL_HOST_ERROR`]).
    pub control: AtomicU32,
}

/// Per-packet payload: one slot of [`SLOT_WORDS`] words for each lane.
#[repr(C)]
pub struct Payload {
    /// `slots[lane][word]`.
    pub slots: [[PayloadWord; SLOT_WORDS]; LANES],
}

impl Default for PacketHeader {
    fn default() -> Self {
        Self {
            next: AtomicU64::new(0),
            activemask: AtomicU64::new(0),
            service: AtomicU32::new(0),
            control: AtomicU32::new(0),
        }
    }
}

impl Default for BufferPrefix {
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

impl Default for Payload {
    fn default() -> Self {
        Self { slots: core::array::from_fn(|_| core::array::from_fn(|_| PayloadWord::default())) }
    }
}

/// Byte offset of the header array from the start of the buffer.
pub const HEADERS_OFFSET: usize = align8(core::mem::size_of::<BufferPrefix>());

/// Byte offset of the payload array for `num_packets` packets.
pub const fn payloads_offset(num_packets: usize) -> usize {
    align8(HEADERS_OFFSET + num_packets * core::mem::size_of::<PacketHeader>())
}

/// Bytes a buffer of `num_packets` packets needs (ROCm's `getHostcallBufferSize`).
///
/// Returns `None` when the size overflows `usize`.
///
/// ```
/// assert_eq!(hostcall_core::layout::buffer_size(2), Some(48 + 2 * 24 + 2 * 4096));
/// ```
pub const fn buffer_size(num_packets: usize) -> Option<usize> {
    let headers = match num_packets.checked_mul(core::mem::size_of::<PacketHeader>()) {
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
    8
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

#[cfg(not(loom))]
mod abi {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<BufferPrefix>() == 48);
    const _: () = assert!(align_of::<BufferPrefix>() == 8);
    const _: () = assert!(offset_of!(BufferPrefix, headers) == 0);
    const _: () = assert!(offset_of!(BufferPrefix, payloads) == 8);
    const _: () = assert!(offset_of!(BufferPrefix, doorbell) == 16);
    const _: () = assert!(offset_of!(BufferPrefix, free_stack) == 24);
    const _: () = assert!(offset_of!(BufferPrefix, ready_stack) == 32);
    const _: () = assert!(offset_of!(BufferPrefix, index_mask) == 40);

    const _: () = assert!(size_of::<PacketHeader>() == 24);
    const _: () = assert!(align_of::<PacketHeader>() == 8);
    const _: () = assert!(offset_of!(PacketHeader, next) == 0);
    const _: () = assert!(offset_of!(PacketHeader, activemask) == 8);
    const _: () = assert!(offset_of!(PacketHeader, service) == 16);
    const _: () = assert!(offset_of!(PacketHeader, control) == 20);

    const _: () = assert!(size_of::<Payload>() == 4096);
    const _: () = assert!(align_of::<Payload>() == 8);
    const _: () = assert!(size_of::<PayloadWord>() == 8);

    const _: () = assert!(HEADERS_OFFSET == 48);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_protocol_formula() {
        for n in [2usize, 3, 7, 64, 1000] {
            let expected = align8(align8(48) + n * 24) + n * 4096;
            assert_eq!(buffer_size(n), Some(expected));
            assert_eq!(payloads_offset(n), align8(48 + n * 24));
        }
        assert_eq!(buffer_size(usize::MAX / 8), None);
        assert_eq!(buffer_align(), 8);
    }
}
