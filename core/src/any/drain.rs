//! The poller's drain of a registered buffer: one function a protocol, each called (not inlined)
//! from the poll, so a poll of a stack buffer runs in a frame of the stack's drain's size, not in
//! one that also holds the line scan's registers or the RPC arm's payload (measured in
//! `docs/performance.md`, "Each protocol's drain in its own frame, cut alone").

use super::{AnyState, AnyStateMut, AnyView, HostScratch};
use crate::host::{DrainHandler, DrainReport, Host as _};
use crate::scan::DrainScope;
use crate::{line, phase, rpc, stack};

impl AnyView<'_> {
    /// [`drain_scope`](Self::drain_scope) with the state as a registration keeps it, borrowed
    /// only by the protocols that have one (the poller's drain of a registered buffer): a stack
    /// or phase drain reads nothing of it. Each protocol's drain is a function of its own
    /// (`#[inline(never)]`), so the poll's frame is its own and each drain's only its protocol's.
    ///
    /// The state is lent by reference and borrowed inside the line and RPC drains, so the poll
    /// reads none of it for a stack or phase buffer (a copy of it would be loaded before the
    /// protocol's `match`, whatever the protocol).
    ///
    /// # Safety
    /// `state` meets [`AnyState::borrow`]'s contract for the time of the call.
    #[inline(always)]
    pub(crate) unsafe fn drain_registered(
        &self,
        scope: &mut DrainScope,
        scratch: &mut HostScratch,
        state: &AnyState,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        match self {
            Self::Stack(view) => drain_stack(view, scope, handler),
            Self::Phase(view) => drain_phase(view, scope, handler),
            // SAFETY: this function's contract.
            Self::Line(view) => unsafe { drain_line(view, scope, &mut scratch.line, state, handler) },
            // SAFETY: this function's contract.
            Self::Rpc(view) => unsafe { drain_rpc(view, scope, &mut scratch.rpc, state, handler) },
        }
    }
}

#[inline(never)]
fn drain_stack(
    view: &stack::View<'_>,
    scope: &mut DrainScope,
    handler: &mut impl DrainHandler,
) -> DrainReport {
    view.host_ref().drain_scope(scope, None, None, handler)
}

#[inline(never)]
fn drain_phase(
    view: &phase::View<'_>,
    scope: &mut DrainScope,
    handler: &mut impl DrainHandler,
) -> DrainReport {
    view.host_ref().drain_scope(scope, None, None, handler)
}

/// # Safety
/// As [`AnyView::drain_registered`]'s.
#[inline(never)]
unsafe fn drain_line(
    view: &line::View<'_>,
    scope: &mut DrainScope,
    scratch: &mut line::ScratchPayload,
    state: &AnyState,
    handler: &mut impl DrainHandler,
) -> DrainReport {
    // SAFETY: this function's contract.
    let memory = match unsafe { state.borrow() } {
        AnyStateMut::Line(memory) => Some(memory),
        _ => None,
    };
    view.host_ref().drain_scope(scope, Some(scratch), memory, handler)
}

/// # Safety
/// As [`AnyView::drain_registered`]'s.
#[inline(never)]
unsafe fn drain_rpc(
    view: &rpc::View<'_>,
    scope: &mut DrainScope,
    scratch: &mut Option<crate::lane::Payload>,
    state: &AnyState,
    handler: &mut impl DrainHandler,
) -> DrainReport {
    // SAFETY: this function's contract.
    let calls = match unsafe { state.borrow() } {
        AnyStateMut::Rpc(calls) => Some(calls),
        _ => None,
    };
    view.host().drain_scope(scope, Some(scratch), calls, handler)
}
