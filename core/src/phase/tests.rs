//! Sequential behaviour of the phase protocol: init, claim/submit/drain/release, the bitmap, the
//! scan window, raw memory, hostile bytes.

use super::*;
use crate::host::{DrainError, DrainReport, ErrorCode, PacketRequest, ERROR_REPLY};
use crate::lane::{PacketEvent, PacketState, Payload, LANES};
use crate::scan::ScanWindow;
use crate::sync::{AtomicU32, Ordering};
use crate::test_support::{echo, words, Collect};
use crate::view::LayoutError;
use in_parts::PhaseBuffer;
use proptest::prelude::*;

extern crate std;
use std::{collections::BTreeSet, vec, vec::Vec};

fn request(tag: u64) -> [u64; 8] {
    [tag, 0, 0, 0, 0, 0, 0, 0]
}

fn occupied_bit(v: &View<'_>, i: usize) -> bool {
    v.occupied_word(i).load(Ordering::Relaxed) & (1 << (i % 32)) != 0
}

#[test]
fn init_writes_the_prefix_and_frees_every_packet() {
    for n in [2usize, 5, 33] {
        let parts = PhaseBuffer::new(n);
        let v = View::from_parts(parts.parts()).unwrap();
        for w in parts.device_phase.iter().chain(parts.host_phase.iter()).chain(parts.occupied.iter()) {
            w.store(0xdead_beef, Ordering::Relaxed);
        }
        v.init(0x10_0000, 7);
        let l = Layout::new(n).unwrap();
        let p = v.prefix();
        let at = |o: usize| 0x10_0000 + o as u64;
        assert_eq!(p.device_phase.load(Ordering::Relaxed), at(l.device_phase));
        assert_eq!(p.host_phase.load(Ordering::Relaxed), at(l.host_phase));
        assert_eq!(p.occupied.load(Ordering::Relaxed), at(l.occupied));
        assert_eq!(p.headers.load(Ordering::Relaxed), at(l.headers));
        assert_eq!(p.payloads.load(Ordering::Relaxed), at(l.payloads));
        assert_eq!(p.doorbell.load(Ordering::Relaxed), 7);
        assert_eq!(p.num_packets.load(Ordering::Relaxed), n as u32);
        for i in 0..n {
            assert_eq!(v.device_phase(i).load(Ordering::Relaxed), 0);
            assert_eq!(v.host_phase(i).load(Ordering::Relaxed), 0);
            assert!(!occupied_bit(&v, i));
        }
        assert_eq!(v.num_packets(), n as u32);
    }
}

#[test]
fn round_trips_answer_each_lane_and_alternate_the_phase() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    for round in 0..10u64 {
        let mut c = v.claim(0).unwrap();
        assert_eq!(c.index(), 0, "a released packet is claimed again first");
        assert!(occupied_bit(&v, 0));
        for lane in [0, 5, LANES - 1] {
            c.write_lane(lane, &request(round * 100 + lane as u64));
        }
        let s = c.submit(42, 1 | 1 << 5 | 1 << (LANES - 1));
        assert_eq!(v.device_phase(0).load(Ordering::Relaxed), (round as u32 + 1) & 1);
        assert!(!s.is_served());
        let mut h = Collect::default();
        assert_eq!(v.host().drain(&mut h), DrainReport { packets: 1, lane_calls: 3, malformed: 0 });
        assert_eq!(h.served, [0]);
        assert_eq!(v.host().drain(&mut h), DrainReport::default(), "served once");
        let done = s.wait(|| {});
        for lane in [0, 5, LANES - 1] {
            assert_eq!(done.reply(lane), [round * 100 + lane as u64 + 1, 42]);
            assert_eq!(done.error(lane), None);
        }
        done.release();
        assert!(!occupied_bit(&v, 0));
    }
}

