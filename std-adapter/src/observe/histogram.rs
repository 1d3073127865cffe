//! Service time and queue wait as log-scale histograms, and the cheap clock they are read with.
//!
//! The serving path pays two clock reads a packet, so the clock is the processor's time-stamp
//! counter on x86_64 (`rdtsc`, a few nanoseconds, no system call) and [`Instant`] elsewhere (and
//! under Miri, which cannot run `rdtsc`).
//! Durations are kept in ticks, bucketed by their base-2 logarithm; a snapshot converts the
//! bucket bounds to nanoseconds with the tick rate measured against [`Instant`] once per process
//! (a constant-rate counter, as every x86_64 processor of the last decade has, is assumed).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Buckets of a histogram: bucket 0 holds 0 ticks, bucket `b` holds `[2^(b-1), 2^b)` ticks, the
/// last one everything longer, up to 2^63 ticks. A duration of 2^63 ticks or more (a century at
/// 3 GHz: only a clock read that went back gives one) is counted by its low 63 bits: a clock that
/// went back by less than 2^62 ticks lands in the last bucket.
pub const BUCKETS: usize = 40;

/// A clock reading, in ticks of [`ticks`]'s counter.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let ticks: u64;
        // One block that joins the two halves (not `_rdtsc`, which LLVM leaves as two halves
        // until they are used: a reading kept across the service call was two spilled registers
        // and their join after it; 6 instructions a packet, measured in `docs/performance.md`,
        // "The registry's serve, cut again"). Not `pure`: the block stays where it is among the
        // calls around it (the service's), as the intrinsic does; `nomem`: no load or store
        // needs to wait for it.
        // SAFETY: `rdtsc` exists on every x86_64 processor and touches no memory; the block
        // writes only `rax` and `rdx`, both declared, and the flags (not preserved).
        unsafe {
            core::arch::asm!(
                "rdtsc",
                "shl rdx, 32",
                "or rax, rdx",
                out("rax") ticks,
                out("rdx") _,
                options(nomem, nostack),
            );
        }
        ticks
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(any(not(target_arch = "x86_64"), miri))]
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds per tick, measured once (a few milliseconds, the first time a snapshot asks).
fn ns_per_tick() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        if cfg!(any(not(target_arch = "x86_64"), miri)) {
            return 1.0;
        }
        let (start, start_ticks) = (Instant::now(), ticks());
        while start.elapsed() < Duration::from_millis(5) {
            std::hint::spin_loop();
        }
        let (elapsed, elapsed_ticks) = (start.elapsed(), ticks().wrapping_sub(start_ticks));
        elapsed.as_nanos() as f64 / elapsed_ticks.max(1) as f64
    })
}

/// Buckets a live histogram keeps: one per bit length of a duration below 2^63 ticks (0 to 63
/// bits), so that counting one needs no bound; a snapshot folds the buckets from [`BUCKETS`]` - 1`
/// on into the last one. A duration of 2^63 ticks or more is counted by its low 63 bits (see
/// [`live_bucket`]).
const LIVE_BUCKETS: usize = 64;

/// The live buckets of one histogram (one shard of it: see the registry's counters).
#[derive(Debug)]
pub(crate) struct TimeBuckets {
    counts: [AtomicU64; LIVE_BUCKETS],
}

impl Default for TimeBuckets {
    fn default() -> Self {
        Self { counts: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

/// The live bucket of a duration of `ticks`: its bit length (0 for 0; `[2^(b-1), 2^b)` is `b`).
/// One `bsr` of `2 * ticks + 1` (a `lea`), which is never 0: no test for 0 and no bound.
///
/// The doubling drops the top bit: a duration of 2^63 ticks or more (a century at 3 GHz; only a
/// clock read that went back gives one, the service time being the two readings' wrapped
/// difference) is counted in the bucket of its low 63 bits. A clock that went back by less than
/// 2^62 ticks still lands in the last bucket, as it did when durations were saturated; only
/// `[2^63, 2^63 + 2^38)` ticks land lower.
#[inline]
fn live_bucket(ticks: u64) -> usize {
    ((ticks << 1) | 1).ilog2() as usize
}

impl TimeBuckets {
    /// Counts one duration of `ticks`; `alone`: the caller is the only thread that adds to these
    /// buckets (see `counters::add`).
    #[inline]
    pub(crate) fn record(&self, ticks: u64, alone: bool) {
        super::counters::add(&self.counts[live_bucket(ticks)], 1, alone);
    }

    /// Adds these buckets into `into` (the live buckets from `BUCKETS - 1` on into its last).
    pub(crate) fn add_to(&self, into: &mut Histogram) {
        for (bucket, live) in self.counts.iter().enumerate() {
            // Relaxed: statistics, see `record`.
            into.counts[bucket.min(BUCKETS - 1)] += live.load(Ordering::Relaxed);
        }
    }
}

/// A snapshot of durations, in log-scale buckets: how many took up to each power of two ticks.
///
/// ```
/// use hostcall::observe::Histogram;
/// let empty = Histogram::default();
/// assert_eq!(empty.count(), 0);
/// assert_eq!(empty.quantile(0.5), None);
/// assert_eq!(empty.to_string(), "-");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// Durations per bucket (bucket `b` holds `[2^(b-1), 2^b)` ticks; 0 holds 0 ticks).
    pub counts: [u64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Self { counts: [0; BUCKETS] }
    }
}

impl Histogram {
    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The upper bound of bucket `bucket`, as a duration (the last bucket has none: `None`).
    pub fn bucket_bound(bucket: usize) -> Option<Duration> {
        if bucket + 1 >= BUCKETS {
            return None;
        }
        let ticks = (1u64 << bucket) as f64;
        Some(Duration::from_nanos((ticks * ns_per_tick()).ceil() as u64))
    }

    /// At least the fraction `q` (0 to 1) of the durations took at most this long (the bound of
    /// the bucket the quantile falls in); `None` when nothing was counted. The last bucket has no
    /// bound: `Duration::MAX`.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let wanted = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return Some(Self::bucket_bound(bucket).unwrap_or(Duration::MAX));
            }
        }
        Some(Duration::MAX)
    }

    /// Adds `other`'s counts into these.
    pub(crate) fn add(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
    }
}

