//! loom models of the hostcall core live in `tests/` and run under `--cfg loom`:
//!
//! ```sh
//! LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!   cargo test -p loom-tests --release
//! ```
//!
//! This library is the models' shared harness, compiled only under `cfg(loom)`: a buffer
//! allocated in parts, `check` (bounded preemptions, executions counted), the producer wave and
//! the host loop written over the core's real producer path (`claim`, `write_lane`, `submit`,
//! `wait_until`, `reply`, `release`) and consumer path (`drain`), and the final checks of the
//! free-list. Nothing here re-implements the protocol.
//!
//! # How the threads wait without hiding the protocol's orderings
//!
//! loom explores busy-wait loops poorly: every poll is a scheduling point, and two threads
//! spinning at once (a wave waiting for its reply while the host polls for work) ping-pong for
//! hundreds of steps, so 2 waves and a host do not finish even with one preemption. The models
//! therefore park where a real wave or host would spin idle, and unpark at points chosen so that
//! the happens-before edge a park/unpark pair creates in loom cannot stand in for one the protocol
//! must provide:
//!
//! - a wave rings the model's `Shared::ring` right after `claim`, *before* it writes its
//!   request, so the edge to the host covers only the pop: the payload and header writes must
//!   still reach the host through the Release push / Acquire `take_all` pair;
//! - the host unparks a wave when `drain` hands it the wave's packet, *before* it writes the reply
//!   and clears READY, so the reply must still reach the wave through the Release store / Acquire
//!   load of `control`; the wave parks once, then polls with the core's `wait_until`.
//!
//! The deliberately broken variants in `tests/broken_orderings.rs` show the models still catch a
//! missing Release.
#![cfg(loom)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

use hostcall_core::__internal::free_list;
use hostcall_core::stack::{Claimed, Completed, Header, Prefix, Submitted, TaggedPtr, View};
use hostcall_core::{DrainError, DrainHandler, Host as _, PacketRequest, Payload, SLOT_WORDS};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread::{self, Thread};
use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::Arc as StdArc;
use std::time::Instant;

pub use hostcall_core::LANES;

/// The preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_PREEMPTIONS: usize = 3;

/// Runs `model` under every interleaving loom explores, with the preemption bound from
/// `LOOM_MAX_PREEMPTIONS` (default [`DEFAULT_PREEMPTIONS`]), and prints one line: the model's
/// name, the executions explored, the bound and the wall time (shown with `--nocapture`).
pub fn check(name: &str, model: impl Fn() + Sync + Send + 'static) {
    check_bounded(name, usize::MAX, model);
}

/// `check` with the preemption bound capped at `max_bound`, for a model too large to explore
/// under the bound CI asks for.
pub fn check_bounded(name: &str, max_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(DEFAULT_PREEMPTIONS).min(max_bound);
    builder.preemption_bound = Some(bound);
    let executions = StdArc::new(StdAtomicUsize::new(0));
    let counter = executions.clone();
    let start = Instant::now();
    // Relaxed: a count of the executions, read after `check` has run them all (on this thread).
    builder.check(move || {
        counter.fetch_add(1, StdOrdering::Relaxed);
        model();
    });
    println!(
        "loom model {name}: {} executions, preemption bound {bound}, {:.2} s",
        executions.load(StdOrdering::Relaxed),
        start.elapsed().as_secs_f64()
    );
}

/// What the threads of one model share: a buffer of `n` packets allocated in parts (the core's
/// own structs, initialised with [`View::init`]) and the model's doorbell.
#[derive(Debug)]
pub struct Shared {
    prefix: Prefix,
    headers: Vec<Header>,
    payloads: Vec<Payload>,
    /// Requests announced by waves through `Shared::ring`. Relaxed: it only tells the host
    /// whether it may park; the unpark that follows each increment is what wakes it.
    rung: AtomicUsize,
    host: Thread,
}

impl Shared {
    /// `n` packets; the calling thread is the host (models without a host never ring).
    pub fn new(n: usize) -> Self {
        let shared = Self {
            prefix: Prefix::default(),
            headers: (0..n).map(|_| Header::default()).collect(),
            payloads: (0..n).map(|_| Payload::default()).collect(),
            rung: AtomicUsize::new(0),
            host: thread::current(),
        };
        shared.view().init(0, 0);
        shared
    }

