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
use crate::memory::{PayloadWords, RawBuffer};
use crate::services::{table, MIX, PICKY, REFUSE};
use hostcall_core::stack::{Claimed, Completed, Submitted, View};
use hostcall_core::{Poller, Protocol, Registration, ServiceTable, LANES};

mod checks;
mod hostile;
mod protocol;

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
    unsafe {
        poller.add(
            Registration::new(Protocol::Stack, buffer.base(), buffer.len(), buffer.num_packets() as u32)
                .unwrap(),
        )
    }
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
}
