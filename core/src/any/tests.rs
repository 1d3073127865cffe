//! One round trip of every protocol through the switch, on raw buffers.

use super::*;
use crate::host::ErrorCode;
use crate::host::PacketRequest;
use crate::lane::{ClaimedPacket, CompletedPacket, SubmittedPacket, SLOT_WORDS};

extern crate std;
use std::vec::Vec;

#[repr(C, align(64))]
struct Line([u64; 8]);

/// One call through the switch on a raw buffer of `protocol`: the same code for every one.
fn round_trip(protocol: Protocol) {
    let n = 3usize;
    let len = protocol.buffer_size(n as u32).unwrap();
    let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
    let base = memory.as_mut_ptr().cast::<u8>();
    // SAFETY: `memory` outlives the view and is only accessed through it.
    let view = unsafe { AnyView::from_raw(protocol, base, len, n as u32) }.unwrap();
    // An RPC client's lock bits are its own memory, beside the buffer.
    let locks = [crate::sync::AtomicU32::new(0)];
    let view = match view {
        AnyView::Rpc(rpc) => AnyView::Rpc(rpc.with_locks(&locks).unwrap()),
        other => other,
    };
    view.init(base as u64, 0);
    assert_eq!((view.protocol(), view.num_packets()), (protocol, 3));
    let mut packet = view.claim(1).unwrap().expect("a free packet");
    packet.write_lane(0, &[41, 0, 0, 0, 0, 0, 0, 0]);
    packet.write_lane(1, &[0; SLOT_WORDS]);
    let submitted = packet.submit(5, 0b11);
    let mut scope = view.scope();
    let mut scratch = HostScratch::new();
    let report =
        view.drain_scope(&mut scope, &mut scratch, AnyStateMut::None, &mut |p: &mut PacketRequest<'_>| {
            p.reply(0, [p.request(0)[0] + 1, 0]);
            p.reply_error(1, ErrorCode::Refused);
        });
    assert_eq!(report, DrainReport { packets: 1, lane_calls: 2, malformed: 0 });
    let done = submitted.wait(|| {});
    assert_eq!(done.reply(0), [42, 0]);
    assert!(done.host_error());
    assert_eq!(ErrorCode::from_reply(done.reply(1)), Some(ErrorCode::Refused));
}

#[test]
fn every_protocol_through_one_switch() {
    round_trip(Protocol::Stack);
    round_trip(Protocol::Phase);
    round_trip(Protocol::Line);
    round_trip(Protocol::Rpc { lanes: 2 });
    assert!(matches!(
        // SAFETY: a null base is refused before any access.
        unsafe { AnyView::from_raw(Protocol::Phase, core::ptr::null_mut(), 1 << 20, 2) },
        Err(LayoutError::Null)
    ));
}
