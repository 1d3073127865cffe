//! The std crate's error type: one enum, each variant wrapping the typed error of its layer.

use crate::memory::MemoryError;
use hostcall_core::ChainError;
use hostcall_core::{LayoutError, PollerError};
use std::fmt;

/// Anything that can go wrong setting up or using hostcalls.
///
/// `#[non_exhaustive]`: later versions may add variants, so a `match` needs a `_` arm. The
/// variants wrapping a lower layer's typed error ([`Memory`](Self::Memory),
/// [`Layout`](Self::Layout), [`Poller`](Self::Poller), [`Corrupt`](Self::Corrupt)) return it from
/// [`source`](std::error::Error::source); their `Display` also names it, so a plain
/// `eprintln!("{e}")`, the message C callers get, says what happened in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Memory could not be allocated.
    Memory(MemoryError),
    /// The memory cannot hold a buffer of that many packets.
    Layout(LayoutError),
    /// A buffer could not be added to or removed from a listener.
    Poller(PollerError),
    /// Shared memory of a buffer was found corrupt.
    Corrupt(ChainError),
    /// The listener has been shut down.
    ShutDown,
    /// A wave waited longer than its limit for a packet or a reply.
    TimedOut,
    /// A thread could not be started.
    Thread(String),
    /// An emulated wave's message stream broke (see `hostcall_core::message::WriterError`).
    Message(String),
    /// A service id is already registered.
    ServiceTaken(u32),
    /// The buffer (or part of its memory) is already served by another listener: one buffer is
    /// served by one listener at a time, whichever API added it (see `threads::claims`).
    AlreadyServed {
        /// The buffer's address.
        buffer: usize,
        /// The address of the buffer already served that it overlaps (the same one, if equal).
        served: usize,
    },
    // -- Buffer lifecycle (`crate::lifecycle`, ROCm's enable/disable). --
    /// The buffer is already enabled on this listener (possibly for another queue).
    AlreadyEnabled {
        /// The buffer's address.
        buffer: usize,
        /// The queue it is enabled for.
        queue: u64,
    },
    /// The buffer is enabled on another listener; one buffer is served by one listener.
    EnabledOnOtherListener {
        /// The buffer's address.
        buffer: usize,
    },
    /// The buffer's memory overlaps a buffer that is already enabled.
    Overlaps {
        /// The buffer's address.
        buffer: usize,
        /// The address of the enabled buffer it overlaps.
        enabled: usize,
    },
    /// The queue already has a buffer (one distinct buffer per hardware queue).
    QueueTaken {
        /// The queue.
        queue: u64,
        /// The buffer enabled for it.
        buffer: usize,
    },
    /// The buffer is not enabled (never, or already disabled).
    NotEnabled {
        /// The buffer's address.
        buffer: usize,
    },
    /// The buffer is enabled for another queue than the one given.
    WrongQueue {
        /// The buffer's address.
        buffer: usize,
        /// The queue it is enabled for.
        enabled_for: u64,
        /// The queue given.
        given: u64,
    },
    /// The buffer is enabled with another packet count than the one given.
    PacketCountMismatch {
        /// The buffer's address.
        buffer: usize,
        /// The packet count it is enabled with.
        enabled_with: u32,
        /// The packet count given.
        given: u32,
    },
    /// Enable or disable was called from a listener thread (from a service handler), where it
    /// would wait for itself.
    CalledFromListener,
    /// The operation does not apply here (e.g. serving part of a stack-protocol buffer, or the
    /// stack protocol on a platform without host-native atomics).
    Unsupported(String),
    /// A CUDA driver call failed (the `cuda` feature): the call and the driver's error.
    Cuda(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory(e) => write!(f, "memory: {e}"),
            Self::Layout(e) => write!(f, "buffer layout: {e}"),
            Self::Poller(e) => write!(f, "listener: {e}"),
            Self::Corrupt(e) => write!(f, "corrupt shared memory: {e}"),
            Self::ShutDown => f.write_str("the listener has been shut down"),
            Self::Thread(e) => write!(f, "cannot start the listener thread: {e}"),
            Self::TimedOut => f.write_str("timed out waiting for the host"),
            Self::Message(e) => write!(f, "message stream: {e}"),
            Self::ServiceTaken(id) => write!(f, "service id {id} is already registered"),
            Self::AlreadyServed { buffer, served } if buffer == served => {
                write!(f, "buffer {buffer:#x} is already served by another listener")
            }
            Self::AlreadyServed { buffer, served } => {
                write!(f, "buffer {buffer:#x} overlaps buffer {served:#x}, which another listener serves")
            }
            Self::AlreadyEnabled { buffer, queue } => {
                write!(f, "buffer {buffer:#x} is already enabled (for queue {queue:#x})")
            }
            Self::EnabledOnOtherListener { buffer } => {
                write!(f, "buffer {buffer:#x} is enabled on another listener")
            }
            Self::Overlaps { buffer, enabled } => {
                write!(f, "buffer {buffer:#x} overlaps the enabled buffer {enabled:#x}")
            }
            Self::QueueTaken { queue, buffer } => {
                write!(f, "queue {queue:#x} already has a buffer enabled ({buffer:#x})")
            }
            Self::NotEnabled { buffer } => write!(f, "buffer {buffer:#x} is not enabled"),
            Self::WrongQueue { buffer, enabled_for, given } => write!(
                f,
                "buffer {buffer:#x} is enabled for queue {enabled_for:#x}, not for queue {given:#x}"
            ),
            Self::PacketCountMismatch { buffer, enabled_with, given } => {
                write!(f, "buffer {buffer:#x} is enabled with {enabled_with} packets, not {given}")
            }
            Self::CalledFromListener => {
                f.write_str("hostcalls cannot be enabled or disabled from a listener thread")
            }
            Self::Unsupported(what) => write!(f, "unsupported: {what}"),
            Self::Cuda(what) => write!(f, "cuda: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Memory(e) => Some(e),
            Self::Layout(e) => Some(e),
            Self::Poller(e) => Some(e),
            Self::Corrupt(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MemoryError> for Error {
    fn from(e: MemoryError) -> Self {
        Self::Memory(e)
    }
}
impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        Self::Layout(e)
    }
}
impl From<PollerError> for Error {
    fn from(e: PollerError) -> Self {
        Self::Poller(e)
    }
}
impl From<ChainError> for Error {
    fn from(e: ChainError) -> Self {
        Self::Corrupt(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn wrapped_errors_are_the_source() {
        let e = Error::Layout(LayoutError::Null);
        let source = e.source().expect("a source");
        assert_eq!(source.downcast_ref::<LayoutError>(), Some(&LayoutError::Null));
        assert!(e.to_string().contains(&LayoutError::Null.to_string()), "{e}");
        assert!(Error::ShutDown.source().is_none());
    }
}
