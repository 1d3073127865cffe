//! The per-service counters: packets, lanes, errors and the two histograms, in per-thread shards.

use super::histogram::{Histogram, TimeBuckets};
use super::stats::ServiceStats;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Counters of one service (or of the unknown ids, or of one buffer), in shards on separate
/// cache lines: each of the first [`EXCLUSIVE_SHARDS`] holders of a [`ShardLease`] (a listener
/// thread's dispatcher, a thread that counts without one) adds to a shard of its own while it
/// lives (so several threads serving packets of one service do not fight over one line, and a
/// holder adds to its shard without a locked instruction); holders beyond them share the last
/// shard, with atomic adds. A snapshot sums the shards.
#[derive(Debug)]
pub(crate) struct Counters {
    shards: Box<[Shard]>,
}

/// Shards a thread may hold alone; one more is shared by every other thread.
pub(crate) const EXCLUSIVE_SHARDS: usize = 16;

/// One thread's share of a service's counters, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Shard {
    /// Packets counted without a timing (`count`): a snapshot adds the timed ones, one in each
    /// bucket of `service_time`.
    packets: AtomicU64,
    lane_calls: AtomicU64,
    errors: AtomicU64,
    service_time: TimeBuckets,
    queue_wait: TimeBuckets,
}

impl Default for Counters {
    fn default() -> Self {
        Self { shards: (0..=EXCLUSIVE_SHARDS).map(|_| Shard::default()).collect() }
    }
}

/// Adds `n` to a counter word; `alone`: the calling thread is the only one that adds to it (it
/// holds the word's shard, see [`ShardLease`]), so a load and a store lose nothing, where a
/// locked add would cost every packet one locked instruction per word (six a packet) and wait
/// for the reply stores before it to leave the store buffer. Relaxed either way: statistics
/// only, nothing is published through them; a snapshot's Relaxed load sees some value each word
/// had, and a wave that got its reply still sees its packet counted (the host's Release store of
/// the reply's phase, or of READY clear, comes after these stores).
#[inline]
pub(crate) fn add(counter: &AtomicU64, n: u64, alone: bool) {
    if alone {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    } else {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The shard its holder adds to: one of the exclusive ones, held from the holder's first count to
/// its end, or the shared one when all are held. A listener thread's dispatcher holds one, so
/// that its packets' shards are found once, with their entry, not at every count (and the thread
/// counts everything through it: one shard a listener thread); a thread that counts without a
/// dispatcher ([`thread_slot`]) holds one from its first count to its end.
#[derive(Debug)]
pub(crate) struct ShardLease {
    index: usize,
}

/// Bit `i`: exclusive shard `i` is held by a live thread.
static HELD: AtomicU32 = AtomicU32::new(0);

impl ShardLease {
    pub(crate) fn take() -> Self {
        // Relaxed: only a guess at the free bits; the compare-exchange below checks it, and its
        // Acquire (or its Relaxed failure, another guess) is what the loop acts on.
        let mut held = HELD.load(Ordering::Relaxed);
        loop {
            let index = held.trailing_ones() as usize;
            if index >= EXCLUSIVE_SHARDS {
                return Self { index: EXCLUSIVE_SHARDS };
            }
            // Acquire: pairs with the Release `fetch_and` of the lease's last holder (`drop`),
            // so its last stores to the shard come before this thread's loads of them.
            match HELD.compare_exchange_weak(held, held | 1 << index, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Self { index },
                Err(now) => held = now,
            }
        }
    }

    /// Whether the holder adds to its shard alone (an exclusive one: plain loads and stores).
    fn alone(&self) -> bool {
        self.index < EXCLUSIVE_SHARDS
    }
}

impl Drop for ShardLease {
    fn drop(&mut self) {
        if self.alone() {
            // Release: pairs with the Acquire CAS of the next holder (`take`).
            HELD.fetch_and(!(1 << self.index), Ordering::Release);
        }
    }
}

thread_local! {
    static LEASE: ShardLease = ShardLease::take();
}

/// Which shard of every [`Counters`] its holder adds to, and whether alone: a lease's
/// ([`ShardLease::slot`]) or this thread's ([`thread_slot`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShardSlot {
    index: usize,
    pub(crate) alone: bool,
}

impl ShardLease {
    /// The slot this lease holds.
    pub(crate) fn slot(&self) -> ShardSlot {
        ShardSlot { index: self.index, alone: self.alone() }
    }
}

/// This thread's slot (the shared shard's while the thread's locals are being destroyed).
#[inline]
pub(crate) fn thread_slot() -> ShardSlot {
    LEASE.try_with(ShardLease::slot).unwrap_or(ShardSlot { index: EXCLUSIVE_SHARDS, alone: false })
}

/// How long a packet took, in clock ticks (`crate::observe::histogram::ticks`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    /// From the start of its service to the end.
    pub(crate) service: u64,
    /// When its service started.
    pub(crate) start: u64,
    /// When the poll that found it started; `None` where the dispatcher does not know. The queue
    /// wait, from there to `start`, is worked out only where it is known (a dispatcher that sees
    /// no poll start pays nothing for it).
    pub(crate) poll_start: Option<NonZeroU64>,
}

