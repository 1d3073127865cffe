//! loom models of the line protocol (PROTOCOL.md section 9, `hostcall_core::line`).
//!
//! Waves are threads on the real device path (`View::claim`, `write_lane`, `Claimed::submit`,
//! `Submitted::wait_until`, `reply`, `release` or `keep`); the host is the main thread on the real scan
//! (`View::drain_window`). Under loom `SEQ_MAX` is 2, so every call after a packet's first is a
//! refresh claim and a model of three calls crosses the wrap. Every line word is a loom atomic,
//! so loom lets each relaxed load return any store that coherence and happens-before allow: stale
//! and in-flight words are explored, not assumed away.
//!
//! That makes every line word the host loads a branch of the exploration, so the core's line
//! geometry is shrunk under loom (the same code, its loops bounded by the constants): a wave has
//! 2 lanes (`LANES`) and a lane's request carries only its first word
//! (`line::CARRIED_REQUEST_WORDS`: 2 line words, the word's low 57 bits and the packed word of its
//! top 7, where production carries 8 words as 9); the reply keeps its 2 words (3 line words).
//! With all of a lane's words the wrap models did not finish in 400 s even with no preemptions;
//! now all of them run. The models' requests put what tells the calls apart in the carried word,
//! in both of its line words (its low bits and its top bits). The models prove:
//!
//! - every call is served exactly once, with the request as its wave wrote it for that call (never
//!   an older call's word with the same sequence, never a half-written one);
//! - each wave reads back its own reply for that call;
//! - every packet ends up released;
//! - a request whose last word lands only after the host remembered it incomplete and reported it
//!   stalled (`line::Incomplete`, `STALL_LOOKS` = 2 and `STALLED_LOOK_PERIOD` = 2 under loom) is
//!   served within `STALLED_LOOK_PERIOD` drains that start after the word landed (and its broken
//!   twin, a host that stops looking at a stalled packet, fails).
//!
//! A wave polls once, then blocks on its `Notify` until the host has served something (spinning
//! on both sides would blow loom's branch budget; see the phase models). The notification
//! synchronises, which could hide a missing Acquire on the wave's side; it cannot hide a torn or
//! stale word, which is a question of which store a load returns (the broken twins below show the
//! model catches both).
//!
//! Each model caps the preemption bound (`check`): the wrap model runs at 3 (about 1.5 M
//! executions, 100-120 s on the 2-core development machine), the hand path and the kept packet
//! at 2 (277 k executions, 20-40 s, each), the others at 1 (with `LOOM_MAX_PREEMPTIONS` lower, that). The broken twins must panic with the model's own assertion ("not this
//! call's"), not with a loom budget error. Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 cargo test -p loom-tests --release --test line_protocol`
#![cfg(loom)]

use hostcall_core::line::{
    carries, decode_reply, encode_head, encode_mask, encode_request, word, Incomplete, Parts, Prefix, Reply,
    Request, ScratchPayload, View, SEQ_MAX, STALLED_LOOK_PERIOD, STALL_LOOKS,
};
use hostcall_core::sync::{AtomicU32, Ordering};
use hostcall_core::{DrainError, DrainHandler, Host as _, PacketRequest, LANES, SLOT_WORDS};
use loom::sync::{Arc, Notify};
use loom::thread;

const SERVICE: u32 = 7;

/// A line buffer allocated normally, and one wake-up per wave.
struct Model {
    prefix: Prefix,
    device_seq: Vec<AtomicU32>,
    occupied: Vec<AtomicU32>,
    served: Vec<AtomicU32>,
    requests: Vec<Request>,
    replies: Vec<Reply>,
    wake: Vec<Notify>,
}

impl Model {
    fn new(packets: usize, waves: usize) -> Arc<Self> {
        let words = |k: usize| (0..k).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        let model = Self {
            prefix: Prefix::default(),
            device_seq: words(packets),
            occupied: words(packets.div_ceil(32)),
            served: words(packets),
            requests: (0..packets).map(|_| Request::default()).collect(),
            replies: (0..packets).map(|_| Reply::default()).collect(),
            wake: (0..waves).map(|_| Notify::new()).collect(),
        };
        model.view().init(0, 0);
        Arc::new(model)
    }

