//! A served buffer's host state, as its entry in the listener (`Served`, `buffers.rs`) owns it:
//! [`HostState`], the one place of the listener that names the protocols whose host keeps state.
//! The entry hands it to each poller registration of the buffer
//! ([`hostcall_core::Registration::with_state`]) and keeps it, at a stable address, until the
//! buffer is no longer served; when a stuck call hands the buffer to another thread's poller the
//! state goes with the new registration (why that needs no lock: `rpc.rs`, "Why a turn needs no
//! lock", which holds for every state).

use super::rpc::RpcState;
use super::BufferOptions;
use crate::dispatch::registry::Services;
use crate::services::rpc::RpcCounters;
use hostcall_core::line::Incomplete;
use hostcall_core::{AnyState, Protocol};
use std::ptr::NonNull;
use std::sync::Arc;

/// What the host keeps of one served buffer across its drains.
pub(super) enum HostState {
    /// Nothing (the stack and phase protocols).
    None,
    /// A line buffer's memory of the requests found incomplete.
    Line(IncompleteMemory),
    /// An LLVM-RPC buffer's host: its calls in progress, policy, budgets and output (`rpc.rs`).
    Rpc(RpcState),
}

impl HostState {
    /// The state of a buffer of `protocol` at `base` of `num_packets` packets, of which
    /// `served` are served here, as `options` say (refusals counted in `services`).
    pub(super) fn new(
        protocol: Protocol,
        base: usize,
        num_packets: u64,
        served: u64,
        options: &BufferOptions,
        services: &Arc<Services>,
    ) -> Self {
        match protocol {
            Protocol::Stack | Protocol::Phase => Self::None,
            Protocol::Line => Self::Line(IncompleteMemory::new(served)),
            // For every port: a range's indices are the buffer's.
            Protocol::Rpc { .. } => {
                let ports = u32::try_from(num_packets).unwrap_or(u32::MAX);
                Self::Rpc(RpcState::new(base, ports, &options.rpc, services))
            }
        }
    }

    /// The state as a poller registration points to it.
    pub(super) fn any(&self) -> AnyState {
        match self {
            Self::None => AnyState::None,
            Self::Line(memory) => AnyState::Line(memory.0),
            Self::Rpc(rpc) => rpc.state(),
        }
    }

    /// An RPC buffer's counters as of its host's last turn.
    pub(super) fn rpc_counters(&self) -> Option<RpcCounters> {
        match self {
            Self::Rpc(rpc) => Some(rpc.counters()),
            Self::None | Self::Line(_) => None,
        }
    }
}

/// One entry per packet served of a line buffer ([`hostcall_core::line::Incomplete`]), which the
/// poller reads and writes through a raw pointer while the buffer is registered: held as that
/// pointer (a `Box` moved into a map would claim unique access to it), freed on drop, which
/// comes only after the pollers let go of it (the buffer removed from the poller that drains it,
/// or its thread ended; a poller it was handed away from drains it no more: `relay.rs`).
pub(super) struct IncompleteMemory(NonNull<[Incomplete]>);

impl IncompleteMemory {
    fn new(packets: u64) -> Self {
        let entries = vec![Incomplete::default(); packets as usize].into_boxed_slice();
        Self(NonNull::from(Box::leak(entries)))
    }
}

impl Drop for IncompleteMemory {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`; no poll uses it any more (see the type's docs).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// SAFETY: the memory is plain data, touched only by the poller's polls (one at a time) while
// registered, and freed by whichever thread drops it after that.
unsafe impl Send for IncompleteMemory {}
