//! The std crate's error type: one enum, each variant wrapping the typed error of its layer.

use crate::memory::MemoryError;
use hostcall_core::buffer::LayoutError;
use hostcall_core::poller::PollerError;
use hostcall_core::stack::StackError;
use std::fmt;

/// Anything that can go wrong setting up or using hostcalls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Memory could not be allocated.
    Memory(MemoryError),
    /// The memory cannot hold a buffer of that many packets.
    Layout(LayoutError),
    /// A buffer could not be added to or removed from a listener.
    Poller(PollerError),
    /// Shared memory of a buffer was found corrupt.
    Corrupt(StackError),
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
        }
    }
}

impl std::error::Error for Error {}

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
impl From<StackError> for Error {
    fn from(e: StackError) -> Self {
        Self::Corrupt(e)
    }
}
