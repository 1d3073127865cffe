//! One emulated wave's hostcall from C, through the real producer path.

use crate::status::{status, Failure};
use hostcall_rs::core::SLOT_WORDS;
use hostcall_rs::lifecycle::EmulatedWave;
use std::ffi::{c_int, c_void};
use std::time::Duration;

/// How long an emulated call waits for a packet and a reply before `HOSTCALL_ERR_TIMED_OUT`.
pub const EMULATED_TIMEOUT: Duration = Duration::from_millis(10_000);

/// One hostcall by an emulated wave with `activemask` on an enabled buffer: each active lane `i`
/// sends `requests[i]` to `service`, and its reply lands in `replies[i]` (inactive entries are
/// neither read nor written). Returns `HOSTCALL_OK` once the host answered; an error reply of the
/// host (`{UINT64_MAX, code}` in a lane) is still `HOSTCALL_OK`.
///
/// # Safety
/// - `requests` and `replies` point to at least `64 - clz(activemask)` entries (may be null when
///   `activemask` is 0);
/// - the buffer stays enabled (and allocated) until this returns.
#[no_mangle]
pub unsafe extern "C" fn hostcall_emulated_call(
    buffer: *mut c_void,
    num_packets: u32,
    service: u32,
    activemask: u64,
    requests: *const [u64; SLOT_WORDS],
    replies: *mut [u64; 2],
) -> c_int {
    status(|| {
        if buffer.is_null() {
            return Err(Failure::null("buffer"));
        }
        let entries = 64 - activemask.leading_zeros() as usize;
        if entries > 0 && requests.is_null() {
            return Err(Failure::null("requests"));
        }
        if entries > 0 && replies.is_null() {
            return Err(Failure::null("replies"));
        }
        let (requests, replies) = if entries == 0 {
            (&[][..], &mut [][..])
        } else {
            // SAFETY: non-null (checked) and, by the contract, `entries` valid entries each; the
            // two arrays are the caller's and do not overlap our memory.
            unsafe {
                (
                    std::slice::from_raw_parts(requests, entries),
                    std::slice::from_raw_parts_mut(replies, entries),
                )
            }
        };
        // SAFETY: the contract keeps the buffer enabled, so valid, for this call.
        let wave = unsafe { EmulatedWave::new(buffer.cast(), num_packets, activemask) }?
            .with_timeout(EMULATED_TIMEOUT);
        let reply = wave.call(service, |lane| requests[lane])?;
        for (lane, out) in replies.iter_mut().enumerate() {
            if activemask >> lane & 1 == 1 {
                *out = reply.lane(lane);
            }
        }
        Ok(())
    })
}
