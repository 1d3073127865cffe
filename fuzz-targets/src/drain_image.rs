//! Target 1: the host drains a buffer whose every byte the device chose.
//!
//! Input: byte 0 picks the packet count (`2 + (b & 0x0f)`, so 2..=17) and, with bit `0x10`, whether
//! the image is XORed onto an initialised buffer (zeros then mean "a fresh buffer", which makes
//! near-valid states cheap to reach) or copied over zeroed memory. Then the image of the prefix
//! and the headers (`payloads_offset(n)` bytes from offset 0, little-endian; zero-padded when
//! short); then payload slots, as records of a packet byte (`% n`), a lane byte (`% 64`) and up
//! to 64 bytes of the slot's 8 words (a whole image would put most payload bytes kilobytes deep
//! into the input). Tagged pointers, cycles, out-of-range indices, activemasks, service ids and
//! reserved control bits are whatever the bytes say.
//!
//! Checked, against an independent reference model of the drain ([`model_drain`]):
//! - no panic; the walk ends;
//! - the served packets, in order, and the malformed reports, in order, are the model's;
//!   so each packet is served at most once per drain and at most `num_packets` are served;
//! - READY reads clear afterwards on every served packet;
//! - nothing else in the buffer changed except the ready-stack top (now 0), the served packets'
//!   `control` words (0 or the host-error flag) and the first two words of their active lanes (the
//!   replies the service table gives);
//! - `Poller::poll_once` over the same image with the same service table does exactly the same, and
//!   a second poll finds nothing.

use crate::input::Input;
use crate::memory::{RawBuffer, PAYLOAD_WORDS, READY_STACK_WORD};
use crate::services::{serve_model, table, Recorder};
use hostcall_core::stack::{CONTROL_HOST_ERROR, CONTROL_READY};
use hostcall_core::{
    ChainError, DrainError, DrainReport, Host as _, Poller, Protocol, Registration, LANES, LANE_MASK,
    SLOT_WORDS,
};

/// Bit of byte 0: XOR the image onto an initialised buffer instead of copying it over zeros.
pub(crate) const XOR_ON_INIT: u8 = 0x10;
/// The doorbell word `init` writes (the host never reads it back).
const DOORBELL: u64 = 0x0d00_be11;

/// Target 1: interprets `data` as a packet count and a buffer image and drains it (see the
/// module docs of the source for the format). Panics if the host breaks an invariant.
pub fn drain_buffer_image(data: &[u8]) {
    let mut input = Input::new(data);
    let head = input.u8();
    let num_packets = 2 + usize::from(head & 0x0f);
    let buffer = RawBuffer::new(num_packets);
    let view = buffer.view();
    let xor = head & XOR_ON_INIT != 0;
    if xor {
        view.init(buffer.base() as u64, DOORBELL);
    }
    apply_image(&buffer, &mut input, xor);
    let before = buffer.snapshot();
    let expected = model_drain(&buffer, &before);
    let table = table();

    let mut recorder = Recorder { table: &table, served: Vec::new(), errors: Vec::new() };
    let report = view.host().drain(&mut recorder);
    check_invariants(&buffer, &recorder.served, report);
    assert_eq!(recorder.served, expected.served, "served packets, in order");
    assert_eq!(recorder.errors, expected.errors, "malformed reports, in order");
    assert_eq!(report, expected.report);
    assert_words(&buffer.snapshot(), &expected.words);

    // The same image through the poller, as a firmware main loop would serve it.
    buffer.restore(&before);
    let poller: Poller<1> = Poller::new();
    // SAFETY: `buffer` outlives `poller` (declared before it). It is accessed atomically, except
    // by `RawBuffer`'s snapshot copies, which run on this thread between polls: nothing races.
    unsafe {
        poller
            .add(Registration::new(Protocol::Stack, buffer.base(), buffer.len(), num_packets as u32).unwrap())
    }
    .expect("a valid layout");
    assert_eq!(poller.poll_once(&table), report, "the poller drains like the view");
    assert_words(&buffer.snapshot(), &expected.words);
    assert_eq!(poller.poll_once(&table), DrainReport::default(), "a drain empties the ready-stack");
    poller.remove(buffer.base()).expect("registered above");
}

