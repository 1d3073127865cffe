//! Sequential behaviour of the line protocol: round trips, the wrap, torn and stale words,
//! abandoned claims, raw memory (hostile bytes: `tests/hostile.rs`). Every test of the scan runs
//! both of its copies ([`in_both_scans`]).

use super::*;
use crate::host::ErrorCode;
use crate::host::Host as _;
use crate::host::{DrainReport, PacketRequest};
use crate::lane::{LANES, SLOT_WORDS};
use crate::sync::{AtomicU32, Ordering};

use crate::test_support::{packets, words};

extern crate std;
use std::{boxed::Box, vec::Vec};

mod hostile;
mod in_place;
mod stalled;

/// Runs `test` with the scan's copy this CPU runs (on x86-64 with AVX2 and `popcnt`, the one built
/// for them), then, where that copy is built in, with the portable copy (`line/host.rs`): the
/// tests of the scan run both. (Under Miri and loom, and off x86-64, there is only the portable
/// one, run once.)
fn in_both_scans(mut test: impl FnMut()) {
    test();
    if VECTOR_SCAN_BUILT {
        super::host::with_portable_scan(test);
    }
}

/// Whether the scan's copy for AVX2 and `popcnt` is built in.
const VECTOR_SCAN_BUILT: bool =
    cfg!(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)));

/// A line buffer allocated in parts.
struct Buffer {
    prefix: Prefix,
    device_seq: Box<[AtomicU32]>,
    occupied: Box<[AtomicU32]>,
    served: Box<[AtomicU32]>,
    requests: Box<[Request]>,
    replies: Box<[Reply]>,
}

impl Buffer {
    fn new(n: usize) -> Box<Self> {
        let buffer = Box::new(Self {
            prefix: Prefix::default(),
            device_seq: words(n),
            occupied: words(n.div_ceil(32)),
            served: words(n),
            requests: packets(n),
            replies: packets(n),
        });
        buffer.view().init(0, 0);
        buffer
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
        .unwrap()
    }
}

/// Lane `lane`'s request in call `call`: every word's top 7 bits (the packed word's) differ by
/// word, lane and call, and bits 48..57 are set.
fn request(call: u64, lane: usize) -> [u64; SLOT_WORDS] {
    core::array::from_fn(|k| {
        let top = (k as u64 * 37 + lane as u64 * 5 + call) % 128;
        top << 57 | 0x01ff_0000_0000_0000 | call << 40 | (lane as u64) << 8 | k as u64
    })
}

/// Echoes word 0 and the complement of word 7 of every lane.
fn echo(p: &mut PacketRequest<'_>) {
    for lane in p.lanes().collect::<Vec<_>>() {
        let r = p.request(lane);
        p.reply(lane, [r[0], !r[7]]);
    }
}

/// One call of packet-claiming wave `start` with `mask`, checked.
fn call(view: &View<'_>, start: usize, number: u64, mask: u64) {
    let mut packet = view.claim(start).expect("a free packet");
    for lane in crate::lane::lanes(mask) {
        packet.write_lane(lane, &request(number, lane));
    }
    let submitted = packet.submit(9, mask);
    assert_eq!(submitted.is_served(), mask == 0, "an empty call needs no answer");
    let report = view.host().drain(&mut echo);
    assert_eq!(report, DrainReport { packets: 1, lane_calls: mask.count_ones(), malformed: 0 });
    assert_eq!(view.host().drain(&mut echo).packets, 0, "served once");
    let done = submitted.wait(|| panic!("answered by the drain"));
    for lane in crate::lane::lanes(mask) {
        let r = request(number, lane);
        assert_eq!(done.reply(lane), [r[0], !r[7]], "call {number} lane {lane}");
    }
    assert!(!done.host_error());
}

#[test]
fn round_trips_in_every_shape() {
    in_both_scans(|| {
        let b = Buffer::new(3);
        let view = b.view();
        for (number, mask) in [1u64, 1 << 63, u64::MAX, 0x8000_0001_0000_0001, 0].into_iter().enumerate() {
            call(&view, number, number as u64, mask);
        }
        assert_eq!(view.device_seq(0).load(Ordering::Relaxed), 2);
        assert_eq!(view.served(1).load(Ordering::Relaxed), 2);
    });
}