    fn view(&self) -> View<'_> {
        View::from_parts(Parts {
            prefix: &self.prefix,
            device_seq: &self.device_seq,
            occupied: &self.occupied,
            served: &self.served,
            requests: &self.requests,
            replies: &self.replies,
        })
        .expect("a valid buffer")
    }
}

/// Lane `lane` of wave `wave` asks this in its call `call`: word 0 names all three, in its low
/// bits and again in its top 7 (so both of its line words differ between calls), and neither of
/// its line words' data is 0 (a word stored as a bare flag, `word(0, seq)`, never passes for
/// one). Only the words the line transport carries under loom (`line::CARRIED_REQUEST_WORDS`, 1)
/// hold data; the others are zero, as `write_lane` requires there, and the host checks that they
/// arrive as zeroes.
fn request(wave: u64, call: u64, lane: usize) -> [u64; SLOT_WORDS] {
    let id = wave * 100 + call * 10 + lane as u64;
    let mut words = [0; SLOT_WORDS];
    words[0] = (id + 1) << 57 | id << 8 | 1;
    words
}

/// ...and must read back this (both words with top bits that differ between calls).
fn reply_for(word0: u64) -> [u64; 2] {
    [word0 ^ 0x5555_0000_5555_0000, !word0]
}

/// One wave's `calls`: call `c` uses the lanes of `masks[c]`; every reply checked. With `keep`
/// the wave claims once and keeps its packet for every later call (`Completed::keep`).
fn wave(model: &Model, wave: usize, masks: &[u64], keep: bool) {
    let view = model.view();
    let mut kept = None;
    for (call, &mask) in masks.iter().enumerate() {
        let mut claimed = kept.take().unwrap_or_else(|| view.claim(wave).expect("a packet per wave"));
        for lane in (0..LANES).filter(|l| mask >> l & 1 == 1) {
            claimed.write_lane(lane, &request(wave as u64, call as u64, lane));
        }
        let mut submitted = claimed.submit(SERVICE, mask);
        let done = loop {
            match submitted.wait_until(|_| false) {
                Ok(done) => break done,
                Err(again) => {
                    submitted = again;
                    model.wake[wave].wait();
                }
            }
        };
        for lane in (0..LANES).filter(|l| mask >> l & 1 == 1) {
            let word0 = request(wave as u64, call as u64, lane)[0];
            assert_eq!(
                done.reply(lane),
                reply_for(word0),
                "wave {wave} call {call} lane {lane}: not this call's reply"
            );
        }
        if keep && call + 1 < masks.len() {
            kept = Some(done.keep());
        } else {
            done.release();
        }
    }
}

/// The host: scans until it has served `packets` packets; checks each request against what the
/// wave wrote for the call its word 0 names, and that calls of a wave come in order.
fn host(model: &Model, packets: u32, masks: &[u64]) {
    let view = model.view();
    let mut window = view.scan_window();
    let mut next_call = vec![0u64; model.wake.len()];
    let mut total = 0;
    while total < packets {
        let mut served = Vec::new();
        let report = view.host().drain_window(&mut window, &mut |p: &mut PacketRequest<'_>| {
            assert_eq!(p.service(), SERVICE);
            let lane = p.lanes().next().expect("an active lane");
            let wave = (p.request(lane)[0] >> 8 & 0xffff) / 100;
            let call = next_call[wave as usize];
            assert_eq!(p.activemask(), masks[call as usize], "wave {wave} call {call}: not this call's mask");
            for lane in p.lanes().collect::<Vec<_>>() {
                let asked = request(wave, call, lane);
                assert_eq!(
                    p.request(lane),
                    asked,
                    "wave {wave} call {call} lane {lane}: not this call's request"
                );
                p.reply(lane, reply_for(asked[0]));
            }
            next_call[wave as usize] += 1;
            served.push(wave as usize);
        });
        total += report.packets;
        if report.packets == 0 {
            thread::yield_now();
        }
        served.into_iter().for_each(|w| model.wake[w].notify());
    }
}

