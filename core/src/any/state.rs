//! A buffer's per-buffer host state of any protocol: [`AnyState`], as a registration keeps it
//! (raw pointers to the owner's memory), and [`AnyStateMut`], borrowed for one drain.

use crate::{line, rpc};
use core::fmt;
use core::ptr::NonNull;

/// The [`Host::State`](crate::Host::State) of one buffer, as its owner hands it to a
/// [`Registration`](crate::Registration): a raw pointer to memory the owner keeps, used only by
/// the drains of that buffer under the registration's contract
/// ([`Registration::with_state`](crate::Registration::with_state)).
#[derive(Clone, Copy, Default)]
pub enum AnyState {
    /// No state: the protocol's stateless drain (every protocol may go without).
    #[default]
    None,
    /// A line buffer's memory of incomplete requests, one entry per packet served.
    Line(NonNull<[line::Incomplete]>),
    /// An LLVM-RPC buffer's calls in progress.
    Rpc(NonNull<dyn rpc::Calls>),
}

impl AnyState {
    /// The state borrowed for one drain.
    ///
    /// # Safety
    /// The memory must be valid for reads and writes, initialised, and accessed through nothing
    /// else while the borrow lives (the contract of
    /// [`Registration::with_state`](crate::Registration::with_state)).
    #[inline]
    pub unsafe fn borrow<'s>(self) -> AnyStateMut<'s> {
        match self {
            Self::None => AnyStateMut::None,
            // SAFETY (both arms): this function's contract.
            Self::Line(memory) => AnyStateMut::Line(unsafe { &mut *memory.as_ptr() }),
            Self::Rpc(calls) => AnyStateMut::Rpc(unsafe { &mut *calls.as_ptr() }),
        }
    }
}

/// Which state, and for a line buffer how many entries (the pointers are the owner's).
impl fmt::Debug for AnyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Line(memory) => f.debug_tuple("Line").field(&memory.len()).finish(),
            Self::Rpc(_) => f.write_str("Rpc"),
        }
    }
}

/// A buffer's [`Host::State`](crate::Host::State) of any protocol, borrowed for one drain
/// ([`AnyView::drain_scope`](crate::AnyView::drain_scope)).
#[derive(Default)]
pub enum AnyStateMut<'s> {
    /// No state.
    #[default]
    None,
    /// A line buffer's memory of incomplete requests.
    Line(&'s mut [line::Incomplete]),
    /// An LLVM-RPC buffer's calls in progress.
    Rpc(&'s mut (dyn rpc::Calls + 'static)),
}

/// Which state, and for a line buffer how many entries.
impl fmt::Debug for AnyStateMut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Line(memory) => f.debug_tuple("Line").field(&memory.len()).finish(),
            Self::Rpc(_) => f.write_str("Rpc"),
        }
    }
}
