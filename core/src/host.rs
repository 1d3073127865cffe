//! What every protocol gives the host: the packet it serves ([`PacketRequest`]) with its service
//! id and the error replies it may answer with ([`ErrorCode`]), the handler it serves with
//! ([`DrainHandler`]), what a drain did ([`DrainReport`]) and found ([`DrainError`]), all of it the
//! same for every protocol.
//!
//! Each protocol's `Host` walks its own shared words and hands every submitted packet to the same
//! handler as a [`PacketRequest`]; services never learn which protocol carried it. This module
//! names no protocol: the protocols use it, never the other way round.

use crate::lane::{lanes, Lanes, Payload, LANE_MASK, REPLY_WORDS, SLOT_WORDS};
use core::fmt;

/// Something malformed the host found in a buffer's shared memory while draining, whatever the
/// protocol. Each variant says what the drain did about it; each protocol's module docs say which
/// of them its host reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainError {
    /// A chain of packets the host walks was broken (a bad index, or a cycle); the walk stopped
    /// there. Packets after the break cannot be found: their waves are not answered until the
    /// buffer is reset. (The stack protocol's ready-stack.)
    Chain(ChainError),
    /// A packet handed to the host was not marked submitted (a duplicate in a corrupt chain, or a
    /// device that handed it over without submitting). It was skipped, not served. (The stack
    /// protocol: on the ready-stack without READY set.)
    NotSubmitted {
        /// The packet's index.
        index: u32,
    },
    /// A pending packet's handshake words had bits set that the protocol does not compare. The
    /// packet was served, compared on the bits the protocol defines, and the device's word was
    /// stored back as read (garbage echoed, never amplified). (The phase protocol: bits above bit
    /// 0 of its phase words.)
    StrayBits {
        /// The packet's index.
        index: u32,
        /// The device's handshake word as read (`device_phase[index]`).
        device_word: u32,
        /// The host's handshake word as read (`host_phase[index]`).
        host_word: u32,
    },
    /// An LLVM-RPC port was handed over with an opcode this host serves no handler for. As LLVM's
    /// server does, the port was handed back untouched (the client reads its own packet back).
    UnhandledOpcode {
        /// The port.
        port: u32,
        /// The opcode its header named.
        opcode: u32,
    },
    /// A pending request stayed incomplete (a word that never carried its head's sequence) for
    /// `looks` looks. It was not served, as no incomplete request is; it is still looked at (one
    /// word every [`line::STALLED_LOOK_PERIOD`](crate::line::STALLED_LOOK_PERIOD)th scan) and
    /// served if that word arrives. Reported once per sequence. (The line protocol, by a host that keeps [`line::Incomplete`](crate::line::Incomplete) memory.)
    Stalled {
        /// The packet's index.
        index: u32,
        /// The sequence of its head.
        seq: u32,
        /// The looks it has had ([`line::STALL_LOOKS`](crate::line::STALL_LOOKS)).
        looks: u32,
    },
}

impl fmt::Display for DrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chain(e) => write!(f, "packet chain: {e}"),
            Self::NotSubmitted { index } => {
                write!(f, "packet {index} was handed to the host without being submitted; skipped")
            }
            Self::StrayBits { index, device_word, host_word } => write!(
                f,
                "packet {index}: handshake words {device_word:#x} (device) and {host_word:#x} (host) \
                 have bits set that the protocol does not compare; compared on its bits only"
            ),
            Self::UnhandledOpcode { port, opcode } => {
                write!(f, "rpc port {port}: opcode {opcode:#x} has no handler; handed back untouched")
            }
            Self::Stalled { index, seq, looks } => write!(
                f,
                "packet {index}: its request of sequence {seq} is still incomplete after {looks} looks \
                 (a word never arrived); not served, and served if it completes"
            ),
        }
    }
}

impl core::error::Error for DrainError {}

impl From<ChainError> for DrainError {
    fn from(e: ChainError) -> Self {
        Self::Chain(e)
    }
}

/// What can go wrong walking a chain of packets linked through words the other side can scribble
/// on (the stack protocol's free-list and ready-stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainError {
    /// A link named a packet index that does not exist.
    IndexOutOfRange {
        /// The index found.
        index: u64,
    },
    /// A chain was longer than the buffer's packet count: it loops.
    ChainTooLong {
        /// The packet count, which bounded the walk.
        limit: u32,
    },
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IndexOutOfRange { index } => {
                write!(f, "tagged pointer names packet {index}, which does not exist")
            }
            Self::ChainTooLong { limit } => {
                write!(f, "packet chain longer than the {limit} packets of the buffer (a cycle)")
            }
        }
    }
}

impl core::error::Error for ChainError {}

/// What one drain did (`#[non_exhaustive]`: a later version may count more; read the fields).
#[non_exhaustive]
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
    /// One turn on an LLVM-RPC port the device handed over (an RPC buffer's drain). Returns
    /// whether it was served as a packet. The default keeps no state: ROCm's `'r'` opcodes and
    /// this project's `'h'` become one packet of their hostcall service, given to
    /// [`DrainHandler::serve`]; any other opcode is left untouched (the drain hands the port
    /// back) and reported as [`DrainError::UnhandledOpcode`]. `scratch` is the host's memory the
    /// packet is copied into.
    fn rpc_turn(&mut self, turn: &mut crate::rpc::Turn<'_>, scratch: &crate::lane::Payload) -> bool
    where
        Self: Sized,
    {
        stateless_rpc_turn(self, turn, scratch)
    }
}

