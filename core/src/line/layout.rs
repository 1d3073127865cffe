//! The line-protocol buffer as device code sees it (PROTOCOL.md section 9): the prefix, the
//! per-packet request and reply blocks (of line words, `word.rs`), the sequences, and where this
//! project puts the arrays the prefix points to (the picture is in the [`crate::line`] docs).

use crate::lane::{LANES, REPLY_WORDS, SLOT_WORDS};
pub(crate) use crate::layout::CACHE_LINE;
use crate::layout::{line_aligned, total};
use crate::sync::{AtomicU32, AtomicU64};
use crate::view::MIN_ALIGN as SHARED_MIN_ALIGN;

/// Request words per lane the line transport carries: all [`SLOT_WORDS`] of a lane's slot.
///
/// Under loom only the first (the facade's table of model sizes, [`crate::sync`]): each line word
/// the host loads is a branch of loom's exploration (every relaxed load with several stores to
/// choose from), so 8 words a lane kept the models across the wrap from finishing. The algorithm
/// is the same code in both builds (every loop of the line module runs to this constant); under
/// loom [`Claimed::write_lane`](super::Claimed::write_lane) refuses (panics on) a non-zero word it
/// would not carry, and the host's payload holds zeroes in the words not carried.
pub const CARRIED_REQUEST_WORDS: usize = crate::sync::LINE_CARRIED_REQUEST_WORDS;

const _: () = assert!(CARRIED_REQUEST_WORDS >= 1 && CARRIED_REQUEST_WORDS <= SLOT_WORDS);

/// Line words per lane request: one for each carried request word's low 57 bits, and one packing
/// their top 7 bits ([`encode_request`](super::encode_request)); 9 in production, 2 under loom.
pub const REQUEST_LANE_WORDS: usize = CARRIED_REQUEST_WORDS + 1;
/// Line words per lane reply: one for each reply word's low 57 bits, and one packing their top
/// bits ([`encode_reply`](super::encode_reply)).
pub const REPLY_LANE_WORDS: usize = REPLY_WORDS + 1;

/// The largest sequence number, `2^SEQ_BITS - 1`; the one after it is 1 (0 is never a sequence:
/// it means "never written"). Shrunk to 2 under loom so the models cross the wrap ([`crate::sync`]).
pub const SEQ_MAX: u32 = crate::sync::LINE_SEQ_MAX;

/// The sequence after `seq`: `seq + 1`, and 1 after [`SEQ_MAX`] (0 is skipped).
///
/// ```
/// use hostcall_core::line::{next_seq, SEQ_MAX};
/// assert_eq!(next_seq(0), 1);
/// assert_eq!(next_seq(SEQ_MAX), 1);
/// ```
pub const fn next_seq(seq: u32) -> u32 {
    if seq < SEQ_MAX {
        seq + 1
    } else {
        1
    }
}

/// Whether the call with sequence `next`, following `previous` on the same packet, is one of the
/// two calls per cycle that refresh the packet's words (the wrap rule in [`crate::line`]):
/// `SEQ_MAX`, and 1 after a wrap (not the first call after `init`, which zeroed everything).
pub const fn refreshes(previous: u32, next: u32) -> bool {
    next == SEQ_MAX || (next == 1 && previous != 0)
}

/// The start of a line buffer: the fields device code reads. Written by the host in
/// [`View::init`](super::View::init) before the hand-off and never read back by the host.
#[derive(Debug)]
#[repr(C)]
pub struct Prefix {
    /// Device address of `Request[num_packets]`.
    pub requests: AtomicU64,
    /// Device address of `Reply[num_packets]`.
    pub replies: AtomicU64,
    /// Device address of `device_seq: u32[num_packets]` (device only).
    pub device_seq: AtomicU64,
    /// Device address of the `occupied` bitmap, `u32[ceil(num_packets / 32)]` (device only).
    pub occupied: AtomicU64,
    /// Device address of `served: u32[num_packets]` (host only; device code never needs it).
    pub served: AtomicU64,
    /// Doorbell handle (section 5) the device may signal after a submit.
    pub doorbell: AtomicU64,
    /// Number of packets.
    pub num_packets: AtomicU32,
}

