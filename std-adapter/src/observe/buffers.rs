//! Per-buffer counters: one [`BufferTally`] for each buffer a registry's listeners serve, kept
//! while any of them serves it (a buffer split between the threads of a pool is one tally).

use super::counters::Counters;
use super::reason::ReasonTally;
use super::stats::BufferStats;
use hostcall_core::Protocol;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// The live counters of one buffer.
#[derive(Debug)]
pub(crate) struct BufferTally {
    protocol: Protocol,
    num_packets: u64,
    /// Packets, lanes and errors of the buffer (every service together; no timings).
    pub(crate) counters: Counters,
    /// Its refusals by reason.
    pub(crate) reasons: ReasonTally,
}

impl BufferTally {
    fn snapshot(&self) -> BufferStats {
        let served = self.counters.snapshot();
        let (refusals, _) = self.reasons.snapshot();
        BufferStats {
            protocol: self.protocol,
            num_packets: self.num_packets,
            packets: served.packets,
            lane_calls: served.lane_calls,
            errors: served.errors,
            refusals,
        }
    }
}

/// Every served buffer's tally by base address, sorted: a dispatcher's copy.
pub(crate) type SortedTallies = Vec<(usize, Arc<BufferTally>)>;

/// The buffers a registry's listeners serve, by base address, each with how many listeners
/// (ranges) hold it.
#[derive(Debug, Default)]
pub(crate) struct BufferTallies {
    map: RwLock<HashMap<usize, (usize, Arc<BufferTally>)>>,
    /// Bumped on every change of `map`, and of the services of the registry these tallies belong
    /// to ([`BufferTallies::changed`]): the one version a dispatcher's copies are checked against.
    generation: AtomicU64,
    /// `map.len()`, read without the lock by [`BufferTallies::is_empty`].
    len: AtomicUsize,
}

/// Keeps a buffer's tally while a listener serves it; dropped (or released) when it stops.
#[derive(Debug)]
pub(crate) struct ServedBuffer {
    /// `None` once released.
    tallies: Option<Arc<BufferTallies>>,
    base: usize,
}

impl ServedBuffer {
    /// Stops counting; whether this was the buffer's last holder (no listener of the registry
    /// serves it any more).
    pub(crate) fn release(mut self) -> bool {
        self.tallies.take().is_some_and(|tallies| tallies.unhold(self.base))
    }
}

impl Drop for ServedBuffer {
    fn drop(&mut self) {
        if let Some(tallies) = self.tallies.take() {
            tallies.unhold(self.base);
        }
    }
}

impl BufferTallies {
    /// One holder of the buffer at `base` lets go; whether it was the last.
    fn unhold(&self, base: usize) -> bool {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        let mut last = false;
        if let Some((holders, _)) = map.get_mut(&base) {
            *holders -= 1;
            if *holders == 0 {
                map.remove(&base);
                last = true;
            }
        }
        // Relaxed: written under the map's lock; readers are ordered after it by the poller's
        // table lock (a buffer is counted here before the poller can hand out its packets).
        self.len.store(map.len(), Ordering::Relaxed);
        // Release: pairs with the Acquire load in `generation`.
        self.generation.fetch_add(1, Ordering::Release);
        last
    }

    /// Counts the buffer at `base` from now on (a second listener of it shares the tally).
    pub(crate) fn serve(self: &Arc<Self>, base: usize, protocol: Protocol, num_packets: u64) -> ServedBuffer {
        let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(base).or_insert_with(|| {
            let tally = BufferTally {
                protocol,
                num_packets,
                counters: Counters::default(),
                reasons: ReasonTally::default(),
            };
            (0, Arc::new(tally))
        });
        entry.0 += 1;
        // Relaxed: as in `unhold`.
        self.len.store(map.len(), Ordering::Relaxed);
        // Release: pairs with the Acquire load in `generation`.
        self.generation.fetch_add(1, Ordering::Release);
        ServedBuffer { tallies: Some(self.clone()), base }
    }

    /// The version of the map and of the registry's services (changes when a buffer is added or
    /// removed, and at [`BufferTallies::changed`]).
    pub(crate) fn generation(&self) -> u64 {
        // Acquire: pairs with the Release increments in `serve`, `unhold` and `changed`, so a
        // cache refreshed after seeing a new generation sees the map and the services it names.
        self.generation.load(Ordering::Acquire)
    }

    /// The registry's services changed (one was registered or removed): a new generation.
    pub(crate) fn changed(&self) {
        // Release: pairs with the Acquire load in `generation`.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The tally of the buffer at `base`, if it is served.
    pub(crate) fn find(&self, base: usize) -> Option<Arc<BufferTally>> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).get(&base).map(|(_, t)| t.clone())
    }

    /// Every tally, sorted by base address, for a dispatcher's cache.
    pub(crate) fn copy(&self) -> SortedTallies {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        let mut tallies: Vec<_> = map.iter().map(|(&base, (_, t))| (base, t.clone())).collect();
        tallies.sort_unstable_by_key(|(base, _)| *base);
        tallies
    }

    /// Whether no buffer is served (then packets are not looked up).
    pub(crate) fn is_empty(&self) -> bool {
        // Relaxed: see `unhold`.
        self.len.load(Ordering::Relaxed) == 0
    }

    /// A snapshot of every served buffer's counters.
    pub(crate) fn snapshot(&self) -> BTreeMap<usize, BufferStats> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        map.iter().map(|(&base, (_, t))| (base, t.snapshot())).collect()
    }
}
