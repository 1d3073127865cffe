//! The built-in services of PROTOCOL.md sections 3 and 4, each registered on
//! [`Services`](crate::dispatch::registry::Services) by one method (all four in `install.rs`):
//!
//! - FUNCTION_CALL (id 1): [`function_call`], a host function called by the address a device
//!   sends (`unsafe` to enable);
//! - PRINTF (id 2): [`printf`], formatting as glibc does, on top of [`message`] assembly;
//! - DEVMEM (id 3): [`devmem`], device memory allocated by the host;
//! - SANITIZER (id 4): [`sanitizer`], AddressSanitizer reports from device code;
//! - [`ending`]: whether a device may end the host process (`exit`, `abort`, an aborting
//!   sanitizer report): one switch, off by default;
//! - [`message`]: host-side message assembly (chunks in, whole messages out), for any service
//!   whose requests span several calls;
//! - [`rpc`]: LLVM libc's GPU RPC opcodes.
//!
//! What devices make the host hold between calls (open messages, RPC calls in progress) is
//! bounded in bytes by one mechanism, `held.rs`: a budget per buffer and one for all buffers.

pub mod devmem;
pub mod ending;
pub mod function_call;
pub(crate) mod held;
mod install;
pub mod message;
pub mod printf;
pub mod rpc;
pub mod sanitizer;