impl Default for Prefix {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            requests: zero(),
            replies: zero(),
            device_seq: zero(),
            occupied: zero(),
            served: zero(),
            doorbell: zero(),
            num_packets: AtomicU32::new(0),
        }
    }
}

/// One packet's request block, written only by the wave holding the packet: the head and the
/// mask word, then every lane's [`REQUEST_LANE_WORDS`] line words, contiguous (a one-lane call's
/// words are bytes 0..88, the first two lines), then reserved words to the end of the last line.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Request {
    /// [`encode_head`](super::encode_head): the service and the activemask's top 7 bits; the
    /// word the host polls.
    pub head: AtomicU64,
    /// [`encode_mask`](super::encode_mask): the activemask's low 57 bits.
    pub mask: AtomicU64,
    /// `lanes[lane]`: [`encode_request`](super::encode_request) of the lane's request.
    pub lanes: [[AtomicU64; REQUEST_LANE_WORDS]; LANES],
    /// Reserved, zero; never read by the host.
    pub reserved: [AtomicU64; 6],
}

/// One packet's reply block, written by the host (and zeroed by the wave at its refresh claims):
/// every lane's [`REPLY_LANE_WORDS`] line words, 24 bytes, contiguous.
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Reply {
    /// `lanes[lane]`: [`encode_reply`](super::encode_reply) of the lane's reply.
    pub lanes: [[AtomicU64; REPLY_LANE_WORDS]; LANES],
}

impl Default for Request {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            head: zero(),
            mask: zero(),
            lanes: core::array::from_fn(|_| core::array::from_fn(|_| zero())),
            reserved: core::array::from_fn(|_| zero()),
        }
    }
}

impl Default for Reply {
    fn default() -> Self {
        Self { lanes: core::array::from_fn(|_| core::array::from_fn(|_| AtomicU64::new(0))) }
    }
}

/// Where each array of a line buffer starts (byte offsets from the base), and the total size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset of `device_seq: u32[n]` (device only).
    pub device_seq: usize,
    /// Offset of `occupied: u32[ceil(n / 32)]` (device only).
    pub occupied: usize,
    /// Offset of `served: u32[n]` (host only).
    pub served: usize,
    /// Offset of `Request[n]`.
    pub requests: usize,
    /// Offset of `Reply[n]`.
    pub replies: usize,
    /// Bytes the whole buffer needs.
    pub size: usize,
}

impl Layout {
    /// The layout for `num_packets` packets, or `None` when the size overflows `usize`.
    ///
    /// ```
    /// use hostcall_core::line::Layout;
    /// let l = Layout::new(3).unwrap();
    /// assert_eq!((l.device_seq, l.occupied, l.served, l.requests), (64, 128, 192, 256));
    /// assert_eq!((l.replies, l.size), (14272, 18880));
    /// assert_eq!((l.replies, l.size), (256 + 3 * 4672, 256 + 3 * 4672 + 3 * 1536));
    /// ```
    pub const fn new(num_packets: u32) -> Option<Self> {
        let Some(([device_seq, occupied, served, requests, replies], size)) = placed(num_packets as usize)
        else {
            return None;
        };
        Some(Self { device_seq, occupied, served, requests, replies, size })
    }
}

/// Bytes a line buffer of `num_packets` packets needs, or `None` on overflow.
pub const fn buffer_size(num_packets: u32) -> Option<usize> {
    total(placed(num_packets as usize))
}

/// The arrays after the prefix, in order: `device_seq`, `occupied`, `served`, the request blocks,
/// the reply blocks.
const fn placed(n: usize) -> Option<([usize; 5], usize)> {
    line_aligned(PREFIX_SIZE, [(n, 4), (n.div_ceil(32), 4), (n, 4), (n, REQUEST_SIZE), (n, REPLY_SIZE)])
}