    /// A view of the buffer.
    pub fn view(&self) -> View<'_> {
        View::from_parts(&self.prefix, &self.headers, &self.payloads).expect("a valid buffer")
    }

    /// A wave tells the host a request is coming. Call it after `claim` and before writing the
    /// request (see the crate docs): the unpark's happens-before edge then covers only the claim.
    /// The count goes first: a host that sees every announced request served may park, and the
    /// unpark that follows wakes it.
    pub fn ring(&self) {
        self.rung.fetch_add(1, Ordering::Relaxed);
        self.host.unpark();
    }
}

/// A phase buffer allocated in parts (loom's atomics cannot view raw memory), initialised: what
/// the phase models and the poller's model run on. The core's own type, the one its phase tests
/// use too.
pub use hostcall_core::__internal::PhaseBuffer;

/// Both lanes of the shrunk loom wave are active.
pub const ACTIVEMASK: u64 = (1 << LANES) - 1;

/// The id of one lane's request: unique per (wave, call, lane) for up to `calls_max` calls.
pub fn request_id(wave: usize, call: usize, lane: usize, calls_max: usize) -> u64 {
    ((wave * calls_max + call) * LANES + lane) as u64
}

/// The request words a lane sends: all derived from its id, so the host tells a torn or stale
/// slot from a real request.
pub fn request_words(id: u64) -> [u64; SLOT_WORDS] {
    core::array::from_fn(|word| (id << 8 | word as u64) ^ 0x5a5a_0000)
}

/// The id a request was made from, or `None` if its words are not one lane's request.
pub fn decode_request(words: &[u64; SLOT_WORDS]) -> Option<u64> {
    let id = (words[0] ^ 0x5a5a_0000) >> 8;
    (request_words(id) == *words).then_some(id)
}

/// The reply the host gives to request `id`: unlike any other id's reply and any request word.
pub fn reply_for(id: u64) -> [u64; 2] {
    [1000 + id, !id]
}

/// The host's side of the models: serves every lane with [`reply_for`] its id, counts how often
/// each id was served, and panics on any [`DrainError`] (a correct producer never causes one).
#[derive(Debug)]
pub struct Host {
    /// `served[id]`: how many times request `id` was answered.
    pub served: Vec<u32>,
    /// Packets served so far.
    pub packets: usize,
    /// `waves[w]`: the thread of wave `w` (the service id it submits with), unparked when its
    /// packet is handed to the host.
    waves: Vec<Thread>,
}

impl Host {
    /// A host for request ids below `ids`, serving the waves whose threads are `waves`.
    pub fn new(ids: usize, waves: Vec<Thread>) -> Self {
        Self { served: vec![0; ids], packets: 0, waves }
    }

    /// Requests served so far.
    pub fn total(&self) -> u32 {
        self.served.iter().sum()
    }

    /// Drains until `packets` packets have been served. While the ready-stack is empty it parks
    /// if every announced request was served, and yields otherwise (a wave is between its ring
    /// and its push). The emptiness test only reads the word; serving is `drain`'s alone.
    pub fn serve(&mut self, shared: &Shared, packets: usize) {
        let buffer = shared.view();
        while self.packets < packets {
            // Relaxed: a stale value costs one more pass, or a drain that finds nothing.
            if buffer.prefix().ready_stack.load(hostcall_core::sync::Ordering::Relaxed) == 0 {
                if shared.rung.load(Ordering::Relaxed) == self.packets {
                    thread::park();
                } else {
                    thread::yield_now();
                }
                continue;
            }
            let report = buffer.host().drain(self);
            self.packets += report.packets as usize;
        }
    }

    /// Asserts every request of waves doing `calls[w]` calls each was answered exactly once
    /// (and nothing else was answered).
    pub fn assert_each_served_once(&self, calls: &[usize]) {
        let calls_max = calls.iter().copied().max().unwrap_or(0);
        let mut expected = vec![0; self.served.len()];
        for (wave, &n) in calls.iter().enumerate() {
            for call in 0..n {
                for lane in 0..LANES {
                    expected[request_id(wave, call, lane, calls_max) as usize] = 1;
                }
            }
        }
        assert_eq!(self.served, expected, "times each request id was served");
    }
}