#[test]
fn a_kept_scratch_serves_every_shape_and_is_zeroed_once() {
    in_both_scans(|| {
        use crate::scan::DrainScope;
        let b = Buffer::new(3);
        let view = b.view();
        let mut scratch = ScratchPayload::new();
        let mut scope = DrainScope::Window(view.scan_window());
        let mut incomplete = [Incomplete::default(); 3];
        // Idle drains leave it untouched.
        assert_eq!(
            view.host()
                .drain_scope(&mut scope, Some(&mut scratch), Some(&mut incomplete[..]), &mut echo)
                .packets,
            0
        );
        assert!(std::format!("{scratch:?}").contains("initialised: false"));
        // Whole, one-lane and split masks one after the other through the same scratch: each lane
        // reads its own request, whatever an earlier packet left in the slots of inactive lanes, and
        // those hold initialised words (what an earlier request or reply wrote, or the first zeroes).
        for (number, mask) in
            [1, u64::MAX, 1 << 63, 0x00ff_0000_ff00_0000, 1, u64::MAX].into_iter().enumerate()
        {
            let mut packet = view.claim(number).expect("a free packet");
            for lane in crate::lane::lanes(mask) {
                packet.write_lane(lane, &request(number as u64, lane));
            }
            let submitted = packet.submit(9, mask);
            let mut inactive = 0u64;
            let report = view.host().drain_scope(
                &mut scope,
                Some(&mut scratch),
                Some(&mut incomplete[..]),
                &mut |p: &mut PacketRequest<'_>| {
                    for lane in 0..LANES {
                        if p.activemask() & 1 << lane == 0 {
                            inactive = inactive.wrapping_add(p.request(lane)[0]);
                            // initialised: readable
                        }
                    }
                    echo(p)
                },
            );
            assert_eq!(report, DrainReport { packets: 1, lane_calls: mask.count_ones(), malformed: 0 });
            let done = submitted.wait(|| panic!("answered by the drain"));
            for lane in crate::lane::lanes(mask) {
                let r = request(number as u64, lane);
                assert_eq!(done.reply(lane), [r[0], !r[7]], "call {number} lane {lane}");
            }
            let _ = inactive;
            assert!(std::format!("{scratch:?}").contains("initialised: true"));
        }
    });
}

#[test]
fn the_wrap_refreshes_and_no_stale_word_matches() {
    in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        // Lane 5 writes in the call with sequence 1; then the packet goes round the whole cycle.
        call(&view, 0, 0, 1 << 5);
        view.device_seq(0).store(SEQ_MAX - 2, Ordering::Relaxed);
        view.served(0).store(SEQ_MAX - 2, Ordering::Relaxed);
        // Planted stale words with the sequences the next calls use: the refreshes must clear them.
        let plant = |seq: u32| {
            view.request(0).lanes[7].iter().for_each(|w| w.store(word(0xbad, seq), Ordering::Relaxed));
            view.reply(0).lanes[7].iter().for_each(|w| w.store(word(0xbad, seq), Ordering::Relaxed));
        };
        plant(1);
        call(&view, 0, 1, 1); // SEQ_MAX - 1: no refresh
        assert_eq!(view.request(0).lanes[7][0].load(Ordering::Relaxed), word(0xbad, 1));
        let packet = view.claim(0).unwrap(); // SEQ_MAX: refresh at the claim
        assert_eq!(packet.seq(), SEQ_MAX);
        assert_eq!(view.request(0).lanes[7][0].load(Ordering::Relaxed), 0, "refreshed");
        assert_eq!(view.reply(0).lanes[7][0].load(Ordering::Relaxed), 0, "refreshed");
        drop(packet); // uses SEQ_MAX up
        plant(2);
        let packet = view.claim(0).unwrap();
        assert_eq!(packet.seq(), 1, "wrapped past 0");
        assert_eq!(view.reply(0).lanes[7][2].load(Ordering::Relaxed), 0, "refreshed again");
        drop(packet);
        for number in 2..6 {
            call(&view, 0, number, 1 << 7 | 1 << 5);
        }
    });
}

/// Call `number` on a claimed packet with `mask`, served by one drain and checked.
fn serve_kept<'a>(view: &View<'a>, mut packet: Claimed<'a>, number: u64, mask: u64) -> Completed<'a> {
    for lane in crate::lane::lanes(mask) {
        packet.write_lane(lane, &request(number, lane));
    }
    let submitted = packet.submit(9, mask);
    assert_eq!(view.host().drain(&mut echo).packets, 1, "call {number} served once");
    let done = submitted.wait(|| panic!("answered by the drain"));
    for lane in crate::lane::lanes(mask) {
        assert_eq!(done.reply(lane), [request(number, lane)[0], !request(number, lane)[7]]);
    }
    done
}

