//! Sequential behaviour of the buffer: init, claim/submit/drain/release, wraparound, hostile bytes.

use super::*;
use crate::host::Host as _;
use crate::host::{ChainError, DrainError, DrainReport, ErrorCode, PacketRequest, ERROR_REPLY};
use crate::lane::{Payload, LANES};
use crate::sync::Ordering;
use crate::test_support::{echo, packets, sized, Collect};
use crate::view::LayoutError;
use proptest::prelude::*;

extern crate std;
use std::{boxed::Box, collections::BTreeSet, vec::Vec};

/// A buffer allocated in parts (tests do not need raw memory).
pub(crate) struct Parts {
    prefix: Prefix,
    headers: Box<[Header]>,
    payloads: Box<[Payload]>,
}

impl Parts {
    pub(crate) fn new(n: usize) -> Self {
        Self { prefix: Prefix::default(), headers: packets(n), payloads: packets(n) }
    }
    pub(crate) fn view(&self) -> View<'_> {
        let v = View::from_parts(&self.prefix, &self.headers, &self.payloads).unwrap();
        v
    }
}

#[test]
fn init_puts_every_packet_on_the_free_list_once() {
    // The last count is no power of two and spans several tag steps.
    for n in [2usize, 3, 5, 8, sized(100, 17)] {
        let parts = Parts::new(n);
        let b = parts.view();
        b.init(0x1000, 9);
        assert_eq!(b.prefix().index_mask.load(Ordering::Relaxed), (n as u64).next_power_of_two() - 1);
        assert_eq!(b.prefix().headers.load(Ordering::Relaxed), 0x1000 + 48);
        assert_eq!(b.prefix().doorbell.load(Ordering::Relaxed), 9);
        let mut seen = BTreeSet::new();
        let mut held = Vec::new();
        while let Some(c) = b.claim().unwrap() {
            assert!(seen.insert(c.index()), "packet {} claimed twice", c.index());
            held.push(c);
        }
        assert_eq!(seen.len(), n);
        // Index 0 comes last with tag 1, not as null.
        assert_eq!(held.last().unwrap().index(), 0);
    }
}

#[test]
fn round_trip_answers_each_lane_and_advances_the_tag() {
    let parts = Parts::new(2);
    let b = parts.view();
    b.init(0, 0);
    for round in 0..10u64 {
        let mut c = b.claim().unwrap().unwrap();
        for lane in [0, 5, LANES - 1] {
            c.write_lane(lane, &[round * 100 + lane as u64, 0, 0, 0, 0, 0, 0, 0]);
        }
        let mask = 1 | 1 << 5 | 1 << (LANES - 1);
        let s = c.submit(42, mask);
        assert!(!s.is_served());
        let mut h = Collect::default();
        let report = b.host().drain(&mut h);
        assert_eq!(report, DrainReport { packets: 1, lane_calls: 3, malformed: 0 });
        let done = s.wait(|| {});
        assert!(!done.host_error());
        for lane in [0, 5, LANES - 1] {
            assert_eq!(done.reply(lane), [round * 100 + lane as u64 + 1, 42]);
        }
        let before = done.tagged();
        done.release();
        let top = b.prefix().free_stack.load(Ordering::Relaxed);
        assert_eq!(top, b.geometry().advance_tag(before).raw());
    }
}

#[test]
fn drain_of_an_empty_stack_does_nothing() {
    let parts = Parts::new(3);
    let b = parts.view();
    b.init(0, 0);
    assert_eq!(b.host().drain(&mut Collect::default()), DrainReport::default());
}

#[test]
fn tag_wraps_at_the_edge_of_the_tag_space() {
    let parts = Parts::new(2); // step 2
    let b = parts.view();
    b.init(0, 0);
    // Put packet 0 on top with the last tag, then 1 below it.
    b.prefix().free_stack.store(u64::MAX - 1, Ordering::Relaxed);
    b.header(0).next.store(1, Ordering::Relaxed);
    b.header(1).next.store(0, Ordering::Relaxed);
    let c = b.claim().unwrap().unwrap();
    assert_eq!(c.index(), 0);
    let s = c.submit(1, 1);
    b.host().drain(&mut echo);
    s.wait(|| {}).release();
    assert_eq!(b.prefix().free_stack.load(Ordering::Relaxed), 2, "wrapped to index 0, tag 1");
    let again = b.claim().unwrap().unwrap();
    assert_eq!(again.index(), 0);
}

#[test]
fn dropping_a_claim_returns_the_packet() {
    let parts = Parts::new(2);
    let b = parts.view();
    b.init(0, 0);
    let a = b.claim().unwrap().unwrap();
    let c = b.claim().unwrap().unwrap();
    assert!(b.claim().unwrap().is_none());
    drop(a);
    drop(c);
    assert!(b.claim().unwrap().is_some());
}

