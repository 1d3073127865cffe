//! What both protocols give the host: the packet it serves ([`PacketRequest`]), the handler it
//! serves with ([`DrainHandler`]), what a drain did ([`DrainReport`]) and found
//! ([`DrainError`]), why memory cannot be viewed as a buffer ([`LayoutError`]), and which
//! protocol a buffer speaks ([`Protocol`]).
//!
//! Each protocol's `View::drain` walks its own shared words and hands every submitted packet to
//! the same handler as a [`PacketRequest`]; services never learn which protocol carried it.

use crate::dispatch::ErrorCode;
use crate::lane::{lanes, Lanes, Payload, LANE_MASK, REPLY_WORDS, SLOT_WORDS};
use crate::{phase, stack};
use core::fmt;

/// Which wire protocol a buffer speaks. The one switch over it is [`AnyView`](crate::AnyView).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The stack protocol (PROTOCOL.md section 1, [`crate::stack`]).
    Stack,
    /// The phase protocol (PROTOCOL.md section 2, [`crate::phase`]).
    Phase,
    /// The line protocol (PROTOCOL.md section 9, [`crate::line`]): this project's own.
    Line,
}

/// The largest packet count either protocol accepts (2^24 packets is 64 GiB of payloads).
pub const MAX_PACKETS: u32 = 1 << 24;

/// The alignment both protocols' buffers need at least: their widest fields are `u64`.
pub(crate) const MIN_ALIGN: usize = 8;

/// Why a packet count cannot make a buffer (of either protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// The stack protocol needs at least 2 packets (index 0 with tag 1 must differ from null);
    /// the phase protocol keeps the same rule.
    TooFewPackets(u64),
    /// More packets than [`MAX_PACKETS`].
    TooManyPackets(u64),
    /// An LLVM-RPC buffer's port count outside 1 ..= [`rpc::MAX_PORT_COUNT`](crate::rpc::MAX_PORT_COUNT).
    PortCount(u64),
    /// An LLVM-RPC buffer's lane count outside 1 ..= [`LANES`](crate::LANES).
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

/// The packet count both protocols accept: 2 ..= [`MAX_PACKETS`], as a `u32`.
///
/// ```
/// use hostcall_core::{packet_count, GeometryError};
/// assert_eq!(packet_count(64), Ok(64));
/// assert_eq!(packet_count(1), Err(GeometryError::TooFewPackets(1)));
/// ```
pub fn packet_count(num_packets: u64) -> Result<u32, GeometryError> {
    if num_packets < 2 {
        return Err(GeometryError::TooFewPackets(num_packets));
    }
    if num_packets > u64::from(MAX_PACKETS) {
        return Err(GeometryError::TooManyPackets(num_packets));
    }
    Ok(num_packets as u32)
}

/// The checks of raw memory every protocol's `View::from_raw` makes before it builds its
/// references, in this order: `base` is not null, `base` is aligned to `align`, and `len` covers
/// the layout's `size`. `layout` is `None` where the layout's size would overflow `usize` (the
/// packet count bounds it, so only on 32-bit targets); that is reported as too small. Returns the
/// layout. Only the checks are shared: the references, and the SAFETY reasoning for them, stay
/// with each protocol.
#[cfg(not(loom))]
pub(crate) fn check_raw<L>(
    base: *mut u8,
    len: usize,
    align: usize,
    layout: Option<L>,
    size: impl FnOnce(&L) -> usize,
) -> Result<L, LayoutError> {
    if base.is_null() {
        return Err(LayoutError::Null);
    }
    if base as usize % align != 0 {
        return Err(LayoutError::Misaligned { address: base as usize });
    }
    let Some(layout) = layout else {
        return Err(LayoutError::TooSmall { needed: usize::MAX, given: len });
    };
    let needed = size(&layout);
    if len < needed {
        return Err(LayoutError::TooSmall { needed, given: len });
    }
    Ok(layout)
}

/// Why memory cannot be viewed as a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The packet count is refused.
    Geometry(GeometryError),
    /// A per-packet array given to a protocol's `View::from_parts` has the wrong length.
    ArrayLength {
        /// Which array (`"payloads"`; for the phase protocol also `"device_phase"`,
        /// `"host_phase"`, `"occupied"`).
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
    /// The memory is not aligned to the protocol's alignment (8 bytes for both).
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
                write!(f, "buffer at {address:#x} is not aligned to {MIN_ALIGN} bytes")
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

/// Something malformed the host found in shared memory while draining, by protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainError {
    /// Found in a stack-protocol buffer.
    Stack(stack::Malformed),
    /// Found in a phase-protocol buffer.
    Phase(phase::Malformed),
}

impl fmt::Display for DrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stack(e) => e.fmt(f),
            Self::Phase(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for DrainError {}

impl From<stack::Malformed> for DrainError {
    fn from(e: stack::Malformed) -> Self {
        Self::Stack(e)
    }
}

impl From<phase::Malformed> for DrainError {
    fn from(e: phase::Malformed) -> Self {
        Self::Phase(e)
    }
}

/// What one drain did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Packets served (stack protocol: READY cleared; phase protocol: `host_phase` flipped).
    pub packets: u32,
    /// Active lanes over those packets.
    pub lane_calls: u32,
    /// Malformed things found (each was passed to [`DrainHandler::malformed`]).
    pub malformed: u32,
}