/// `p50<=X p99<=Y` (bucket bounds), or `-` when nothing was counted.
impl fmt::Display for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Some(p50), Some(p99)) = (self.quantile(0.5), self.quantile(0.99)) else {
            return f.write_str("-");
        };
        write!(f, "p50<={} p99<={}", Short(p50), Short(p99))
    }
}

/// A duration in three significant figures at most: `850ns`, `12.3us`, `4.1ms`, `2.0s`.
struct Short(Duration);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        match ns {
            _ if self.0 == Duration::MAX => f.write_str("inf"),
            0..=999 => write!(f, "{ns}ns"),
            1_000..=999_999 => write!(f, "{:.1}us", ns as f64 / 1e3),
            1_000_000..=999_999_999 => write!(f, "{:.1}ms", ns as f64 / 1e6),
            _ => write!(f, "{:.1}s", ns as f64 / 1e9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_their_power_of_two() {
        let buckets = TimeBuckets::default();
        for ticks in [0, 1, 2, 3, 4, 1000, u64::MAX] {
            buckets.record(ticks, false);
        }
        // Each side of every power of two, up to the 64-bit durations.
        for bits in 1..u64::BITS - 1 {
            assert_eq!(live_bucket(1 << bits), bits as usize + 1, "2^{bits}");
            assert_eq!(live_bucket((1 << bits) - 1), bits as usize, "2^{bits} - 1");
        }
        assert_eq!(live_bucket((1 << 63) - 1), 63);
        // 64 bits: counted by the low 63 (the clock went back): by 1,000 ticks, in the last
        // bucket; exactly 2^63 and a little more, low.
        assert_eq!(live_bucket(0u64.wrapping_sub(1000)), 63, "a clock 1,000 ticks back");
        assert_eq!(live_bucket(1 << 63), 0, "2^63: its low 63 bits are 0");
        assert_eq!(live_bucket((1 << 63) + 5), 3, "2^63 + 5: as 5");
        let mut h = Histogram::default();
        buckets.add_to(&mut h);
        assert_eq!(&h.counts[..4], &[1, 1, 2, 1]);
        assert_eq!(h.counts[10], 1, "1000 ticks: [512, 1024)");
        assert_eq!(h.counts[BUCKETS - 1], 1, "the longest in the last bucket");
        assert_eq!(h.count(), 7);
        assert_eq!(h.quantile(1.0), Some(Duration::MAX));
        assert!(h.quantile(0.5) <= Histogram::bucket_bound(2));
    }

    /// The joined halves are the counter's reading: between two readings of the intrinsic.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[test]
    fn a_clock_reading_is_the_whole_counter() {
        for _ in 0..1000 {
            // SAFETY: `rdtsc` exists on every x86_64 processor and has no memory effects.
            let before = unsafe { core::arch::x86_64::_rdtsc() };
            let reading = ticks();
            // SAFETY: as above.
            let after = unsafe { core::arch::x86_64::_rdtsc() };
            assert!((before..=after).contains(&reading), "{before} <= {reading} <= {after}");
        }
    }

    #[test]
    fn the_clock_advances_and_converts_to_time() {
        let start = ticks();
        std::thread::sleep(Duration::from_millis(2));
        let elapsed = ticks().wrapping_sub(start) as f64 * ns_per_tick();
        assert!((1e6..1e9).contains(&elapsed), "2 ms read as {elapsed} ns");
    }
}