#[test]
fn a_kept_packet_crosses_the_wrap_without_touching_occupied() {
    in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        let held = |view: &View<'_>| view.occupied_word(0).load(Ordering::Relaxed) == 1;
        let done = serve_kept(&view, view.claim(0).expect("a free packet"), 0, 1 << 5);
        // `keep` continues from the call it completes: sequence 2 after 1.
        let mut packet = done.keep();
        assert!(held(&view));
        assert_eq!(packet.seq(), 2);
        packet.write_lane(0, &request(99, 0));
        drop(packet); // an unsent kept claim uses its sequence up and frees the packet
        assert!(!held(&view), "freed");
        assert_eq!(view.device_seq(0).load(Ordering::Relaxed), 2);
        // Close to the wrap, with stale words planted under the sequences the kept calls will use.
        view.device_seq(0).store(SEQ_MAX - 2, Ordering::Relaxed);
        let lane7 = &view.request(0).lanes[7];
        let plant = |seq: u32| lane7.iter().for_each(|w| w.store(word(0xbad, seq), Ordering::Relaxed));
        plant(SEQ_MAX);
        let mut packet = view.claim(0).expect("free again");
        for (number, expected) in [SEQ_MAX - 1, SEQ_MAX, 1, 2].into_iter().enumerate() {
            assert_eq!(packet.seq(), expected);
            if expected == SEQ_MAX || expected == 1 {
                assert_eq!(lane7[0].load(Ordering::Relaxed), 0, "refreshed at {expected}");
            }
            if expected == SEQ_MAX {
                plant(1);
            }
            let done = serve_kept(&view, packet, number as u64 + 1, 1 << 3);
            assert!(held(&view), "held throughout");
            packet = done.keep();
        }
        drop(packet);
        assert!(!held(&view));
        // Lane 7 never called: its stale words were never taken.
        assert_eq!(view.host().drain(&mut echo).packets, 0);
    });
}

#[test]
fn a_torn_or_stale_request_is_not_served_until_complete() {
    in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        call(&view, 1, 0, 0b11);
        let mut packet = view.claim(1).unwrap();
        let seq = packet.seq();
        packet.write_lane(0, &request(1, 0));
        packet.write_lane(1, &request(1, 1));
        let submitted = packet.submit(9, 0b11);
        let lanes = &view.request(1).lanes;
        // Each word of lane 1 in turn has not arrived (it still holds the previous call's sequence),
        // or is torn between calls (a foreign sequence): refused either way.
        for (k, line_word) in lanes[1].iter().enumerate() {
            let fresh = line_word.load(Ordering::Relaxed);
            for stale in [seq - 1, seq + 1] {
                line_word.store(word(fresh, stale), Ordering::Relaxed);
                assert_eq!(view.host().drain(&mut echo).packets, 0, "word {k} of sequence {stale}");
            }
            line_word.store(fresh, Ordering::Relaxed);
        }
        // The mask word is checked as well.
        let mask = view.request(1).mask.load(Ordering::Relaxed);
        view.request(1).mask.store(word(mask, 0), Ordering::Relaxed);
        assert_eq!(view.host().drain(&mut echo).packets, 0);
        view.request(1).mask.store(mask, Ordering::Relaxed);
        assert_eq!(view.host().drain(&mut echo).packets, 1);
        // A reply word still carrying an old sequence keeps the wave waiting.
        let reply = &view.reply(1).lanes[0][2];
        let answered = reply.load(Ordering::Relaxed);
        reply.store(word(answered, seq - 1), Ordering::Relaxed);
        let Err(submitted) = submitted.wait_until(|polls| polls < 3) else {
            panic!("a torn reply was taken")
        };
        reply.store(answered, Ordering::Relaxed);
        assert_eq!(submitted.wait(|| {}).reply(1)[0], request(1, 1)[0]);
    });
}

#[test]
fn reserved_bits_change_nothing() {
    in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        let mut packet = view.claim(0).expect("a free packet");
        packet.write_lane(2, &request(4, 2));
        let submitted = packet.submit(9, 1 << 2);
        let (request_block, relaxed) = (view.request(0), Ordering::Relaxed);
        let set = |word: &crate::sync::AtomicU64, bits: u64| word.store(word.load(relaxed) | bits, relaxed);
        set(&request_block.head, DATA_MASK & !((1 << 39) - 1)); // head bits 39..57
        set(&request_block.lanes[2][8], 1 << 56); // the packed word's bit 56
        request_block.reserved.iter().for_each(|word| word.store(u64::MAX, relaxed));
        let mut service = 0;
        let report = view.host().drain(&mut |p: &mut PacketRequest<'_>| {
            service = p.service();
            assert_eq!((p.activemask(), p.request(2)), (1 << 2, request(4, 2)));
            echo(p)
        });
        assert_eq!((report.packets, service), (1, 9));
        // The reply's packed word's reserved bits (14..57) are not the wave's to read either.
        set(&view.reply(0).lanes[2][2], DATA_MASK & !((1 << 14) - 1));
        let r = request(4, 2);
        assert_eq!(submitted.wait(|| {}).reply(2), [r[0], !r[7]]);
    });
}

