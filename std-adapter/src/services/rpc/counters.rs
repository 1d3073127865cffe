//! [`RpcCounters`]: what one buffer's RPC host did.

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
