//! Statistics for C hosts: [`hostcall_get_stats`] (the default runtime's listener),
//! [`hostcall_get_buffer_stats`] (one enabled buffer) and [`hostcall_get_service_stats`] (one
//! service id), each filling a struct versioned by its first field, `size`.
//!
//! The caller sets `size = sizeof(the struct)` as its header declares it; the library writes the
//! fields it knows within `size` and zeroes any bytes beyond them up to `size` (fields of a newer
//! header read 0). A `size` below version 1 or above [`HOSTCALL_STATS_MAX_SIZE`] is refused with
//! `HOSTCALL_ERR_OPTIONS`, before anything is written.

use crate::status::{
    status, Failure, HOSTCALL_ERR_NOT_ENABLED, HOSTCALL_ERR_NOT_REGISTERED, HOSTCALL_ERR_OPTIONS,
};
use hostcall_rs::observe::{Histogram, Reason, ReasonCounts, REASONS};
use hostcall_rs::HostcallRuntime;
use std::ffi::{c_int, c_void};
use std::time::Duration;

/// Room for reasons in the structs (the library counts [`REASONS`] today; later ones fill the
/// rest, so the layout stays).
pub const HOSTCALL_REASON_SLOTS: usize = 32;
/// The largest `size` accepted.
pub const HOSTCALL_STATS_MAX_SIZE: u32 = 4096;

const _: () = assert!(REASONS <= HOSTCALL_REASON_SLOTS);

/// `hostcall_stats_t`: everything the default runtime's listener counted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HostcallStats {
    /// `sizeof(hostcall_stats_t)`, set by the caller.
    pub size: u32,
    /// How many entries of `refusals` this library counts (`HOSTCALL_REASON_*` below it).
    pub reasons: u32,
    /// Packets served, every service and the unknown ids together.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
    /// Packets whose service id nobody registered.
    pub unknown_service_packets: u64,
    /// Malformed shared state found.
    pub malformed: u64,
    /// Doorbell waits ended by a ring.
    pub doorbell_wakes: u64,
    /// Doorbell waits ended by their timeout.
    pub timeout_polls: u64,
    /// Polls that found nothing.
    pub empty_scans: u64,
    /// Log lines the rate limit suppressed.
    pub log_lines_suppressed: u64,
    /// Buffers enabled now.
    pub buffers: u64,
    /// Refusals by reason, indexed by `HOSTCALL_REASON_*`.
    pub refusals: [u64; HOSTCALL_REASON_SLOTS],
}

/// `hostcall_buffer_stats_t`: one enabled buffer's counters.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HostcallBufferStats {
    /// `sizeof(hostcall_buffer_stats_t)`, set by the caller.
    pub size: u32,
    /// `HOSTCALL_PROTOCOL_*` of the buffer.
    pub protocol: u32,
    /// Its packets.
    pub num_packets: u64,
    /// Packets served from it.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
    /// Refusals by reason, indexed by `HOSTCALL_REASON_*`.
    pub refusals: [u64; HOSTCALL_REASON_SLOTS],
}

/// `hostcall_service_stats_t`: one service's counters and timings (bucket bounds, nanoseconds).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HostcallServiceStats {
    /// `sizeof(hostcall_service_stats_t)`, set by the caller.
    pub size: u32,
    /// The service id asked for.
    pub id: u32,
    /// Packets dispatched to it.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
    /// Half the packets took at most this long to serve (0: none counted).
    pub service_ns_p50: u64,
    /// 99 % of them took at most this long (`UINT64_MAX`: past the longest bucket).
    pub service_ns_p99: u64,
    /// Half the packets waited at most this long in their poll before service.
    pub queue_wait_ns_p50: u64,
    /// 99 % of them waited at most this long.
    pub queue_wait_ns_p99: u64,
}

fn refusals(counts: &ReasonCounts) -> [u64; HOSTCALL_REASON_SLOTS] {
    let mut out = [0; HOSTCALL_REASON_SLOTS];
    for (i, &reason) in Reason::ALL.iter().enumerate() {
        out[i] = counts.get(reason);
    }
    out
}

fn nanos(histogram: &Histogram, q: f64) -> u64 {
    histogram.quantile(q).map_or(0, |d| if d == Duration::MAX { u64::MAX } else { d.as_nanos() as u64 })
}

/// Writes `value` into the caller's struct at `out`: the first `min(size, sizeof T)` bytes, then
/// zeroes up to `size`.
///
/// # Safety
/// `out` is null or points to `out->size` writable bytes.
unsafe fn write_versioned<T: Copy>(out: *mut T, value: impl FnOnce(u32) -> T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null("stats"));
    }
    // SAFETY: the contract gives at least the `size` field (4 bytes); read at any alignment.
    let size = unsafe { out.cast::<u32>().read_unaligned() };
    let ours = std::mem::size_of::<T>();
    if (size as usize) < ours || size > HOSTCALL_STATS_MAX_SIZE {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            format!("stats size is {size}: set it to sizeof the struct ({ours}..={HOSTCALL_STATS_MAX_SIZE})"),
        ));
    }
    let value = value(size);
    // SAFETY: `size` >= `ours` bytes are writable by the contract; bytewise copies need no
    // alignment; `value` is a local, not overlapping the caller's memory.
    unsafe {
        std::ptr::copy_nonoverlapping((&value as *const T).cast::<u8>(), out.cast::<u8>(), ours);
        std::ptr::write_bytes(out.cast::<u8>().add(ours), 0, size as usize - ours);
    }
    Ok(())
}