#[test]
fn two_packets_in_flight_at_once() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    let mut a = v.claim(0).unwrap();
    let mut b = v.claim(0).unwrap();
    assert_eq!((a.index(), b.index()), (0, 1));
    a.write_lane(0, &request(10));
    b.write_lane(1, &request(20));
    let (a, b) = (a.submit(1, 0b01), b.submit(2, 0b10));
    let mut h = Collect::default();
    assert_eq!(v.host().drain(&mut h).packets, 2);
    assert_eq!(h.served, [0, 1]);
    assert_eq!(b.wait(|| {}).reply(1), [21, 2]);
    assert_eq!(a.wait(|| {}).reply(0), [11, 1]);
}

#[test]
fn claim_fails_when_every_packet_is_occupied() {
    let parts = PhaseBuffer::new(3);
    let v = parts.view();
    let held: Vec<_> = (0..3).map(|_| v.claim(1).unwrap()).collect();
    assert_eq!(held.iter().map(|c| c.index()).collect::<Vec<_>>(), [1, 2, 0], "from the start, wrapping");
    assert!(v.claim(0).is_none());
    drop(held);
    assert!(v.claim(0).is_some());
}

#[test]
fn a_non_power_of_two_count_spanning_two_bitmap_words() {
    let n = 37;
    let parts = PhaseBuffer::new(n);
    let v = parts.view();
    let mut claimed: Vec<_> = (0..n).map(|k| v.claim(k * 7).unwrap()).collect();
    let indices: BTreeSet<_> = claimed.iter().map(|c| c.index()).collect();
    assert_eq!(indices.len(), n);
    assert!(v.claim(0).is_none());
    assert_eq!(parts.occupied[1].load(Ordering::Relaxed), (1 << 5) - 1, "bits beyond n stay clear");
    for c in &mut claimed {
        let tag = c.index() as u64;
        c.write_lane(0, &request(tag));
    }
    let submitted: Vec<_> = claimed.into_iter().map(|c| c.submit(3, 1)).collect();
    let mut h = Collect::default();
    assert_eq!(v.host().drain(&mut h).packets, n as u32);
    for s in submitted {
        let i = s.index() as u64;
        assert_eq!(s.wait(|| {}).reply(0), [i + 1, 3]);
    }
    assert!(parts.occupied.iter().all(|w| w.load(Ordering::Relaxed) == 0));
}

#[test]
fn dropping_a_claim_frees_it_unsent() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    let c = v.claim(1).unwrap();
    assert_eq!(c.index(), 1);
    drop(c);
    assert!(!occupied_bit(&v, 1));
    assert_eq!(v.device_phase(1).load(Ordering::Relaxed), 0, "nothing was submitted");
    assert_eq!(v.host().drain(&mut Collect::default()), DrainReport::default());
}

#[test]
fn an_abandoned_submit_is_not_reclaimed_before_the_host_answers() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    let s = v.claim(0).unwrap().submit(1, 1);
    let blocker = v.claim(0).unwrap();
    assert_eq!(blocker.index(), 1);
    drop(s);
    assert!(!occupied_bit(&v, 0), "the bit is cleared");
    assert!(v.claim(0).is_none(), "but the phases still differ");
    assert!(!occupied_bit(&v, 0), "and the failed claim cleared the bit again");
    assert_eq!(v.host().drain(&mut echo).packets, 1);
    let again = v.claim(0).unwrap();
    assert_eq!(again.index(), 0);
    drop((again, blocker));
}

#[test]
fn a_bitmap_outside_the_buffer_takes_the_claims() {
    let parts = PhaseBuffer::new(33);
    let outside = words(2);
    let v = parts.view().with_occupied(&outside).unwrap();
    let held = v.claim(32).unwrap();
    assert_eq!(outside[1].load(Ordering::Relaxed), 1, "claimed through the outside bitmap");
    assert!(parts.occupied.iter().all(|w| w.load(Ordering::Relaxed) == 0), "the inner one untouched");
    let s = v.claim(0).unwrap().submit(1, 1);
    assert_eq!(v.host().drain(&mut echo).packets, 1);
    drop(s.wait(|| {}));
    drop(held);
    assert!(outside.iter().all(|w| w.load(Ordering::Relaxed) == 0), "every claim released");
    let short = words(1);
    assert_eq!(
        parts.view().with_occupied(&short).err(),
        Some(LayoutError::ArrayLength { array: "occupied", expected: 2, given: 1 })
    );
}

