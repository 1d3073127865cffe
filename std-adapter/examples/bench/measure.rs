//! Measuring one row: what a sample is, latency windows, and pinning a latency pair.

use crate::options::Options;
use crate::pin;
use std::time::{Duration, Instant};

/// What one row measured in one round.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sample {
    /// Round-trip percentiles in ns, over the share `clean` of the round trips (see
    /// [`round_trips`]).
    Latency { p50: f64, p99: f64, clean: f64 },
    /// Wave calls (or channel requests) per second, lane calls per second, and the process's CPU
    /// time (all threads, user + system) per wave call in ns.
    Throughput { calls: f64, lanes: f64, cpu_ns: f64 },
    /// ns per packet of `lanes` lanes, of what `timed` says.
    Cost { ns_per_packet: f64, lanes: u32, timed: Timed },
}

/// What a listener-cost row times.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Timed {
    /// The whole loop on one thread: claim, fill, submit, a poll session's `poll_once`, read the
    /// replies, release.
    Loop,
    /// The poll alone, in that loop (one packet per poll, requests the listener's own
    /// thread just wrote: hot); `loop_ns` is the whole loop per packet, timed without the clock
    /// reads around the poll.
    Poll { loop_ns: f64 },
    /// One `Poller::poll_once` serving `packets` packets that another thread filled (cold).
    Cold { packets: u32 },
}

/// Round trips per window of a latency measurement, and the longest a window lasts.
pub(crate) const WINDOW_SAMPLES: usize = 200;
pub(crate) const WINDOW_TIME: Duration = Duration::from_millis(5);
/// A window is clean when its median is within this factor of the best window's median.
pub(crate) const CLEAN_FACTOR: f64 = 2.0;

/// Times `one()` round trips: a tenth of the samples as warm-up, then up to `samples` timed ones
/// within `budget`, in windows of [`WINDOW_SAMPLES`] (or [`WINDOW_TIME`]).
///
/// On a shared machine a spinning pair of threads sometimes shares one core, and a round trip
/// then takes a scheduler time slice (milliseconds) instead of a few hundred nanoseconds. Such
/// stretches say nothing about the code, so percentiles are taken over the clean windows only:
/// those whose median is within [`CLEAN_FACTOR`] of the best window's (a window of at least a
/// quarter of [`WINDOW_SAMPLES`]). Every row gets the same rule; the share of round trips kept is
/// reported as `clean`.
pub(crate) fn round_trips(o: &Options, mut one: impl FnMut()) -> Sample {
    let warmup = (o.samples / 10).max(100);
    let started = Instant::now();
    for _ in 0..warmup {
        one();
        if started.elapsed() > o.latency_budget / 4 {
            break;
        }
    }
    let mut windows: Vec<Vec<u64>> = Vec::new();
    let mut total = 0;
    let started = Instant::now();
    while total < o.samples && started.elapsed() < o.latency_budget {
        let mut window = Vec::with_capacity(WINDOW_SAMPLES);
        let window_started = Instant::now();
        while window.len() < WINDOW_SAMPLES && window_started.elapsed() < WINDOW_TIME {
            let t = Instant::now();
            one();
            window.push(t.elapsed().as_nanos() as u64);
        }
        total += window.len();
        if window.is_empty() {
            continue; // descheduled for the whole window (a loaded machine): nothing to keep
        }
        window.sort_unstable();
        windows.push(window);
    }
    let median = |w: &Vec<u64>| w[w.len() / 2] as f64;
    let best = windows.iter().filter(|w| w.len() >= WINDOW_SAMPLES / 4).map(median).min_by(f64::total_cmp);
    let mut kept: Vec<u64> = windows
        .iter()
        .filter(|w| best.map_or(true, |best| median(w) <= best * CLEAN_FACTOR))
        .flatten()
        .copied()
        .collect();
    kept.sort_unstable();
    let pct = |p: f64| kept[((kept.len() - 1) as f64 * p).round() as usize] as f64;
    Sample::Latency { p50: pct(0.50), p99: pct(0.99), clean: kept.len() as f64 / total as f64 }
}

/// Starts a latency pair's peer pinned to one CPU and pins the caller to another (see [`pin`]);
/// returns what `start_peer` returned. The caller is unpinned by [`unpin`].
pub(crate) fn pinned_pair<T>(o: &Options, start_peer: impl FnOnce() -> T) -> T {
    let cpus = pin::allowed_at_start();
    if !o.pin || cpus.len() < 2 {
        return start_peer();
    }
    pin::set(&cpus[1..2]);
    let peer = start_peer();
    pin::set(&cpus[0..1]);
    peer
}

/// Lets the calling thread run anywhere again.
pub(crate) fn unpin(o: &Options) {
    let cpus = pin::allowed_at_start();
    if o.pin && cpus.len() >= 2 {
        pin::set(cpus);
    }
}

/// The backoff a spinning producer passes to `Submitted::wait`: none, as `wait` already pauses
/// the CPU once per poll (the floor's loop pauses once per poll too).
pub(crate) fn no_backoff() {}
