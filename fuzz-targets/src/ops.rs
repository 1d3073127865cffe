//! Target 2: a producer and the host take turns on one buffer, and a hostile device scribbles.
//!
//! Input: byte 0 picks the packet count (`2 + (b & 7)`, so 2..=9); then operations, each an opcode
//! byte (`% OP_COUNT`) and its operands (see [`Run::step`]). At most [`MAX_OPS`] are run.
//!
//! A model follows the buffer: the free-list as a stack of indices, the ready-stack, each packet's
//! state, the tagged pointer each packet carries, and every payload word. While the protocol is
//! intact (no scribble has broken it: see [`Run::scribble`] for which writes do), every operation
//! is checked against it:
//! - a claim returns the model's free-list top, with the tagged pointer the model predicts, and
//!   fails only when the model's free-list is empty; so every claim is a distinct packet;
//! - a drain serves exactly the submitted packets, newest first, once each, reports nothing
//!   malformed, and writes exactly the replies the model predicts (all payload words are compared);
//! - a completed packet's host-error flag and replies (read through the handle for its active
//!   lanes and lanes 0 and 63; every lane's words are compared in memory after each drain) are the
//!   model's;
//! - a released packet goes back on top of the free-list with its tag advanced one step (wrapping
//!   like PROTOCOL.md says; the `RETAG` operation moves tags next to the wrap);
//! - after every operation the free chain and the ready chain in memory are the model's;
//! - at the end every packet is claimable again: none was lost.
//!
//! After a breaking scribble only "no panic, no hang" is asserted (and the drain invariants that
//! hold whatever the memory says), until `REINIT` (or the end of the input) re-initialises the
//! buffer with `stack::View::init` and the model checks again.

use crate::input::Input;
use crate::memory::{
    PayloadWords, RawBuffer, FREE_STACK_WORD, HEADER_WORDS, PAYLOAD_WORDS, READY_STACK_WORD,
};
use crate::services::{serve_model, table, Recorder, MIX, PICKY, REFUSE};
use hostcall_core::lane::lanes;
use hostcall_core::stack::{Claimed, Completed, Submitted, View, CONTROL_READY};
use hostcall_core::{DrainReport, Poller, Protocol, ServiceTable, LANES, LANE_MASK, SLOT_WORDS};

/// Most operations run from one input.
pub(crate) const MAX_OPS: usize = 2000;

pub(crate) const OP_CLAIM: u8 = 0;
pub(crate) const OP_WRITE_LANE: u8 = 1;
pub(crate) const OP_SUBMIT: u8 = 2;
pub(crate) const OP_DRAIN: u8 = 3;
pub(crate) const OP_TRY_COMPLETE: u8 = 4;
pub(crate) const OP_WAIT: u8 = 5;
pub(crate) const OP_RELEASE: u8 = 6;
pub(crate) const OP_DROP_CLAIMED: u8 = 7;
pub(crate) const OP_SCRIBBLE: u8 = 8;
pub(crate) const OP_REINIT: u8 = 9;
pub(crate) const OP_RETAG: u8 = 10;
pub(crate) const OP_COUNT: u8 = 11;

/// The doorbell word `init` writes.
const DOORBELL: u64 = 0x0d00_be11;

/// Target 2: runs the operations `data` encodes against the model (see the module docs of the
/// source for the format). Panics if the core breaks an invariant.
pub fn producer_consumer_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let buffer = RawBuffer::new(2 + usize::from(input.u8() & 7));
    let poller: Poller<1> = Poller::new();
    // SAFETY: `buffer` outlives `poller` (declared before it). It is accessed atomically, except
    // by `RawBuffer`'s snapshot copies, which run on this thread between polls: nothing races.
    unsafe { poller.add(Protocol::Stack, buffer.base(), buffer.len(), buffer.num_packets() as u64) }
        .expect("a valid layout");
    let mut run = Run::new(&buffer, &poller);
    let mut ops = 0;
    while !input.is_empty() && ops < MAX_OPS {
        run.step(&mut input);
        run.check_chains();
        ops += 1;
    }
    run.finish();
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Claimed,
    Submitted,
    Served,
    Completed,
}