impl core::ops::AddAssign for DrainReport {
    fn add_assign(&mut self, other: Self) {
        self.packets += other.packets;
        self.lane_calls += other.lane_calls;
        self.malformed += other.malformed;
    }
}

/// The host's side of a drain: serve each packet, hear about malformed state.
pub trait DrainHandler {
    /// Serve one packet: read its lanes' requests and write their replies. Lanes left unanswered
    /// keep whatever their slot holds.
    fn serve(&mut self, packet: &mut PacketRequest<'_>);
    /// Something malformed was found and skipped.
    fn malformed(&mut self, error: DrainError) {
        let _ = error;
    }
}

impl<F: FnMut(&mut PacketRequest<'_>)> DrainHandler for F {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self(packet)
    }
}

/// One packet handed to the host's service code during a drain.
pub struct PacketRequest<'a> {
    index: u32,
    service: u32,
    activemask: u64,
    payload: &'a Payload,
    error: bool,
    /// The ordinal of the device whose buffer carried the packet (0 unless the buffer was
    /// registered with one: [`Poller::add_on_device`](crate::Poller::add_on_device)).
    device: u32,
    /// The base address of the buffer that carried the packet (0 unless a poller set it).
    buffer: usize,
}

/// The packet's header as the host took it (the payload is not read).
impl fmt::Debug for PacketRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketRequest")
            .field("index", &self.index)
            .field("service", &self.service)
            .field("activemask", &format_args!("{:#x}", self.activemask))
            .field("error", &self.error)
            .finish()
    }
}

impl<'a> PacketRequest<'a> {
    /// A request for packet `index` (shared by every protocol's host side). `activemask` is
    /// masked to the lanes that exist.
    #[inline]
    pub(crate) fn new(index: u32, service: u32, activemask: u64, payload: &'a Payload) -> Self {
        Self {
            index,
            service,
            activemask: activemask & LANE_MASK,
            payload,
            error: false,
            device: 0,
            buffer: 0,
        }
    }

    /// The packet's index in its buffer.
    #[inline]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The ordinal of the device whose buffer carried this packet, as the host registered the
    /// buffer ([`Poller::add_on_device`](crate::Poller::add_on_device); 0 by default). ROCm's
    /// sanitizer report names the device by it.
    #[inline]
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The base address of the buffer that carried this packet, as the host registered it with
    /// a [`Poller`](crate::Poller) (0 for a packet drained without one). The std crate keys its
    /// per-buffer counters by it, and the state services keep for a device (DEVMEM's blocks, open
    /// messages), so one buffer's device cannot reach another's; several pollers serving ranges
    /// of one buffer see the same address.
    #[inline]
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    /// Sets [`PacketRequest::device`] and [`PacketRequest::buffer`] (the poller does, from the
    /// buffer's registration; the poller is not built under loom).
    #[inline]
    #[cfg(not(loom))]
    pub(crate) fn set_origin(&mut self, device: u32, buffer: usize) {
        self.device = device;
        self.buffer = buffer;
    }

    /// The service id the device asked for (not validated: any `u32`).
    #[inline]
    pub fn service(&self) -> u32 {
        self.service
    }

    /// The active lanes (only bits of lanes that exist).
    #[inline]
    pub fn activemask(&self) -> u64 {
        self.activemask
    }

    /// The active lanes, lowest first.
    #[inline]
    pub fn lanes(&self) -> Lanes {
        lanes(self.activemask)
    }

    /// Lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES` (lanes from [`PacketRequest::lanes`] never are).
    #[inline]
    pub fn request(&self, lane: usize) -> [u64; SLOT_WORDS] {
        self.payload.read_lane(lane)
    }

    /// Writes lane `lane`'s reply (the first [`REPLY_WORDS`] words of its slot).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.payload.write_lane(lane, &reply);
    }

    /// Answers lane `lane` with an error reply `[ERROR_REPLY, code]` (`[0, code]` for DEVMEM:
    /// see [`ErrorCode::reply_for`]) and flags the packet. The stack protocol stores the flag as
    /// [`crate::stack::CONTROL_HOST_ERROR`]; the phase protocol has no control word, so there the
    /// reply words are the only signal (see [`crate::phase`]).
    pub fn reply_error(&mut self, lane: usize, code: ErrorCode) {
        self.reply(lane, code.reply_for(self.service));
        self.error = true;
    }

    /// Writes `reply` to lane `lane` and flags the packet as answered with an error, for services
    /// whose failure reply is not `[ERROR_REPLY, code]` (DEVMEM answers a failed allocation with a
    /// null address, which device code checks).
    pub fn reply_with_error(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.reply(lane, reply);
        self.error = true;
    }

    /// Answers every active lane with an error reply.
    pub fn reply_error_all(&mut self, code: ErrorCode) {
        for lane in self.lanes() {
            self.reply_error(lane, code);
        }
        self.error = true;
    }

    /// Whether an error reply was written.
    #[inline]
    pub fn has_error(&self) -> bool {
        self.error
    }

    /// Read-only access to lane `lane`'s raw payload words (for per-packet services).
    pub fn payload(&self) -> &Payload {
        self.payload
    }
}