fn check(name: &str, max_bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(builder.preemption_bound.unwrap_or(3).min(max_bound));
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    let start = std::time::Instant::now();
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    println!(
        "loom model {name}: {} executions, preemption bound {:?}, {:.2} s",
        executions.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound,
        start.elapsed().as_secs_f64()
    );
}

/// Two waves on two packets, one call each on every lane.
#[test]
fn two_waves_two_packets() {
    check("line: 2 waves, 2 packets", 1, || {
        let model = Model::new(2, 2);
        let masks = [0b01];
        let w = (0..2)
            .map(|i| {
                let model = model.clone();
                thread::spawn(move || wave(&model, i, &masks, false))
            })
            .collect::<Vec<_>>();
        host(&model, 2, &masks);
        w.into_iter().for_each(|t| t.join().unwrap());
        let view = model.view();
        assert_eq!(view.occupied_word(0).load(Ordering::Relaxed), 0, "released");
    });
}

/// One wave, three calls on one packet: sequences 1, 2 (= SEQ_MAX, a refresh) and 1 again (a
/// refresh). Lane 1 calls in the first and the third, both with sequence 1: its words from the
/// first call carry the third's sequence, and only the refreshes keep them from being taken.
const WRAP_MASKS: [u64; 3] = [0b10, 0b01, 0b10];

/// The real device path across the wrap, at preemption bound 3.
#[test]
fn the_wrap_never_lets_a_stale_word_through() {
    assert_eq!(SEQ_MAX, 2);
    check("line: one wave across the wrap", 3, || one_wave_across_the_wrap(false));
}

/// One wave making the `WRAP_MASKS` calls on packet 0 (packet 1 held, so the wave uses packet 0),
/// keeping its packet between calls or not, against the host.
fn one_wave_across_the_wrap(keep: bool) {
    let model = Model::new(2, 1);
    let held = model.view().claim(1).expect("packet 1, held so the wave uses packet 0");
    let w = {
        let model = model.clone();
        thread::spawn(move || wave(&model, 0, &WRAP_MASKS, keep))
    };
    host(&model, 3, &WRAP_MASKS);
    w.join().unwrap();
    drop(held);
    assert_eq!(model.view().occupied_word(0).load(Ordering::Relaxed), 0, "every packet released");
}

/// The same wave keeping its packet (`Completed::keep`: no `occupied` read-modify-write after
/// the first claim) across the wrap, at preemption bound 2 (what it explores beside the hand
/// path below is the real `keep`).
#[test]
fn a_kept_packet_crosses_the_wrap() {
    check("line: one wave keeping its packet across the wrap", 2, || one_wave_across_the_wrap(true));
}