#[test]
fn error_replies_set_the_host_error_bit() {
    let parts = Parts::new(2);
    let b = parts.view();
    b.init(0, 0);
    let s = b.claim().unwrap().unwrap().submit(9, 0b11);
    b.host().drain(&mut |p: &mut PacketRequest<'_>| p.reply_error_all(ErrorCode::UnknownService));
    let done = s.wait(|| {});
    assert!(done.host_error());
    assert_eq!(done.reply(1), [ERROR_REPLY, ErrorCode::UnknownService as u64]);
}

#[test]
fn a_cycle_in_the_ready_chain_is_bounded_and_served_once() {
    let parts = Parts::new(3);
    let b = parts.view();
    b.init(0, 0);
    let s0 = b.claim().unwrap().unwrap().submit(1, 1);
    let s1 = b.claim().unwrap().unwrap().submit(1, 1);
    // Hostile: make the chain loop (s1 -> s0 -> s1 -> ...).
    b.header(s0.index()).next.store(s1.index() as u64, Ordering::Relaxed);
    let mut h = Collect::default();
    let report = b.host().drain(&mut h);
    assert_eq!(report.packets, 2);
    assert!(h.errors.contains(&DrainError::NotSubmitted { index: s1.index() as u32 }));
    assert!(h.errors.iter().any(|e| matches!(e, DrainError::Chain(ChainError::ChainTooLong { limit: 3 }))));
    assert!(s0.is_served() && s1.is_served());
    let _ = (s0.wait(|| {}), s1.wait(|| {}));
}

#[test]
fn an_index_outside_the_buffer_is_reported_even_inside_the_mask() {
    let parts = Parts::new(3); // mask 3: index 3 passes the mask but does not exist
    let b = parts.view();
    b.init(0, 0);
    b.prefix().index_mask.store(u64::MAX, Ordering::Relaxed); // the host must not use this word
    b.prefix().ready_stack.store(3, Ordering::Relaxed);
    let mut h = Collect::default();
    let report = b.host().drain(&mut h);
    assert_eq!(report.packets, 0);
    assert_eq!(h.errors, [DrainError::Chain(ChainError::IndexOutOfRange { index: 3 })]);
}

#[test]
fn from_raw_checks_address_size_and_count() {
    let n = 3;
    let size = buffer_size(n).unwrap();
    let mut words = std::vec![0u64; size / 8 + 1];
    let base = words.as_mut_ptr() as *mut u8;
    // SAFETY (all calls): `words` outlives the views and is only accessed through them.
    unsafe {
        assert!(View::from_raw(base, size, n).is_ok());
        assert_eq!(
            View::from_raw(base, size - 1, n).err(),
            Some(LayoutError::TooSmall { needed: size, given: size - 1 })
        );
        assert!(matches!(View::from_raw(base.add(4), size, n), Err(LayoutError::Misaligned { .. })));
        assert!(matches!(View::from_raw(base, size, 1), Err(LayoutError::Geometry(_))));
        assert_eq!(View::from_raw(core::ptr::null_mut(), size, 2).err(), Some(LayoutError::Null));
    }
}

proptest! {

    #![proptest_config(crate::test_support::proptest_config())]
    /// Any bytes at all in the shared words: the drain returns, serves only in-range packets and
    /// serves each at most once.
    #[test]
    fn drain_survives_any_shared_words(
        n in 2usize..9,
        top in any::<u64>(),
        nexts in proptest::collection::vec(any::<u64>(), 8),
        controls in proptest::collection::vec(any::<u32>(), 8),
        masks in proptest::collection::vec(any::<u64>(), 8),
    ) {
        let parts = Parts::new(n);
        let b = parts.view();
        b.init(0, 0);
        b.prefix().ready_stack.store(top, Ordering::Relaxed);
        for i in 0..n {
            b.header(i).next.store(nexts[i], Ordering::Relaxed);
            b.header(i).control.store(controls[i], Ordering::Relaxed);
            b.header(i).activemask.store(masks[i], Ordering::Relaxed);
        }
        let mut h = Collect::default();
        let report = b.host().drain(&mut h);
        let unique: BTreeSet<_> = h.served.iter().collect();
        prop_assert_eq!(unique.len(), h.served.len(), "a packet was served twice");
        prop_assert!(h.served.len() <= n);
        prop_assert_eq!(report.packets as usize, h.served.len());
        prop_assert_eq!(report.malformed as usize, h.errors.len());
    }

    /// Sequential use against a model: every claim is a distinct packet, every submitted lane is
    /// answered, the free-list never loses a packet.
    #[test]
    fn sequential_ops_match_the_model(n in 2usize..6, ops in proptest::collection::vec(0u8..3, 1..60)) {
        let parts = Parts::new(n);
        let b = parts.view();
        b.init(0, 0);
        let mut claimed = Vec::new();
        let mut submitted = Vec::new();
        let mut tag = 0u64;
        for op in ops {
            match op {
                0 => match b.claim().unwrap() {
                    Some(c) => claimed.push(c),
                    None => prop_assert_eq!(claimed.len() + submitted.len(), n),
                },
                1 => if let Some(mut c) = claimed.pop() {
                    tag += 1;
                    c.write_lane(0, &[tag, 0, 0, 0, 0, 0, 0, 0]);
                    submitted.push((tag, c.submit(5, 1)));
                },
                _ => {
                    let report = b.host().drain(&mut echo);
                    prop_assert_eq!(report.packets as usize, submitted.len());
                    for (tag, s) in submitted.drain(..) {
                        let done = s.wait_until(|_| false).expect("served");
                        prop_assert_eq!(done.reply(0), [tag + 1, 5]);
                    }
                }
            }
        }
        let report = b.host().drain(&mut echo);
        prop_assert_eq!(report.packets as usize, submitted.len());
        for (_, s) in submitted { let _ = s.wait(|| {}); }
        drop(claimed);
        let mut all = BTreeSet::new();
        while let Some(c) = b.claim().unwrap() { all.insert(c.index()); core::mem::forget(c); }
        prop_assert_eq!(all.len(), n, "every packet is back on the free-list");
    }
}