#[test]
fn a_service_sees_its_requests_and_zeroes_in_the_other_lanes() {
    in_both_scans(|| {
        let b = Buffer::new(3);
        let view = b.view();
        // Two packets in one scan: lanes 0, 2..=33 and 63, then lane 1 only.
        let masks = [0x3_ffff_fffd | 1 << 63, 1 << 1];
        let submitted: Vec<_> = masks
            .iter()
            .enumerate()
            .map(|(number, &mask)| {
                let mut packet = view.claim(number).expect("a free packet");
                for lane in crate::lane::lanes(mask) {
                    packet.write_lane(lane, &request(number as u64, lane));
                }
                packet.submit(9, mask)
            })
            .collect();
        let mut served = 0;
        let report = view.host().drain(&mut |p: &mut PacketRequest<'_>| {
            let number = p.index() as u64;
            for lane in 0..LANES {
                let slot: [u64; SLOT_WORDS] = p.payload().read_lane(lane);
                if p.activemask() & 1 << lane != 0 {
                    assert_eq!(slot, request(number, lane), "packet {number} lane {lane}");
                } else if number == 0 {
                    assert_eq!(slot, [0; SLOT_WORDS], "lane {lane} is zero in the scan's first packet");
                } else {
                    // A later packet of the scan: the first one's words or zeroes, nothing else.
                    let first = if masks[0] & 1 << lane != 0 { request(0, lane) } else { [0; SLOT_WORDS] };
                    let mut replied = first; // what `echo` wrote over it
                    replied[1] = !first[7];
                    assert!(slot == first || slot == replied, "packet {number} lane {lane}: {slot:x?}");
                }
            }
            served += 1;
            echo(p);
        });
        assert_eq!((report.packets, served), (2, 2));
        for (number, submitted) in submitted.into_iter().enumerate() {
            let done = submitted.wait(|| panic!("answered by the drain"));
            for lane in crate::lane::lanes(masks[number]) {
                let r = request(number as u64, lane);
                assert_eq!(done.reply(lane), [r[0], !r[7]]);
            }
        }
    });
}

#[test]
fn an_abandoned_claim_never_matches_the_next_call() {
    in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        let mut packet = view.claim(0).unwrap();
        packet.write_lane(0, &[0xbad; SLOT_WORDS]);
        let abandoned = packet.seq();
        drop(packet);
        let packet = view.claim(0).unwrap();
        assert_eq!(packet.seq(), abandoned + 1);
        // The next call writes only the mask and head, not lane 0: the host must wait for lane 0.
        let submitted = packet.submit(9, 1);
        assert_eq!(view.host().drain(&mut echo).packets, 0, "lane 0 holds the abandoned sequence");
        drop(submitted); // leaks packet 0
        assert_eq!(view.claim(0).unwrap().index(), 1);
    });
}

#[test]
fn errors_reach_the_wave_and_raw_memory_works() {
    in_both_scans(|| {
        #[repr(C, align(64))]
        struct Line([u64; 8]);
        let n = 4usize;
        let len = buffer_size(n as u32).unwrap();
        let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
        let base = memory.as_mut_ptr().cast::<u8>();
        // SAFETY: `memory` outlives the view and is only accessed through it.
        let view = unsafe { View::from_raw(base, len, n as u32) }.unwrap();
        view.init(0x1000, 5);
        let layout = Layout::new(n as u32).unwrap();
        assert_eq!(view.prefix().replies.load(Ordering::Relaxed), 0x1000 + layout.replies as u64);
        // SAFETY: refused before any access.
        let misaligned = unsafe { View::from_raw(base.add(8), len, n as u32) };
        assert!(matches!(misaligned, Err(crate::LayoutError::Misaligned { .. })));
        let mut packet = view.claim(2).unwrap();
        packet.write_lane(1, &[1; SLOT_WORDS]);
        let submitted = packet.submit(7, 0b10);
        view.host().drain(&mut |p: &mut PacketRequest<'_>| p.reply_error(1, ErrorCode::Refused));
        let done = submitted.wait(|| {});
        assert!(done.host_error());
        assert_eq!(done.error(1), Some(ErrorCode::Refused));
    });
}
