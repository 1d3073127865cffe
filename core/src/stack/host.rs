//! [`Host`]: the host's side of the stack protocol, which takes the whole ready-stack in one swap,
//! serves every packet on it and clears READY.

use super::layout::{CONTROL_HOST_ERROR, CONTROL_READY};
use super::view::View;
use crate::host::{sealed, DrainError, DrainHandler, DrainReport, PacketRequest};
use crate::scan::DrainScope;
use crate::sync::Ordering;

/// The host's side of a stack buffer ([`View::host`]): it swaps the ready-stack empty, reads the
/// headers and requests of the packets it took, and writes their reply words and `control`. One
/// host per buffer: the swap takes every submitted packet. It keeps no state and no scratch
/// (its [`Host`](crate::Host) state and scratch are `()`), and drains the whole buffer whatever
/// the scope: the drains of [`Host`](crate::Host) all take the whole ready-stack.
#[derive(Clone, Copy, Debug)]
pub struct Host<'a>(pub(super) View<'a>);

impl sealed::Sealed for Host<'_> {}

impl crate::host::Host for Host<'_> {
    type State = ();
    type Scratch = ();

    /// Takes the whole ready-stack and serves every packet on it (whatever `scope` says).
    ///
    /// For each packet (its `next` read first: once served, the device owns it again) whose READY
    /// bit is set, `handler.serve` writes the replies; then `control` is stored with READY clear
    /// (and [`CONTROL_HOST_ERROR`] if an error reply was written). Malformed state goes to
    /// `handler.malformed` and is counted; the drain never panics, loops or leaves the buffer.
    ///
    /// An idle ready-stack costs one load (a spinning poll loop's common case); the walk is
    /// inlined too, which saves a packet the call's register saves and reloads of the view.
    #[inline]
    fn drain_scope(
        &self,
        _scope: &mut DrainScope,
        _scratch: Option<&mut ()>,
        _state: Option<&mut ()>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        if self.0.ready_stack().looks_empty() {
            return DrainReport::default();
        }
        self.drain_taken(handler)
    }
}

impl Host<'_> {
    /// The drain past its look at an idle ready-stack (which saw it not empty: the swap is not
    /// preceded by a second look).
    #[inline(always)]
    fn drain_taken(&self, handler: &mut impl DrainHandler) -> DrainReport {
        let mut report = DrainReport::default();
        for link in self.0.ready_stack().take_all_seen() {
            let ptr = match link {
                Ok(ptr) => ptr,
                Err(e) => {
                    report.malformed += 1;
                    handler.malformed(DrainError::Chain(e));
                    break;
                }
            };
            // SAFETY: the walk of this view's ready-stack decoded `ptr` with the view's geometry.
            let (header, payload) = unsafe { self.0.packet_unchecked(ptr) };
            // Relaxed: the Acquire swap in `take_all` ordered the producer's writes before us.
            if header.control.load(Ordering::Relaxed) & CONTROL_READY == 0 {
                report.malformed += 1;
                handler.malformed(DrainError::NotSubmitted { index: ptr.index() as u32 });
                continue;
            }
            let mut request = PacketRequest::new(
                ptr.index() as u32,
                header.service.load(Ordering::Relaxed),
                header.activemask.load(Ordering::Relaxed),
                payload,
            );
            handler.serve(&mut request);
            let control = if request.has_error() { CONTROL_HOST_ERROR } else { 0 };
            // Release: publishes the reply words; pairs with the Acquire load of `control` in
            // `Submitted::wait_until`. From here on the producer owns the packet.
            header.control.store(control, Ordering::Release);
            report.packets += 1;
            report.lane_calls += crate::lane_count(request.activemask());
        }
        report
    }
}
