//! The multi-packet streams of `rpc.h` (`send_n` / `recv_n`), one arithmetic for both directions
//! and both sides: the first packet carries the lane's byte count in word 0 and 56 bytes after
//! it, each later packet 64 bytes; the stream runs to the longest lane of the port's mask (lanes
//! that have sent everything ride along with nothing to add). Every packet after the first waits
//! for the peer's acknowledging flip, so a stream of `n` packets is `n` turns.
//!
//! The host's ends ([`StreamIn`], [`StreamOut`]) are turn by turn: a stream in progress is a few
//! words of state, not a blocked thread. A lane that declares more than the receiver's limit is
//! still read to its end (so the client stays in step with the host) but its bytes are dropped and
//! the lane is marked; what the host keeps is bounded by the limit whatever the device claims.

use super::host::Turn;
use crate::lane::{LANES, SLOT_WORDS};
use core::ops::Range;

/// Data bytes in a stream's first packet (word 0 holds the lane's byte count).
pub const FIRST_PACKET_BYTES: u64 = 56;
/// Data bytes in each later packet.
pub const PACKET_BYTES: u64 = 64;

/// Packets a stream takes whose longest lane has `longest` bytes.
///
/// ```
/// use hostcall_core::rpc::stream_packets;
/// assert_eq!((stream_packets(0), stream_packets(56), stream_packets(57)), (1, 1, 2));
/// assert_eq!(stream_packets(200), 4);
/// ```
pub const fn stream_packets(longest: u64) -> u64 {
    if longest <= FIRST_PACKET_BYTES {
        1
    } else {
        1 + (longest - FIRST_PACKET_BYTES).div_ceil(PACKET_BYTES)
    }
}

/// Where a stream stands: the stream offset of the packet about to move (0: the first packet).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    offset: u64,
}

impl Cursor {
    /// At the first packet.
    pub const fn start() -> Self {
        Self { offset: 0 }
    }

    /// Whether the packet about to move is the first (the one with the byte count).
    #[inline]
    pub const fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// The bytes of a `size`-byte lane stream that the packet about to move carries, and the
    /// byte of the packet they start at (8 in the first packet, after the count; else 0).
    #[inline]
    pub fn chunk(&self, size: u64) -> (Range<u64>, usize) {
        if self.is_first() {
            (0..size.min(FIRST_PACKET_BYTES), 8)
        } else {
            let start = self.offset.min(size);
            (start..size.min(self.offset.saturating_add(PACKET_BYTES)), 0)
        }
    }

    /// Moves past the packet; returns whether another follows for a longest lane of `longest`.
    #[inline]
    pub fn advance(&mut self, longest: u64) -> bool {
        self.offset =
            if self.is_first() { FIRST_PACKET_BYTES } else { self.offset.saturating_add(PACKET_BYTES) };
        self.offset < longest
    }
}

