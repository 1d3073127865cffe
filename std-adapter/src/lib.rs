//! `hostcall`: GPU hostcalls served by a Rust listener, on top of [`hostcall_core`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use hostcall_core as core;

pub mod doorbell;
pub mod memory;
pub mod message;
pub mod printf;
