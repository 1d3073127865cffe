//! The per-service counters: packets, lanes, errors and the two histograms, in per-thread shards.

use super::histogram::{Histogram, TimeBuckets};
use super::stats::ServiceStats;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters of one service (or of the unknown ids, or of one buffer), in [`COUNTER_SHARDS`]
/// shards on separate cache lines: each listener thread adds to its own shard, so several threads
/// serving packets of one service do not fight over one line; a snapshot sums the shards.
#[derive(Debug)]
pub(crate) struct Counters {
    shards: Box<[Shard]>,
}

/// Shards per counter set; threads beyond it share shards (still correct, just contended).
const COUNTER_SHARDS: usize = 16;

/// One thread's share of a service's counters, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    packets: AtomicU64,
    lane_calls: AtomicU64,
    errors: AtomicU64,
    service_time: TimeBuckets,
    queue_wait: TimeBuckets,
}

impl Default for Counters {
    fn default() -> Self {
        Self { shards: (0..COUNTER_SHARDS).map(|_| Shard::default()).collect() }
    }
}

/// This thread's shard index, handed out round robin on first use.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: a counter handing out distinct-ish numbers; nothing is published through it.
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// How long a packet took, in clock ticks (`crate::observe::histogram::ticks`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// From the start of its service to the end.
    pub(crate) service: u64,
    /// From the start of the poll that found it to the start of its service; `None` where the
    /// dispatcher does not know when the poll started.
    pub(crate) queue_wait: Option<u64>,
}

impl Counters {
    /// Counts one packet of `lanes` lanes, `errors` of them answered with an error, and its
    /// timing if measured.
    #[inline]
    pub(crate) fn count(&self, lanes: u64, errors: u64, timing: Option<Timing>) {
        let shard = &self.shards[shard_index()];
        // Relaxed: statistics only; no other memory is published through them. A wave that got
        // its reply still sees them counted: the host's Release store of the reply's phase (or
        // READY clear) comes after these adds.
        shard.packets.fetch_add(1, Ordering::Relaxed);
        shard.lane_calls.fetch_add(lanes, Ordering::Relaxed);
        if errors != 0 {
            shard.errors.fetch_add(errors, Ordering::Relaxed);
        }
        if let Some(timing) = timing {
            shard.service_time.record(timing.service);
            if let Some(wait) = timing.queue_wait {
                shard.queue_wait.record(wait);
            }
        }
    }

    /// The sums over the shards.
    pub(crate) fn snapshot(&self) -> ServiceStats {
        let mut total = ServiceStats::default();
        let (mut service_time, mut queue_wait) = (Histogram::default(), Histogram::default());
        for shard in self.shards.iter() {
            // Relaxed: statistics, see `count`.
            total.packets += shard.packets.load(Ordering::Relaxed);
            total.lane_calls += shard.lane_calls.load(Ordering::Relaxed);
            total.errors += shard.errors.load(Ordering::Relaxed);
            shard.service_time.add_to(&mut service_time);
            shard.queue_wait.add_to(&mut queue_wait);
        }
        total.service_time = service_time;
        total.queue_wait = queue_wait;
        total
    }
}

/// The live counters behind [`ListenerEvents`](super::ListenerEvents): added to by listener
/// threads, once per wait or empty poll (not sharded: an idle listener's events are rare, a busy
/// one's polls find packets).
#[derive(Debug, Default)]
pub(crate) struct EventTally {
    doorbell_wakes: AtomicU64,
    timeout_polls: AtomicU64,
    empty_scans: AtomicU64,
}

impl EventTally {
    /// A doorbell wait ended: with a ring (`rung`) or its timeout.
    pub(crate) fn woke(&self, rung: bool) {
        let counter = if rung { &self.doorbell_wakes } else { &self.timeout_polls };
        // Relaxed: a statistic; nothing is published through it.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A poll found no packet.
    pub(crate) fn empty_scan(&self) {
        // Relaxed: a statistic; nothing is published through it.
        self.empty_scans.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> super::ListenerEvents {
        // Relaxed: statistics, see `woke`.
        super::ListenerEvents {
            doorbell_wakes: self.doorbell_wakes.load(Ordering::Relaxed),
            timeout_polls: self.timeout_polls.load(Ordering::Relaxed),
            empty_scans: self.empty_scans.load(Ordering::Relaxed),
        }
    }
}