#[test]
fn wait_until_gives_the_packet_back() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    let s = v.claim(0).unwrap().submit(1, 1);
    let s = s.wait_until(|polls| polls < 3).expect_err("not answered");
    v.host().drain(&mut echo);
    assert!(s.wait_until(|_| false).is_ok());
}

#[test]
fn errors_travel_only_in_the_reply_words() {
    let parts = PhaseBuffer::new(2);
    let v = parts.view();
    let s = v.claim(0).unwrap().submit(99, 0b11);
    let mut saw_error = false;
    v.host().drain(&mut |p: &mut PacketRequest<'_>| {
        p.reply_error(1, ErrorCode::UnknownService);
        p.reply(0, [5, 6]);
        saw_error = p.has_error();
    });
    assert!(saw_error);
    let done = s.wait(|| {});
    assert_eq!(done.error(0), None);
    assert_eq!(done.reply(1), [ERROR_REPLY, ErrorCode::UnknownService as u64]);
    assert_eq!(done.error(1), Some(ErrorCode::UnknownService));
    assert!(done.host_error(), "lane 1's error reply is the packet's host error");
    assert_eq!(v.header(0).service.load(Ordering::Relaxed), 99, "the header is not touched");
}

#[test]
fn from_parts_checks_every_length() {
    let parts = PhaseBuffer::new(3);
    let short = words(2);
    let mut p = parts.parts();
    p.host_phase = &short;
    assert_eq!(
        View::from_parts(p).err(),
        Some(LayoutError::ArrayLength { array: "host_phase", expected: 3, given: 2 })
    );
    let mut p = parts.parts();
    p.occupied = &short;
    assert_eq!(
        View::from_parts(p).err(),
        Some(LayoutError::ArrayLength { array: "occupied", expected: 1, given: 2 })
    );
    let mut p = parts.parts();
    p.headers = &parts.headers[..1];
    assert!(matches!(View::from_parts(p), Err(LayoutError::Geometry(_))));
}

/// A raw, line-aligned allocation.
#[repr(C, align(64))]
struct Line([u64; 8]);

fn raw(size: usize) -> Vec<Line> {
    (0..size.div_ceil(64) + 1).map(|_| Line([0; 8])).collect()
}

#[test]
fn from_raw_checks_address_size_and_count() {
    let n = 5;
    let size = buffer_size(n).unwrap();
    let mut mem = raw(size);
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY (all calls): `mem` outlives the views and is only accessed through them.
    unsafe {
        assert!(View::from_raw(base, size, n as u64).is_ok());
        assert!(View::from_raw(base.add(8), size, n as u64).is_ok(), "8-aligned is enough");
        assert_eq!(
            View::from_raw(base, size - 1, n as u64).err(),
            Some(LayoutError::TooSmall { needed: size, given: size - 1 })
        );
        assert!(matches!(View::from_raw(base.add(4), size, n as u64), Err(LayoutError::Misaligned { .. })));
        assert!(matches!(View::from_raw(base, size, 1), Err(LayoutError::Geometry(_))));
        assert!(matches!(View::from_raw(base, size, u64::MAX), Err(LayoutError::Geometry(_))));
        assert_eq!(View::from_raw(core::ptr::null_mut(), size, 2).err(), Some(LayoutError::Null));
    }
}