/// What the buffer must hold while the protocol is intact.
struct Model {
    /// The free-list, bottom first.
    free: Vec<usize>,
    /// Submitted packets not served yet, in push order.
    ready: Vec<usize>,
    /// The tagged pointer of each packet: on the free-list, or held by its claimer.
    raw: Vec<u64>,
    state: Vec<State>,
    /// Service id and activemask of each packet's last submit.
    request: Vec<(u32, u64)>,
    host_error: Vec<bool>,
    payload: Vec<Box<PayloadWords>>,
    /// A scribble broke the protocol: the model no longer says what the buffer holds.
    broken: bool,
}

impl Model {
    /// The model of a freshly initialised buffer (payloads keep what memory holds).
    fn after_init(buffer: &RawBuffer) -> Self {
        let n = buffer.num_packets();
        let step = tag_step(n);
        let words = buffer.snapshot();
        Self {
            free: (0..n).collect(),
            ready: Vec::new(),
            // PROTOCOL.md: packet 0 is linked as index 0 with tag 1 (not null), the others tag 0.
            raw: (0..n).map(|i| if i == 0 { step } else { i as u64 }).collect(),
            state: vec![State::Free; n],
            request: vec![(0, 0); n],
            host_error: vec![false; n],
            payload: (0..n).map(|i| buffer.payload_of(&words, i)).collect(),
            broken: false,
        }
    }

    /// The free-list top's tagged pointer, or null.
    fn free_top(&self) -> u64 {
        self.free.last().map_or(0, |&i| self.raw[i])
    }
}

fn tag_step(num_packets: usize) -> u64 {
    (num_packets as u64).next_power_of_two()
}

/// PROTOCOL.md's return rule: add one tag step; a result of 0 (null) becomes index 0 with tag 1.
fn advance(raw: u64, step: u64) -> u64 {
    match raw.wrapping_add(step) {
        0 => step,
        next => next,
    }
}

struct Held<'a> {
    handle: Claimed<'a>,
    index: usize,
}

struct InFlight<'a> {
    handle: Submitted<'a>,
    index: usize,
}

struct Done<'a> {
    handle: Completed<'a>,
    index: usize,
}

struct Run<'a> {
    buffer: &'a RawBuffer,
    view: View<'a>,
    poller: &'a Poller<1>,
    table: ServiceTable<'static, 4>,
    model: Model,
    claimed: Vec<Held<'a>>,
    submitted: Vec<InFlight<'a>>,
    completed: Vec<Done<'a>>,
}

/// Picks one of `len` items with a byte.
fn pick(len: usize, byte: u8) -> Option<usize> {
    (len > 0).then(|| usize::from(byte) % len)
}