impl DrainHandler for Host {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        assert_eq!(packet.activemask(), ACTIVEMASK);
        // Before any reply is written: see the crate docs.
        self.waves[packet.service() as usize].unpark();
        let lanes: Vec<usize> = packet.lanes().collect();
        for lane in lanes {
            let words = packet.request(lane);
            let id = decode_request(&words).expect("a request written by one lane, not torn");
            let served = &mut self.served[id as usize];
            *served += 1;
            assert_eq!(*served, 1, "request {id} served twice");
            packet.reply(lane, reply_for(id));
        }
    }

    fn malformed(&mut self, error: DrainError) {
        panic!("drain reported {error}");
    }
}

/// Claims a packet, yielding while the free-list is empty (more waves than packets).
pub fn claim_retrying<'a>(buffer: &View<'a>) -> Claimed<'a> {
    loop {
        match buffer.claim() {
            Ok(Some(packet)) => return packet,
            Ok(None) => thread::yield_now(),
            Err(e) => panic!("claim: {e}"),
        }
    }
}

/// Waits for the reply with the core's `wait_until`: parks before the second poll (the host
/// unparks the wave when it starts serving the packet), then polls.
pub fn wait_parking(submitted: Submitted<'_>) -> Completed<'_> {
    let parked_once = |polls: u32| {
        if polls == 0 {
            thread::park();
        }
        true
    };
    match submitted.wait_until(parked_once) {
        Ok(done) => done,
        Err(_) => unreachable!("the predicate never gives up"),
    }
}

/// One producer wave `wave`: `calls` hostcalls through the core's producer path, each checked to
/// read back this wave's own reply. Returns the tagged pointer of every packet it claimed.
pub fn wave(shared: &Shared, wave: usize, calls: usize, calls_max: usize) -> Vec<TaggedPtr> {
    let buffer = shared.view();
    let mut claimed = Vec::with_capacity(calls);
    for call in 0..calls {
        let mut packet = claim_retrying(&buffer);
        shared.ring();
        for lane in 0..LANES {
            packet.write_lane(lane, &request_words(request_id(wave, call, lane, calls_max)));
        }
        let done = wait_parking(packet.submit(wave as u32, ACTIVEMASK));
        assert!(!done.host_error());
        for lane in 0..LANES {
            let id = request_id(wave, call, lane, calls_max);
            assert_eq!(done.reply(lane), reply_for(id), "wave {wave} call {call} lane {lane}: not its reply");
        }
        claimed.push(done.tagged());
        done.release();
    }
    claimed
}

/// The pointer packet `index` has on the free-list right after `init` (PROTOCOL.md section 1:
/// packet 0 carries tag 1 so it is not null, the others tag 0).
pub fn initial_ptr(buffer: &View<'_>, index: usize) -> TaggedPtr {
    let g = buffer.geometry();
    let raw = if index == 0 { g.tag_step() } else { index as u64 };
    g.decode(raw).expect("in range").expect("not null")
}

/// After every thread is joined: the free-list holds every packet exactly once, and each packet's
/// tag advanced by exactly one step per claim. `claims` holds every claim's tagged pointer; the
/// claims of one packet must be its initial pointer advanced 0, 1, 2... times, so each reuse of a
/// packet was claimed with a strictly larger tag than the use before.
pub fn assert_free_list_advanced(buffer: &View<'_>, claims: &[TaggedPtr]) {
    let g = buffer.geometry();
    let n = g.num_packets() as usize;
    let mut on_free_list = vec![None; n];
    for link in free_list(buffer).take_all() {
        let ptr = link.expect("a well-formed free-list");
        assert!(on_free_list[ptr.index()].replace(ptr).is_none(), "packet {} twice", ptr.index());
    }
    for (index, last) in on_free_list.into_iter().enumerate() {
        let mut tags: Vec<u64> = claims.iter().filter(|p| p.index() == index).map(|&p| g.tag(p)).collect();
        tags.sort_unstable();
        let mut expected = initial_ptr(buffer, index);
        for &tag in &tags {
            assert_eq!(tag, g.tag(expected), "packet {index}: claimed with tags {tags:?}");
            expected = g.advance_tag(expected);
        }
        let last = last.unwrap_or_else(|| panic!("packet {index} lost"));
        assert_eq!(last, expected, "packet {index}: final pointer after {} claims", tags.len());
    }
}
