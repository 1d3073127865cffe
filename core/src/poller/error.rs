//! Why [`Poller::add`](super::Poller::add) (or building its [`Registration`](super::Registration)), or [`Poller::remove`](super::Poller::remove), refuse.

#[cfg(doc)]
use super::Poller;
use crate::any::Protocol;
use crate::view::LayoutError;
use core::fmt;

/// Why a buffer cannot be added or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollerError {
    /// The poller already holds its capacity of buffers.
    Full {
        /// The capacity.
        capacity: usize,
    },
    /// The buffer at this address is already registered.
    AlreadyRegistered {
        /// Its base address.
        base: usize,
    },
    /// No buffer is registered at this address.
    NotRegistered {
        /// The address asked for.
        base: usize,
    },
    /// The memory cannot hold a buffer of that many packets.
    Layout(LayoutError),
    /// A buffer of this protocol cannot be served by packet ranges ([`Registration::range`](super::Registration::range)): its
    /// host side drains it whole (see [`Protocol::range_capable`]).
    NotRangeCapable {
        /// The protocol asked for.
        protocol: Protocol,
    },
}

impl fmt::Display for PollerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity } => {
                write!(f, "the poller already serves its capacity of {capacity} buffers")
            }
            Self::AlreadyRegistered { base } => write!(f, "buffer {base:#x} is already registered"),
            Self::NotRegistered { base } => write!(f, "buffer {base:#x} is not registered"),
            Self::Layout(e) => e.fmt(f),
            Self::NotRangeCapable { protocol } => {
                write!(f, "a {protocol:?}-protocol buffer cannot be served by packet ranges")
            }
        }
    }
}

impl core::error::Error for PollerError {}
