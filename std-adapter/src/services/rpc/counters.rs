//! [`RpcCounters`]: what one buffer's RPC host did, and the host's (cold) logging of what it
//! refused or did not serve.

use super::RpcHost;
use crate::rate_limit::warn_limited;
use hostcall_core::rpc::opcode::status;
use hostcall_core::rpc::Turn;

/// What one buffer's RPC host did, counted since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcCounters {
    /// Turns taken (each one flip of the host's mailbox).
    pub turns: u64,
    /// Calls begun.
    pub calls: u64,
    /// Calls finished (the host's last turn of the call taken).
    pub calls_done: u64,
    /// Calls answered as an unhandled opcode (unknown, or not served by this host).
    pub unhandled: u64,
    /// Lanes answered with a failure because their opcode group is off, they named a stream
    /// they may not use, or a path outside the files directory ([`RpcPolicy::with_files`](super::RpcPolicy::with_files)).
    pub refused_lanes: u64,
    /// Lanes whose stream (or read) was longer than [`RpcLimits::stream_bytes`](super::RpcLimits::stream_bytes) (logged,
    /// rate-limited).
    pub over_limit_lanes: u64,
    /// `fopen`s answered null because the buffer held [`RpcLimits::open_files`](super::RpcLimits::open_files) files (logged,
    /// rate-limited).
    pub open_files_refused: u64,
    /// Lanes answered with a failure because what they would keep did not fit the held-bytes
    /// budgets ([`RpcLimits::max_held_bytes_per_buffer`](super::RpcLimits::max_held_bytes_per_buffer), [`RpcLimits::max_held_bytes`](super::RpcLimits::max_held_bytes)).
    pub held_refused_lanes: u64,
    /// Turns put off to a later poll because the poll's work budget
    /// ([`RpcLimits::poll_work_bytes`](super::RpcLimits::poll_work_bytes)) was spent (the port stayed the host's meanwhile).
    pub deferred_turns: u64,
    /// Bytes the calls in progress hold now, as charged to the budgets (a level, not a count:
    /// the sum over a pool's stripes is the buffer's).
    pub held_bytes: u64,
}

impl RpcCounters {
    /// The four refusal counts, in [`RpcCounters::refused_lanes`]'s order of the fields.
    pub(crate) fn refusals(&self) -> [u64; 4] {
        [self.refused_lanes, self.over_limit_lanes, self.open_files_refused, self.held_refused_lanes]
    }
}

impl std::ops::Add for RpcCounters {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            turns: self.turns + o.turns,
            calls: self.calls + o.calls,
            calls_done: self.calls_done + o.calls_done,
            unhandled: self.unhandled + o.unhandled,
            refused_lanes: self.refused_lanes + o.refused_lanes,
            over_limit_lanes: self.over_limit_lanes + o.over_limit_lanes,
            open_files_refused: self.open_files_refused + o.open_files_refused,
            held_refused_lanes: self.held_refused_lanes + o.held_refused_lanes,
            deferred_turns: self.deferred_turns + o.deferred_turns,
            held_bytes: self.held_bytes + o.held_bytes,
        }
    }
}

impl RpcHost {
    /// Logs (rate-limited) the lanes this turn refused, from the refusal counts `before` it.
    #[cold]
    pub(super) fn log_refusals(&self, turn: &Turn<'_>, before: [u64; 4]) {
        let [refused_lanes, over_limit_lanes, open_files_refused, held_refused_lanes] = before;
        let before = RpcCounters {
            refused_lanes,
            over_limit_lanes,
            open_files_refused,
            held_refused_lanes,
            ..self.counters
        };
        if self.counters.refused_lanes > before.refused_lanes {
            warn_limited!(
                "rpc: port {}: opcode {:#x}: {} lanes refused (their opcode group is off in the buffer's \
                 RpcPolicy, they named a FILE they may not use, or a path outside the files directory); \
                 answered as failed",
                turn.port(),
                turn.header().1,
                self.counters.refused_lanes - before.refused_lanes
            );
        }
        if self.counters.over_limit_lanes > before.over_limit_lanes {
            warn_limited!(
                "rpc: port {}: opcode {:#x}: {} lanes' streams longer than the buffer's RpcLimits::stream_bytes \
                 ({} bytes): their calls answered as failed, their data dropped (a read is cut to the limit)",
                turn.port(),
                turn.header().1,
                self.counters.over_limit_lanes - before.over_limit_lanes,
                self.limits.stream_bytes
            );
        }
        if self.counters.open_files_refused > before.open_files_refused {
            warn_limited!(
                "rpc: port {}: {} fopens answered NULL: the buffer holds RpcLimits::open_files ({}) files",
                turn.port(),
                self.counters.open_files_refused - before.open_files_refused,
                self.limits.open_files
            );
        }
        if self.counters.held_refused_lanes > before.held_refused_lanes {
            warn_limited!(
                "rpc: port {}: opcode {:#x}: {} lanes refused: the calls in progress would hold more than \
                 this buffer's {} bytes or all buffers' {} (RpcLimits::max_held_bytes_per_buffer, \
                 max_held_bytes); answered as failed",
                turn.port(),
                turn.header().1,
                self.counters.held_refused_lanes - before.held_refused_lanes,
                self.limits.max_held_bytes_per_buffer,
                self.limits.max_held_bytes
            );
        }
    }

    /// Counts and logs (rate-limited) an opcode this host does not serve.
    #[cold]
    pub(super) fn unhandled(&mut self, turn: &Turn<'_>, opcode: u32) {
        self.counters.unhandled += 1;
        warn_limited!(
            "rpc: port {}: opcode {opcode:#x} not served (status {:#x}): the port is handed back untouched",
            turn.port(),
            status::UNHANDLED_OPCODE
        );
    }
}