/// Fills `stats` with what the default runtime's listener counted so far (also after its
/// listener stopped: the counters belong to the runtime). Returns `HOSTCALL_OK`,
/// `HOSTCALL_ERR_NULL` or `HOSTCALL_ERR_OPTIONS` (a `size` refused).
///
/// # Safety
/// `stats` is null or points to `stats->size` writable bytes whose `size` field is set.
#[no_mangle]
pub unsafe extern "C" fn hostcall_get_stats(stats: *mut HostcallStats) -> c_int {
    status(|| {
        let s = HostcallRuntime::global().services().stats();
        let total = s.total();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            write_versioned(stats, |size| HostcallStats {
                size,
                reasons: REASONS as u32,
                packets: total.packets,
                lane_calls: total.lane_calls,
                errors: total.errors,
                unknown_service_packets: s.unknown.packets,
                malformed: s.malformed,
                doorbell_wakes: s.events.doorbell_wakes,
                timeout_polls: s.events.timeout_polls,
                empty_scans: s.events.empty_scans,
                log_lines_suppressed: s.log_lines_suppressed,
                buffers: s.buffers.len() as u64,
                refusals: refusals(&s.refusals),
            })
        }
    })
}

/// Fills `stats` with the counters of the enabled buffer at `buffer`. Returns `HOSTCALL_OK`,
/// `HOSTCALL_ERR_NULL`, `HOSTCALL_ERR_OPTIONS` (a `size` refused) or `HOSTCALL_ERR_NOT_ENABLED`.
///
/// # Safety
/// As [`hostcall_get_stats`]; `buffer` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hostcall_get_buffer_stats(
    buffer: *const c_void,
    stats: *mut HostcallBufferStats,
) -> c_int {
    status(|| {
        let all = HostcallRuntime::global().services().stats();
        let Some(b) = all.buffers.get(&(buffer as usize)) else {
            return Err(Failure::new(HOSTCALL_ERR_NOT_ENABLED, format!("buffer {buffer:p} is not enabled")));
        };
        let protocol = crate::options::protocol_number(b.protocol);
        // SAFETY: forwarded from this function's contract.
        unsafe {
            write_versioned(stats, |size| HostcallBufferStats {
                size,
                protocol,
                num_packets: b.num_packets,
                packets: b.packets,
                lane_calls: b.lane_calls,
                errors: b.errors,
                refusals: refusals(&b.refusals),
            })
        }
    })
}

/// Fills `stats` with the counters of service `id` (registered now). Returns `HOSTCALL_OK`,
/// `HOSTCALL_ERR_NULL`, `HOSTCALL_ERR_OPTIONS` (a `size` refused) or `HOSTCALL_ERR_NOT_REGISTERED` (no
/// such service).
///
/// # Safety
/// As [`hostcall_get_stats`].
#[no_mangle]
pub unsafe extern "C" fn hostcall_get_service_stats(id: u32, stats: *mut HostcallServiceStats) -> c_int {
    status(|| {
        let all = HostcallRuntime::global().services().stats();
        let Some((_, s)) = all.services.get(&id) else {
            return Err(Failure::new(
                HOSTCALL_ERR_NOT_REGISTERED,
                format!("no service is registered under id {id}"),
            ));
        };
        // SAFETY: forwarded from this function's contract.
        unsafe {
            write_versioned(stats, |size| HostcallServiceStats {
                size,
                id,
                packets: s.packets,
                lane_calls: s.lane_calls,
                errors: s.errors,
                service_ns_p50: nanos(&s.service_time, 0.5),
                service_ns_p99: nanos(&s.service_time, 0.99),
                queue_wait_ns_p50: nanos(&s.queue_wait, 0.5),
                queue_wait_ns_p99: nanos(&s.queue_wait, 0.99),
            })
        }
    })
}

const _: () = {
    assert!(std::mem::size_of::<HostcallStats>() == 344);
    assert!(std::mem::offset_of!(HostcallStats, refusals) == 88);
    assert!(std::mem::size_of::<HostcallBufferStats>() == 296);
    assert!(std::mem::size_of::<HostcallServiceStats>() == 64);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's `HOSTCALL_REASON_*` numbers are the reasons' order here.
    #[test]
    fn reasons_are_numbered_as_the_header_says() {
        let header =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/hostcall.h")).unwrap();
        for (i, reason) in Reason::ALL.iter().enumerate() {
            let name = reason.name().to_ascii_uppercase().replace(' ', "_");
            let define = format!("#define HOSTCALL_REASON_{name} {i}\n");
            assert!(header.contains(&define), "the header lacks `{}`", define.trim());
        }
    }
}
