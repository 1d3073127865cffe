//! A call in progress on one port ([`Call`]), and what its turns may use besides the port
//! ([`Context`]).

use super::budget::{Held, PollWork};
use super::console::Write;
use super::printf::Printf;
use super::{file_calls, files, gather, RpcCounters};
use crate::services::printf::PrintfSink;

/// What a call's turn may use besides the port.
pub(crate) struct Context<'a> {
    pub(crate) sink: &'a mut dyn PrintfSink,
    pub(crate) counters: &'a mut RpcCounters,
    /// The buffer's open files.
    pub(crate) files: &'a files::SharedFiles,
    /// Whether stdout and stderr may be used by the stream calls (the console group).
    pub(crate) console_allowed: bool,
    /// Whether stdin and host files may be used (the files group).
    pub(crate) files_allowed: bool,
    /// [`RpcLimits::stream_bytes`].
    pub(crate) limit: u64,
    /// What the host's calls hold (`budget.rs`).
    pub(super) held: &'a mut Held,
    /// The work the drain in progress may still do (`budget.rs`).
    pub(super) work: &'a mut PollWork,
}

impl Context<'_> {
    /// Charges `bytes` a lane is to keep to `charged` (its call's charge), if the budgets have
    /// room; else counts the lane as refused for them and returns `false`.
    pub(super) fn hold(&mut self, charged: &mut usize, bytes: usize) -> bool {
        if self.held.charge(bytes).is_err() {
            self.counters.held_refused_lanes += 1;
            return false;
        }
        *charged += bytes;
        true
    }
}

/// A call in progress on one port.
#[derive(Debug)]
pub(super) enum Call {
    Write(Box<Write>),
    Printf(Box<Printf>),
    /// A one-turn call on a stream (`opcode`, lanes).
    OnStream(u32, u64),
    Read(Box<file_calls::Read>),
    Gather(Box<gather::Gather>),
    Ending(gather::Ending),
}

impl Call {
    /// The lanes of the call.
    pub(super) fn mask(&self) -> u64 {
        match self {
            Call::Write(write) => write.mask(),
            Call::Printf(printf) => printf.mask(),
            Call::OnStream(_, mask) => *mask,
            Call::Read(read) => read.mask(),
            Call::Gather(gather) => gather.mask(),
            Call::Ending(ending) => ending.mask(),
        }
    }

    /// Bytes charged to the held budgets for the call.
    pub(super) fn charged(&self) -> usize {
        match self {
            Call::Write(write) => write.charged(),
            Call::Printf(printf) => printf.charged(),
            Call::Read(read) => read.charged(),
            Call::Gather(gather) => gather.charged(),
            Call::OnStream(..) | Call::Ending(_) => 0,
        }
    }
}