/// The device path by hand (what `claim`, `write_lane` and `submit` do), for the broken twins:
/// `refresh` false skips the wrap refresh; `flag_first` stores each word's sequence before its
/// data (as a flag-then-data protocol would). Its encodings are the core's (`encode_request`...).
///
/// Its orderings are the wave's (`core/src/line/mod.rs`, Orderings): every line word Relaxed (its
/// data is in the word); the refresh zeroes ordered before the call's words by the Release fence,
/// paired with the host's Acquire fence after a pending head; `device_seq` is this wave's own
/// (one thread, Relaxed); the reply polled with Acquire, pairing with the host's Release reply
/// stores, so the host's reads of this request are done before the next call writes it.
fn hand_call(model: &Model, view: &View<'_>, call: u64, mask: u64, refresh: bool, flag_first: bool) {
    let (request_block, reply_block) = (view.request(0), view.reply(0));
    let previous = view.device_seq(0).load(Ordering::Relaxed);
    let seq = hostcall_core::line::next_seq(previous);
    if refresh && hostcall_core::line::refreshes(previous, seq) {
        let words = request_block.lanes.iter().flatten().chain(reply_block.lanes.iter().flatten());
        std::iter::once(&request_block.mask).chain(words).for_each(|w| w.store(0, Ordering::Relaxed));
        hostcall_core::sync::fence(Ordering::Release);
    }
    for lane in (0..LANES).filter(|l| mask >> l & 1 == 1) {
        let words = encode_request(&request(0, call, lane), seq);
        for (line_word, value) in request_block.lanes[lane].iter().zip(words) {
            if flag_first {
                line_word.store(word(0, seq), Ordering::Relaxed); // BUG: the sequence before the data
            }
            line_word.store(value, Ordering::Relaxed);
        }
    }
    request_block.mask.store(encode_mask(mask, seq), Ordering::Relaxed);
    request_block.head.store(encode_head(SERVICE, mask, seq), Ordering::Relaxed);
    view.device_seq(0).store(seq, Ordering::Relaxed);
    let answered = || {
        (0..LANES)
            .filter(|l| mask >> l & 1 == 1)
            .all(|lane| reply_block.lanes[lane].iter().all(|w| carries(w.load(Ordering::Acquire), seq)))
    };
    while !answered() {
        model.wake[0].wait();
    }
    for lane in (0..LANES).filter(|l| mask >> l & 1 == 1) {
        let reply =
            decode_reply(&std::array::from_fn(|k| reply_block.lanes[lane][k].load(Ordering::Relaxed)));
        assert_eq!(
            reply,
            reply_for(request(0, call, lane)[0]),
            "call {call} lane {lane}: not this call's reply"
        );
    }
}

fn broken_twin(refresh: bool, flag_first: bool, masks: &'static [u64]) {
    let model = Model::new(2, 1);
    let device = {
        let model = model.clone();
        thread::spawn(move || {
            let view = model.view();
            for (call, &mask) in masks.iter().enumerate() {
                hand_call(&model, &view, call as u64, mask, refresh, flag_first);
            }
        })
    };
    host(&model, masks.len() as u32, masks);
    device.join().unwrap();
}

/// The hand path is faithful: with the refresh and the data in the flag's store it passes. Bound
/// 2 (it explores exactly what the wrap model does, whose bound 3 is the stronger check).
#[test]
fn the_hand_path_with_the_refresh_passes() {
    check("line: hand path across the wrap", 2, || broken_twin(true, false, &WRAP_MASKS));
}

/// Broken twin: no wrap refresh. Lane 1's words from the first call carry the third call's
/// sequence, and loom finds the host (or the wave) reading them as the third call's.
#[test]
#[should_panic(expected = "not this call's")]
fn without_the_wrap_refresh_a_stale_word_is_taken() {
    check("line: no refresh (must fail)", 1, || broken_twin(false, false, &WRAP_MASKS));
}

/// Broken twin: the sequence published before the data (two stores). The host takes the
/// flag-only word as the request.
#[test]
#[should_panic(expected = "not this call's")]
fn a_sequence_stored_before_its_data_is_caught() {
    check("line: flag before data (must fail)", 1, || broken_twin(true, true, &[0b01]));
}