impl Shard {
    /// Counts one packet of `lanes` lanes, `errors` of them answered with an error, and its
    /// timing if measured; `alone`: the caller holds the shard's lease ([`ShardSlot::alone`]).
    #[inline]
    pub(crate) fn count(&self, lanes: u64, errors: u64, timing: Option<Timing>, alone: bool) {
        // A packet with its timing is counted by its service-time bucket (a snapshot adds the
        // histogram's count to `packets`): one add a packet less.
        if timing.is_none() {
            add(&self.packets, 1, alone);
        }
        add(&self.lane_calls, lanes, alone);
        // Alone, 0 is added too: one plain add to a line the two above just wrote, where the
        // test would be two instructions a packet; shared, 0 is not (a locked add, for nothing).
        if alone || errors != 0 {
            add(&self.errors, errors, alone);
        }
        if let Some(timing) = timing {
            self.service_time.record(timing.service, alone);
            if let Some(poll) = timing.poll_start {
                // Saturated: a poll start read on another processor may be a little after it.
                self.queue_wait.record(timing.start.saturating_sub(poll.get()), alone);
            }
        }
    }
}

impl Counters {
    /// The shard of `slot` (its holder adds to it, alone if [`ShardSlot::alone`]).
    #[inline]
    pub(crate) fn shard(&self, slot: ShardSlot) -> &Shard {
        &self.shards[slot.index]
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
        // `packets` holds the packets counted without a timing; each timed one is in a bucket.
        total.packets += service_time.count();
        total.service_time = service_time;
        total.queue_wait = queue_wait;
        total
    }
}

/// The live counters behind [`ListenerEvents`](super::ListenerEvents): added to by listener
/// threads, once per wait or empty poll. The waits are rare (one per sleep); the empty polls
/// are a spinning listener's every poll, so they are counted in per-thread shards as the
/// services' counters are: with one word, every pool thread spinning would take that word's
/// line exclusive on every poll, against all the others.
#[derive(Debug, Default)]
pub(crate) struct EventTally {
    doorbell_wakes: AtomicU64,
    timeout_polls: AtomicU64,
    empty_scans: ShardedCount,
}

/// One count in per-thread shards (see [`Counters`]).
#[derive(Debug)]
struct ShardedCount {
    shards: Box<[PaddedCount]>,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct PaddedCount(AtomicU64);

impl Default for ShardedCount {
    fn default() -> Self {
        Self { shards: (0..=EXCLUSIVE_SHARDS).map(|_| PaddedCount::default()).collect() }
    }
}

impl ShardedCount {
    #[inline]
    fn add(&self, n: u64, slot: ShardSlot) {
        add(&self.shards[slot.index].0, n, slot.alone);
    }

    fn total(&self) -> u64 {
        // Relaxed: statistics, see `add`.
        self.shards.iter().map(|shard| shard.0.load(Ordering::Relaxed)).sum()
    }
}

impl EventTally {
    /// A doorbell wait ended: with a ring (`rung`) or its timeout.
    pub(crate) fn woke(&self, rung: bool) {
        let counter = if rung { &self.doorbell_wakes } else { &self.timeout_polls };
        // Relaxed: a statistic; nothing is published through it.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A poll found no packet (counted in `slot`'s shard: the polling thread's dispatcher's).
    #[inline]
    pub(crate) fn empty_scan(&self, slot: ShardSlot) {
        self.empty_scans.add(1, slot);
    }

    pub(crate) fn snapshot(&self) -> super::ListenerEvents {
        // Relaxed: statistics, see `woke`.
        super::ListenerEvents {
            doorbell_wakes: self.doorbell_wakes.load(Ordering::Relaxed),
            timeout_polls: self.timeout_polls.load(Ordering::Relaxed),
            empty_scans: self.empty_scans.total(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More threads than exclusive shards, each counting while the others do: no count is lost (two threads adding with plain stores to one shard would
    /// lose some).
    #[test]
    fn threads_beyond_the_exclusive_shards_lose_no_count() {
        let counters = Counters::default();
        // Fewer rounds under Miri, which interprets every step (the threads still interleave).
        let per_thread = if cfg!(miri) { 200 } else { 200_000u64 };
        let threads = 2 * EXCLUSIVE_SHARDS as u64 + 3;
        let barrier = std::sync::Barrier::new(threads as usize);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    let slot = thread_slot();
                    for _ in 0..per_thread {
                        let timing = Some(Timing { service: 5, start: 7, poll_start: NonZeroU64::new(7) });
                        counters.shard(slot).count(2, 1, timing, slot.alone);
                    }
                });
            }
        });
        let total = counters.snapshot();
        assert_eq!(
            (total.packets, total.lane_calls, total.errors),
            (threads * per_thread, 2 * threads * per_thread, threads * per_thread)
        );
        assert_eq!(
            (total.service_time.count(), total.queue_wait.count()),
            (threads * per_thread, threads * per_thread)
        );
    }
}