/// Copies (or XORs) the prefix and header image, then the payload slot records, over the buffer.
fn apply_image(buffer: &RawBuffer, input: &mut Input<'_>, xor: bool) {
    let apply = |word: usize, value: u64| {
        let old = if xor { buffer.load(word) } else { 0 };
        buffer.store(word, old ^ value);
    };
    for word in 0..buffer.payload_word(0) {
        apply(word, input.u64());
    }
    while !input.is_empty() {
        let packet = usize::from(input.u8()) % buffer.num_packets();
        let lane = usize::from(input.u8()) % LANES;
        let slot = buffer.payload_word(packet) + lane * SLOT_WORDS;
        for word in slot..slot + SLOT_WORDS {
            apply(word, input.u64());
        }
    }
}

/// What a correct drain of an image does.
struct Expected {
    served: Vec<u32>,
    errors: Vec<DrainError>,
    report: DrainReport,
    /// The whole buffer afterwards.
    words: Vec<u64>,
}

/// The drain, restated from PROTOCOL.md section 1 and the trust model of PROTOCOL.md section 7: take the
/// ready-stack (its top becomes 0), walk at most `num_packets` links with the host's own index
/// mask, stop at an index outside the buffer or at a link past the limit, skip packets without
/// READY, serve the others and store their `control` without READY.
fn model_drain(buffer: &RawBuffer, before: &[u64]) -> Expected {
    let n = buffer.num_packets();
    let index_mask = (n as u64).next_power_of_two() - 1;
    let mut words = before.to_vec();
    words[READY_STACK_WORD] = 0;
    let (mut served, mut errors, mut report) = (Vec::new(), Vec::new(), DrainReport::default());
    let mut next = before[READY_STACK_WORD];
    let mut steps = 0;
    while next != 0 {
        let index = next & index_mask;
        if index >= n as u64 {
            errors.push(DrainError::Chain(ChainError::IndexOutOfRange { index }));
            break;
        }
        if steps == n {
            errors.push(DrainError::Chain(ChainError::ChainTooLong { limit: n as u32 }));
            break;
        }
        steps += 1;
        let index = index as usize;
        let header = buffer.header_word(index);
        next = words[header]; // the drain never writes `next`
        let (service, control) = (words[header + 2] as u32, (words[header + 2] >> 32) as u32);
        if control & CONTROL_READY == 0 {
            errors.push(DrainError::NotSubmitted { index: index as u32 });
            continue;
        }
        let activemask = words[header + 1] & LANE_MASK;
        let mut payload = buffer.payload_of(&words, index);
        let host_error = serve_model(service, activemask, &mut payload);
        let start = buffer.payload_word(index);
        words[start..start + PAYLOAD_WORDS].copy_from_slice(payload.as_flattened());
        let control = if host_error { CONTROL_HOST_ERROR } else { 0 };
        words[header + 2] = u64::from(service) | u64::from(control) << 32;
        served.push(index as u32);
        report.packets += 1;
        report.lane_calls += activemask.count_ones();
    }
    report.malformed = errors.len() as u32;
    Expected { served, errors, report, words }
}

/// The invariants stated on their own (the model comparison implies them; they document the
/// target and hold whatever the model says).
fn check_invariants(buffer: &RawBuffer, served: &[u32], report: DrainReport) {
    let n = buffer.num_packets();
    let mut seen = vec![false; n];
    for &index in served {
        let index = index as usize;
        assert!(index < n, "served packet {index} of a {n}-packet buffer");
        assert!(!seen[index], "packet {index} served twice in one drain");
        seen[index] = true;
        let control = (buffer.load(buffer.header_word(index) + 2) >> 32) as u32;
        assert_eq!(control & CONTROL_READY, 0, "served packet {index} still READY");
    }
    assert!(served.len() <= n);
    assert_eq!(report.packets as usize, served.len());
}

fn assert_words(actual: &[u64], expected: &[u64]) {
    if actual == expected {
        return; // one memcmp: the search below only runs on failure
    }
    if let Some(word) = (0..actual.len()).find(|&w| actual[w] != expected[w]) {
        panic!(
            "buffer word {word} (byte {}) is {:#x}, expected {:#x}",
            word * 8,
            actual[word],
            expected[word]
        );
    }
}
