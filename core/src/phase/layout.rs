//! The phase-protocol buffer as device code sees it (PROTOCOL.md section 2), and where this
//! project puts the arrays the prefix points to (the picture is in the [`crate::phase`] docs).

pub(crate) use crate::layout::CACHE_LINE;
use crate::layout::{line_aligned, total};
use crate::sync::{AtomicU32, AtomicU64};
use crate::view::MIN_ALIGN as SHARED_MIN_ALIGN;

/// The start of a phase buffer: the fields device code reads (PROTOCOL.md section 2).
///
/// All of them are written by the host in [`View::init`](super::View::init), before
/// the buffer is handed to the device, and never read back by the host (it keeps its own
/// copies of the addresses and of the packet count).
#[repr(C)]
#[derive(Debug)]
pub struct Prefix {
    /// Device address of `device_phase: u32[num_packets]`.
    pub device_phase: AtomicU64,
    /// Device address of `host_phase: u32[num_packets]`.
    pub host_phase: AtomicU64,
    /// Device address of the `occupied` bitmap, `u32[ceil(num_packets / 32)]`.
    pub occupied: AtomicU64,
    /// Device address of `Header[num_packets]`.
    pub headers: AtomicU64,
    /// Device address of `Payload[num_packets]`.
    pub payloads: AtomicU64,
    /// Doorbell handle (an HSA signal on ROCm) the device signals after a submit.
    pub doorbell: AtomicU64,
    /// Number of packets.
    pub num_packets: AtomicU32,
}

/// Per-packet header of the phase protocol (16 bytes): the stack header without `next` and
/// `control`. Written by the claiming wave before it flips `device_phase`; read by the host.
#[repr(C)]
#[derive(Debug)]
pub struct Header {
    /// Bit `i` set: lane `i`'s slot holds a request.
    pub activemask: AtomicU64,
    /// Service id (see [`crate::PRINTF`] and its siblings).
    pub service: AtomicU32,
}

impl Default for Prefix {
    fn default() -> Self {
        Self {
            device_phase: AtomicU64::new(0),
            host_phase: AtomicU64::new(0),
            occupied: AtomicU64::new(0),
            headers: AtomicU64::new(0),
            payloads: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
            num_packets: AtomicU32::new(0),
        }
    }
}

impl Default for Header {
    fn default() -> Self {
        Self { activemask: AtomicU64::new(0), service: AtomicU32::new(0) }
    }
}

/// Words of the `occupied` bitmap for `num_packets` packets: `ceil(num_packets / 32)`.
pub const fn occupied_words(num_packets: u32) -> usize {
    occupied_len(num_packets as usize)
}

/// [`occupied_words`] of an array length.
pub(crate) const fn occupied_len(num_packets: usize) -> usize {
    num_packets.div_ceil(32)
}

/// Where each array of a phase buffer of some packet count starts (byte offsets from the base),
/// and the total size. See the [`crate::phase`] docs for the picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of `device_phase: u32[n]`.
    pub device_phase: usize,
    /// Offset of `occupied: u32[ceil(n / 32)]`.
    pub occupied: usize,
    /// Offset of `host_phase: u32[n]`.
    pub host_phase: usize,
    /// Offset of `Header[n]`.
    pub headers: usize,
    /// Offset of `Payload[n]`.
    pub payloads: usize,
    /// Bytes the whole buffer needs.
    pub size: usize,
}

impl Layout {
    /// The layout for `num_packets` packets, or `None` when the size overflows `usize`.
    ///
    /// ```
    /// use hostcall_core::phase::Layout;
    /// let l = Layout::new(3).unwrap();
    /// assert_eq!((l.device_phase, l.occupied, l.host_phase, l.headers, l.payloads), (64, 128, 192, 256, 320));
    /// assert_eq!(l.size, 320 + 3 * 4096);
    /// ```
    pub const fn new(num_packets: u32) -> Option<Self> {
        let Some(([device_phase, occupied, host_phase, headers, payloads], size)) =
            placed(num_packets as usize)
        else {
            return None;
        };
        Some(Self { device_phase, occupied, host_phase, headers, payloads, size })
    }
}

/// Bytes a phase buffer of `num_packets` packets needs, or `None` on overflow.
///
/// ```
/// assert_eq!(hostcall_core::phase::buffer_size(2), Some(320 + 2 * 4096));
/// ```
pub const fn buffer_size(num_packets: u32) -> Option<usize> {
    total(placed(num_packets as usize))
}

/// The arrays after the prefix, in order: `device_phase`, `occupied`, `host_phase`, the headers,
/// the payloads.
const fn placed(n: usize) -> Option<([usize; 5], usize)> {
    line_aligned(PREFIX_SIZE, [(n, 4), (occupied_len(n), 4), (n, 4), (n, HEADER_SIZE), (n, PAYLOAD_SIZE)])
}

/// The alignment to allocate a phase buffer with: a cache line, so the arrays the device writes
/// and the array the host writes sit on separate lines. [`MIN_ALIGN`] is what
/// [`View::from_raw`](super::View::from_raw) requires.
pub const fn buffer_align() -> usize {
    CACHE_LINE
}

/// The alignment a phase buffer must have (its widest fields are `u64`).
pub const MIN_ALIGN: usize = SHARED_MIN_ALIGN;

// The ABI sizes, written out so the layout arithmetic also holds under loom, whose atomics are
// larger than the integers they model (the `abi` asserts below tie them to the real types).
const PREFIX_SIZE: usize = 56;
const HEADER_SIZE: usize = 16;
const PAYLOAD_SIZE: usize = 4096;

crate::sync::abi_checks! {
    use super::*;
    use crate::lane::Payload;
    use crate::sync::assert_abi;
    use core::mem::{align_of, size_of};

    assert_abi!(Prefix {
        size: PREFIX_SIZE,
        align: 8,
        device_phase: 0,
        host_phase: 8,
        occupied: 16,
        headers: 24,
        payloads: 32,
        doorbell: 40,
        num_packets: 48,
    });
    assert_abi!(Header { size: HEADER_SIZE, align: 8, activemask: 0, service: 8 });

    const _: () = assert!(size_of::<Payload>() == PAYLOAD_SIZE);
    const _: () = assert!(size_of::<AtomicU32>() == 4 && align_of::<AtomicU32>() == 4);

    // Every array offset is a multiple of the line, hence of every element's alignment.
    const _: () = assert!(CACHE_LINE % align_of::<Payload>() == 0);
    const _: () = assert!(CACHE_LINE % align_of::<Header>() == 0);
    const _: () = assert!(MIN_ALIGN == align_of::<Prefix>());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_line_aligned_disjoint_and_in_bounds() {
        crate::test_support::assert_line_aligned_for_counts(|n| {
            let l = Layout::new(n as u32).unwrap();
            (
                [
                    (0, PREFIX_SIZE),
                    (l.device_phase, 4 * n),
                    (l.occupied, 4 * occupied_words(n as u32)),
                    (l.host_phase, 4 * n),
                    (l.headers, HEADER_SIZE * n),
                    (l.payloads, PAYLOAD_SIZE * n),
                ],
                l.size,
            )
        });
        assert!(Layout::new(u32::MAX).is_some(), "a u32 count never overflows a 64-bit size");
        assert_eq!(occupied_words(32), 1);
        assert_eq!(occupied_words(33), 2);
    }
}
