//! `MALLOC` and `FREE` through the buffer's DEVMEM service (hostcall service 3, the backend's
//! device memory, with its budget): the runtimes serve these, not libc's handler. `MALLOC` is
//! one turn (the size in word 0 in, the address in word 0 out, 0 on failure); `FREE` one packet
//! with the address in word 0 and no reply (a null address frees nothing, as C's `free`).
//!
//! Allocations ask DEVMEM for LLVM's alignment rule ([`LLVM_RULE`] in word 2): requests of 1 MiB
//! and more come back 2 MiB aligned, as LLVM libc's GPU allocator needs of its slabs and large
//! blocks (`services::devmem`, "Alignment"); smaller ones 4 KiB aligned.

use super::RpcCounters;
use crate::services::devmem::LLVM_RULE;
use hostcall_core::rpc::{serve_as_packet, Turn};
use hostcall_core::DEVMEM;
use hostcall_core::{DrainHandler, Payload};

/// Serves a `MALLOC` (`free == false`) or `FREE` turn of the lanes of `mask`; when not
/// `allowed`, answers `MALLOC` with null and frees nothing.
pub(super) fn serve(
    turn: &mut Turn<'_>,
    mask: u64,
    free: bool,
    allowed: bool,
    scratch: &Payload,
    packets: &mut (impl DrainHandler + ?Sized),
    counters: &mut RpcCounters,
) {
    if !allowed {
        counters.refused_lanes += u64::from(mask.count_ones());
        if !free {
            for lane in turn.lanes(mask) {
                turn.write(lane as u32, &[0; 8]);
            }
        }
        return;
    }
    let mut requests = 0u64;
    for lane in turn.lanes(mask) {
        let word = turn.read(lane as u32)[0];
        // DEVMEM's request: word 0 = the address to free, else word 1 = the bytes to allocate
        // under LLVM's rule (word 2).
        let request = if free { [word, 0, 0, 0, 0, 0, 0, 0] } else { [0, word, LLVM_RULE, 0, 0, 0, 0, 0] };
        if !free || word != 0 {
            requests |= 1 << lane;
        }
        turn.write(lane as u32, &request);
    }
    if requests == 0 {
        return;
    }
    serve_as_packet(turn, requests, DEVMEM, scratch, packets);
}
