//! `hostcall`: GPU hostcalls served by a Rust listener, on top of [`hostcall_core`].
//!
//! A device (a GPU kernel, or an emulated [`Wave`] on a CPU thread) writes a request into a packet
//! of a [`HostcallBuffer`] and rings a [`Doorbell`]; a [`Listener`] thread finds the packet,
//! dispatches it by service id through its [`Services`], and writes the reply back.
//!
//! ```
//! use hostcall::prelude::*;
//! use hostcall::{HostcallBuffer, HostMemory, Listener, ListenerConfig, ParkingDoorbell, Wave};
//! use std::sync::Arc;
//!
//! // Host memory and a parking doorbell: the backend for emulated waves and embedded runtimes.
//! let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
//! let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
//! listener.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
//! let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 8, doorbell).unwrap());
//! listener.add(buffer.clone()).unwrap();
//!
//! // Four lanes of one wave call service 100; lane `i` asks for `i + 40`.
//! let reply = Wave::new(buffer, 4).call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
//! assert_eq!(reply.lane(2), [42, 0]);
//! listener.shutdown();
//! ```
//!
//! # One public path per type
//!
//! Every type, trait, function and constant has one public path: the crate root, or one of the
//! three namespaces below, never both. The crate root holds what a user of any backend names:
//! buffers and waves ([`HostcallBuffer`], [`Protocol`], [`Wave`], [`Reply`], [`EmulatedWave`]),
//! the two traits every backend implements ([`DeviceMemory`], [`Doorbell`]) and the host backend
//! of both ([`HostMemory`], [`ParkingDoorbell`]; every doorbell is an object of ROCm's
//! `amd_signal_t` layout, [`amd_signal`]), the service registry ([`Services`], [`PacketService`],
//! [`PacketRequest`]), the listener and its groups ([`Listener`], [`ListenerConfig`],
//! [`BufferRegistration`], [`ListenerPool`], [`DeviceListeners`]: a pinned listener group per
//! device), ROCm's enable/disable lifecycle on a process-wide listener ([`enable`],
//! [`enable_with`] for either of ROCm's two protocols, [`disable`], [`buffer_size`],
//! [`HostcallRuntime`]; the line protocol is refused there), and [`Error`]. The namespaces are
//! what a user navigates by topic:
//!
//! - [`backend`]: one namespace per vendor backend, each holding its memory and its doorbell side
//!   by side: [`backend::hsa`] (memory where ROCm puts it, one HSA signal per listener) and, with
//!   the feature `cuda`, `backend::cuda` (pinned, mapped memory and kernel launches through the
//!   CUDA driver API, loaded at run time, for CUDA kernels using `include/hostcall_cuda.cuh`);
//!   and choosing HSA or host memory at run time ([`backend::detect`], [`backend::Backend`]);
//! - [`services`]: the built-in services, one namespace each ([`services::printf`],
//!   [`services::rpc`] for LLVM libc's GPU RPC, [`services::devmem`], [`services::sanitizer`],
//!   [`services::function_call`], [`services::message`], [`services::ending`]), their `enable_*`
//!   methods on [`Services`];
//! - [`observe`]: what the listener did and why: counters with reasons, per-buffer counters,
//!   service-time and queue-wait histograms, the [`observe::Stats`] snapshot and its table.
//!
//! The [`prelude`] re-exports the traits whose methods a user calls (`use hostcall::prelude::*`),
//! and only traits, each with its one path elsewhere. Items of [`hostcall_core`] (the packet
//! layouts, `ErrorCode`, the service ids, the lane constants) are named there, as
//! `hostcall_core::...`; only [`Protocol`] and [`PacketRequest`], which every user of this crate
//! names, are re-exported, once, at the root. `tests/one_path.rs` checks the rule against the list
//! of public items.
//!
//! For a GPU runtime embedding it the way ROCm embeds `rochostcall.hpp` (size a buffer, enable it
//! per hardware queue, disable it), start at [`enable`]; for the C ABI, the `hostcall-capi`
//! crate and `include/hostcall.h`; for the wire format, `PROTOCOL.md`.
//!
//! # The public surface
//!
//! What the four published crates make public is a decision: `tests/public_items.rs` lists every
//! `pub` declaration of their sources in `tests/public_items.txt` and fails when one is added,
//! removed or renamed without the list (`HOSTCALL_BLESS_PUBLIC_ITEMS=1 cargo test -p hostcall
//! --test public_items` rewrites it; review its diff). The configuration types
//! ([`ListenerConfig`], [`EnableOptions`], [`backend::DetectOptions`], [`services::sanitizer::SanitizerConfig`],
//! the `*Limits` structs) and the reports ([`observe::Stats`], `hostcall_core::DrainReport`)
//! are `#[non_exhaustive]`, so they may gain fields in a minor release: build a configuration
//! from its `Default` and its `with_*` setters.
//!
//! # Features
//!
//! - `cuda` (off by default): `backend::cuda`, CUDA kernels as devices (pinned, device-mapped
//!   memory, kernel launches). It builds without CUDA installed: cudarc loads the driver at run
//!   time. It needs Rust 1.88 (cudarc's dependency libloading), the crate itself 1.81.
//!
//! # Target requirements
//!
//! Those of [`hostcall_core`] (native, lock-free 64-bit atomics: the build fails without them), and
//! `std` with threads. The HSA backend loads ROCm's `libhsa-runtime64.so` at run time and falls
//! back to host memory (saying why) where it is missing, so the crate builds and its tests run on
//! any Linux machine; the stack protocol on a real GPU also needs platform atomics between CPU and
//! GPU, which [`backend::detect`] checks.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

