//! A producer's packet of any protocol: [`AnyClaimed`], [`AnySubmitted`], [`AnyCompleted`], each
//! one arm per protocol over the protocol's own handle.
//!
//! Each is `#[repr(u8)]`: a tag byte of its own, which every step's `match` reads and jumps on,
//! where the compiler's layout would hide the tag in a spare value of the RPC handle's flags and
//! decode it at every step.

use crate::lane::{ClaimedPacket, CompletedPacket, SubmittedPacket, REPLY_WORDS, SLOT_WORDS};
use crate::{line, phase, rpc, stack};

/// A claimed packet of any protocol (from [`AnyView::claim`](super::AnyView::claim)). Dropping it returns the packet
/// unsent, as the protocol's handle does.
#[derive(Debug)]
#[must_use = "dropping a claimed packet returns it unsent"]
#[repr(u8)]
pub enum AnyClaimed<'a> {
    /// A stack-protocol packet.
    Stack(stack::Claimed<'a>),
    /// A phase-protocol packet.
    Phase(phase::Claimed<'a>),
    /// A line-protocol packet.
    Line(line::Claimed<'a>),
    /// An LLVM-RPC port, opened through the client's lock bits.
    Rpc(rpc::Claimed<'a>),
}

/// A submitted packet of any protocol. Dropping it behaves as the protocol's handle does
/// (a stack or line packet leaks, a phase packet is freed once the host has answered).
#[derive(Debug)]
#[must_use = "wait for the reply"]
#[repr(u8)]
pub enum AnySubmitted<'a> {
    /// A stack-protocol packet.
    Stack(stack::Submitted<'a>),
    /// A phase-protocol packet.
    Phase(phase::Submitted<'a>),
    /// A line-protocol packet.
    Line(line::Submitted<'a>),
    /// An LLVM-RPC port, sent.
    Rpc(rpc::Submitted<'a>),
}

/// An answered packet of any protocol. Dropping it releases the packet.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
#[repr(u8)]
pub enum AnyCompleted<'a> {
    /// A stack-protocol packet.
    Stack(stack::Completed<'a>),
    /// A phase-protocol packet.
    Phase(phase::Completed<'a>),
    /// A line-protocol packet.
    Line(line::Completed<'a>),
    /// An LLVM-RPC port, answered.
    Rpc(rpc::Completed<'a>),
}

impl<'a> ClaimedPacket for AnyClaimed<'a> {
    type Submitted = AnySubmitted<'a>;

    #[inline(always)]
    fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        match self {
            Self::Stack(packet) => packet.write_lane(lane, words),
            Self::Phase(packet) => packet.write_lane(lane, words),
            Self::Line(packet) => packet.write_lane(lane, words),
            Self::Rpc(packet) => packet.write_lane(lane, words),
        }
    }

    #[inline(always)]
    fn submit(self, service: u32, activemask: u64) -> AnySubmitted<'a> {
        match self {
            Self::Stack(packet) => AnySubmitted::Stack(packet.submit(service, activemask)),
            Self::Phase(packet) => AnySubmitted::Phase(packet.submit(service, activemask)),
            Self::Line(packet) => AnySubmitted::Line(packet.submit(service, activemask)),
            Self::Rpc(packet) => AnySubmitted::Rpc(packet.submit(service, activemask)),
        }
    }
}

impl<'a> SubmittedPacket for AnySubmitted<'a> {
    type Completed = AnyCompleted<'a>;

    #[inline(always)]
    fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<AnyCompleted<'a>, Self> {
        match self {
            Self::Stack(packet) => {
                packet.wait_until(keep_waiting).map(AnyCompleted::Stack).map_err(Self::Stack)
            }
            Self::Phase(packet) => {
                packet.wait_until(keep_waiting).map(AnyCompleted::Phase).map_err(Self::Phase)
            }
            Self::Line(packet) => packet.wait_until(keep_waiting).map(AnyCompleted::Line).map_err(Self::Line),
            Self::Rpc(packet) => packet.wait_until(keep_waiting).map(AnyCompleted::Rpc).map_err(Self::Rpc),
        }
    }
}

impl CompletedPacket for AnyCompleted<'_> {
    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        match self {
            Self::Stack(packet) => packet.reply(lane),
            Self::Phase(packet) => packet.reply(lane),
            Self::Line(packet) => packet.reply(lane),
            Self::Rpc(packet) => packet.reply(lane),
        }
    }

    #[inline(always)]
    fn host_error(&self) -> bool {
        match self {
            Self::Stack(packet) => packet.host_error(),
            Self::Phase(packet) => packet.host_error(),
            Self::Line(packet) => packet.host_error(),
            Self::Rpc(packet) => packet.host_error(),
        }
    }
}
