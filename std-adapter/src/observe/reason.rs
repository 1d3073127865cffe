//! Why a lane (or a packet, or a finding) was refused: [`Reason`], and its counters.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the host refused something a device asked for, or lost part of its output. Each is
/// counted per registry (its listeners) and per buffer ([`crate::observe::Stats`]).
///
/// What one count is: a lane for the reasons a service finds in one lane's request (the budgets,
/// a bad free, an allocation failure, a request it cannot parse, a lane handler's panic); every
/// active lane of the packet for the reasons that answer a whole packet (an unknown service, a
/// packet service's panic, shutting down); one finding for a malformed packet; one message for
/// the printf limits (the message is cut, the lane still answered); one call for a stuck service.
///
/// ```
/// use hostcall::observe::Reason;
/// assert_eq!(Reason::DevmemBytes.name(), "devmem bytes");
/// assert!(Reason::ALL.contains(&Reason::ShuttingDown));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// A packet for a service id nobody registered.
    UnknownService,
    /// Malformed shared state: a broken chain, a packet without READY, a torn line lane.
    MalformedPacket,
    /// A request its service could not parse (a bad message descriptor, an unknown message id,
    /// a bad printf format, a bad FUNCTION_CALL).
    BadRequest,
    /// A message BEGIN refused: as many messages open as the bound allows.
    OpenMessages,
    /// A message refused or dropped: the open messages (of its buffer, or of all buffers) would
    /// hold more than their byte budget; or an LLVM-RPC lane refused: the calls in progress
    /// would hold more than `RpcLimits::max_held_bytes_per_buffer` or `max_held_bytes`.
    HeldBytes,
    /// A message chunk naming a message another lane (of this buffer or another) has open: a
    /// guessed or stolen id; refused, and that message untouched.
    ForeignMessage,
    /// A message dropped: larger than the message size bound.
    MessageSize,
    /// A printf message cut: its conversions would do more work than allowed.
    PrintfWork,
    /// A printf message cut: its output would be longer than allowed.
    PrintfOutput,
    /// A DEVMEM allocation refused: over the bytes live budget.
    DevmemBytes,
    /// A DEVMEM allocation refused: as many allocations live as allowed.
    DevmemCount,
    /// A DEVMEM allocation refused: size 0 or above the largest allocation.
    DevmemSize,
    /// A DEVMEM free of an address DEVMEM did not hand out.
    BadFree,
    /// The backend could not allocate (out of memory, or it refused).
    AllocationFailure,
    /// A service panicked; the lanes were answered with an error.
    HandlerPanic,
    /// Answered with the shutdown error: submitted after a listener's grace ran out.
    ShuttingDown,
    /// An LLVM-RPC call refused (answered with its failure value, 0, null or -1, as LLVM's
    /// server answers a failed call): its opcode group is off in the buffer's `RpcPolicy`, or
    /// it named a `FILE` it may not use.
    RpcRefused,
    /// An LLVM-RPC lane's stream (a write, a path, a format, a string) longer than the buffer's
    /// `RpcLimits::stream_bytes`: read to its end, dropped, the call answered as failed.
    RpcStreamLength,
    /// An LLVM-RPC `fopen` answered null: the buffer's device holds `RpcLimits::open_files`
    /// host files.
    RpcOpenFiles,
    /// A line-protocol request still incomplete after `line::STALL_LOOKS` looks (a word that
    /// never arrived): not served, reported once per sequence, served if it completes later.
    StalledRequest,
    /// A service call ran past its listener's
    /// [`stuck_after`](crate::ListenerConfig::stuck_after) (one count per call; its packet is
    /// answered when the call returns, and the listener's other buffers are served meanwhile).
    StuckService,
}

impl Reason {
    /// Every reason, in the order of [`ReasonCounts`]. The C header numbers them in this order
    /// (`HOSTCALL_REASON_*`, checked by `hostcall-capi`'s tests): once released, new reasons go
    /// at the end.
    pub const ALL: [Reason; REASONS] = [
        Self::UnknownService,
        Self::MalformedPacket,
        Self::BadRequest,
        Self::OpenMessages,
        Self::HeldBytes,
        Self::ForeignMessage,
        Self::MessageSize,
        Self::PrintfWork,
        Self::PrintfOutput,
        Self::DevmemBytes,
        Self::DevmemCount,
        Self::DevmemSize,
        Self::BadFree,
        Self::AllocationFailure,
        Self::HandlerPanic,
        Self::ShuttingDown,
        Self::RpcRefused,
        Self::RpcStreamLength,
        Self::RpcOpenFiles,
        Self::StalledRequest,
        Self::StuckService,
    ];

