//! Sizing, enabling and disabling buffers: the `hostcall_*` entry points with status codes, and
//! ROCm's names (`getHostcallBufferSize`, ...) with ROCm's signatures.

use crate::options::{self, HostcallEnableOptions};
use crate::status::{guard, status, Failure};
use hostcall_rs::{buffer_align_for, buffer_size_for, QueueId};
use std::ffi::{c_int, c_void};

/// The queue a buffer is enabled for: any non-null pointer (it names the queue, it is never
/// dereferenced). NULL is refused with `HOSTCALL_ERR_NULL`: it would key every NULL enable alike.
fn queue_id(queue: *const c_void) -> Result<QueueId, Failure> {
    if queue.is_null() {
        return Err(Failure::null("queue"));
    }
    Ok(QueueId::from(queue))
}

/// Bytes a buffer of `num_packets` packets needs; 0 if the count is refused (fewer than 2, or
/// absurdly many: see `hostcall_last_error()`).
#[no_mangle]
pub extern "C" fn hostcall_buffer_size(num_packets: u32) -> usize {
    guard(|_| 0, || Ok(hostcall_rs::buffer_size(num_packets)?))
}

/// The alignment a buffer needs (8).
#[no_mangle]
pub extern "C" fn hostcall_buffer_alignment() -> u32 {
    hostcall_rs::buffer_align() as u32
}

/// Initialises the buffer, starts the listener if none runs, and serves the buffer for `queue`.
/// Returns `HOSTCALL_OK` or a `HOSTCALL_ERR_*` code (nothing changed then).
///
/// # Safety
/// `buffer` points to `hostcall_buffer_size(num_packets)` bytes, aligned, that stay valid and
/// untouched but by the protocol until `hostcall_disable` returns for it (or the process ends).
#[no_mangle]
pub unsafe extern "C" fn hostcall_enable(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
) -> c_int {
    status(|| {
        if buffer.is_null() {
            return Err(Failure::null("buffer"));
        }
        let queue = queue_id(queue)?;
        // SAFETY: forwarded from this function's contract; the callee checks alignment.
        unsafe { crate::memory::runtime()?.enable(buffer.cast(), num_packets, queue) }.map_err(Failure::from)
    })
}

/// Bytes a buffer of `num_packets` packets needs in `protocol` (`HOSTCALL_PROTOCOL_*`); 0 if the
/// protocol or the count is refused (see `hostcall_last_error()`).
#[no_mangle]
pub extern "C" fn hostcall_buffer_size_for(protocol: u32, num_packets: u32) -> usize {
    guard(|_| 0, || Ok(buffer_size_for(options::protocol(protocol)?, num_packets)?))
}

/// The alignment a buffer of `protocol` needs (8 for the stack protocol, 64 for the phase
/// protocol); 0 for an unknown protocol.
#[no_mangle]
pub extern "C" fn hostcall_buffer_alignment_for(protocol: u32) -> u32 {
    guard(|_| 0, || Ok(buffer_align_for(options::protocol(protocol)?) as u32))
}

/// [`hostcall_enable`] with options: the protocol, the phase protocol's `occupied` bitmap, the
/// device ordinal. `options` null: the defaults (the stack protocol, device 0), as
/// `hostcall_enable`. Returns `HOSTCALL_OK` or a `HOSTCALL_ERR_*` code (nothing changed then).
///
/// # Safety
/// - `buffer` points to `hostcall_buffer_size_for(protocol, num_packets)` bytes, aligned to
///   `hostcall_buffer_alignment_for(protocol)`, that stay valid and untouched but by the
///   protocol until `hostcall_disable` returns for it (or the process ends);
/// - `options` is null or points to `options->size` readable bytes (any alignment);
/// - `options->occupied`, if not null, points to `ceil(num_packets / 32)` zeroed `u32`s, not
///   overlapping any buffer, that stay valid and untouched but by device code until
///   `hostcall_disable` returns for the buffer.
#[no_mangle]
pub unsafe extern "C" fn hostcall_enable_ex(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
    options: *const HostcallEnableOptions,
) -> c_int {
    status(|| {
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { options::read(options) }?;
        if buffer.is_null() {
            return Err(Failure::null("buffer"));
        }
        let queue = queue_id(queue)?;
        // SAFETY: forwarded from this function's contract; the callee checks null, alignment,
        // overlaps and the bitmap.
        unsafe { crate::memory::runtime()?.enable_with(buffer.cast(), num_packets, queue, options) }
            .map_err(Failure::from)
    })
}

/// Stops serving the buffer; afterwards it may be freed. The listener thread is joined after the
/// last buffer. Returns `HOSTCALL_OK` or a `HOSTCALL_ERR_*` code.
#[no_mangle]
pub extern "C" fn hostcall_disable(buffer: *mut c_void, queue: *const c_void) -> c_int {
    status(|| {
        if buffer.is_null() {
            return Err(Failure::null("buffer"));
        }
        hostcall_rs::disable(buffer.cast(), queue_id(queue)?).map_err(Failure::from)
    })
}

/// ROCm's `getHostcallBufferSize` (0 for a refused count).
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn getHostcallBufferSize(num_packets: u32) -> usize {
    hostcall_buffer_size(num_packets)
}

/// ROCm's `getHostcallBufferAlignment`.
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn getHostcallBufferAlignment() -> u32 {
    hostcall_buffer_alignment()
}

/// ROCm's `enableHostcalls`: true on success (else see `hostcall_last_error()`).
///
/// # Safety
/// As [`hostcall_enable`].
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn enableHostcalls(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { hostcall_enable(buffer, num_packets, queue) == crate::status::HOSTCALL_OK }
}

/// ROCm's `disableHostcalls`, whose `void` signature is kept: to learn the result, call
/// [`hostcall_disable`] (the same disable, with a status) or read `hostcall_last_error()` after
/// it (`""` when it succeeded: every successful call clears it).
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn disableHostcalls(buffer: *mut c_void, queue: *const c_void) {
    hostcall_disable(buffer, queue);
}
