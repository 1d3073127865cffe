//! [`Host`]: what every protocol's host side is, one required drain over a [`DrainScope`] and
//! the others written once, here, on top of it.

use super::{DrainHandler, DrainReport};
use crate::scan::{DrainScope, ScanWindow};
use core::ops::Range;

/// Keeps [`Host`] implemented by the protocols of this crate only: a new protocol is a folder of
/// this crate, never a type of another.
pub(crate) mod sealed {
    /// The seal of [`Host`](super::Host).
    pub trait Sealed {}
}

/// The host's side of a buffer of one protocol ([`stack::Host`](crate::stack::Host),
/// [`phase::Host`](crate::phase::Host), [`line::Host`](crate::line::Host),
/// [`rpc::Host`](crate::rpc::Host)): one required drain, [`Host::drain_scope`], and the others as
/// defaults over it. Sealed: implemented by this crate's protocols only.
///
/// A host keeps what it needs across drains of one buffer as its [`Host::State`], and the memory
/// it copies requests into as its [`Host::Scratch`]; a drain given neither (every default) keeps
/// nothing: it serves what a stateless host serves, with scratch of its own.
///
/// ```
/// use hostcall_core::{phase, Host, PacketRequest, ScanWindow};
/// let len = phase::buffer_size(4).unwrap();
/// let mut memory = vec![0u64; len.div_ceil(8)];
/// let base = memory.as_mut_ptr().cast::<u8>();
/// // SAFETY: `memory` outlives the view; only the view touches it.
/// let view = unsafe { phase::View::from_raw(base, len, 4) }.unwrap();
/// view.init(base as u64, 0);
/// let mut packet = view.claim(2).unwrap();
/// packet.write_lane(0, &[41, 0, 0, 0, 0, 0, 0, 0]);
/// let submitted = packet.submit(7, 1);
/// let mut answer = |p: &mut PacketRequest<'_>| p.reply(0, [p.request(0)[0] + 1, 0]);
/// assert_eq!(view.host().drain_range(0..2, &mut answer).packets, 0, "packet 2 is not in 0..2");
/// let mut window = ScanWindow::new(4);
/// assert_eq!(view.host().drain_window(&mut window, &mut answer).packets, 1);
/// assert_eq!(submitted.wait(|| {}).reply(0), [42, 0]);
/// ```
pub trait Host: sealed::Sealed {
    /// What the host keeps of one buffer across its drains: nothing (`()`) for the stack and
    /// phase protocols, the memory of incomplete requests for the line protocol
    /// (`[line::Incomplete]`), the calls in progress for LLVM RPC (`dyn rpc::Calls`).
    type State: ?Sized;
    /// Memory the host copies requests into, kept across drains by a host that drains often
    /// (`()` for the protocols that serve the packets in place).
    type Scratch;

    /// Serves the submitted packets of `scope` once, updating the scope's private state (a
    /// [`ScanWindow`]'s record). `scratch` is the caller's kept scratch (`None`: the drain's own);
    /// `state` this buffer's [`Host::State`] (`None`: keep nothing, as each protocol's docs say).
    /// A host that takes every submitted packet at once (the stack protocol) drains the whole
    /// buffer whatever the scope.
    fn drain_scope(
        &self,
        scope: &mut DrainScope,
        scratch: Option<&mut Self::Scratch>,
        state: Option<&mut Self::State>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport;

    /// Serves every submitted packet once, keeping nothing.
    #[inline]
    fn drain(&self, handler: &mut impl DrainHandler) -> DrainReport {
        self.drain_scope(&mut DrainScope::Whole, None, None, handler)
    }

    /// Serves the submitted packets of `range` only (clamped to the buffer; an empty or
    /// out-of-bounds range serves nothing), keeping nothing. Hosts that split one buffer between
    /// threads give each a disjoint range (only
    /// [`Protocol::range_capable`](crate::Protocol::range_capable) protocols).
    fn drain_range(&self, range: Range<usize>, handler: &mut impl DrainHandler) -> DrainReport {
        let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        self.drain_scope(&mut DrainScope::range(index(range.start)..index(range.end)), None, None, handler)
    }

    /// Serves the submitted packets of the part of the buffer `window` says is in use (see
    /// [`ScanWindow`]: no packet is missed), keeping nothing else.
    fn drain_window(&self, window: &mut ScanWindow, handler: &mut impl DrainHandler) -> DrainReport {
        let mut scope = DrainScope::Window(*window);
        let report = self.drain_scope(&mut scope, None, None, handler);
        if let DrainScope::Window(kept) = scope {
            *window = kept;
        }
        report
    }
}
