//! `hostcall_enable_options_t`: what `hostcall_enable_ex` takes besides the buffer, versioned by
//! its size; and the protocol numbers of the C API.

use crate::status::{Failure, HOSTCALL_ERR_OPTIONS};
use hostcall_rs::{
    services::rpc::{RpcLimits, RpcPolicy},
    EnableOptions, Protocol,
};
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
    /// Version 2, `HOSTCALL_PROTOCOL_RPC` only (else zero): lanes a port.
    pub rpc_lanes: u32,
    /// `HOSTCALL_RPC_GROUP_*` groups served besides the defaults.
    pub rpc_allow: u32,
    /// `HOSTCALL_RPC_GROUP_*` groups not served (wins over `rpc_allow`).
    pub rpc_deny: u32,
    /// Host files the device may hold open (0: the default).
    pub rpc_open_files: u32,
    /// Bytes kept of one lane's stream (0: the default).
    pub rpc_stream_bytes: u64,
    /// Version 3, `HOSTCALL_PROTOCOL_RPC` only (else null): the directory the Files group is
    /// confined to, a NUL-terminated path (at most `PATH_MAX` bytes), copied at enable. Required
    /// with `HOSTCALL_RPC_GROUP_FILES`, null otherwise.
    pub rpc_files_dir: *const std::ffi::c_char,
}

/// The size of version 1 (up to `reserved`): the smallest `size` accepted.
pub const HOSTCALL_ENABLE_OPTIONS_SIZE_V1: u32 = 24;
/// The size of version 2 (the RPC fields).
pub const HOSTCALL_ENABLE_OPTIONS_SIZE_V2: u32 = 48;
/// The size of version 3 (`rpc_files_dir`).
pub const HOSTCALL_ENABLE_OPTIONS_SIZE_V3: u32 = 56;

/// `HOSTCALL_RPC_GROUP_CONSOLE`.
pub const HOSTCALL_RPC_GROUP_CONSOLE: u32 = 1;
/// `HOSTCALL_RPC_GROUP_PRINTF`.
pub const HOSTCALL_RPC_GROUP_PRINTF: u32 = 2;
/// `HOSTCALL_RPC_GROUP_MEMORY`.
pub const HOSTCALL_RPC_GROUP_MEMORY: u32 = 4;
/// `HOSTCALL_RPC_GROUP_FILES`.
pub const HOSTCALL_RPC_GROUP_FILES: u32 = 8;
/// `HOSTCALL_RPC_GROUP_EXIT`: refused in `rpc_allow` and `rpc_deny` (whether `exit` and `abort`
/// end the host is `hostcall_allow_device_to_end_process`, for the whole process).
pub const HOSTCALL_RPC_GROUP_EXIT: u32 = 16;
/// `HOSTCALL_RPC_GROUP_HOST_CALLS_UNSAFE`.
pub const HOSTCALL_RPC_GROUP_HOST_CALLS_UNSAFE: u32 = 32;
/// `HOSTCALL_RPC_GROUP_SYSTEM_UNSAFE`.
pub const HOSTCALL_RPC_GROUP_SYSTEM_UNSAFE: u32 = 64;
/// `HOSTCALL_RPC_GROUP_ROCM`.
pub const HOSTCALL_RPC_GROUP_ROCM: u32 = 128;
/// `HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE`: files on any path (`RpcPolicy::with_files_anywhere`).
pub const HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE: u32 = 256;
/// The largest `size` accepted (a sanity bound on what is read).
pub const HOSTCALL_ENABLE_OPTIONS_MAX_SIZE: u32 = 1024;

const _: () =
    assert!(std::mem::size_of::<HostcallEnableOptions>() == HOSTCALL_ENABLE_OPTIONS_SIZE_V3 as usize);

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

