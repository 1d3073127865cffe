//! `hostcall`: the std adapter around [`hostcall_core`].
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use hostcall_core as core;
