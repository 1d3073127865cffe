//! `libhostcall_capi`: the C ABI of `hostcall`, a drop-in for ROCm's `rochostcall.hpp` interface.
//!
//! Built as `libhostcall_capi.so` and `libhostcall_capi.a`; declared in `include/hostcall.h`:
//!
//! - [`getHostcallBufferSize`], [`getHostcallBufferAlignment`], [`enableHostcalls`],
//!   [`disableHostcalls`]: ROCm's names and signatures (C linkage);
//! - [`hostcall_buffer_size`], [`hostcall_buffer_alignment`], [`hostcall_enable`],
//!   [`hostcall_disable`]: the same with status codes, and [`hostcall_last_error`] to say why;
//! - [`hostcall_buffer_size_for`], [`hostcall_buffer_alignment_for`], [`hostcall_enable_ex`]:
//!   either protocol (the phase protocol with its `occupied` bitmap passed in or allocated), and
//!   the device ordinal, through the size-versioned [`options::HostcallEnableOptions`];
//! - [`hostcall_register_service`], [`hostcall_unregister_service`]: services in C, and
//!   [`hostcall_count_reason`] for a service to say why it refused a lane;
//!   [`hostcall_enable_function_calls_unsafe`]: the built-in FUNCTION_CALL, off until asked for
//!   (PRINTF, to stdout and stderr, and DEVMEM are served from the start);
//! - [`hostcall_allow_device_to_end_process`]: whether a device may end the host process (RPC's
//!   `exit`/`abort`, SANITIZER's aborting reports), off by default;
//! - [`hostcall_rpc_buffer_size`], [`hostcall_rpc_client_object`]: LLVM libc's GPU RPC buffer and
//!   the client object device code expects, checked against the device symbol's size;
//! - [`hostcall_set_memory`], [`hostcall_memory_reason`]: which memory the library serves with
//!   (HSA, CUDA with the `cuda` feature, or host memory; `HOSTCALL_MEMORY` otherwise), refused
//!   with a reason where it does not fit;
//! - [`hostcall_set_wait_policy`], [`hostcall_set_wait_times`], [`hostcall_get_wait_times`]: how
//!   the listener waits when idle (a preset, or explicit microseconds), at any time;
//! - [`hostcall_emulated_call`]: one wave's hostcall from the CPU, through the real producer
//!   path of the buffer's protocol (for tests and for runtimes without a GPU).
//!
//! Every entry point checks its pointers as far as they can be checked (null, alignment,
//! overlap with the memory the listener shares), reads and writes the caller's memory only
//! through raw pointers (never as Rust references that would assume more than the C contract
//! says), catches panics (none crosses the boundary: a panic is reported as
//! [`status::HOSTCALL_ERR_PANIC`]) and records a message for [`hostcall_last_error`] on failure.
//! Everything runs on the process-wide default runtime, `hostcall::HostcallRuntime::global()`,
//! created on the chosen memory by the first enable ([`memory`]).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

pub mod emulated;
pub mod lifecycle;
pub mod logging;
pub mod memory;
pub mod options;
pub mod process;
pub mod rpc;
pub mod service;
pub mod stats;
pub mod status;
pub mod wait;

pub use emulated::hostcall_emulated_call;
pub use lifecycle::{
    disableHostcalls, enableHostcalls, getHostcallBufferAlignment, getHostcallBufferSize,
    hostcall_buffer_alignment, hostcall_buffer_alignment_for, hostcall_buffer_size, hostcall_buffer_size_for,
    hostcall_disable, hostcall_enable, hostcall_enable_ex,
};
pub use logging::hostcall_set_log_callback;
pub use memory::{hostcall_memory_reason, hostcall_set_memory};
pub use process::hostcall_allow_device_to_end_process;
pub use rpc::{hostcall_rpc_buffer_size, hostcall_rpc_client_object};
pub use service::{
    hostcall_count_reason, hostcall_enable_function_calls_unsafe, hostcall_register_service,
    hostcall_unregister_service,
};
pub use stats::{hostcall_get_buffer_stats, hostcall_get_service_stats, hostcall_get_stats};
pub use status::{hostcall_last_error, hostcall_status_string};
pub use wait::{hostcall_get_wait_times, hostcall_set_wait_policy, hostcall_set_wait_times};
