//! The one protocol switch: [`Protocol`] names a buffer's protocol, [`AnyView`] is a buffer of
//! any protocol, [`AnyClaimed`] (and its [`AnySubmitted`], [`AnyCompleted`]) a producer's packet of
//! any, [`HostScratch`] what a host keeps for the protocols whose host needs scratch memory,
//! [`AnyState`] (and its borrowed [`AnyStateMut`]) a buffer's per-buffer host state
//! ([`Host::State`](crate::Host::State)) of any protocol, and [`Protocol`]'s sizes are each
//! protocol's. Everything that serves or fills buffers of every
//! protocol (the [`Poller`](crate::Poller), the std crate's buffers and emulated waves) goes
//! through here, so a new protocol is one folder plus one arm in each `match` of this module
//! (here, in `packet.rs`, and in `state.rs` for a host with per-buffer state: the compiler names
//! every one). This is the only module outside the protocol folders that names them.

mod drain;
mod packet;
mod state;

pub use packet::{AnyClaimed, AnyCompleted, AnySubmitted};
pub use state::{AnyState, AnyStateMut};

use crate::host::{ChainError, DrainHandler, DrainReport, Host as _};
use crate::line;
use crate::phase;
use crate::rpc;
use crate::scan::DrainScope;
use crate::stack;
use crate::view::GeometryError;
#[cfg(not(loom))]
use crate::view::LayoutError;

/// Which wire protocol a buffer speaks. The one switch over it is [`AnyView`](crate::AnyView).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The stack protocol (PROTOCOL.md section 1, [`crate::stack`]).
    Stack,
    /// The phase protocol (PROTOCOL.md section 2, [`crate::phase`]).
    Phase,
    /// The line protocol (PROTOCOL.md section 9, [`crate::line`]): this project's own.
    Line,
    /// LLVM libc's GPU RPC ([`crate::rpc`]), its ports of `lanes` lanes (the client's warp or
    /// wave width); a buffer's packet count is its port count.
    Rpc {
        /// Lanes per port (1 ..= [`LANES`](crate::LANES)).
        lanes: u32,
    },
}

impl Protocol {
    /// Bytes a buffer of `num_packets` packets needs (the protocol's `buffer_size`), or `None`
    /// when the size overflows `usize`.
    ///
    /// ```
    /// use hostcall_core::{phase, stack, Protocol};
    /// assert_eq!(Protocol::Stack.buffer_size(4), stack::buffer_size(4));
    /// assert_eq!(Protocol::Phase.buffer_size(4), phase::buffer_size(4));
    /// ```
    pub const fn buffer_size(self, num_packets: u32) -> Option<usize> {
        match self {
            Self::Stack => stack::buffer_size(num_packets),
            Self::Phase => phase::buffer_size(num_packets),
            Self::Line => line::buffer_size(num_packets),
            Self::Rpc { lanes } => rpc::buffer_size(num_packets, lanes),
        }
    }

    /// `num_packets`, a count of a wider type (a C caller's `u64`), as the `u32` every count of
    /// this crate is, checked against this protocol's bounds: [`packet_count`](crate::packet_count)'s
    /// 2 ..= [`MAX_PACKETS`](crate::MAX_PACKETS) for the hostcall protocols; for an LLVM-RPC
    /// buffer, whose count is its ports, [`rpc::check_geometry`]'s 1 ..= [`rpc::MAX_PORT_COUNT`].
    ///
    /// ```
    /// use hostcall_core::{GeometryError, Protocol};
    /// assert_eq!(Protocol::Phase.packet_count(64), Ok(64));
    /// assert_eq!(Protocol::Phase.packet_count(1), Err(GeometryError::TooFewPackets(1)));
    /// assert_eq!(Protocol::Rpc { lanes: 32 }.packet_count(1), Ok(1));
    /// assert_eq!(Protocol::Stack.packet_count(1 << 40), Err(GeometryError::TooManyPackets(1 << 40)));
    /// ```
    pub const fn packet_count(self, num_packets: u64) -> Result<u32, GeometryError> {
        match self {
            Self::Rpc { lanes } => match rpc::check_geometry(num_packets, lanes as u64) {
                Ok((ports, _)) => Ok(ports),
                Err(e) => Err(e),
            },
            _ => crate::view::packet_count(num_packets),
        }
    }

