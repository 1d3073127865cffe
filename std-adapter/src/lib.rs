//! `hostcall`: GPU hostcalls served by a Rust listener, on top of [`hostcall_core`].
//!
//! - [`memory`]: memory both sides reach ([`memory::HostMemory`] by default);
//! - [`doorbell`]: what the device rings and the host sleeps on;
//! - [`buffer`]: an owned, initialised buffer;
//! - [`service`]: the registry from service id to handler;
//! - [`listener`]: the thread that serves buffers;
//! - [`device`]: emulated waves on CPU threads.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use hostcall_core as core;

pub mod backend;
pub mod buffer;
pub mod device;
pub mod doorbell;
pub mod error;
pub mod hsa;
pub mod listener;
pub mod memory;

    pub use crate::Error;
    pub use crate::buffer::HostcallBuffer;
    pub use crate::device::{Reply, Wave};
    pub use crate::doorbell::{Doorbell, ParkingDoorbell};
    pub use crate::listener::{Listener, ListenerConfig};
    pub use crate::memory::{DeviceMemory, HostMemory};
    pub use crate::service::{PacketService, Services, Stats};
    pub use hostcall_core::service::ErrorCode;
/// (8-byte slot 10).
/// (8-byte slot 3).
/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI < 500
/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI >= 500
/// The types most users need.
pub const IMPLICITARG_OFFSET_V4: usize = 24;
pub const IMPLICITARG_OFFSET_V5: usize = 80;
pub mod message;
pub mod prelude {
pub mod printf;
pub mod service;
pub use error::Error;
}
