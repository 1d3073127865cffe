//! What the listener did, and why: counters with reasons, timings, a snapshot to print.
//!
//! Every registry ([`Services`](crate::Services), shared by the listeners that dispatch through
//! it) counts, per service, packets, lanes and errors, with the service time and the queue wait
//! as log-scale [`Histogram`]s; every refusal by its [`Reason`] (a budget by name, a bad free,
//! an unknown service, a panic, shutting down, ...), for the registry and for the packet's
//! buffer; its listeners' doorbell wakes, timeout polls and empty scans; and the log lines the
//! rate limit suppressed. [`Listener::stats`](crate::Listener::stats) and the other `stats`
//! methods return a [`Stats`] snapshot, whose `Display` is a readable table.
//!
//! The serving path takes no lock and allocates nothing for this: Relaxed atomic adds on
//! per-thread shards (a listener thread's dispatcher holds its own, found with the packet's service), two reads of a cheap clock per packet ([`Histogram`]), a thread-local set
//! around each service call so that a service deep inside can say why it refused
//! ([`count`]).

mod buffers;
pub(crate) mod counters;
pub(crate) mod histogram;
mod reason;
pub(crate) mod scope;
mod stats;

pub(crate) use buffers::{BufferTallies, BufferTally, ServedBuffer, SortedTallies};
pub use histogram::{Histogram, BUCKETS};
pub(crate) use reason::ReasonTally;
pub use reason::{Reason, ReasonCounts, REASONS};
pub use stats::{BufferStats, ListenerEvents, ServiceStats, Stats};

/// Counts one `reason` for the packet being served on this thread (its registry and its
/// buffer). A service registered by the user may call it to say why it answered an error; outside
/// a service call it does nothing.
///
/// ```
/// use hostcall::observe::{count, Reason};
/// count(Reason::BadRequest); // outside a service: nowhere
/// ```
pub fn count(reason: Reason) {
    scope::count_n(reason, 1);
}
