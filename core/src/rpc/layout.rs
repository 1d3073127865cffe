//! The buffer of LLVM libc's RPC as device code sees it, for `P` ports and `L` lanes (the picture
//! is in the [`crate::rpc`] docs): two mailboxes, the headers and the lane buffers, one after the
//! other, each aligned to 8 bytes.

use super::version::MAX_PORT_COUNT;
use crate::lane::{LANES, SLOT_WORDS};
use crate::sync::{AtomicU32, AtomicU64, PayloadWord};
use crate::view::GeometryError;

/// The alignment a buffer needs: its widest fields are `u64` (`alignof(rpc::Header)` and
/// `alignof(rpc::Buffer)` are both 8).
pub const MIN_ALIGN: usize = 8;

/// Bytes of one lane's buffer (`rpc::Buffer`: 8 `u64`).
pub const LANE_BUFFER_SIZE: usize = 64;

/// Bytes of one port's header (`rpc::Header`: `mask: u64`, `opcode: u32`, 4 bytes of padding).
pub const HEADER_SIZE: usize = 16;

/// Port `p`'s header: written by the client when it opens the port, before its first send, and
/// read by the host at the first turn of the call (which keeps its own copy).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Header {
    /// The lanes of the warp that opened the port (bit `i`: lane `i`).
    pub mask: AtomicU64,
    /// What the call asks for (see [`super::opcode`]).
    pub opcode: AtomicU32,
    /// Padding (`sizeof(rpc::Header)` is 16).
    pub padding: AtomicU32,
}

/// One lane's 64 bytes of a port (`rpc::Buffer`). Written by whichever side owns the port.
#[derive(Debug, Default)]
#[repr(C)]
pub struct LaneBuffer {
    /// The eight words (a stream's bytes are packed little-endian into them).
    pub words: [PayloadWord; SLOT_WORDS],
}

impl LaneBuffer {
    /// The eight words (Relaxed loads: the handshake orders them).
    #[inline]
    pub fn read(&self) -> [u64; SLOT_WORDS] {
        self.read_first()
    }

    /// The first `K` words only (as [`LaneBuffer::read`]): a reader that needs fewer words
    /// leaves the rest, and the cache line they may lie in, alone.
    #[inline]
    pub fn read_first<const K: usize>(&self) -> [u64; K] {
        const { assert!(K <= SLOT_WORDS) };
        core::array::from_fn(|i| self.words[i].read())
    }

    /// Stores the eight words (Relaxed: the flip that follows publishes them).
    #[inline]
    pub fn write(&self, words: &[u64; SLOT_WORDS]) {
        for (word, value) in self.words.iter().zip(words) {
            word.write(*value);
        }
    }
}

/// Where each part of a buffer of `ports` ports and `lanes` lanes lies (`rpc::Process`'s offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Ports (`port_count`).
    pub ports: u32,
    /// Lanes per port (`lane_size`: the client's warp or wave width).
    pub lanes: u32,
    /// The host's mailbox, `u32[ports]`, at offset 0 (the client's inbox).
    pub host_mailbox: usize,
    /// The device's mailbox, `u32[ports]` (the client's outbox).
    pub device_mailbox: usize,
    /// `Header[ports]`.
    pub headers: usize,
    /// `LaneBuffer[ports][lanes]`: port `p` lane `i` at `buffers + (p * lanes + i) * 64`.
    pub buffers: usize,
    /// Bytes of the whole buffer (`rpc::Server::allocation_size(lanes, ports)`).
    pub size: usize,
}

const fn align_up(value: usize, align: usize) -> usize {
    value.div_ceil(align) * align
}

/// Checks a geometry: 1 ..= [`MAX_PORT_COUNT`] ports and 1 ..= [`LANES`] lanes.
pub const fn check_geometry(ports: u64, lanes: u64) -> Result<(u32, u32), GeometryError> {
    if ports == 0 || ports > MAX_PORT_COUNT as u64 {
        return Err(GeometryError::PortCount(ports));
    }
    if lanes == 0 || lanes > LANES as u64 {
        return Err(GeometryError::LaneCount(lanes));
    }
    Ok((ports as u32, lanes as u32))
}

impl Layout {
    /// The layout of `ports` ports of `lanes` lanes (checked by [`check_geometry`]).
    ///
    /// ```
    /// use hostcall_core::rpc::Layout;
    /// assert_eq!(Layout::new(1, 1).unwrap().size, 88);
    /// assert_eq!(Layout::new(4096, 32).unwrap().size, 8_486_912);
    /// ```
    pub const fn new(ports: u32, lanes: u32) -> Result<Self, GeometryError> {
        let (ports, lanes) = match check_geometry(ports as u64, lanes as u64) {
            Ok(geometry) => geometry,
            Err(e) => return Err(e),
        };
        let p = ports as usize;
        let device_mailbox = 4 * p;
        let headers = align_up(8 * p, MIN_ALIGN);
        let buffers = align_up(headers + HEADER_SIZE * p, MIN_ALIGN);
        let size = buffers + LANE_BUFFER_SIZE * p * lanes as usize;
        Ok(Self { ports, lanes, host_mailbox: 0, device_mailbox, headers, buffers, size })
    }

    /// The lane buffer index of port `port`, lane `lane`.
    #[inline]
    pub const fn lane_buffer(&self, port: u32, lane: u32) -> usize {
        port as usize * self.lanes as usize + lane as usize
    }
}

/// Bytes a buffer of `ports` ports and `lanes` lanes needs, or `None` for a geometry
/// [`check_geometry`] refuses.
pub const fn buffer_size(ports: u32, lanes: u32) -> Option<usize> {
    match Layout::new(ports, lanes) {
        Ok(layout) => Some(layout.size),
        Err(_) => None,
    }
}

/// The alignment to allocate a buffer with.
pub const fn buffer_align() -> usize {
    MIN_ALIGN
}

// The ABI (checked outside loom: loom's atomics and cells are larger than the integers).
crate::sync::abi_checks! {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<Header>() == HEADER_SIZE && align_of::<Header>() == 8);
    const _: () = assert!(offset_of!(Header, mask) == 0 && offset_of!(Header, opcode) == 8);
    const _: () = assert!(size_of::<LaneBuffer>() == LANE_BUFFER_SIZE && align_of::<LaneBuffer>() == 8);
    const _: () = assert!(size_of::<AtomicU32>() == 4 && align_of::<AtomicU32>() == 4);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Server::allocation_size(L, P)` of `rpc.h`, figures from compiling the header.
    #[test]
    fn sizes_match_upstream() {
        for (ports, lanes, size) in
            [(1, 1, 88), (64, 32, 132_608), (4096, 32, 8_486_912), (4096, 64, 16_875_520)]
        {
            assert_eq!(buffer_size(ports, lanes), Some(size), "P = {ports}, L = {lanes}");
        }
        let odd = Layout::new(3, 1).unwrap();
        assert_eq!((odd.device_mailbox, odd.headers, odd.buffers, odd.size), (12, 24, 72, 264));
    }

    #[test]
    fn geometry_is_bounded() {
        assert_eq!(buffer_size(0, 32), None);
        assert_eq!(buffer_size(4097, 32), None);
        assert_eq!(buffer_size(1, 0), None);
        assert_eq!(buffer_size(1, 65), None);
        assert_eq!(Layout::new(4097, 1), Err(GeometryError::PortCount(4097)));
        assert_eq!(Layout::new(8, 0), Err(GeometryError::LaneCount(0)));
        let l = Layout::new(5, 32).unwrap();
        assert_eq!(l.lane_buffer(4, 31), 5 * 32 - 1);
    }
}