#[macro_use]
mod setters;

pub mod backend;
mod buffer;
mod device;
mod dispatch;
mod doorbell;
mod error;
mod lifecycle;
mod memory;
pub mod observe;
pub(crate) mod rate_limit;
pub mod services;
mod threads;

pub use backend::host::{HostMemory, ParkingDoorbell};
pub use buffer::HostcallBuffer;
pub use device::{RawWave, Reply, Wave};
pub use dispatch::registry::{error_reply, PacketService, Services, ThreadDispatch};
pub use dispatch::REMEMBERED_UNKNOWN_IDS;
pub use doorbell::signal as amd_signal;
pub use doorbell::{Doorbell, DONE as DOORBELL_DONE, INIT as DOORBELL_INIT};
pub use error::Error;
pub use hostcall_core::{PacketRequest, Protocol};
pub use lifecycle::{
    buffer_align, buffer_align_for, buffer_size, buffer_size_for, device_ordinal, disable, enable,
    enable_with, is_enabled, occupied_size, protocol_of, EmulatedWave, EnableOptions, HostcallRuntime,
    QueueId,
};
pub use memory::{DeviceAllocation, DeviceMemory, MemoryError};
pub use rate_limit::{WARNINGS_PER_WINDOW, WARNING_WINDOW};
pub use threads::affinity::{allowed_cpus, pin_current_thread};
pub use threads::devices::{DeviceGroup, DeviceListeners};
pub use threads::listener::{
    BufferOptions, BufferRegistration, Listener, ListenerConfig, WaitPolicy, MAX_BUFFERS,
};
pub use threads::pool::{stripes, ListenerPool, STRIPE_ALIGN};

/// This crate's README, so that `cargo test --doc` runs its example (only under rustdoc's test mode).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

/// The workspace README and the embedding guide, so that `cargo test --doc` compiles and runs
/// their Rust snippets (only under rustdoc's test mode, in the repository: the published crate
/// neither needs nor has these files).
#[cfg(doctest)]
mod workspace_docs {
    #[doc = include_str!("../../README.md")]
    mod readme {}
    #[doc = include_str!("../../docs/guide.md")]
    mod guide {}
}

/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI < 500
/// (8-byte slot 3).
pub const IMPLICITARG_OFFSET_V4: usize = 24;
/// Byte offset of `hidden_hostcall_buffer` in a kernel's implicit arguments, code-object ABI >= 500
/// (8-byte slot 10).
pub const IMPLICITARG_OFFSET_V5: usize = 80;

/// The traits a user implements or calls methods of (`use hostcall::prelude::*`): traits only,
/// each also at its one public path (the crate root or its namespace).
pub mod prelude {
    pub use crate::services::printf::PrintfSink;
    pub use crate::{DeviceMemory, Doorbell, PacketService};
}
