//! loom models of the phase protocol (PROTOCOL.md section 2, `hostcall_core::phase`).
//!
//! Waves are threads that go through the real device path (`View::claim`, `write_lane`,
//! `Claimed::submit`, `Submitted::wait_until`, `reply`, `Completed::release`); the host is the
//! model's main thread calling the real scan (`View::drain_window`). Over every interleaving
//! loom explores (preemptions bounded by `LOOM_MAX_PREEMPTIONS`, default 3; the 3-wave model caps
//! it at 1) the models prove:
//!
//! - every request is answered exactly once and the scan reports nothing malformed;
//! - each wave reads back its own reply (replies are derived from the wave and lane);
//! - payload accesses never race: payload words are loom cells, so a request write not ordered
//!   before the host's read, a reply write not ordered before the wave's read, or a previous
//!   owner's read not ordered before the next owner's write fails the model;
//! - every packet ends up released (its `occupied` bit clear).
//!
//! How the waves wait. A wave polls its packet once, and if the host has not answered it blocks on
//! its own `loom::sync::Notify` until the host has finished a scan (or, for a claim, until another
//! wave released a packet), then polls again. Spinning instead would let loom's scheduler explore
//! two waves yielding to each other forever while the host, which must make progress, is never
//! picked (yield gives no fairness), and the models would exceed the branch limit. A notification
//! does synchronise, so in the interleavings where a wave blocked it hides a missing Acquire on
//! that wave's side; the interleavings in which the wave's first poll (or first claim) succeeds
//! check the protocol's own orderings without any help, and loom explores those too. The host
//! spins (it is the only thread that does), so its side is never helped.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release --test phase_protocol`
#![cfg(loom)]

use hostcall_core::phase::{Claimed, View};
use hostcall_core::sync::Ordering;
use hostcall_core::{Host as _, PacketRequest, LANES, LANE_MASK};
use loom::sync::{Arc, Notify};
use loom::thread;
use loom_tests::{check, check_bounded, PhaseBuffer};

const SERVICE: u32 = 7;

/// A phase buffer allocated normally (loom atomics do not have the ABI representation), and one
/// wake-up per wave.
struct Model {
    buffer: PhaseBuffer,
    wake: Vec<Notify>,
    /// Whether the host wakes every wave after a scan that served something, not just the waves
    /// it served (a wave waiting to claim an abandoned packet needs it).
    host_wakes_all: bool,
    /// Whether a wave that releases a packet wakes the others: only needed when some wave can
    /// find every packet taken (more waves than packets, or a packet held by the model).
    release_wakes_others: bool,
}

impl Model {
    fn new(packets: usize, waves: usize) -> Arc<Self> {
        let model = Self {
            buffer: PhaseBuffer::new(packets),
            wake: (0..waves).map(|_| Notify::new()).collect(),
            host_wakes_all: false,
            release_wakes_others: waves > packets,
        };
        Arc::new(model)
    }

    fn view(&self) -> View<'_> {
        self.buffer.view()
    }

    /// Wakes the waves that may be waiting to claim a packet, if there can be any.
    fn wake_claimers(&self, except: usize) {
        if self.release_wakes_others {
            self.wake.iter().enumerate().filter(|(w, _)| *w != except).for_each(|(_, n)| n.notify());
        }
    }
}

/// Lane `lane` of wave `wave` asks for this...
fn request(wave: u64, lane: usize) -> [u64; 8] {
    core::array::from_fn(|word| (wave * 10 + lane as u64) * 100 + word as u64)
}

/// ...and must read back this, which no other lane or wave gets.
fn reply_for(wave: u64, lane: usize) -> [u64; 2] {
    [1000 + wave * 10 + lane as u64, !wave]
}

/// Claims a packet, blocking until some wave releases one while none is free.
fn claim<'a>(model: &Model, view: &View<'a>, wave: usize) -> Claimed<'a> {
    loop {
        match view.claim(wave) {
            Some(claimed) => return claimed,
            None => model.wake[wave].wait(),
        }
    }
}

/// One wave: claim, fill every lane, submit, wait, check its own reply, release.
fn wave(model: &Model, wave: usize) {
    let view = model.view();
    let mut claimed = claim(model, &view, wave);
    for lane in 0..LANES {
        claimed.write_lane(lane, &request(wave as u64, lane));
    }
    let mut submitted = claimed.submit(SERVICE, LANE_MASK);
    let done = loop {
        match submitted.wait_until(|_| false) {
            Ok(done) => break done,
            Err(again) => {
                submitted = again;
                model.wake[wave].wait();
            }
        }
    };
    for lane in 0..LANES {
        assert_eq!(done.reply(lane), reply_for(wave as u64, lane), "wave {wave} lane {lane}: not its reply");
    }
    done.release();
    model.wake_claimers(wave);
}