/// [`DrainHandler::rpc_turn`]'s default, for handlers that override it and fall back to it.
pub(crate) fn stateless_rpc_turn(
    handler: &mut impl DrainHandler,
    turn: &mut crate::rpc::Turn<'_>,
    scratch: &crate::lane::Payload,
) -> bool {
    let (mask, opcode) = turn.header();
    match crate::rpc::service_of(opcode) {
        Some(service) => {
            crate::rpc::serve_as_packet(turn, mask, service, scratch, handler);
            true
        }
        None => {
            handler.malformed(DrainError::UnhandledOpcode { port: turn.port(), opcode });
            false
        }
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
    /// The lanes answered with an error reply, one bit each.
    error_lanes: u64,
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
            error_lanes: 0,
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
    /// buffer's registration).
    #[inline]
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
    /// see [`ErrorCode::reply_for`]) and flags the packet ([`PacketRequest::has_error`]). A protocol with a control word stores
    /// the flag there for the wave; in the others the reply words are the only signal (each
    /// protocol's docs say which it is).
    pub fn reply_error(&mut self, lane: usize, code: ErrorCode) {
        self.reply_with_error(lane, code.reply_for(self.service));
    }

    /// Writes `reply` to lane `lane` and flags the packet as answered with an error, for services
    /// whose failure reply is not `[ERROR_REPLY, code]` (DEVMEM answers a failed allocation with a
    /// null address, which device code checks).
    pub fn reply_with_error(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.reply(lane, reply);
        self.error = true;
        self.error_lanes |= 1u64 << (lane % crate::LANES);
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

    /// How many lanes were answered with an error reply.
    #[inline]
    pub fn error_lanes(&self) -> u32 {
        self.error_lanes.count_ones()
    }

    /// Read-only access to lane `lane`'s raw payload words (for per-packet services).
    pub fn payload(&self) -> &Payload {
        self.payload
    }
}

/// Reserved: always answered with an error.
pub const RESERVED: u32 = 0;
/// Call a host function: `slot[0]` = `fn(out: *mut [u64; 2], in: *const [u64; 7])`, `slot[1..8]` its inputs.
pub const FUNCTION_CALL: u32 = 1;
/// printf through a message stream.
pub const PRINTF: u32 = 2;
/// Allocate (`slot[0] = 0`, `slot[1]` = bytes) or free (`slot[0]` = address) device-visible memory.
pub const DEVMEM: u32 = 3;
/// Address-sanitizer report, handled once per packet.
pub const SANITIZER: u32 = 4;

/// The first reply word of an error reply. The second word is the [`ErrorCode`].
pub const ERROR_REPLY: u64 = u64::MAX;

/// Why the host answered a lane with an error reply `[ERROR_REPLY, code]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
pub enum ErrorCode {
    /// No service is registered under the packet's id.
    UnknownService = 1,
    /// The service's handler panicked.
    ServicePanicked = 2,
    /// The request was malformed for its service.
    BadRequest = 3,
    /// The service refused the request (a limit, an unknown address, no memory).
    Refused = 4,
    /// The host is shutting down and answers without serving.
    ShuttingDown = 5,
}

impl ErrorCode {
    /// The reply words `[ERROR_REPLY, code]`.
    pub fn reply(self) -> [u64; 2] {
        [ERROR_REPLY, self as u64]
    }

    /// The error reply for a lane that called `service`: [`ErrorCode::reply`], except for
    /// [`DEVMEM`], whose device code (ROCm's device allocator) takes any non-zero word 0 as the
    /// address of its block and checks only for null: there it is `[0, code]`. Every error reply
    /// the host writes goes through here, so no failure (an unknown or unregistered service, a
    /// panic, a shutdown) ever hands a DEVMEM caller `ERROR_REPLY` as a pointer.
    ///
    /// ```
    /// use hostcall_core::dispatch::{DEVMEM, PRINTF};
    /// use hostcall_core::ErrorCode;
    /// assert_eq!(ErrorCode::UnknownService.reply_for(DEVMEM), [0, 1]);
    /// assert_eq!(ErrorCode::UnknownService.reply_for(PRINTF), [u64::MAX, 1]);
    /// ```
    pub fn reply_for(self, service: u32) -> [u64; 2] {
        match service {
            DEVMEM => [0, self as u64],
            _ => self.reply(),
        }
    }

    /// Decodes a reply: `Some(code)` if it is an error reply this project writes.
    ///
    /// ```
    /// use hostcall_core::ErrorCode;
    /// assert_eq!(ErrorCode::from_reply(ErrorCode::Refused.reply()), Some(ErrorCode::Refused));
    /// assert_eq!(ErrorCode::from_reply([7, 3]), None);
    /// ```
    pub fn from_reply(reply: [u64; 2]) -> Option<Self> {
        if reply[0] != ERROR_REPLY {
            return None;
        }
        Some(match reply[1] {
            1 => Self::UnknownService,
            2 => Self::ServicePanicked,
            3 => Self::BadRequest,
            4 => Self::Refused,
            5 => Self::ShuttingDown,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::UnknownService => "unknown service",
            Self::ServicePanicked => "service panicked",
            Self::BadRequest => "malformed request",
            Self::Refused => "request refused",
            Self::ShuttingDown => "host shutting down",
        })
    }
}