    /// Whether several hosts may serve one buffer of this protocol, each a disjoint range of
    /// packet indices ([`DrainScope::Range`]): the phase, line and RPC protocols, whose host writes
    /// only per-packet (per-port) words. A stack buffer's host takes the whole ready-stack in one
    /// swap.
    ///
    /// ```
    /// use hostcall_core::Protocol;
    /// assert!(Protocol::Phase.range_capable() && Protocol::Line.range_capable());
    /// assert!(Protocol::Rpc { lanes: 32 }.range_capable());
    /// assert!(!Protocol::Stack.range_capable());
    /// ```
    pub const fn range_capable(self) -> bool {
        match self {
            Self::Stack => false,
            // The host writes only a port's mailbox word and lane buffers; a host that keeps
            // calls in progress keeps them per port, so each range's host keeps its own.
            Self::Phase | Self::Line | Self::Rpc { .. } => true,
        }
    }

    /// The alignment to allocate a buffer with (the protocol's `buffer_align`).
    pub const fn buffer_align(self) -> usize {
        match self {
            Self::Stack => stack::buffer_align(),
            Self::Phase => phase::buffer_align(),
            Self::Line => line::buffer_align(),
            Self::Rpc { .. } => rpc::buffer_align(),
        }
    }
}

/// A checked view of a buffer of any protocol.
#[derive(Clone, Copy, Debug)]
pub enum AnyView<'a> {
    /// The stack protocol (PROTOCOL.md section 1).
    Stack(stack::View<'a>),
    /// The phase protocol (PROTOCOL.md section 2).
    Phase(phase::View<'a>),
    /// The line protocol (PROTOCOL.md section 9).
    Line(line::View<'a>),
    /// LLVM libc's GPU RPC ([`crate::rpc`]).
    Rpc(rpc::View<'a>),
}

/// What a host keeps across drains for the protocols whose host copies requests into memory of
/// its own (the line protocol's [`line::ScratchPayload`]): one per host thread, passed to every
/// [`AnyView::drain_scope`]. Nothing of it is initialised until a drain needs it.
#[derive(Debug, Default)]
pub struct HostScratch {
    line: line::ScratchPayload,
    /// Where an RPC buffer's hostcall packets are copied (built at the first).
    rpc: Option<crate::lane::Payload>,
}

impl HostScratch {
    /// Scratch for every protocol, nothing of it initialised yet.
    pub const fn new() -> Self {
        Self { line: line::ScratchPayload::new(), rpc: None }
    }
}

impl<'a> AnyView<'a> {
    /// A view of the `protocol` buffer of `num_packets` packets at `base` (`len` bytes), checked
    /// as that protocol's `from_raw` checks it.
    ///
    /// # Safety
    /// - `base..base + len` must be valid for reads and writes for `'a`, and only accessed
    ///   through atomics (views like this one, or device code) while the view lives.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u32,
    ) -> Result<Self, LayoutError> {
        // SAFETY (every arm): forwarded from this function's contract, which is theirs.
        match protocol {
            Protocol::Stack => unsafe { stack::View::from_raw(base, len, num_packets) }.map(Self::Stack),
            Protocol::Phase => unsafe { phase::View::from_raw(base, len, num_packets) }.map(Self::Phase),
            Protocol::Line => unsafe { line::View::from_raw(base, len, num_packets) }.map(Self::Line),
            Protocol::Rpc { lanes } => {
                unsafe { rpc::View::from_raw(base, len, num_packets, lanes) }.map(Self::Rpc)
            }
        }
    }

    /// The protocol the buffer speaks.
    pub fn protocol(&self) -> Protocol {
        match self {
            Self::Stack(_) => Protocol::Stack,
            Self::Phase(_) => Protocol::Phase,
            Self::Line(_) => Protocol::Line,
            Self::Rpc(view) => Protocol::Rpc { lanes: view.lanes() },
        }
    }

    /// The view's private packet count.
    pub fn num_packets(&self) -> u32 {
        match self {
            Self::Stack(view) => view.geometry().num_packets(),
            Self::Phase(view) => view.num_packets(),
            Self::Line(view) => view.num_packets(),
            Self::Rpc(view) => view.ports(),
        }
    }

    /// The stack-protocol view, if this is a stack buffer.
    pub fn stack(self) -> Option<stack::View<'a>> {
        match self {
            Self::Stack(view) => Some(view),
            _ => None,
        }
    }

    /// The phase-protocol view, if this is a phase buffer.
    pub fn phase(self) -> Option<phase::View<'a>> {
        match self {
            Self::Phase(view) => Some(view),
            _ => None,
        }
    }

    /// The line-protocol view, if this is a line buffer.
    pub fn line(self) -> Option<line::View<'a>> {
        match self {
            Self::Line(view) => Some(view),
            _ => None,
        }
    }

    /// The RPC view, if this is an LLVM-RPC buffer.
    pub fn rpc(self) -> Option<rpc::View<'a>> {
        match self {
            Self::Rpc(view) => Some(view),
            _ => None,
        }
    }

    /// Initialises the buffer: every packet free, nothing submitted (the protocol's `init`; an
    /// RPC buffer has no prefix: its client object carries the addresses, see
    /// [`rpc::client_object`]).
    pub fn init(&self, device_base: u64, doorbell: u64) {
        match self {
            Self::Rpc(view) => view.init(),
            Self::Stack(view) => view.init(device_base, doorbell),
            Self::Phase(view) => view.init(device_base, doorbell),
            Self::Line(view) => view.init(device_base, doorbell),
        }
    }

    /// Host: serves every submitted packet once (the protocol's `Host::drain`).
    pub fn drain(&self, handler: &mut impl DrainHandler) -> DrainReport {
        match self {
            Self::Stack(view) => view.host().drain(handler),
            Self::Phase(view) => view.host().drain(handler),
            Self::Line(view) => view.host().drain(handler),
            Self::Rpc(view) => view.host().drain(handler),
        }
    }

    /// The scope a host that serves the whole buffer starts with: a fresh
    /// [`ScanWindow`](crate::ScanWindow) for a buffer whose host scans, [`DrainScope::Whole`] for
    /// one whose host takes every submitted packet at once.
    pub fn scope(&self) -> DrainScope {
        match self {
            Self::Stack(_) => DrainScope::Whole,
            Self::Phase(view) => DrainScope::Window(view.scan_window()),
            Self::Line(view) => DrainScope::Window(view.scan_window()),
            Self::Rpc(_) => DrainScope::Whole,
        }
    }

    /// Host: serves the submitted packets of `scope` once, updating its private state (the
    /// protocol's [`Host::drain_scope`](crate::Host::drain_scope)). A stack buffer is drained
    /// whole whatever the scope. Requests are copied into `scratch` (the line protocol's, and an
    /// RPC buffer's stateless packets): keep one per host thread for every drain. `state` is the
    /// buffer's [`Host::State`](crate::Host::State), kept across its drains; a state of another
    /// protocol than the view's, or [`AnyStateMut::None`], is no state.
    ///
    /// Always inlined: it is the poller's inner step, and left to the inliner it is called, which
    /// costs every packet a call and its register spills (the instruction counts, and the command
    /// that measured them, are in `docs/cache-lines.md`, "Measured").
    #[inline(always)]
    pub fn drain_scope(
        &self,
        scope: &mut DrainScope,
        scratch: &mut HostScratch,
        state: AnyStateMut<'_>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        match (self, state) {
            (Self::Stack(view), _) => view.host().drain_scope(scope, None, None, handler),
            (Self::Phase(view), _) => view.host_ref().drain_scope(scope, None, None, handler),
            (Self::Line(view), state) => {
                let memory = match state {
                    AnyStateMut::Line(memory) => Some(memory),
                    _ => None,
                };
                view.host_ref().drain_scope(scope, Some(&mut scratch.line), memory, handler)
            }
            (Self::Rpc(view), state) => {
                let calls = match state {
                    AnyStateMut::Rpc(calls) => Some(calls),
                    _ => None,
                };
                view.host().drain_scope(scope, Some(&mut scratch.rpc), calls, handler)
            }
        }
    }

    /// The lanes one packet carries: all [`LANES`](crate::LANES) for the stack, phase and line
    /// protocols, an RPC port's lanes (its client's warp width) for an RPC buffer. A producer
    /// whose activemask has lanes outside it cannot call through this buffer.
    pub fn lane_mask(&self) -> u64 {
        match self {
            Self::Rpc(view) => view.lane_mask(),
            Self::Stack(_) | Self::Phase(_) | Self::Line(_) => crate::lane::LANE_MASK,
        }
    }

    /// Producer: claims a free packet. A phase or line claim tries each index once from `start`
    /// (waves that start apart collide less); a stack claim pops the free-list and ignores `start`;
    /// an RPC claim tries each port once from `start` through the client's lock bits, which the
    /// view must have ([`rpc::View::with_locks`]: a buffer's lock bits are the client's, not the
    /// buffer's). `Ok(None)`: none is free (retry); `Err`: the stack protocol's free-list is
    /// corrupt.
    ///
    /// # Panics
    /// For an RPC view without lock bits (see [`rpc::View::claim`]).
    #[inline(always)]
    pub fn claim(&self, start: usize) -> Result<Option<AnyClaimed<'a>>, ChainError> {
        Ok(match self {
            Self::Stack(view) => view.claim()?.map(AnyClaimed::Stack),
            Self::Phase(view) => view.claim(start).map(AnyClaimed::Phase),
            Self::Line(view) => view.claim(start).map(AnyClaimed::Line),
            Self::Rpc(view) => {
                let ports = view.ports() as usize;
                let start = if start < ports { start } else { start % ports };
                view.claim(start as u32).map(AnyClaimed::Rpc)
            }
        })
    }
}

#[cfg(test)]
mod tests;