/// The host: scans until it has served `packets` packets, waking the waves after every scan that
/// served something; returns how often each wave was served.
fn host(model: &Model, packets: u32) -> Vec<u32> {
    let view = model.view();
    let mut window = view.scan_window();
    let mut per_wave = vec![0u32; model.wake.len()];
    let mut total = 0;
    while total < packets {
        let mut served = Vec::new();
        let report = view.host().drain_window(&mut window, &mut |p: &mut PacketRequest<'_>| {
            assert_eq!(p.service(), SERVICE);
            assert_eq!(p.activemask(), LANE_MASK, "every lane was submitted");
            let wave = p.request(0)[0] / 1000;
            for lane in 0..LANES {
                assert_eq!(p.request(lane), request(wave, lane), "the request as the wave wrote it");
                p.reply(lane, reply_for(wave, lane));
            }
            per_wave[wave as usize] += 1;
            served.push(wave as usize);
        });
        assert_eq!(report.malformed, 0);
        total += report.packets;
        if report.packets == 0 {
            thread::yield_now();
        } else if model.host_wakes_all {
            model.wake.iter().for_each(Notify::notify);
        } else {
            served.into_iter().for_each(|w| model.wake[w].notify());
        }
    }
    per_wave
}

/// `waves` waves over `packets` packets, one host; every request is answered exactly once.
fn waves_and_a_host(waves: usize, packets: usize) {
    let model = Model::new(packets, waves);
    let handles: Vec<_> = (0..waves)
        .map(|w| {
            let model = model.clone();
            thread::spawn(move || wave(&model, w))
        })
        .collect();
    let per_wave = host(&model, waves as u32);
    for handle in handles {
        handle.join().unwrap();
    }
    assert!(per_wave.iter().all(|&n| n == 1), "served {per_wave:?}, want each wave once");
    let view = model.view();
    for i in 0..packets {
        assert_eq!(view.occupied_word(i).load(Ordering::Relaxed), 0, "packet {i} not released");
    }
}

#[test]
fn two_waves_two_packets() {
    check("phase: 2 waves, 2 packets", || waves_and_a_host(2, 2));
}

/// Capped at one preemption: 364k executions, about a minute; with two preemptions the model did
/// not finish in 25 minutes. Packet reuse by another wave (the `occupied` Release/Acquire pair) is
/// only exercised here.
#[test]
fn three_waves_two_packets() {
    check_bounded("phase: 3 waves, 2 packets", 1, || waves_and_a_host(3, 2));
}

/// A wave that abandons its submitted packet: the bitmap frees it at once, but the next claimer
/// must not get it before the host has answered (the phase check in `claim`, whose Acquire load
/// of `host_phase` orders the host's accesses before the new owner's). Packet 1 is held all
/// along, so both waves go through packet 0.
#[test]
fn an_abandoned_packet_is_reused_only_after_the_host_answers() {
    check("phase: abandoned submit, 2 waves, 2 packets", || {
        let mut model = Model::new(2, 2);
        let settings = Arc::get_mut(&mut model).expect("not shared yet");
        (settings.host_wakes_all, settings.release_wakes_others) = (true, true);
        let held = model.view().claim(1).unwrap();
        assert_eq!(held.index(), 1);
        let abandoner = {
            let model = model.clone();
            thread::spawn(move || {
                let view = model.view();
                let mut claimed = claim(&model, &view, 0);
                for lane in 0..LANES {
                    claimed.write_lane(lane, &request(0, lane));
                }
                drop(claimed.submit(SERVICE, LANE_MASK));
                model.wake[1].notify(); // the bit is clear: the other wave may retry its claim
            })
        };
        let waiter = {
            let model = model.clone();
            thread::spawn(move || wave(&model, 1))
        };
        let per_wave = host(&model, 2);
        abandoner.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(per_wave, [1, 1]);
        drop(held);
    });
}

/// The models can fail: a device that flips `device_phase` with a Relaxed store publishes nothing,
/// and loom reports the host's read of the request racing the wave's write.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_relaxed_phase_flip_is_caught() {
    check("phase: relaxed flip (must fail)", || {
        let model = Model::new(2, 1);
        let device = {
            let model = model.clone();
            thread::spawn(move || {
                let view = model.view();
                // The device path by hand, with one ordering wrong.
                for (word, value) in view.payload(0).slots[0].iter().zip(request(0, 0)) {
                    word.write(value);
                }
                view.header(0).activemask.store(1, Ordering::Relaxed);
                view.header(0).service.store(SERVICE, Ordering::Relaxed);
                view.device_phase(0).store(1, Ordering::Relaxed); // BUG: must be Release
                while view.host_phase(0).load(Ordering::Acquire) & 1 != 1 {
                    thread::yield_now();
                }
                assert_eq!(view.payload(0).slots[0][0].read(), reply_for(0, 0)[0]);
            })
        };
        let view = model.view();
        while view
            .host()
            .drain(&mut |p: &mut PacketRequest<'_>| {
                let wave = p.request(0)[0] / 1000;
                p.reply(0, reply_for(wave, 0));
            })
            .packets
            == 0
        {
            thread::yield_now();
        }
        device.join().unwrap();
    });
}
