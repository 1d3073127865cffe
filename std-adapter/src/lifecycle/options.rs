//! What `enable_with` takes besides the buffer: the protocol, the phase protocol's `occupied`
//! bitmap, the device ordinal; and the sizes and alignments of each protocol's buffers.

use crate::buffer::Protocol;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use crate::services::rpc::{RpcLimits, RpcPolicy};
use hostcall_core::{packet_count, phase, GeometryError, LayoutError};
use std::ptr::NonNull;
use std::sync::Arc;

/// How [`HostcallRuntime::enable_with`](super::HostcallRuntime::enable_with) sets a buffer up.
///
/// The default is what ROCm's `enableHostcalls` does: the stack protocol, device 0.
///
/// ```
/// use hostcall::EnableOptions;
/// use hostcall::Protocol;
/// let phase = EnableOptions::default().with_protocol(Protocol::Phase);
/// assert_eq!(phase.occupied, None); // the runtime allocates the bitmap
/// assert_eq!(EnableOptions::default().protocol, Protocol::Stack);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnableOptions {
    /// The wire protocol the device code of the kernels using this buffer speaks. A code object
    /// carries no marker of which one it uses: the runtime chooses, per buffer.
    /// [`Protocol::Stack`] (the default) is ROCm's default in every release;
    /// [`Protocol::Phase`] is ROCm's opt-in, for device libraries built with
    /// `USE_NEW_HOSTCALL_IMPL`.
    pub protocol: Protocol,
    /// Phase protocol only: the `occupied` bitmap, `ceil(num_packets / 32)` `u32`s, zeroed,
    /// 4-aligned, that device code claims packets in. ROCm allocates it in the GPU's own memory
    /// (only the device touches it, so its atomics never cross the bus) and passes it here. The
    /// address is written into the buffer's prefix as given (the address device code uses); the
    /// host never reads or writes the words, except emulated waves, which claim through them as
    /// device code does (so for them it must be host-accessible memory). It must stay valid
    /// until the buffer is disabled. `None`: the runtime allocates it, zeroed, through its device
    /// memory ([`HostcallRuntime::device_memory`](super::HostcallRuntime::device_memory)), and
    /// frees it when the buffer is disabled. Must be `None` for the stack protocol, which has no
    /// bitmap.
    pub occupied: Option<NonNull<u32>>,
    /// The index of the GPU whose queue the buffer serves (ROCm's device index), kept with the
    /// buffer's registration ([`device_ordinal`](super::device_ordinal)) and handed to services
    /// with each of its packets (`PacketRequest::device`: the sanitizer's report ids). Default 0.
    pub device_ordinal: u32,
    /// [`Protocol::Rpc`] only: the opcode groups served (console, printf, memory and ROCm's by
    /// default). Console and printf output goes to the process's stdout and stderr.
    pub rpc_policy: RpcPolicy,
    /// [`Protocol::Rpc`] only: the budgets of the buffer's host.
    pub rpc_limits: RpcLimits,
}

setters!(EnableOptions {
    with_protocol: protocol: Protocol,
    with_occupied: occupied: Option<NonNull<u32>>,
    with_device_ordinal: device_ordinal: u32,
    with_rpc_policy: rpc_policy: RpcPolicy,
    with_rpc_limits: rpc_limits: RpcLimits,
});

impl Default for EnableOptions {
    fn default() -> Self {
        Self {
            protocol: Protocol::Stack,
            occupied: None,
            device_ordinal: 0,
            rpc_policy: RpcPolicy::default(),
            rpc_limits: RpcLimits::default(),
        }
    }
}

/// Bytes a buffer of `num_packets` packets needs in `protocol`.
///
/// ```
/// use hostcall::{buffer_size_for, Protocol};
/// assert_eq!(buffer_size_for(Protocol::Stack, 2), hostcall::buffer_size(2));
/// assert_eq!(buffer_size_for(Protocol::Phase, 2), Ok(320 + 2 * 4096));
/// assert!(buffer_size_for(Protocol::Phase, 1).is_err()); // every protocol needs 2 packets
/// ```
pub fn buffer_size_for(protocol: Protocol, num_packets: u32) -> Result<usize, Error> {
    if let Protocol::Rpc { lanes } = protocol {
        // An LLVM-RPC buffer's count is its ports (1 ..= rpc::MAX_PORT_COUNT, its own rule).
        let (ports, lanes) = hostcall_core::rpc::check_geometry(u64::from(num_packets), u64::from(lanes))
            .map_err(|e| Error::Layout(e.into()))?;
        return Ok(hostcall_core::rpc::buffer_size(ports, lanes).unwrap_or(usize::MAX));
    }
    let n = packet_count(u64::from(num_packets)).map_err(|e| Error::Layout(e.into()))?;
    protocol
        .buffer_size(n)
        .ok_or(Error::Layout(LayoutError::Geometry(GeometryError::TooManyPackets(u64::from(num_packets)))))
}