#[test]
fn a_raw_buffer_round_trips_and_the_prefix_points_at_its_arrays() {
    let n = 4;
    let size = buffer_size(n).unwrap();
    let mut mem = raw(size);
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY: `mem` outlives the view and is only accessed through it.
    let v = unsafe { View::from_raw(base, size, n as u64) }.unwrap();
    v.init(base as u64, 0);
    let device_phase = v.prefix().device_phase.load(Ordering::Relaxed) as usize;
    assert_eq!(device_phase, v.device_phase(0) as *const AtomicU32 as usize);
    assert_eq!(v.prefix().host_phase.load(Ordering::Relaxed) as usize, v.host_phase(0) as *const _ as usize);
    assert_eq!(v.prefix().headers.load(Ordering::Relaxed) as usize, v.header(0) as *const _ as usize);
    assert_eq!(v.prefix().payloads.load(Ordering::Relaxed) as usize, v.payload(0) as *const _ as usize);
    assert_eq!(v.prefix().occupied.load(Ordering::Relaxed) as usize, v.occupied_word(0) as *const _ as usize);
    assert_eq!(v.payload(n - 1) as *const Payload as usize + 4096, base as usize + size);
    let mut c = v.claim(3).unwrap();
    c.write_lane(2, &request(41));
    let s = c.submit(8, 1 << 2);
    // The device's view of the wire: the raw u32 at device_phase[3] is 1.
    // SAFETY: in bounds of `mem` (the layout), aligned, read while no one writes.
    assert_eq!(unsafe { *(device_phase as *const u32).add(3) }, 1);
    assert_eq!(v.host().drain(&mut echo).packets, 1);
    assert_eq!(s.wait(|| {}).reply(2), [42, 8]);
}

#[test]
fn garbage_upper_bits_are_reported_served_once_and_echoed() {
    let parts = PhaseBuffer::new(3);
    let v = parts.view();
    v.device_phase(1).store(0xffff_fff3, Ordering::Relaxed); // bit 0 set: pending
    v.device_phase(2).store(0x10, Ordering::Relaxed); // bit 0 clear: not pending
    let mut h = Collect::default();
    let report = v.host().drain(&mut h);
    assert_eq!(report.packets, 1);
    assert_eq!(h.served, [1]);
    let found = DrainError::StrayBits { index: 1, device_word: 0xffff_fff3, host_word: 0 };
    assert_eq!(h.errors, [found]);
    assert_eq!(v.host_phase(1).load(Ordering::Relaxed), 0xffff_fff3, "the device's value, as read");
    assert_eq!(v.host().drain(&mut h), DrainReport::default());
}

/// Serves packet `index` by hand as a device would (no handle), for window tests.
fn submit_at(v: &View<'_>, index: usize) {
    let d = v.device_phase(index).load(Ordering::Relaxed);
    v.header(index).activemask.store(1, Ordering::Relaxed);
    v.device_phase(index).store(d ^ 1, Ordering::Release);
}

#[test]
fn the_window_narrows_to_the_packets_in_use_and_never_misses_one() {
    let n = 200u32;
    let parts = PhaseBuffer::new(n as usize);
    let v = parts.view();
    let mut w = v.scan_window();
    assert!(w.full_scan_due());
    submit_at(&v, 3);
    let mut h = Collect::default();
    assert_eq!(v.host().drain_window(&mut w, &mut h).packets, 1);
    assert_eq!(w.limit(), 4 + ScanWindow::SLACK, "narrowed after the full scan");

    // A busy prefix: the packet above the limit waits, but at most FULL_SCAN_PERIOD calls.
    let high = n as usize - 1;
    submit_at(&v, high);
    let mut calls = 0;
    loop {
        submit_at(&v, 0);
        calls += 1;
        let mut h = Collect::default();
        v.host().drain_window(&mut w, &mut h);
        if h.served.contains(&(high as u32)) {
            break;
        }
        assert!(calls <= ScanWindow::FULL_SCAN_PERIOD, "packet {high} missed");
    }
    assert_eq!(calls, ScanWindow::FULL_SCAN_PERIOD, "served at the periodic full scan");
    assert_eq!(w.limit(), n, "the full scan that found it widened the window");

    // An idle prefix: a packet above the limit is served in the same call.
    for _ in 0..ScanWindow::FULL_SCAN_PERIOD {
        v.host().drain_window(&mut w, &mut Collect::default());
    }
    assert_eq!(w.limit(), ScanWindow::SLACK);
    submit_at(&v, 150);
    let mut h = Collect::default();
    assert_eq!(v.host().drain_window(&mut w, &mut h).packets, 1);
    assert_eq!(h.served, [150]);
}