/// The alignment a line buffer needs: a cache line (the request and reply blocks are
/// line-aligned types, and words with different writers must not share a line).
pub const fn buffer_align() -> usize {
    CACHE_LINE
}

/// The alignment [`View::from_raw`](super::View::from_raw) requires: the blocks' own alignment.
pub const MIN_ALIGN: usize = CACHE_LINE;

const _: () = assert!(MIN_ALIGN % SHARED_MIN_ALIGN == 0);

// The ABI sizes, written out so the layout arithmetic also holds under loom (whose atomics are
// larger than the integers they model; the `abi` asserts tie them to the real types).
const PREFIX_SIZE: usize = 56;
/// Bytes of one [`Request`] block: the head and mask words and 72 bytes per lane (64 lanes, also
/// under loom, whose geometry is the layout's), rounded up to whole lines.
pub const REQUEST_SIZE: usize = ((2 + 64 * REQUEST_LANE_WORDS) * 8).next_multiple_of(CACHE_LINE);
/// Bytes of one [`Reply`] block: 24 bytes per lane, whole lines.
pub const REPLY_SIZE: usize = (64 * REPLY_LANE_WORDS * 8).next_multiple_of(CACHE_LINE);

crate::sync::abi_checks! {
    use super::*;
    use crate::sync::assert_abi;
    use core::mem::{align_of, offset_of, size_of};

    assert_abi!(Prefix {
        size: PREFIX_SIZE,
        align: 8,
        requests: 0,
        replies: 8,
        device_seq: 16,
        occupied: 24,
        served: 32,
        doorbell: 40,
        num_packets: 48,
    });

    const _: () = assert!(CARRIED_REQUEST_WORDS == SLOT_WORDS && REQUEST_LANE_WORDS == 9);
    const _: () = assert!(SEQ_MAX == 127 && REPLY_LANE_WORDS == 3);
    const _: () = assert!(size_of::<Request>() == REQUEST_SIZE && REQUEST_SIZE == 4672);
    const _: () = assert!(align_of::<Request>() == CACHE_LINE);
    const _: () = assert!(offset_of!(Request, head) == 0);
    const _: () = assert!(offset_of!(Request, mask) == 8);
    const _: () = assert!(offset_of!(Request, lanes) == 16);
    const _: () = assert!(offset_of!(Request, reserved) == 4624); // 16 + 64 * 72, then 6 words
    const _: () = assert!(size_of::<Reply>() == REPLY_SIZE && REPLY_SIZE == 1536);
    const _: () = assert!(align_of::<Reply>() == CACHE_LINE);
    const _: () = assert!(size_of::<AtomicU64>() == 8 && size_of::<AtomicU32>() == 4);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_array_starts_on_a_line_of_its_own() {
        crate::test_support::assert_line_aligned_for_counts(|n| {
            let l = Layout::new(n as u32).unwrap();
            (
                [
                    (0, PREFIX_SIZE),
                    (l.device_seq, 4 * n),
                    (l.occupied, 4 * n.div_ceil(32)),
                    (l.served, 4 * n),
                    (l.requests, REQUEST_SIZE * n),
                    (l.replies, REPLY_SIZE * n),
                ],
                l.size,
            )
        });
        assert!(Layout::new(u32::MAX).is_some(), "a u32 count never overflows a 64-bit size");
    }

    #[test]
    fn sequences_wrap_past_zero() {
        assert_eq!(next_seq(SEQ_MAX - 1), SEQ_MAX);
        assert_eq!(next_seq(SEQ_MAX), 1);
        assert!(refreshes(SEQ_MAX - 1, SEQ_MAX) && refreshes(SEQ_MAX, 1));
        assert!(!refreshes(0, 1) && !refreshes(1, 2));
        assert_eq!(super::super::seq_of(super::super::word(5, 9)), 9);
    }
}
