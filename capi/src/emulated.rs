//! One emulated wave's hostcall from C, through the real producer path of the buffer's protocol.
//!
//! The caller's arrays are read and written through raw pointers, never as Rust slices: the
//! contract requires them aligned (checked) but lets them overlap each other, so every request is
//! copied out before any reply is written back. What they must not overlap is the memory the
//! listener and device code share (the buffer, a phase buffer's bitmap), which is checked too.

use crate::status::{status, Failure, HOSTCALL_ERR_MISALIGNED, HOSTCALL_ERR_OVERLAPS};
use hostcall_core::{LANES, REPLY_WORDS, SLOT_WORDS};
use hostcall_rs::EmulatedWave;
use std::ffi::{c_int, c_void};
use std::mem::{align_of, size_of};
use std::time::Duration;

/// How long an emulated call waits for a packet and a reply before `HOSTCALL_ERR_TIMED_OUT`.
pub const EMULATED_TIMEOUT: Duration = Duration::from_millis(10_000);

/// One hostcall by an emulated wave with `activemask` on an enabled buffer of either protocol:
/// each active lane `i` sends `requests[i]` to `service`, and its reply lands in `replies[i]`
/// (inactive entries are neither read nor written). Returns `HOSTCALL_OK` once the host
/// answered; an error reply of the host (`{UINT64_MAX, code}` in a lane, `{0, code}` for DEVMEM)
/// is still `HOSTCALL_OK`.
///
/// Checked, with their codes: a null `buffer`, `requests` or `replies` (the arrays may be null
/// when `activemask` is 0) `HOSTCALL_ERR_NULL`; `requests` or `replies` not aligned to 8
/// `HOSTCALL_ERR_MISALIGNED`; either array overlapping the buffer or its bitmap
/// `HOSTCALL_ERR_OVERLAPS`; a buffer not enabled, or enabled with another packet count.
///
/// # Safety
/// - `requests` points to at least `64 - clz(activemask)` readable entries, and `replies` to as
///   many writable ones, not accessed by another thread during the call. The two arrays may
///   overlap each other: every request is read before any reply is written;
/// - the buffer stays enabled (and allocated) until this returns.
#[no_mangle]
pub unsafe extern "C" fn hostcall_emulated_call(
    buffer: *mut c_void,
    num_packets: u32,
    service: u32,
    activemask: u64,
    requests: *const [u64; SLOT_WORDS],
    replies: *mut [u64; REPLY_WORDS],
) -> c_int {
    status(|| {
        if buffer.is_null() {
            return Err(Failure::null("buffer"));
        }
        let entries = 64 - activemask.leading_zeros() as usize;
        let requests = CallerArray::new(requests, entries, "requests")?;
        let replies = CallerArray::new(replies.cast_const(), entries, "replies")?;
        // SAFETY: the contract keeps the buffer enabled, so valid, for this call.
        let wave = unsafe { EmulatedWave::new(buffer.cast(), num_packets, activemask) }?
            .with_timeout(EMULATED_TIMEOUT);
        requests.check_apart(&wave)?;
        replies.check_apart(&wave)?;
        let (requests, replies) = (requests.array, replies.array.cast_mut());
        let mut copied = [[0u64; SLOT_WORDS]; LANES];
        for lane in active(activemask) {
            // SAFETY: non-null and aligned (checked), `entries > lane` readable entries by the
            // contract, outside the shared memory (checked), so a plain read races with nothing.
            copied[lane] = unsafe { requests.add(lane).read() };
        }
        let reply = wave.call(service, |lane| copied[lane])?;
        log::trace!(
            "emulated call answered: buffer {:#x}, service {service}, lanes {activemask:#x}",
            buffer as usize
        );
        for lane in active(activemask) {
            // SAFETY: as for the reads, writable by the contract; every read is done, so a
            // `replies` overlapping `requests` changes no request.
            unsafe { replies.add(lane).write(reply.lane(lane)) };
        }
        Ok(())
    })
}

/// The active lanes of `mask`, lowest first.
fn active(mask: u64) -> impl Iterator<Item = usize> {
    (0..LANES).filter(move |lane| mask >> lane & 1 == 1)
}

/// One of the caller's arrays: `entries` entries of `T` at `array`.
struct CallerArray<'n, T> {
    array: *const T,
    entries: usize,
    name: &'n str,
}

impl<'n, T> CallerArray<'n, T> {
    /// Checks the pointer: not null, aligned for `T` (nothing to check, and null allowed, for
    /// 0 entries).
    fn new(array: *const T, entries: usize, name: &'n str) -> Result<Self, Failure> {
        let address = array as usize;
        if entries > 0 && array.is_null() {
            return Err(Failure::null(name));
        }
        if entries > 0 && address % align_of::<T>() != 0 {
            let align = align_of::<T>();
            return Err(Failure::new(
                HOSTCALL_ERR_MISALIGNED,
                format!("{name} ({address:#x}) is not {align}-aligned"),
            ));
        }
        Ok(Self { array, entries, name })
    }

    /// Checks that the array lies apart from the memory the wave's buffer shares with the
    /// listener.
    fn check_apart(&self, wave: &EmulatedWave) -> Result<(), Failure> {
        let address = self.array as usize;
        if wave.overlaps_shared(address, self.entries * size_of::<T>()) {
            return Err(Failure::new(
                HOSTCALL_ERR_OVERLAPS,
                format!("{} ({address:#x}) overlaps the hostcall buffer or its occupied bitmap", self.name),
            ));
        }
        Ok(())
    }
}
