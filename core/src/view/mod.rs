//! What every protocol's `View` is built with: the packet count every protocol accepts
//! ([`packet_count`]), why memory cannot be viewed as a buffer ([`LayoutError`]), and the checks
//! and slicing of raw memory (`raw.rs`) and of separately held parts (`parts.rs`), written once.
//!
//! Every packet (and port) count the crate takes or returns is a `u32`: `buffer_size`,
//! `Layout::new`, `View::from_raw`, [`Registration::new`](crate::Registration::new),
//! `num_packets()`, an LLVM-RPC buffer's ports and lanes. It holds every count a buffer can have
//! ([`MAX_PACKETS`] is 2^24, an RPC buffer's ports at most `rpc::MAX_PORT_COUNT`), it is what the
//! views, the scan and the packet indices the host reports use, and it is the width the device
//! code's own counts have. Sizes and offsets in bytes stay `usize`. A caller holding a wider
//! count (a C caller's `u64`, a `usize` length) converts it once, checked: [`packet_count`] for
//! the hostcall protocols, [`Protocol::packet_count`](crate::Protocol::packet_count) for any
//! protocol (an RPC buffer's count is its ports, 1 ..= `rpc::MAX_PORT_COUNT`). The
//! [`GeometryError`] it returns keeps the caller's value, as a `u64`.
//!
//! A protocol's `View::from_raw` calls [`RawBuffer::check`](raw::RawBuffer::check) (null, alignment, length) and takes
//! its arrays with [`RawBuffer::slice`](raw::RawBuffer::slice); its `View::from_parts` calls [`check_lengths`]. Which
//! arrays there are, and the offsets of each, stay with the protocol.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use core::fmt;
pub(crate) use parts::{check_lengths, debug_parts, part};

mod parts;
// Raw memory: outside loom only, like every `from_raw` (see the `sync` docs).
#[cfg(not(loom))]
pub(crate) mod raw;

/// The largest packet count every protocol accepts (2^24 packets is 64 GiB of payloads).
pub const MAX_PACKETS: u32 = 1 << 24;

/// The alignment every protocol's buffer needs at least: their widest fields are `u64`.
pub(crate) const MIN_ALIGN: usize = 8;

/// Why a packet count cannot make a buffer (of any protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// At least 2 packets are needed (the stack protocol's index 0 with tag 1 must differ from
    /// null; every protocol keeps the same rule).
    TooFewPackets(u64),
    /// More packets than [`MAX_PACKETS`].
    TooManyPackets(u64),
    /// A port count outside what the protocol supports (an LLVM-RPC buffer: 1 ..= its
    /// `MAX_PORT_COUNT`).
    PortCount(u64),
    /// A lane count outside 1 ..= [`LANES`](crate::LANES) (an LLVM-RPC buffer's `lane_size`).
    LaneCount(u64),
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooFewPackets(n) => write!(f, "num_packets = {n}: at least 2 packets are needed"),
            Self::TooManyPackets(n) => {
                write!(f, "num_packets = {n}: at most {MAX_PACKETS} packets are supported")
            }
            Self::PortCount(n) => {
                write!(f, "port_count = {n}: 1 ..= {} ports are supported", crate::rpc::MAX_PORT_COUNT)
            }
            Self::LaneCount(n) => {
                write!(f, "lane_size = {n}: 1 ..= {} lanes are supported", crate::lane::LANES)
            }
        }
    }
}

impl core::error::Error for GeometryError {}

/// The packet count every protocol accepts: 2 ..= [`MAX_PACKETS`], as a `u32`.
///
/// ```
/// use hostcall_core::{packet_count, GeometryError};
/// assert_eq!(packet_count(64), Ok(64));
/// assert_eq!(packet_count(1), Err(GeometryError::TooFewPackets(1)));
/// ```
pub const fn packet_count(num_packets: u64) -> Result<u32, GeometryError> {
    if num_packets < 2 {
        return Err(GeometryError::TooFewPackets(num_packets));
    }
    if num_packets > MAX_PACKETS as u64 {
        return Err(GeometryError::TooManyPackets(num_packets));
    }
    Ok(num_packets as u32)
}

/// Why memory cannot be viewed as a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The packet count is refused.
    Geometry(GeometryError),
    /// A per-packet array given to a protocol's `View::from_parts` has the wrong length.
    ArrayLength {
        /// Which array, by its field name in the protocol's `Parts` (`"payloads"`,
        /// `"occupied"`, ...).
        array: &'static str,
        /// Entries the packet count needs.
        expected: usize,
        /// Entries given.
        given: usize,
    },
    /// The memory is smaller than the protocol's `buffer_size` for the packet count.
    TooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        given: usize,
    },
    /// The memory is not aligned to the protocol's `MIN_ALIGN`.
    Misaligned {
        /// The address given.
        address: usize,
    },
    /// A null address.
    Null,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Geometry(e) => e.fmt(f),
            Self::ArrayLength { array, expected, given } => {
                write!(f, "buffer array `{array}` has {given} entries, {expected} needed")
            }
            Self::TooSmall { needed, given } => {
                write!(f, "buffer of {given} bytes is too small: {needed} needed")
            }
            Self::Misaligned { address } => {
                write!(f, "buffer at {address:#x} is not aligned to the protocol's alignment")
            }
            Self::Null => f.write_str("buffer address is null"),
        }
    }
}

impl core::error::Error for LayoutError {}

impl From<GeometryError> for LayoutError {
    fn from(e: GeometryError) -> Self {
        Self::Geometry(e)
    }
}

/// The prefix stores of a protocol's `View::init`: each `(word, offset)` of `addresses` gets the
/// device address of its array (`device_base + offset`, wrapping: the device's address space is
/// its own), then the doorbell handle and the packet count. Relaxed: `init` is published by the
/// hand-off of the buffer to its producers (thread start, registration, kernel dispatch).
pub(crate) fn write_prefix(
    device_base: u64,
    addresses: &[(&AtomicU64, usize)],
    doorbell: (&AtomicU64, u64),
    num_packets: (&AtomicU32, u32),
) {
    for &(word, offset) in addresses {
        word.store(device_base.wrapping_add(offset as u64), Ordering::Relaxed);
    }
    doorbell.0.store(doorbell.1, Ordering::Relaxed);
    num_packets.0.store(num_packets.1, Ordering::Relaxed);
}

/// Zeroes every word of `words` (Relaxed, as [`write_prefix`]: published by the hand-off).
pub(crate) fn zero_all<'w>(words: impl IntoIterator<Item = &'w AtomicU32>) {
    words.into_iter().for_each(|word| word.store(0, Ordering::Relaxed));
}
