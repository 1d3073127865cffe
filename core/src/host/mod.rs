//! What every protocol gives the host: the packet it serves ([`PacketRequest`]) with its service
//! id and the error replies it may answer with ([`ErrorCode`]), the handler it serves with
//! ([`DrainHandler`]), what a drain did ([`DrainReport`]) and found ([`DrainError`]), and the
//! shape of every protocol's host side ([`Host`]: one required drain over a scope, the rest as
//! defaults, and the per-buffer [`Host::State`] a host keeps across drains), all of it the same
//! for every protocol.
//!
//! Each protocol's host walks its own shared words and hands every submitted packet to the same
//! handler as a [`PacketRequest`]; services never learn which protocol carried it. A host whose
//! own work for a buffer is more than serving packets (an LLVM-RPC host's console writes, files
//! and allocations) runs it through [`DrainHandler::own_work`], so whatever wraps the handler (a
//! listener's stuck-call watch) sees it as one call, with the packets it serves inside it. This
//! module names no protocol (their variants of [`DrainError`] aside, each of which says where it
//! comes from); the protocols use it, never the other way round.

mod drain;
mod reply;
mod request;

pub(crate) use drain::sealed;
pub use drain::Host;
pub use reply::{ErrorCode, DEVMEM, ERROR_REPLY, FUNCTION_CALL, PRINTF, RESERVED, SANITIZER};
pub use request::PacketRequest;

use core::fmt;

/// Serves one packet of a piece of a host's own work ([`DrainHandler::own_work`]).
pub type ServePacket<'s> = dyn FnMut(&mut PacketRequest<'_>) + 's;

/// A piece of a host's own work for a buffer ([`DrainHandler::own_work`]), given the way to
/// serve the packets it makes.
pub type OwnWork<'w> = dyn FnMut(&mut ServePacket<'_>) + 'w;

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
    /// Runs `work`, a piece of the host's own work for the buffer being drained that is more
    /// than serving one packet (an LLVM-RPC turn's console write, file call or allocation), named
    /// `name` (the service id it stands for, or another id of the protocol's). `work` is given
    /// the way to serve the packets it makes: they are part of this one piece of work, not
    /// separate calls. A handler that watches its calls (the std crate's listener) watches it as
    /// one; the default only runs it, serving its packets with [`DrainHandler::serve`].
    fn own_work(&mut self, name: u32, work: &mut OwnWork<'_>) {
        let _ = name;
        work(&mut |packet| self.serve(packet));
    }
}

impl<F: FnMut(&mut PacketRequest<'_>)> DrainHandler for F {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self(packet)
    }
}