    /// A short name, for tables and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnknownService => "unknown service",
            Self::MalformedPacket => "malformed packet",
            Self::BadRequest => "bad request",
            Self::OpenMessages => "open messages",
            Self::HeldBytes => "held bytes",
            Self::ForeignMessage => "foreign message",
            Self::MessageSize => "message size",
            Self::PrintfWork => "printf work",
            Self::PrintfOutput => "printf output",
            Self::DevmemBytes => "devmem bytes",
            Self::DevmemCount => "devmem count",
            Self::DevmemSize => "devmem size",
            Self::BadFree => "bad free",
            Self::AllocationFailure => "allocation failure",
            Self::HandlerPanic => "handler panic",
            Self::ShuttingDown => "shutting down",
            Self::RpcRefused => "rpc refused",
            Self::RpcStreamLength => "rpc stream length",
            Self::RpcOpenFiles => "rpc open files",
            Self::StalledRequest => "stalled request",
            Self::StuckService => "stuck service",
        }
    }

    /// The reason's index in [`Reason::ALL`] (the enum's order).
    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many reasons there are.
pub const REASONS: usize = 21;

/// A snapshot of the count of each [`Reason`].
///
/// ```
/// use hostcall::observe::{Reason, ReasonCounts};
/// let counts = ReasonCounts::default();
/// assert_eq!(counts.get(Reason::BadFree), 0);
/// assert_eq!(counts.total(), 0);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReasonCounts {
    counts: [u64; REASONS],
}

impl ReasonCounts {
    /// The count of `reason`.
    pub fn get(&self, reason: Reason) -> u64 {
        self.counts[reason.index()]
    }

    /// Every reason counted so far, with its count (the reasons never seen left out).
    pub fn nonzero(&self) -> impl Iterator<Item = (Reason, u64)> + '_ {
        Reason::ALL.iter().map(|&r| (r, self.get(r))).filter(|&(_, n)| n > 0)
    }

    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// `reason: count, ...` for the reasons counted, or `none`.
impl fmt::Display for ReasonCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for (reason, count) in self.nonzero() {
            if any {
                f.write_str(", ")?;
            }
            write!(f, "{reason} {count}")?;
            any = true;
        }
        if !any {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// The live counters behind a [`ReasonCounts`]: one word per reason, added to with Relaxed
/// atomics (refusals are rare: not sharded), and the log lines the rate limit suppressed.
#[derive(Debug, Default)]
pub(crate) struct ReasonTally {
    counts: [AtomicU64; REASONS],
    suppressed_logs: AtomicU64,
}

impl ReasonTally {
    /// Counts `n` of `reason`.
    pub(crate) fn add(&self, reason: Reason, n: u64) {
        // Relaxed: statistics only; nothing is published through them. A wave that got its
        // reply sees the count: the host's Release store of the reply comes after this add.
        self.counts[reason.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one log line the rate limit suppressed.
    pub(crate) fn suppressed_log(&self) {
        // Relaxed: a statistic, as in `add`.
        self.suppressed_logs.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far, and the suppressed log lines.
    pub(crate) fn snapshot(&self) -> (ReasonCounts, u64) {
        let mut counts = ReasonCounts::default();
        for (count, live) in counts.counts.iter_mut().zip(&self.counts) {
            // Relaxed: statistics, see `add`.
            *count = live.load(Ordering::Relaxed);
        }
        // Relaxed: statistics, see `add`.
        (counts, self.suppressed_logs.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_reason_in_index_order() {
        for (i, reason) in Reason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason}");
        }
        let names: std::collections::BTreeSet<_> = Reason::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), REASONS, "names are distinct");
    }

    #[test]
    fn a_tally_counts_by_reason() {
        let tally = ReasonTally::default();
        tally.add(Reason::BadFree, 2);
        tally.add(Reason::DevmemBytes, 1);
        tally.suppressed_log();
        let (counts, suppressed) = tally.snapshot();
        assert_eq!((counts.get(Reason::BadFree), counts.get(Reason::DevmemBytes), counts.total()), (2, 1, 3));
        assert_eq!(suppressed, 1);
        assert_eq!(counts.to_string(), "devmem bytes 1, bad free 2");
    }
}
