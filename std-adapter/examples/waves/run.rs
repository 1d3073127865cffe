//! The waves: one thread each, calling until done or interrupted, and the counts they share.

use crate::calls::{request, service_of_call, wrong_lanes};
use crate::cli;
use crate::options::Options;
use crate::printf::print_from_lanes;
use hostcall::{HostcallBuffer, Wave};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the waves have done so far, read by the progress line while they run and by the summary
/// after they are joined.
///
/// Both counters are Relaxed: each is a count on its own, ordered with nothing else. The progress
/// line's loads may lag (they are a display); the summary's loads come after every wave thread
/// is joined, and the join orders each thread's adds before them.
#[derive(Clone, Default)]
pub(crate) struct Counts {
    /// Calls finished (answered, failed or printed).
    pub(crate) done: Arc<AtomicU64>,
    /// Wrong or missing lane replies.
    pub(crate) errors: Arc<AtomicU64>,
}

impl Counts {
    /// One call finished with `wrong` lanes wrong.
    fn add_call(&self, wrong: u64) {
        // Relaxed: a count, see the type's docs.
        self.errors.fetch_add(wrong, Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts of joined waves: `(done, errors)`.
    pub(crate) fn after_join(&self) -> (u64, u64) {
        // Relaxed: the joins ordered every add before these loads (see the type's docs).
        (self.done.load(Ordering::Relaxed), self.errors.load(Ordering::Relaxed))
    }
}

/// Runs `o.waves` waves on `buffers` until each made `o.calls` calls or an interrupt stopped it;
/// returns the latencies (ns) of every timed call, unsorted.
///
/// The waves split between the buffers in contiguous blocks ([`buffer_of`]). A wave claims from
/// the index of its creation in the process, so a block's waves start at distinct packets of
/// their buffer, as one buffer's waves do.
pub(crate) fn run_waves(o: &Options, buffers: &[Arc<HostcallBuffer>], counts: &Counts) -> Vec<u64> {
    let threads: Vec<_> = (0..o.waves)
        .map(|w| {
            let buffer = &buffers[buffer_of(w, o.waves, buffers.len())];
            let wave = Wave::new(buffer.clone(), o.lanes);
            let (counts, calls, printf_every) = (counts.clone(), o.calls, o.printf_every);
            std::thread::spawn(move || one_wave(&wave, w, calls, printf_every, &counts))
        })
        .collect();
    threads.into_iter().flat_map(|t| t.join().expect("wave thread")).collect()
}

/// The buffer of wave `w` of `waves` when there are `buffers`: contiguous blocks, sizes differing by
/// at most one, none larger than `ceil(waves / buffers)` (each buffer's default packet count).
pub(crate) fn buffer_of(w: u64, waves: u64, buffers: usize) -> usize {
    (w * buffers as u64 / waves) as usize
}

/// Wave `w`'s calls: every `printf_every`-th a printf (0: none), the others cycling through the
/// services; returns the latencies (ns) of the non-printf calls.
fn one_wave(wave: &Wave, w: u64, calls: u64, printf_every: u64, counts: &Counts) -> Vec<u64> {
    let mut latencies = Vec::with_capacity(calls.min(1 << 20) as usize);
    for c in 0..calls {
        if cli::progress::interrupted() {
            break;
        }
        if printf_every > 0 && c % printf_every == 0 {
            counts.add_call(print_from_lanes(wave, w, c));
            continue;
        }
        let (service, seed) = (service_of_call(c), w << 40 | c);
        let started = std::time::Instant::now();
        let reply = wave.call(service, |lane| request(service, seed, lane));
        latencies.push(started.elapsed().as_nanos() as u64);
        let wrong = match reply {
            Ok(reply) => wrong_lanes(wave, service, seed, &reply),
            Err(e) => {
                eprintln!("wave {w} call {c}: {e}");
                u64::from(wave.activemask().count_ones())
            }
        };
        counts.add_call(wrong);
    }
    latencies
}

#[cfg(test)]
mod tests {
    use super::buffer_of;

    #[test]
    fn waves_split_into_contiguous_blocks_no_larger_than_a_buffer() {
        for (waves, buffers) in [(64, 8), (6, 4), (5, 2), (40, 3), (1, 1), (3, 4), (1024, 64)] {
            let of: Vec<usize> = (0..waves).map(|w| buffer_of(w, waves, buffers)).collect();
            assert!(of.windows(2).all(|pair| pair[1] == pair[0] || pair[1] == pair[0] + 1), "{of:?}");
            assert!(of.iter().all(|&b| b < buffers), "{of:?}");
            for b in 0..buffers {
                let block = of.iter().filter(|&&x| x == b).count() as u64;
                assert!(block <= waves.div_ceil(buffers as u64), "{waves} waves, {buffers} buffers: {of:?}");
                assert!(waves < buffers as u64 || block > 0, "every buffer has waves: {of:?}");
            }
        }
    }
}
