//! Sequential behaviour of the phase protocol: init, claim/submit/drain/release, the bitmap, the
//! scan window, raw memory, hostile bytes.

use super::*;
use crate::host::Host as _;
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

mod properties;
mod raw;
mod window;

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
        let l = Layout::new(n as u32).unwrap();
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

#[test]
fn set_occupied_address_rewrites_only_that_field() {
    let parts = PhaseBuffer::new(4);
    let view = parts.view();
    let before = view.prefix().headers.load(Ordering::Relaxed);
    view.set_occupied_address(0xdead_b000);
    assert_eq!(view.prefix().occupied.load(Ordering::Relaxed), 0xdead_b000);
    assert_eq!(view.prefix().headers.load(Ordering::Relaxed), before);
}
