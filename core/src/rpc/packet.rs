//! ROCm clr's `'r'` opcodes (and this project's `'h'`) as hostcall packets: one receive-then-send turn whose lanes
//! carry the same eight request words and two reply words as a hostcall packet, so every
//! [`DrainHandler`] (and the services behind it) serves them unchanged.

use super::host::Turn;
use super::lane_copy;
use super::opcode::{namespace, HOSTCALL, ROCM};
use crate::host::{DrainHandler, PacketRequest};
use crate::lane::Payload;

/// The hostcall service id (PROTOCOL.md section 3) an opcode carries: a ROCm `'r'` opcode's
/// (FUNCTION (0) is FUNCTION_CALL (1), DEVMEM (1) is DEVMEM (3), SANITIZER (2) is SANITIZER (4),
/// PRINTF (3) is PRINTF (2)), or the id in the low 24 bits of this project's `'h'` namespace.
/// `None` for any other opcode.
///
/// ```
/// use hostcall_core::rpc::{opcode::{self, rocm, HOSTCALL}, service_of};
/// assert_eq!(service_of(rocm::DEVMEM), Some(3));
/// assert_eq!(service_of(opcode::opcode(HOSTCALL, 100)), Some(100));
/// assert_eq!(service_of(0x6300_0002), None);
/// ```
pub const fn service_of(opcode: u32) -> Option<u32> {
    let n = opcode & 0x00ff_ffff;
    match namespace(opcode) {
        ROCM => match n {
            0 => Some(1),
            1 => Some(3),
            2 => Some(4),
            3 => Some(2),
            _ => None,
        },
        HOSTCALL => Some(n),
        _ => None,
    }
}

/// The opcode that carries hostcall service `service`: ROCm's `'r'` opcode for its four, else
/// `'h' << 24 | service` (an id of 2^24 or more is carried as reserved id 0, which every host
/// answers with an error).
///
/// ```
/// use hostcall_core::rpc::{opcode_of, service_of};
/// for id in [1, 2, 3, 4, 100] {
///     assert_eq!(service_of(opcode_of(id)), Some(id));
/// }
/// ```
pub const fn opcode_of(service: u32) -> u32 {
    match service {
        1 => super::opcode::rocm::FUNCTION,
        2 => super::opcode::rocm::PRINTF,
        3 => super::opcode::rocm::DEVMEM,
        4 => super::opcode::rocm::SANITIZER,
        id if id < 1 << 24 => super::opcode::opcode(HOSTCALL, id),
        _ => super::opcode::opcode(HOSTCALL, 0),
    }
}

/// Serves the lanes of `mask` of this turn as one packet of `service`: each lane's eight words
/// are copied into `payload` (the host's scratch: never the shared buffer), `handler` serves the
/// packet, and each lane's two reply words (PacketRequest::reply writes those only) go back into its lane buffer (words 2..8 keep the
/// request, as clr's server leaves them). The turn is left for the caller to finish. Returns
/// the packet's error flag.
#[inline]
pub fn serve_as_packet(
    turn: &mut Turn<'_>,
    mask: u64,
    service: u32,
    payload: &Payload,
    handler: &mut (impl DrainHandler + ?Sized),
) -> bool {
    let mask = mask & crate::lane::LANE_MASK;
    for (lane, buffer) in turn.lane_buffers(mask) {
        lane_copy::request_in(buffer, &payload.slots[lane]);
    }
    let mut packet = PacketRequest::new(turn.port(), service, mask, payload);
    handler.serve(&mut packet);
    let error = packet.has_error();
    for (lane, buffer) in turn.lane_buffers(mask) {
        // Only the reply's words: words 2..8 keep the request (and their cache line stays clean).
        lane_copy::reply_out(&payload.slots[lane], buffer);
    }
    error
}