/// The slow wave (`line/incomplete.rs`): a request whose last word lands only after the host has
/// remembered it incomplete and reported it stalled (`STALL_LOOKS` is 2 under loom) must still be
/// served, within `STALLED_LOOK_PERIOD` drains that start after the word landed. With `give_up`
/// the host is the broken twin that stops looking at a packet once it has reported it stalled
/// (what "a stalled request costs nothing" would be without its periodic look): the model must
/// catch it.
fn slow_wave(give_up: bool) {
    let model = Model::new(2, 1);
    let landed = Arc::new(loom::sync::atomic::AtomicBool::new(false));
    // The host's stalled report, told to the device (a flag: a `Notify` may wake spuriously).
    let reported = Arc::new((loom::sync::atomic::AtomicBool::new(false), Notify::new()));
    let device = {
        let (model, landed, reported) = (model.clone(), landed.clone(), reported.clone());
        thread::spawn(move || {
            let view = model.view();
            let (request_block, reply_block) = (view.request(0), view.reply(0));
            let seq = hostcall_core::line::next_seq(0);
            let value = request(0, 0, 0)[0];
            let words = encode_request(&request(0, 0, 0), seq);
            // Lane 0's first word, the mask and the head; its packed word (the last) held back.
            request_block.lanes[0][0].store(words[0], Ordering::Relaxed);
            request_block.mask.store(encode_mask(1, seq), Ordering::Relaxed);
            request_block.head.store(encode_head(SERVICE, 1, seq), Ordering::Relaxed);
            // Until the host has remembered it and reported it stalled.
            while !reported.0.load(loom::sync::atomic::Ordering::Acquire) {
                reported.1.wait();
            }
            request_block.lanes[0][1].store(words[1], Ordering::Relaxed);
            // Release: pairs with the host's Acquire load of `landed` (the model's check only).
            landed.store(true, loom::sync::atomic::Ordering::Release);
            while !reply_block.lanes[0].iter().all(|w| carries(w.load(Ordering::Acquire), seq)) {
                model.wake[0].wait();
            }
            let reply =
                decode_reply(&std::array::from_fn(|k| reply_block.lanes[0][k].load(Ordering::Relaxed)));
            assert_eq!(reply, reply_for(value), "not this call's reply");
        })
    };
    let view = model.view();
    let (mut scope, mut scratch) = (hostcall_core::DrainScope::Whole, ScratchPayload::new());
    let mut incomplete = [Incomplete::default(); 2];
    struct Host<'m> {
        model: &'m Model,
        stalled: Vec<DrainError>,
        served: u32,
    }
    impl DrainHandler for Host<'_> {
        fn serve(&mut self, p: &mut PacketRequest<'_>) {
            let asked = request(0, 0, 0);
            assert_eq!(p.request(0), asked, "not this call's request");
            p.reply(0, reply_for(asked[0]));
            self.served += 1;
            let _ = self.model;
        }
        fn malformed(&mut self, error: DrainError) {
            self.stalled.push(error);
        }
    }
    let mut host = Host { model: &model, stalled: Vec::new(), served: 0 };
    let (mut notified, mut drains_after_landing) = (false, 0);
    while host.served == 0 {
        // Acquire: pairs with the device's Release store; a drain that starts after it sees the
        // last word (the model's check of the claim, not part of the protocol).
        let complete = landed.load(loom::sync::atomic::Ordering::Acquire);
        if !(give_up && notified) {
            view.host().drain_scope(&mut scope, Some(&mut scratch), Some(&mut incomplete[..]), &mut host);
        }
        drains_after_landing += u16::from(complete);
        // A stalled packet is looked at every STALLED_LOOK_PERIOD scans.
        assert!(
            host.served == 1 || drains_after_landing < STALLED_LOOK_PERIOD,
            "a complete request was not served"
        );
        if !host.stalled.is_empty() && !notified {
            assert_eq!(
                host.stalled,
                [DrainError::Stalled { index: 0, seq: 1, looks: u32::from(STALL_LOOKS) }]
            );
            notified = true;
            // Release: pairs with the device's Acquire load (the model's sequencing only).
            reported.0.store(true, loom::sync::atomic::Ordering::Release);
            reported.1.notify();
        }
        if host.served == 0 {
            thread::yield_now();
        }
    }
    model.wake[0].notify();
    device.join().unwrap();
    assert_eq!(host.stalled.len(), 1, "reported once");
}

/// A slow wave's last word lands after the host remembered its request and reported it stalled:
/// served, with its own request and reply.
#[test]
fn a_slow_word_landing_after_the_stalled_report_is_served() {
    assert_eq!(STALL_LOOKS, 2);
    check("line: slow wave after the stalled report", 3, || slow_wave(false));
}

/// Broken twin: the host stops looking at a packet it reported stalled; the late word is never
/// taken.
#[test]
#[should_panic(expected = "a complete request was not served")]
fn a_host_that_gives_up_on_a_stalled_request_is_caught() {
    check("line: host gives up on a stalled request (must fail)", 1, || slow_wave(true));
}
