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
