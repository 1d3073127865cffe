//! `hostcall`: GPU hostcalls served by a Rust listener, on top of [`hostcall_core`].
//!
//! - [`memory`]: memory both sides reach ([`memory::HostMemory`] by default; [`hsa`] where ROCm is);
//! - [`doorbell`]: what the device rings and the host sleeps on;
//! - [`backend`]: choosing HSA or host memory at run time;
//! - `cuda` (feature `cuda`): pinned, mapped memory, device memory and kernel launches through
//!   the CUDA driver API, loaded at run time, for CUDA kernels using `include/hostcall_cuda.cuh`;
//! - [`buffer`]: an owned, initialised buffer;
//! - [`service`]: the registry from service id to handler;
//! - [`message`] and [`printf`]: message streams and the PRINTF service;
//! - [`listener`]: the thread that serves buffers; [`pool`]: several threads splitting them;
//! - [`device`]: emulated waves on CPU threads;
//! - [`lifecycle`]: ROCm's enable/disable lifecycle on a process-wide listener.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use hostcall_core as core;

pub mod backend;
pub mod buffer;
pub mod builtin;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
pub mod doorbell;
pub mod error;
pub mod hsa;
pub mod lifecycle;
pub mod listener;
pub mod memory;
pub mod message;
pub mod pool;
pub mod printf;
pub mod service;

pub use error::Error;
pub use lifecycle::{buffer_align, buffer_size, disable, enable, HostcallRuntime, QueueId};

/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI < 500
/// (8-byte slot 3).
pub const IMPLICITARG_OFFSET_V4: usize = 24;
/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI >= 500
/// (8-byte slot 10).
pub const IMPLICITARG_OFFSET_V5: usize = 80;

/// The types most users need.
pub mod prelude {
    pub use crate::buffer::HostcallBuffer;
    pub use crate::device::{Reply, Wave};
    pub use crate::doorbell::{Doorbell, ParkingDoorbell};
    pub use crate::listener::{Listener, ListenerConfig};
    pub use crate::memory::{DeviceMemory, HostMemory};
    pub use crate::service::{PacketService, Services, Stats};
    pub use crate::Error;
    pub use hostcall_core::service::ErrorCode;
}