#[test]
fn a_window_from_a_larger_buffer_stays_in_bounds() {
    let big = PhaseBuffer::new(100);
    let mut w = big.view().scan_window();
    let small = PhaseBuffer::new(3);
    let v = small.view();
    for i in 0..3 {
        submit_at(&v, i);
    }
    assert_eq!(v.host().drain_window(&mut w, &mut Collect::default()).packets, 3);
}

/// The phase protocol's words, read back as the shared `PacketState` machine.
fn state_of(v: &View<'_>, i: usize, held: bool) -> PacketState {
    let differ =
        (v.device_phase(i).load(Ordering::Relaxed) ^ v.host_phase(i).load(Ordering::Relaxed)) & 1 != 0;
    match (occupied_bit(v, i), differ, held) {
        (false, false, _) => PacketState::Free,
        (true, true, _) => PacketState::Ready,
        (true, false, false) => PacketState::Served,
        (true, false, true) => PacketState::Claimed,
        (false, true, _) => unreachable!("an unoccupied packet is pending only after an abandoned submit"),
    }
}

proptest! {
    /// Any bytes at all in the phase words, headers and bitmap: the drain returns, serves only
    /// packets in range, each at most once per scan, and leaves no packet pending.
    #[test]
    fn drain_survives_any_shared_words(
        n in 2usize..70,
        device in proptest::collection::vec(any::<u32>(), 70),
        host in proptest::collection::vec(any::<u32>(), 70),
        masks in proptest::collection::vec(any::<u64>(), 70),
        services in proptest::collection::vec(any::<u32>(), 70),
        occupied in any::<u32>(),
        window_calls in 0u32..40,
    ) {
        let parts = PhaseBuffer::new(n);
        let v = parts.view();
        for i in 0..n {
            v.device_phase(i).store(device[i], Ordering::Relaxed);
            v.host_phase(i).store(host[i], Ordering::Relaxed);
            v.header(i).activemask.store(masks[i], Ordering::Relaxed);
            v.header(i).service.store(services[i], Ordering::Relaxed);
        }
        v.occupied_word(0).store(occupied, Ordering::Relaxed);
        let pending: BTreeSet<u32> = (0..n).filter(|&i| (device[i] ^ host[i]) & 1 != 0).map(|i| i as u32).collect();

        let mut w = v.scan_window();
        for _ in 0..window_calls {
            v.host().drain_window(&mut w, &mut Collect::default());
            prop_assert!(w.limit() <= n as u32);
        }
        let mut h = Collect::default();
        let report = if window_calls == 0 { v.host().drain(&mut h) } else { v.host().drain_window(&mut w, &mut h) };
        let unique: BTreeSet<u32> = h.served.iter().copied().collect();
        prop_assert_eq!(unique.len(), h.served.len(), "a packet was served twice in one scan");
        prop_assert!(h.served.iter().all(|&i| (i as usize) < n));
        prop_assert_eq!(report.packets as usize, h.served.len());
        prop_assert_eq!(report.malformed as usize, h.errors.len());
        if window_calls == 0 {
            prop_assert_eq!(unique, pending, "a full scan serves exactly the pending packets");
        }
        for (i, &written) in device.iter().enumerate().take(n) {
            let (d, hp) = (v.device_phase(i).load(Ordering::Relaxed), v.host_phase(i).load(Ordering::Relaxed));
            prop_assert_eq!(d, written, "the host never writes device_phase");
            if h.served.contains(&(i as u32)) {
                prop_assert_eq!(hp, d);
            }
        }
        prop_assert_eq!(v.occupied_word(0).load(Ordering::Relaxed), occupied, "the host never touches occupied");
    }

    /// Sequential use against the shared state machine: every claim is a distinct free packet,
    /// every submitted lane is answered once with its own reply, and the words always read back as
    /// the state the handles are in.
    #[test]
    fn sequential_ops_follow_the_packet_state_machine(
        n in 2usize..6,
        ops in proptest::collection::vec((0u8..5, 0usize..8), 1..80),
    ) {
        let parts = PhaseBuffer::new(n);
        let v = parts.view();
        let mut model = vec![PacketState::Free; n];
        let mut claimed: Vec<Claimed<'_>> = Vec::new();
        let mut submitted: Vec<(u64, usize, Submitted<'_>)> = Vec::new();
        let mut tag = 0u64;
        for (op, start) in ops {
            match op {
                0 => match v.claim(start) {
                    Some(c) => {
                        model[c.index()] = model[c.index()].apply(PacketEvent::Claim).unwrap();
                        claimed.push(c);
                    }
                    None => prop_assert!(model.iter().all(|s| *s != PacketState::Free)),
                },
                1 => if let Some(mut c) = claimed.pop() {
                    tag += 1;
                    c.write_lane(start % LANES, &request(tag));
                    let i = c.index();
                    submitted.push((tag, start % LANES, c.submit(5, 1 << (start % LANES))));
                    model[i] = model[i].apply(PacketEvent::Submit).unwrap();
                },
                2 => {
                    let mut h = Collect::default();
                    v.host().drain(&mut h);
                    let ready = model.iter().filter(|s| **s == PacketState::Ready).count();
                    prop_assert_eq!(h.served.len(), ready);
                    for &i in &h.served {
                        model[i as usize] = model[i as usize].apply(PacketEvent::Serve).unwrap();
                    }
                }
                3 => if !submitted.is_empty() {
                    let (tag, lane, s) = submitted.remove(start % submitted.len());
                    let i = s.index();
                    match s.wait_until(|_| false) {
                        Ok(done) => {
                            prop_assert_eq!(model[i], PacketState::Served);
                            prop_assert_eq!(done.reply(lane), [tag + 1, 5]);
                            drop(done);
                            model[i] = model[i].apply(PacketEvent::Release).unwrap();
                        }
                        Err(s) => {
                            prop_assert_eq!(model[i], PacketState::Ready);
                            submitted.push((tag, lane, s));
                        }
                    }
                },
                _ => if !claimed.is_empty() {
                    let c = claimed.remove(start % claimed.len());
                    let i = c.index();
                    drop(c);
                    model[i] = model[i].apply(PacketEvent::Release).unwrap();
                }
            }
            let held: BTreeSet<usize> = claimed.iter().map(|c| c.index()).collect();
            for (i, s) in model.iter().enumerate() {
                prop_assert_eq!(state_of(&v, i, held.contains(&i)), *s, "packet {}", i);
            }
        }
    }
}

#[test]
fn drain_range_serves_only_its_range_and_clamps() {
    let parts = PhaseBuffer::new(6);
    let view = parts.view();
    let submitted: Vec<_> = (0..6)
        .map(|i| {
            let mut p = view.claim(i).unwrap();
            assert_eq!(p.index(), i);
            p.write_lane(0, &request(i as u64));
            p.submit(3, 1)
        })
        .collect();
    let mut low = Collect::default();
    assert_eq!(view.host().drain_range(0..2, &mut low).packets, 2);
    assert_eq!(low.served, vec![0, 1]);
    let mut out_of_bounds = Collect::default();
    assert_eq!(view.host().drain_range(6..100, &mut out_of_bounds).packets, 0);
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = view.host().drain_range(5..1, &mut out_of_bounds).packets;
    assert_eq!(backwards, 0);
    let mut high = Collect::default();
    assert_eq!(view.host().drain_range(2..100, &mut high).packets, 4);
    assert_eq!(high.served, vec![2, 3, 4, 5]);
    for s in submitted {
        assert!(s.is_served());
    }
}

#[test]
fn set_occupied_address_rewrites_only_that_field() {
    let parts = PhaseBuffer::new(4);
    let view = parts.view();
    let before = view.prefix().headers.load(Ordering::Relaxed);
    view.set_occupied_address(0xdead_b000);
    assert_eq!(view.prefix().occupied.load(Ordering::Relaxed), 0xdead_b000);
    assert_eq!(view.prefix().headers.load(Ordering::Relaxed), before);
}