/// `HOSTCALL_PROTOCOL_RPC`: an LLVM libc GPU RPC buffer (`hostcall_enable_ex` with the version-2
/// fields).
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
/// bytewise), not written by another thread meanwhile; `rpc_files_dir`, where `size` covers it, is
/// null or a NUL-terminated string (read bytewise, at most `PATH_MAX` bytes).
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
    // The fields `size` covers; the others keep their zero defaults.
    let mut raw = [0u8; std::mem::size_of::<HostcallEnableOptions>()];
    let bytes = options.cast::<u8>();
    for (at, byte) in raw.iter_mut().enumerate().take(size as usize) {
        // SAFETY: bytes `0..size` are readable by the contract; a byte read needs no alignment.
        *byte = unsafe { bytes.add(at).read() };
    }
    // SAFETY: `raw` holds the struct's bytes; every bit pattern is valid for its integer and
    // raw-pointer fields; `read_unaligned` needs no alignment.
    let known = unsafe { raw.as_ptr().cast::<HostcallEnableOptions>().read_unaligned() };
    // SAFETY: bytes `raw.len()..size` are readable by the contract.
    let newer_set = (raw.len() as u32..size).any(|at| unsafe { bytes.add(at as usize).read() } != 0);
    if known.reserved != 0 || newer_set {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "options this library does not know are set (reserved fields must be zero)",
        ));
    }
    if known.protocol == HOSTCALL_PROTOCOL_RPC {
        // SAFETY: forwarded from this function's contract.
        return unsafe { rpc(&known) };
    }
    if known.rpc_lanes | known.rpc_allow | known.rpc_deny | known.rpc_open_files != 0
        || known.rpc_stream_bytes != 0
        || !known.rpc_files_dir.is_null()
    {
        return Err(Failure::new(HOSTCALL_ERR_OPTIONS, "options.rpc_* are set, but the protocol is not RPC"));
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

/// The options of an RPC buffer (`HOSTCALL_PROTOCOL_RPC`).
///
/// # Safety
/// `known.rpc_files_dir` is null or a NUL-terminated string.
unsafe fn rpc(known: &HostcallEnableOptions) -> Result<EnableOptions, Failure> {
    let groups = HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE * 2 - 1;
    if known.rpc_lanes == 0 || (known.rpc_allow | known.rpc_deny) & !groups != 0 || !known.occupied.is_null()
    {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "an RPC buffer needs options.rpc_lanes, HOSTCALL_RPC_GROUP_* bits only, and no occupied bitmap",
        ));
    }
    if (known.rpc_allow | known.rpc_deny) & HOSTCALL_RPC_GROUP_EXIT != 0 {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "HOSTCALL_RPC_GROUP_EXIT is not a per-buffer group: exit() and abort() end the host only \
             after hostcall_allow_device_to_end_process(1), one decision for every buffer and SANITIZER",
        ));
    }
    let on = |group| known.rpc_allow & group != 0 && known.rpc_deny & group == 0;
    let off = |group| known.rpc_deny & group != 0;
    let mut policy = RpcPolicy::default();
    for (group, deny) in [
        (HOSTCALL_RPC_GROUP_CONSOLE, RpcPolicy::without_console as fn(RpcPolicy) -> RpcPolicy),
        (HOSTCALL_RPC_GROUP_PRINTF, RpcPolicy::without_printf),
        (HOSTCALL_RPC_GROUP_MEMORY, RpcPolicy::without_memory),
        (HOSTCALL_RPC_GROUP_ROCM, RpcPolicy::without_rocm),
    ] {
        if off(group) {
            policy = deny(policy);
        }
    }
    // SAFETY: forwarded from this function's contract.
    let files_dir = unsafe { files_dir(known.rpc_files_dir) }?;
    match (on(HOSTCALL_RPC_GROUP_FILES), on(HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE), files_dir) {
        (false, false, None) => {}
        (true, false, Some(dir)) => policy = policy.with_files(dir),
        (false, true, None) => {
            // SAFETY: the C caller asked for it by the name that says unsafe; the header states
            // the contract of `RpcPolicy::with_files_anywhere` beside it.
            policy = unsafe { policy.with_files_anywhere() };
        }
        _ => return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            "HOSTCALL_RPC_GROUP_FILES needs options.rpc_files_dir (an existing directory: file calls are \
                 confined to it), and rpc_files_dir is for that group only; \
                 HOSTCALL_RPC_GROUP_FILES_ANYWHERE_UNSAFE takes no directory and excludes FILES",
        )),
    }
    if on(HOSTCALL_RPC_GROUP_HOST_CALLS_UNSAFE) {
        // SAFETY: the C caller asked for it by the name that says unsafe; the header states the
        // contract of `RpcPolicy::with_host_calls` beside it.
        policy = unsafe { policy.with_host_calls() };
    }
    if on(HOSTCALL_RPC_GROUP_SYSTEM_UNSAFE) {
        // SAFETY: as above, for `RpcPolicy::with_system`.
        policy = unsafe { policy.with_system() };
    }
    let mut limits = RpcLimits::default();
    if known.rpc_open_files != 0 {
        limits = limits.with_open_files(known.rpc_open_files);
    }
    if known.rpc_stream_bytes != 0 {
        limits = limits.with_stream_bytes(known.rpc_stream_bytes);
    }
    Ok(EnableOptions::default()
        .with_protocol(Protocol::Rpc { lanes: known.rpc_lanes })
        .with_device_ordinal(known.device_ordinal)
        .with_rpc_policy(policy)
        .with_rpc_limits(limits))
}

/// Linux's `PATH_MAX`: the longest `rpc_files_dir` read.
const PATH_MAX: usize = 4096;

/// The directory `path` names (null: none), checked to be one.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
unsafe fn files_dir(path: *const std::ffi::c_char) -> Result<Option<std::path::PathBuf>, Failure> {
    use std::os::unix::ffi::OsStrExt;
    if path.is_null() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    loop {
        // SAFETY: the string's bytes up to its NUL are readable by the contract; the loop stops
        // at the NUL, or at PATH_MAX bytes.
        let byte = unsafe { path.cast::<u8>().add(bytes.len()).read() };
        if byte == 0 {
            break;
        }
        if bytes.len() == PATH_MAX {
            return Err(Failure::new(HOSTCALL_ERR_OPTIONS, "options.rpc_files_dir is longer than PATH_MAX"));
        }
        bytes.push(byte);
    }
    let dir = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&bytes));
    if !dir.is_dir() {
        return Err(Failure::new(
            HOSTCALL_ERR_OPTIONS,
            format!("options.rpc_files_dir {} is not a directory", dir.display()),
        ));
    }
    Ok(Some(dir))
}