/// The alignment a buffer of `protocol` needs (and `enable_with` checks): 8 for the stack
/// protocol (ROCm's `getHostcallBufferAlignment`); 64, a cache line, for the phase and line
/// protocols, so that the arrays the device writes and those the host writes never share a line.
pub const fn buffer_align_for(protocol: Protocol) -> usize {
    protocol.buffer_align()
}

/// Bytes of the phase protocol's `occupied` bitmap for `num_packets` packets:
/// `4 * ceil(num_packets / 32)`.
pub const fn occupied_size(num_packets: u32) -> usize {
    4 * phase::occupied_words(num_packets)
}

/// Where an enabled phase buffer's `occupied` bitmap is.
pub(super) enum Bitmap {
    /// None: a stack buffer.
    None,
    /// Passed to enable: its address (device's and host's alike).
    Given(usize),
    /// Allocated through the runtime's device memory at enable; freed when dropped (the buffer's
    /// registry entry is dropped after disable).
    Owned(DeviceAllocation),
}

impl Bitmap {
    /// The bitmap `options` asks for, allocated through `memory` if the phase protocol has
    /// none passed in. Refuses a bitmap for the stack protocol, a misaligned one, and one that
    /// overlaps the buffer (`base..base + len`).
    pub fn for_options(
        options: &EnableOptions,
        base: usize,
        len: usize,
        num_packets: u32,
        memory: &Arc<dyn DeviceMemory>,
    ) -> Result<Self, Error> {
        match (options.protocol, options.occupied) {
            (Protocol::Stack | Protocol::Rpc { .. }, None) => Ok(Self::None),
            (Protocol::Stack | Protocol::Rpc { .. }, Some(_)) => {
                Err(Error::Unsupported("only a phase-protocol buffer has an occupied bitmap".into()))
            }
            (Protocol::Phase, Some(given)) => {
                let address = given.as_ptr() as usize;
                if address % std::mem::align_of::<u32>() != 0 {
                    return Err(Error::Layout(LayoutError::Misaligned { address }));
                }
                let end = address.saturating_add(occupied_size(num_packets));
                if address < base.saturating_add(len) && base < end {
                    return Err(Error::Overlaps { buffer: address, enabled: base });
                }
                Ok(Self::Given(address))
            }
            (Protocol::Line, _) => Err(line_unsupported()),
            (Protocol::Phase, None) => {
                let size = occupied_size(num_packets);
                // A line of its own: the device's atomics on it share no line with anything.
                let allocation = DeviceAllocation::new(memory.clone(), size, phase::buffer_align())?;
                Ok(Self::Owned(allocation))
            }
        }
    }

    /// The address written into the buffer's prefix (0: none).
    pub fn device_address(&self) -> u64 {
        match self {
            Self::None => 0,
            Self::Given(address) => *address as u64,
            Self::Owned(allocation) => allocation.device_address(),
        }
    }

    /// The address emulated waves claim through.
    pub fn host_address(&self) -> Option<NonNull<u32>> {
        match self {
            Self::None => None,
            Self::Given(address) => NonNull::new(*address as *mut u32),
            Self::Owned(allocation) => NonNull::new(allocation.as_ptr().cast()),
        }
    }
}

/// The lifecycle API serves ROCm's two ABIs; the line protocol (this project's own, whose device
/// side is not ROCm's code) is served through [`crate::Listener`] and [`crate::HostcallBuffer`].
pub(super) fn line_unsupported() -> Error {
    Error::Unsupported("the lifecycle API serves the stack and phase protocols; the line protocol is served through Listener and HostcallBuffer".into())
}

/// Emulated waves of the lifecycle API speak ROCm's protocols; an LLVM-RPC buffer's device side
/// is `hostcall_core::rpc::Client`.
pub(super) fn rpc_unsupported() -> Error {
    Error::Unsupported("emulated waves of the lifecycle API speak the stack and phase protocols; an LLVM-RPC buffer's device side is hostcall_core::rpc::Client".into())
}
