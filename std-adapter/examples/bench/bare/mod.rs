//! Bare-algorithm rows: ROCm's two hostcall algorithms alone, no project code on either side, in
//! the memory the project's buffers use, beside the full paths (as `llvm_rpc_1l` models LLVM's).
//!
//! - `bare_1l_stack` (`stack.rs`): ROCm's stack algorithm. The device pops the free-list, fills
//!   lane 0, sets READY, pushes the ready-stack, rings, spins on READY, reads the reply and
//!   pushes the packet back with its tag bumped; the host exchanges the ready-stack with 0 and
//!   serves every packet of the chain in place.
//! - `bare_1l_phase` (`phase.rs`): ROCm's phase algorithm. The device sets its `occupied` bit,
//!   fills lane 0, flips `device_phase`, rings, spins on `host_phase`, reads, clears the bit; the
//!   host scans both phase words of every packet and answers by copying `device_phase`.
//!
//! No checks, no registry, no poller, no counters: what the algorithm itself costs, so that the
//! ratio of a full path to its bare row (printed by [`print_ratios`]) is what the project's code
//! adds. The service is the bench's `echo`, called inline by the host.

use crate::latency::Line;
use crate::measure::{pinned_pair, round_trips, Sample};
use crate::options::Options;
use crate::report::Spread;
use crate::rows::Row;
use crate::{echo, request};
use hostcall_core::{LANES, SLOT_WORDS};
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

mod phase;
mod stack;

pub(crate) use phase::bare_phase;
pub(crate) use stack::bare_stack;

/// Each full path and the bare row it is measured against.
pub(crate) const PAIRS: [(&str, &str); 4] = [
    ("hostcall_1l_spinning", "bare_1l_stack"),
    ("core_1l_spinning", "bare_1l_stack"),
    ("hostcall_1l_phase", "bare_1l_phase"),
    ("core_1l_phase", "bare_1l_phase"),
];

/// The bare row a row `name` is compared to, if any (so `--only` runs it too).
pub(crate) fn bare_row_of(name: &str) -> Option<&'static str> {
    PAIRS.iter().find(|(full, _)| *full == name).map(|&(_, bare)| bare)
}

/// One packet's payload, as both ABIs lay it out: 64 slots of 8 words, the reply over words 0
/// and 1 of the slot.
pub(crate) type Payload = [[AtomicU64; SLOT_WORDS]; LANES];

/// A zeroed payload.
pub(crate) fn payload() -> Payload {
    std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0)))
}

/// Host: serves every lane of `activemask` in place (its reply over the first words of its slot).
/// Relaxed, all: the protocol's flag orders them.
pub(crate) fn serve_in_place(payload: &Payload, activemask: u64) {
    let mut lanes = activemask;
    while lanes != 0 {
        let slot = &payload[lanes.trailing_zeros() as usize];
        lanes &= lanes - 1;
        let words = std::array::from_fn(|w| slot[w].load(Ordering::Relaxed));
        for (word, value) in slot.iter().zip(echo(&words)) {
            word.store(value, Ordering::Relaxed);
        }
    }
}

/// One bare row: `host` serves `buffer` on the pinned peer thread while the caller times
/// `call(buffer, request, doorbell)` round trips, each checking its reply; `call` fills lane 0
/// with the request, rings `doorbell` after the submit (ROCm's signal add; the spinning host never
/// reads it) and returns lane 0's reply.
pub(crate) fn run<B: Send + Sync + 'static>(
    o: &Options,
    buffer: Arc<B>,
    host: fn(&B) -> bool,
    mut call: impl FnMut(&B, &[u64; SLOT_WORDS], &Line) -> [u64; 2],
) -> Sample {
    let doorbell = Line::default();
    let peer = {
        let buffer = buffer.clone();
        Peer::start(o, move || host(&buffer))
    };
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let words = request(i, 0);
        assert_eq!(call(&buffer, &words, &doorbell), echo(&words));
    });
    peer.stop();
    sample
}

/// Device: stores `words` into `slot` (Relaxed: the submit publishes them).
pub(crate) fn fill(slot: &[AtomicU64; SLOT_WORDS], words: &[u64; SLOT_WORDS]) {
    for (word, &value) in slot.iter().zip(words) {
        word.store(value, Ordering::Relaxed);
    }
}

/// Device: the reply words of `slot` (Relaxed: the wait's Acquire ordered them).
pub(crate) fn reply(slot: &[AtomicU64; SLOT_WORDS]) -> [u64; 2] {
    [slot[0].load(Ordering::Relaxed), slot[1].load(Ordering::Relaxed)]
}

/// The host thread of a bare row, pinned as the pair's peer: calls `serve_once` until stopped,
/// with one CPU pause after each call that found nothing (as the listener's idle spin does).
struct Peer {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

impl Peer {
    fn start(o: &Options, mut serve_once: impl FnMut() -> bool + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = pinned_pair(o, || {
            let stop = stop.clone();
            thread::spawn(move || {
                // Relaxed: the flag carries no data.
                while !stop.load(Ordering::Relaxed) {
                    if !serve_once() {
                        spin_loop();
                    }
                }
            })
        });
        Self { stop, thread }
    }

    fn stop(self) {
        // Relaxed: the flag carries no data.
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// Per-round p50 ratios of each full path to its bare row, for the pairs that both ran.
fn ratios(rows: &[Row]) -> Vec<(&'static str, &'static str, Spread)> {
    let p50 = |s: &Sample| match *s {
        Sample::Latency { p50, .. } => p50,
        _ => f64::NAN,
    };
    let samples = |name: &str| rows.iter().find(|r| r.name == name).map(|r| &r.samples);
    PAIRS
        .iter()
        .filter_map(|&(full, bare)| {
            let (f, b) = (samples(full)?, samples(bare)?);
            let per_round = f.iter().zip(b).map(|(f, b)| p50(f) / p50(b)).collect();
            Spread::of(per_round).map(|r| (full, bare, r))
        })
        .collect()
}

/// Prints each full path's p50 ratio to its bare row (taken within each round; median and
/// min..max over rounds), as lines, a table and the goal of at most 1.0.
pub(crate) fn print_ratios(rows: &[Row]) {
    let ratios = ratios(rows);
    if ratios.is_empty() {
        return;
    }
    println!();
    for (full, bare, r) in &ratios {
        println!("bench: {full} ratio_to_{bare}={:.2}", r.median);
    }
    println!();
    println!("| full path | bare row | p50 / bare p50 |");
    println!("| --- | --- | ---: |");
    for (full, bare, r) in &ratios {
        println!("| {full} | {bare} | {} |", r.show(2));
    }
    println!();
    for (full, bare, r) in ratios.iter().filter(|(full, ..)| full.starts_with("hostcall_")) {
        let verdict = if r.median <= 1.0 { "met" } else { "missed" };
        println!("goal: {full} p50 <= 1.0 x {bare} p50: {:.2} -> {verdict}", r.median);
    }
}
