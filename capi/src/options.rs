//! `hostcall_enable_options_t`: what `hostcall_enable_ex` takes besides the buffer, versioned by
//! its size; and the protocol numbers of the C API.

use crate::status::{Failure, HOSTCALL_ERR_OPTIONS};
use hostcall_rs::lifecycle::EnableOptions;
use hostcall_rs::Protocol;
use std::ptr::NonNull;

/// `HOSTCALL_PROTOCOL_STACK`: the stack protocol, ROCm's default (every release).
pub const HOSTCALL_PROTOCOL_STACK: u32 = 0;
/// `HOSTCALL_PROTOCOL_PHASE`: the phase protocol, ROCm's opt-in (`USE_NEW_HOSTCALL_IMPL`).
pub const HOSTCALL_PROTOCOL_PHASE: u32 = 1;

/// The options of `hostcall_enable_ex` (`hostcall_enable_options_t` in `hostcall.h`).
///
/// Versioned by `size`, as Linux's extensible system-call structs are (`openat2`, `clone3`):
/// the caller sets `size = sizeof(hostcall_enable_options_t)` as its header declares it. A
/// library that knows more fields than the caller's `size` covers gives them their defaults; a
/// caller whose `size` covers fields this library does not know must leave them zero, else the
/// call is refused. So old programs work with new libraries and new programs with old libraries,
/// as long as they ask for nothing the library cannot do.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HostcallEnableOptions {
    /// `sizeof(hostcall_enable_options_t)` of the caller's header: the struct's version.
    pub size: u32,
    /// `HOSTCALL_PROTOCOL_STACK` or `HOSTCALL_PROTOCOL_PHASE`.
    pub protocol: u32,
    /// Phase protocol only: the `occupied` bitmap (`HOSTCALL_PHASE_OCCUPIED_WORDS(n)` zeroed,
    /// 4-aligned `uint32_t`s), or null for one allocated by the library. Null for the stack
    /// protocol.
    pub occupied: *mut u32,
    /// The GPU's index, kept with the buffer (for per-device reports).
    pub device_ordinal: u32,
    /// Must be zero.
    pub reserved: u32,
}

/// The size of version 1 (the fields above): the smallest `size` accepted.
pub const HOSTCALL_ENABLE_OPTIONS_SIZE_V1: u32 = 24;
/// The largest `size` accepted (a sanity bound on what is read).
pub const HOSTCALL_ENABLE_OPTIONS_MAX_SIZE: u32 = 1024;

const _: () =
    assert!(std::mem::size_of::<HostcallEnableOptions>() == HOSTCALL_ENABLE_OPTIONS_SIZE_V1 as usize);

/// The protocol numbered `protocol` in the C API.
pub fn protocol(protocol: u32) -> Result<Protocol, Failure> {
    match protocol {
        HOSTCALL_PROTOCOL_STACK => Ok(Protocol::Stack),
        HOSTCALL_PROTOCOL_PHASE => Ok(Protocol::Phase),
        other => Err(Failure::new(HOSTCALL_ERR_OPTIONS, format!("unknown protocol {other}"))),
    }
}

/// `HOSTCALL_PROTOCOL_LINE`: the line protocol, as statistics report it (the lifecycle, and so
/// `hostcall_enable_ex`, refuses it).
pub const HOSTCALL_PROTOCOL_LINE: u32 = 2;

/// `HOSTCALL_PROTOCOL_RPC`: an LLVM libc GPU RPC buffer, as statistics report it (the lifecycle,
/// and so `hostcall_enable_ex`, refuses it).
pub const HOSTCALL_PROTOCOL_RPC: u32 = 3;

/// The C API's number of `protocol`.
pub fn protocol_number(protocol: Protocol) -> u32 {
    match protocol {
        Protocol::Stack => HOSTCALL_PROTOCOL_STACK,
        Protocol::Phase => HOSTCALL_PROTOCOL_PHASE,
        Protocol::Line => HOSTCALL_PROTOCOL_LINE,
        Protocol::Rpc { .. } => HOSTCALL_PROTOCOL_RPC,
    }
}

/// Reads the options at `options` (null: the defaults) and checks them.
///
/// # Safety
/// `options` is null or points to `options->size` readable bytes (any alignment: they are read
/// bytewise), not written by another thread meanwhile.
pub unsafe fn read(options: *const HostcallEnableOptions) -> Result<EnableOptions, Failure> {
    if options.is_null() {
        return Ok(EnableOptions::default());
    }
    // SAFETY: the contract gives at least the `size` field (4 bytes), readable at any alignment.
    let size = unsafe { options.cast::<u32>().read_unaligned() };
    if !(HOSTCALL_ENABLE_OPTIONS_SIZE_V1..=HOSTCALL_ENABLE_OPTIONS_MAX_SIZE).contains(&size) {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            format!(
                "options.size is {size}: set it to sizeof(hostcall_enable_options_t) \
                 ({HOSTCALL_ENABLE_OPTIONS_SIZE_V1}..={HOSTCALL_ENABLE_OPTIONS_MAX_SIZE})"
            ),
        ));
    }
    // SAFETY: `size` >= the struct's size, readable by the contract; `read_unaligned` needs no
    // alignment, and every bit pattern is valid for its integer and raw-pointer fields.
    let known = unsafe { options.read_unaligned() };
    let bytes = options.cast::<u8>();
    // SAFETY: bytes `V1..size` are readable by the contract; a byte read needs no alignment.
    let newer_set =
        (HOSTCALL_ENABLE_OPTIONS_SIZE_V1..size).any(|at| unsafe { bytes.add(at as usize).read() } != 0);
    if known.reserved != 0 || newer_set {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "options this library does not know are set (reserved fields must be zero)",
        ));
    }
    let protocol = protocol(known.protocol)?;
    if protocol == Protocol::Stack && !known.occupied.is_null() {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "options.occupied is set, but the stack protocol has no occupied bitmap",
        ));
    }
    Ok(EnableOptions::default()
        .with_protocol(protocol)
        .with_occupied(NonNull::new(known.occupied))
        .with_device_ordinal(known.device_ordinal))
}
