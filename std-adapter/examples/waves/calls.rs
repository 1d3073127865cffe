//! The calls each wave makes, the services that answer them, and the replies they must get.

use hostcall::{PacketService, Reply, Services, Wave};
use hostcall_core::lanes;
use hostcall_core::FUNCTION_CALL;
use hostcall_core::{PacketRequest, SLOT_WORDS};

/// A lane service: each lane gets `[a + b, c]` for its request `[a, b, c, ..]`.
const ADD: u32 = 100;
/// A packet service ([`LaneSum`]).
const LANE_SUM: u32 = 101;

/// The services a wave cycles through, call by call.
const CYCLE: [u32; 3] = [ADD, LANE_SUM, FUNCTION_CALL];

/// The service of a wave's `call`-th call.
pub(crate) fn service_of_call(call: u64) -> u32 {
    CYCLE[(call % CYCLE.len() as u64) as usize]
}

/// Registers [`ADD`] and [`LANE_SUM`] and enables FUNCTION_CALL and PRINTF on `services`.
pub(crate) fn register(services: &Services) {
    services.register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    services.register_packet(LANE_SUM, "lane-sum", LaneSum).unwrap();
    // SAFETY: the only devices are this program's emulated waves, which send `mul_add`'s address.
    unsafe { services.enable_function_calls() }.unwrap();
    services.enable_printf(hostcall::services::printf::StdStreams, Default::default()).unwrap();
}

/// The host function FUNCTION_CALL jumps to: out = [a * b + c, a ^ b].
extern "C" fn mul_add(out: *mut [u64; 2], input: *const [u64; 7]) {
    // SAFETY: the listener passes valid pointers for the duration of the call.
    let (out, input) = unsafe { (&mut *out, &*input) };
    *out = [input[0].wrapping_mul(input[1]).wrapping_add(input[2]), input[0] ^ input[1]];
}

/// Per packet: each lane gets the sum of word 0 over all active lanes, and its lane number.
struct LaneSum;
impl PacketService for LaneSum {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let sum = packet.lanes().map(|lane| packet.request(lane)[0]).fold(0u64, u64::wrapping_add);
        for lane in packet.lanes() {
            packet.reply(lane, [sum, lane as u64]);
        }
    }
}

/// One call's request for `lane`.
pub(crate) fn request(service: u32, seed: u64, lane: usize) -> [u64; SLOT_WORDS] {
    let a = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lane as u64;
    match service {
        ADD => [a, lane as u64, seed, 0, 0, 0, 0, 0],
        FUNCTION_CALL => [mul_add as *const () as usize as u64, a, 3, lane as u64, 0, 0, 0, 0],
        _ => [a, 0, 0, 0, 0, 0, 0, 0],
    }
}

/// The reply `lane` must get to [`request`]`(service, seed, lane)` when the lanes of `mask` call.
fn expected(service: u32, seed: u64, lane: usize, mask: u64) -> [u64; 2] {
    let r = request(service, seed, lane);
    match service {
        ADD => [r[0].wrapping_add(r[1]), r[2]],
        FUNCTION_CALL => [r[1].wrapping_mul(r[2]).wrapping_add(r[3]), r[1] ^ r[2]],
        _ => {
            let sum = lanes(mask).map(|l| request(service, seed, l)[0]);
            [sum.fold(0u64, u64::wrapping_add), lane as u64]
        }
    }
}

/// The lanes of `wave` whose reply to its call of `service` with `seed` is wrong.
pub(crate) fn wrong_lanes(wave: &Wave, service: u32, seed: u64, reply: &Reply) -> u64 {
    let mask = wave.activemask();
    lanes(mask).filter(|&l| reply.lane(l) != expected(service, seed, l, mask)).count() as u64
}
