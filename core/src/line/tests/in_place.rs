//! Lane services on a line packet: served from the host's scratch in place.

use super::{request, Buffer};
use crate::host::{ErrorCode, Host as _, PacketRequest};
use crate::lane::SLOT_WORDS;

extern crate std;
use std::vec::Vec;

/// A lane service answers a line packet from its scratch in place (the lane loop's plain slots):
/// each lane reads its own request, its reply or error reply reaches its wave, and a loop from a
/// later lane serves only the lanes from there on.
#[test]
fn lane_services_serve_a_line_packet_in_place() {
    super::in_both_scans(|| {
        use crate::dispatch::{serve_lanes_from, ServiceTable};
        use crate::Dispatch as _;
        let b = Buffer::new(2);
        let view = b.view();
        // Odd lanes are refused; the others answer from words 0, 3 and 7.
        let service = |r: &[u64; SLOT_WORDS]| {
            if (r[0] >> 8) & 1 == 1 {
                Err(ErrorCode::BadRequest)
            } else {
                Ok([r[0] ^ r[7], r[3]])
            }
        };
        let table = ServiceTable::<1>::new().with(9, &service);
        for (number, mask) in [0b1011 | 1 << 40 | 1 << 63, u64::MAX, 1 << 6].into_iter().enumerate() {
            let mut packet = view.claim(0).expect("a free packet");
            for lane in crate::lane::lanes(mask) {
                packet.write_lane(lane, &request(number as u64, lane));
            }
            let submitted = packet.submit(9, mask);
            let report = view.host().drain(&mut |p: &mut PacketRequest<'_>| table.dispatch(p));
            assert_eq!(report.packets, 1);
            let done = submitted.wait(|| panic!("answered by the drain"));
            for lane in crate::lane::lanes(mask) {
                let r = request(number as u64, lane);
                if lane % 2 == 1 {
                    assert_eq!(done.error(lane), Some(ErrorCode::BadRequest), "call {number} lane {lane}");
                } else {
                    assert_eq!(done.reply(lane), [r[0] ^ r[7], r[3]], "call {number} lane {lane}");
                }
            }
            assert_eq!(done.host_error(), mask.count_ones() > 1);
        }
        let mut packet = view.claim(0).expect("a free packet");
        let mask = 0b1_0110_0101;
        for lane in crate::lane::lanes(mask) {
            packet.write_lane(lane, &request(7, lane));
        }
        let submitted = packet.submit(9, mask);
        view.host().drain(&mut |p: &mut PacketRequest<'_>| {
            let mut served = Vec::new();
            let errors = serve_lanes_from(p, 2, |lane, r| {
                assert_eq!(*r, request(7, lane), "lane {lane} reads its own request");
                served.push(lane);
                Ok([lane as u64, r[7]])
            });
            assert_eq!((errors, served.as_slice()), (0, &[2, 5, 6, 8][..]));
        });
        let done = submitted.wait(|| panic!("answered by the drain"));
        for lane in [2, 5, 6, 8] {
            assert_eq!(done.reply(lane), [lane as u64, request(7, lane)[7]]);
        }
        // Lane 0, before the loop's first lane, is answered with what its slot holds: its request's
        // first words (as in the protocols whose payload is shared).
        assert_eq!(done.reply(0), [request(7, 0)[0], request(7, 0)[1]]);
    });
}

/// `LaneService::serve_lanes` stores each lane in `serving` before its service runs (the lane a
/// panic guard answers), for one lane and for runs of lanes, in place.
#[test]
fn serve_lanes_marks_each_lane_before_serving_it() {
    use core::cell::{Cell, RefCell};
    std::thread_local! {
        // The service must be `Sync`: what it reads and records is the test thread's.
        static SERVING: Cell<usize> = const { Cell::new(usize::MAX) };
        static SEEN: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }
    fn service(r: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
        SEEN.with(|seen| seen.borrow_mut().push(SERVING.with(Cell::get)));
        Ok([r[0].wrapping_add(1), r[7]])
    }
    super::in_both_scans(|| {
        use crate::dispatch::LaneService;
        let b = Buffer::new(2);
        let view = b.view();
        for mask in [1 << 5, 0b1110_0111, u64::MAX, 1 << 63 | 1] {
            SEEN.with(|seen| seen.borrow_mut().clear());
            let mut packet = view.claim(0).expect("a free packet");
            for lane in crate::lane::lanes(mask) {
                packet.write_lane(lane, &request(3, lane));
            }
            let submitted = packet.submit(9, mask);
            view.host().drain(&mut |p: &mut PacketRequest<'_>| {
                SERVING.with(|serving| assert_eq!(service.serve_lanes(p, 0, serving), 0));
            });
            let done = submitted.wait(|| panic!("answered by the drain"));
            let lanes: Vec<usize> = crate::lane::lanes(mask).collect();
            SEEN.with(|seen| {
                assert_eq!(*seen.borrow(), lanes, "mask {mask:#x}: the lane stored before its service ran")
            });
            for lane in lanes {
                let r = request(3, lane);
                assert_eq!(done.reply(lane), [r[0].wrapping_add(1), r[7]], "mask {mask:#x} lane {lane}");
            }
        }
    });
}