/// Copies `bytes` into the packet's words from byte `at` (little-endian within each word).
///
/// # Panics
/// If `at + bytes.len() > 64`.
pub fn write_chunk(words: &mut [u64; SLOT_WORDS], at: usize, bytes: &[u8]) {
    let mut packet = [0u8; 64];
    for (i, word) in words.iter().enumerate() {
        packet[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
    }
    packet[at..at + bytes.len()].copy_from_slice(bytes);
    for (i, word) in words.iter_mut().enumerate() {
        *word = u64::from_le_bytes(packet[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
    }
}

/// The packet's bytes (little-endian words).
pub fn packet_bytes(words: &[u64; SLOT_WORDS]) -> [u8; 64] {
    let mut packet = [0u8; 64];
    for (i, word) in words.iter().enumerate() {
        packet[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
    }
    packet
}

/// The packet of one lane's part of a stream: word 0 the count in the first packet, then the
/// chunk of `data` the cursor says.
pub fn fill_packet(cursor: &Cursor, data: &[u8]) -> [u64; SLOT_WORDS] {
    let mut words = [0u64; SLOT_WORDS];
    let (range, at) = cursor.chunk(data.len() as u64);
    if cursor.is_first() {
        words[0] = data.len() as u64;
    }
    write_chunk(&mut words, at, &data[range.start as usize..range.end as usize]);
    words
}

/// The host receiving a stream (the client's `send_n`), one turn per packet.
#[derive(Clone, Debug)]
pub struct StreamIn {
    mask: u64,
    sizes: [u64; LANES],
    longest: u64,
    limit: u64,
    cursor: Cursor,
}

impl StreamIn {
    /// A stream from the lanes of `mask`, keeping at most `limit` bytes a lane.
    pub fn new(mask: u64, limit: u64) -> Self {
        Self { mask, sizes: [0; LANES], longest: 0, limit, cursor: Cursor::start() }
    }

    /// Takes this turn's packet, handing each kept lane's bytes to `sink(lane, offset, bytes)`.
    /// Returns `true` when the stream is complete (this was its last packet).
    pub fn receive(&mut self, turn: &Turn<'_>, sink: &mut impl FnMut(u32, u64, &[u8])) -> bool {
        for lane in turn.lanes(self.mask) {
            let words = turn.read(lane as u32);
            if self.cursor.is_first() {
                self.sizes[lane] = words[0];
                self.longest = self.longest.max(words[0]);
            }
            let size = self.sizes[lane];
            if size > self.limit {
                continue;
            }
            let (range, at) = self.cursor.chunk(size);
            let len = (range.end - range.start) as usize;
            sink(lane as u32, range.start, &packet_bytes(&words)[at..at + len]);
        }
        !self.cursor.advance(self.longest)
    }

    /// Whether the packet about to be received is the stream's first (the one with the counts).
    #[inline]
    pub fn at_first_packet(&self) -> bool {
        self.cursor.is_first()
    }

    /// The byte count lane `lane` declared (0 before the first packet).
    pub fn size(&self, lane: u32) -> u64 {
        self.sizes.get(lane as usize).copied().unwrap_or(0)
    }

    /// Whether lane `lane`'s stream fit the limit (its bytes were all handed to the sink).
    pub fn kept(&self, lane: u32) -> bool {
        self.size(lane) <= self.limit
    }
}

/// The host sending a stream (the client's `recv_n`), one turn per packet.
#[derive(Clone, Debug, Default)]
pub struct StreamOut {
    longest: u64,
    cursor: Cursor,
}

impl StreamOut {
    /// A stream at its first packet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes this turn's packet for the lanes of `mask` from `data(lane)` (the same bytes at
    /// every turn of the stream). Returns `true` when it was the last packet.
    pub fn send<'d>(&mut self, turn: &mut Turn<'_>, mask: u64, data: impl Fn(u32) -> &'d [u8]) -> bool {
        if self.cursor.is_first() {
            self.longest = turn.lanes(mask).map(|lane| data(lane as u32).len() as u64).max().unwrap_or(0);
        }
        for lane in turn.lanes(mask) {
            let words = fill_packet(&self.cursor, data(lane as u32));
            turn.write(lane as u32, &words);
        }
        !self.cursor.advance(self.longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_byte_stream_is_four_packets() {
        let mut cursor = Cursor::start();
        let mut chunks = [(0u64, 0u64, 0usize); 4];
        let mut n = 0;
        loop {
            let (range, at) = cursor.chunk(200);
            chunks[n] = (range.start, range.end, at);
            n += 1;
            if !cursor.advance(200) {
                break;
            }
        }
        assert_eq!(n, 4);
        assert_eq!(chunks, [(0, 56, 8), (56, 120, 0), (120, 184, 0), (184, 200, 0)]);
        assert_eq!(stream_packets(200), 4);
    }

    #[test]
    fn a_shorter_lane_rides_along_empty() {
        let mut cursor = Cursor::start();
        assert!(cursor.advance(130));
        assert_eq!(cursor.chunk(10), (10..10, 0));
        assert!(cursor.advance(130));
        assert!(!cursor.advance(130));
    }

    #[test]
    fn packets_are_little_endian_bytes() {
        let words = fill_packet(&Cursor::start(), b"hello");
        assert_eq!(words[0], 5);
        assert_eq!(words[1], u64::from_le_bytes(*b"hello\0\0\0"));
        assert_eq!(&packet_bytes(&words)[8..13], b"hello");
    }

    #[test]
    fn a_huge_count_never_overflows_the_cursor() {
        let mut cursor = Cursor { offset: u64::MAX - 10 };
        assert!(!cursor.advance(u64::MAX));
        assert_eq!(cursor.chunk(u64::MAX), (u64::MAX..u64::MAX, 0));
    }
}