/// A well-mixed word (splitmix64), for request words.
fn mix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<'a> Run<'a> {
    fn new(buffer: &'a RawBuffer, poller: &'a Poller<1>) -> Self {
        let view = buffer.view();
        view.init(buffer.base() as u64, DOORBELL);
        Self {
            buffer,
            view,
            poller,
            table: table(),
            model: Model::after_init(buffer),
            claimed: Vec::new(),
            submitted: Vec::new(),
            completed: Vec::new(),
        }
    }

    fn n(&self) -> usize {
        self.buffer.num_packets()
    }

    /// Decodes and runs one operation.
    fn step(&mut self, input: &mut Input<'_>) {
        match input.u8() % OP_COUNT {
            OP_CLAIM => self.claim(),
            OP_WRITE_LANE => {
                let (which, lane, seed) = (input.u8(), input.u8(), input.u16());
                self.write_lane(which, usize::from(lane) % LANES, seed);
            }
            OP_SUBMIT => {
                let which = input.u8();
                let service = match input.u8() % 6 {
                    0 | 5 => MIX,
                    1 => PICKY,
                    2 => REFUSE,
                    3 => 0,
                    _ => input.u32(),
                };
                let m = input.u8();
                let activemask = match m & 3 {
                    0 => u64::MAX,
                    1 => 1 << (m >> 2),
                    2 => input.u64(),
                    _ => u64::from(m >> 2),
                };
                self.submit(which, service, activemask);
            }
            OP_DRAIN => {
                let via_poller = input.u8() & 1 == 1;
                self.drain(via_poller);
            }
            OP_TRY_COMPLETE => {
                let which = input.u8();
                self.try_complete(which);
            }
            OP_WAIT => {
                let which = input.u8();
                self.wait(which);
            }
            OP_RELEASE => {
                let which = input.u8();
                self.release(which);
            }
            OP_DROP_CLAIMED => {
                let which = input.u8();
                self.drop_claimed(which);
            }
            OP_SCRIBBLE => {
                let (region, word, kind, value) = (input.u8(), input.u16(), input.u8(), input.u64());
                self.scribble(region, word, kind, value);
            }
            OP_REINIT => self.reinit(),
            OP_RETAG => {
                let k = input.u8();
                self.retag(k);
            }
            _ => unreachable!("opcodes are taken modulo OP_COUNT"),
        }
    }

    fn claim(&mut self) {
        let top_before = self.buffer.load(FREE_STACK_WORD);
        let claimed = self.view.claim();
        let model = &mut self.model;
        match claimed {
            Ok(Some(handle)) => {
                let index = handle.index();
                if !model.broken {
                    assert_eq!(model.free.pop(), Some(index), "a claim takes the free-list top");
                    assert_eq!(top_before, model.raw[index], "packet {index}'s tagged pointer");
                    assert_eq!(model.state[index], State::Free);
                    model.state[index] = State::Claimed;
                }
                self.claimed.push(Held { handle, index });
            }
            Ok(None) => assert!(model.broken || model.free.is_empty(), "claim found no packet"),
            Err(e) => assert!(model.broken, "claim failed on an intact buffer: {e}"),
        }
    }

    fn write_lane(&mut self, which: u8, lane: usize, seed: u16) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let held = &mut self.claimed[i];
        let words: [u64; SLOT_WORDS] = core::array::from_fn(|w| {
            if w == 0 {
                u64::from(seed)
            } else {
                mix64(u64::from(seed) << 3 | w as u64)
            }
        });
        held.handle.write_lane(lane, &words);
        // Exact even when broken: this is the only writer of these words right now.
        self.model.payload[held.index][lane] = words;
    }

    fn submit(&mut self, which: u8, service: u32, activemask: u64) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let Held { handle, index } = self.claimed.swap_remove(i);
        let handle = handle.submit(service, activemask);
        let model = &mut self.model;
        if !model.broken {
            assert_eq!(model.state[index], State::Claimed);
            model.state[index] = State::Submitted;
            model.request[index] = (service, activemask);
            model.ready.push(index);
        }
        self.submitted.push(InFlight { handle, index });
    }

    fn drain(&mut self, via_poller: bool) {
        let (report, served, errors) = if via_poller {
            (self.poller.poll_once(&self.table), None, None)
        } else {
            let mut recorder = Recorder { table: &self.table, served: Vec::new(), errors: Vec::new() };
            let report = self.view.drain(&mut recorder);
            (report, Some(recorder.served), Some(recorder.errors))
        };
        // True whatever the memory holds (single-threaded: nobody sets READY again).
        let n = self.n();
        assert!(report.packets as usize <= n, "{} packets served of {n}", report.packets);
        if let (Some(served), Some(errors)) = (&served, &errors) {
            assert_eq!(report.packets as usize, served.len());
            assert_eq!(report.malformed as usize, errors.len());
            let mut seen = vec![false; n];
            for &index in served {
                let index = index as usize;
                assert!(!std::mem::replace(&mut seen[index], true), "packet {index} served twice");
                let control = self.view.header(index).control.load(hostcall_core::sync::Ordering::Relaxed);
                assert_eq!(control & CONTROL_READY, 0, "served {index} still READY");
            }
        }
        let model = &mut self.model;
        if model.broken {
            return;
        }
        let newest_first: Vec<u32> = model.ready.iter().rev().map(|&i| i as u32).collect();
        if let Some(served) = served {
            assert_eq!(served, newest_first, "a drain serves the submitted packets, newest first");
        }
        assert_eq!(errors.unwrap_or_default(), []);
        let mut expected = DrainReport::default();
        for index in model.ready.drain(..) {
            let (service, activemask) = model.request[index];
            model.host_error[index] = serve_model(service, activemask, &mut model.payload[index]);
            model.state[index] = State::Served;
            expected.packets += 1;
            expected.lane_calls += (activemask & LANE_MASK).count_ones();
        }
        assert_eq!(report, expected);
        self.check_payloads();
    }

    fn try_complete(&mut self, which: u8) {
        let Some(i) = pick(self.submitted.len(), which) else { return };
        let InFlight { handle, index } = self.submitted.swap_remove(i);
        match handle.wait_until(|_| false) {
            Ok(handle) => self.completed(handle, index),
            Err(handle) => {
                let state = self.model.state[index];
                assert!(self.model.broken || state == State::Submitted, "packet {index} is {state:?}");
                self.submitted.push(InFlight { handle, index });
            }
        }
    }

    /// Waits for a packet, serving it first if the model says it is not served yet. The wait is
    /// bounded: an intact buffer must answer at once, a broken one may never.
    fn wait(&mut self, which: u8) {
        let Some(i) = pick(self.submitted.len(), which) else { return };
        if !self.model.broken && self.model.state[self.submitted[i].index] == State::Submitted {
            self.drain(false);
        }
        let InFlight { handle, index } = self.submitted.swap_remove(i);
        match handle.wait_until(|polls| polls < 8) {
            Ok(handle) => self.completed(handle, index),
            Err(handle) => {
                assert!(self.model.broken, "packet {index} was served but its wait did not see it");
                self.submitted.push(InFlight { handle, index });
            }
        }
    }

    fn completed(&mut self, handle: Completed<'a>, index: usize) {
        let model = &mut self.model;
        if !model.broken {
            assert_eq!(model.state[index], State::Served, "packet {index} completed");
            assert_eq!(handle.index(), index);
            assert_eq!(handle.tagged().raw(), model.raw[index], "packet {index}'s tagged pointer");
            assert_eq!(handle.host_error(), model.host_error[index], "packet {index}'s host-error flag");
            // The active lanes, and the edges; the other lanes' words are compared with the model
            // in memory after every drain.
            let activemask = model.request[index].1 | 1 | 1 << (LANES - 1);
            for lane in lanes(activemask) {
                assert_eq!(
                    handle.reply(lane)[..],
                    model.payload[index][lane][..2],
                    "packet {index} lane {lane}"
                );
            }
            model.state[index] = State::Completed;
        }
        self.completed.push(Done { handle, index });
    }

    fn release(&mut self, which: u8) {
        let Some(i) = pick(self.completed.len(), which) else { return };
        let Done { handle, index } = self.completed.swap_remove(i);
        handle.release();
        self.released(index, State::Completed);
    }

    fn drop_claimed(&mut self, which: u8) {
        let Some(i) = pick(self.claimed.len(), which) else { return };
        let Held { handle, index } = self.claimed.swap_remove(i);
        drop(handle);
        self.released(index, State::Claimed);
    }

    /// The model of a release: the packet goes on top of the free-list, its tag one step on.
    fn released(&mut self, index: usize, from: State) {
        let step = tag_step(self.n());
        let model = &mut self.model;
        if model.broken {
            return;
        }
        assert_eq!(model.state[index], from);
        model.state[index] = State::Free;
        model.raw[index] = advance(model.raw[index], step);
        model.free.push(index);
        assert_eq!(self.buffer.load(FREE_STACK_WORD), model.raw[index], "released {index} on top");
    }

    /// A hostile device writes `value` (shaped by `kind`) into one word of the buffer.
    ///
    /// Which writes break the protocol (so the model stops checking): the stack tops; a `next`
    /// word of a packet on a stack (free or submitted); the activemask, service or control word
    /// of a packet between submit and completion. Others must change nothing the host does: the
    /// prefix's `headers`, `payloads`, `doorbell` and `index_mask` (the host keeps its own
    /// copies), the header words of packets that the next submit overwrites, and any payload word
    /// (the model follows it: a request word is read by the service, a reply word by the wave).
    fn scribble(&mut self, region: u8, word: u16, kind: u8, value: u64) {
        let n = self.n();
        let step = tag_step(n);
        let word = usize::from(word);
        let at = match region % 3 {
            0 => word % 6,
            1 => self.buffer.header_word(0) + word % (n * HEADER_WORDS),
            _ => self.buffer.payload_word(0) + word % (n * PAYLOAD_WORDS),
        };
        let old = self.buffer.load(at);
        let value = match kind % 6 {
            0 => value & 0xff,
            1 => (value & 0xff) % (n as u64 + 2) + (value >> 8 & 0xffff) * step, // a tagged pointer
            2 => value,
            3 => (value & 3) << 32 | (value >> 2 & 0xff), // control bits, a small service id
            4 => u64::MAX,
            _ => old ^ 1 << (value % 64), // one bit flipped
        };
        self.buffer.store(at, value);

        let model = &mut self.model;
        let header_start = self.buffer.header_word(0);
        let payload_start = self.buffer.payload_word(0);
        let breaks = if at < header_start {
            at == FREE_STACK_WORD || at == READY_STACK_WORD
        } else if at < payload_start {
            let (index, field) = ((at - header_start) / HEADER_WORDS, (at - header_start) % HEADER_WORDS);
            match (field, model.state[index]) {
                (0, state) => matches!(state, State::Free | State::Submitted),
                (_, state) => matches!(state, State::Submitted | State::Served),
            }
        } else {
            let offset = at - payload_start;
            let (index, slot) = (offset / PAYLOAD_WORDS, offset % PAYLOAD_WORDS);
            model.payload[index][slot / SLOT_WORDS][slot % SLOT_WORDS] = value;
            false
        };
        model.broken |= breaks && value != old;
    }

    /// Drops every handle (a submitted packet is simply forgotten: its wave gave up), then
    /// re-initialises the buffer: the model holds again.
    fn reinit(&mut self) {
        self.claimed.clear();
        self.completed.clear();
        self.submitted.clear();
        self.view.init(self.buffer.base() as u64, DOORBELL);
        self.model = Model::after_init(self.buffer);
    }

    /// Moves the tags of the free packets next to the end of the tag space (as a buffer that has
    /// served for a very long time has them) and relinks the free-list with them, so that the
    /// next releases wrap. The producer's own doing, so the model follows it.
    fn retag(&mut self, k: u8) {
        let n = self.n();
        let step = tag_step(n);
        let model = &mut self.model;
        if model.broken {
            return;
        }
        let last_tag = u64::MAX / step;
        for (j, &index) in model.free.iter().enumerate() {
            let back = (u64::from(k) + j as u64) % 4;
            model.raw[index] = index as u64 + (last_tag - back) * step;
        }
        let mut below = 0;
        for &index in &model.free {
            self.buffer.store(self.buffer.header_word(index), below);
            below = model.raw[index];
        }
        self.buffer.store(FREE_STACK_WORD, model.free_top());
    }

    /// The free chain and the ready chain in memory are the model's.
    fn check_chains(&self) {
        let model = &self.model;
        if model.broken {
            return;
        }
        for (top_word, list) in [(FREE_STACK_WORD, &model.free), (READY_STACK_WORD, &model.ready)] {
            let top = list.last().map_or(0, |&i| model.raw[i]);
            assert_eq!(self.buffer.load(top_word), top, "stack top at word {top_word}");
            let mut below = 0;
            for &index in list {
                assert_eq!(self.buffer.load(self.buffer.header_word(index)), below, "packet {index}'s next");
                below = model.raw[index];
            }
        }
    }

    /// Every payload word is the model's.
    fn check_payloads(&self) {
        let words = self.buffer.snapshot();
        for index in 0..self.n() {
            let start = self.buffer.payload_word(index);
            if words[start..start + PAYLOAD_WORDS] == *self.model.payload[index].as_flattened() {
                continue; // one memcmp: the search below only runs on failure
            }
            let actual = self.buffer.payload_of(&words, index);
            for lane in lanes(u64::MAX) {
                assert_eq!(actual[lane], self.model.payload[index][lane], "packet {index} lane {lane}");
            }
        }
    }

    /// Ends the run: answers and returns everything, then every packet must be claimable once.
    fn finish(mut self) {
        if self.model.broken {
            // Whatever the scribbles did, the cleanup ends; then a fresh start is checked.
            self.drain(false);
            for _ in 0..self.submitted.len() {
                self.try_complete(0);
            }
            self.reinit();
            self.claim();
            self.write_lane(0, 0, 0x5eed);
            self.submit(0, MIX, 1);
            self.wait(0);
            self.release(0);
        }
        assert!(!self.model.broken);
        self.drain(false);
        // Everything submitted is served now: each completes (or the model's asserts fail).
        while !self.submitted.is_empty() {
            self.try_complete(0);
            self.release(0);
        }
        while !self.completed.is_empty() {
            self.release(0);
        }
        while !self.claimed.is_empty() {
            self.drop_claimed(0);
        }
        self.check_chains();
        let n = self.n();
        for _ in 0..n {
            self.claim();
        }
        let mut indices: Vec<usize> = self.claimed.iter().map(|h| h.index).collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..n).collect::<Vec<_>>(), "every packet is claimable: none was lost");
        self.claim(); // and no more: the model asserts it gets none
        assert_eq!(self.claimed.len(), n);
    }
}
