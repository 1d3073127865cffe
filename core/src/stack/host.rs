//! [`Host`]: the host's side of the stack protocol, which takes the whole ready-stack in one swap,
//! serves every packet on it and clears READY.

use super::layout::{CONTROL_HOST_ERROR, CONTROL_READY};
use super::tagged::TaggedPtr;
use super::view::View;
use crate::host::{sealed, ChainError, DrainError, DrainHandler, DrainReport, PacketRequest};
use crate::scan::DrainScope;
use crate::sync::Ordering;

/// The host's side of a stack buffer ([`View::host`]): it swaps the ready-stack empty, reads the
/// headers and requests of the packets it took, and writes their reply words and `control`. One
/// host per buffer: the swap takes every submitted packet. It keeps no state and no scratch
/// (its [`Host`](crate::Host) state and scratch are `()`), and drains the whole buffer whatever
/// the scope: the drains of [`Host`](crate::Host) all take the whole ready-stack.
///
/// Transparent over its view, so that the crate's poller can borrow a view as its host, without
/// a copy (its drain's chain of more than one packet goes on in a call that takes the host by
/// reference).
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
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
    /// An idle ready-stack costs one load (a spinning poll loop's common case); the chain's first
    /// packet is served inline too, which saves it a call's register saves and reloads of the
    /// view (a longer chain's rest goes on in a call of its own).
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
    /// preceded by a second look). The chain's first packet is served here; the walk goes on in
    /// [`drain_rest`](Self::drain_rest) only when its `next` named another packet. A chain of one
    /// packet (a lone wave's call, the spinning poll's common case) so holds nothing across the
    /// service call but the report, the header and the walk, not the loop's state.
    #[inline(always)]
    fn drain_taken(&self, handler: &mut impl DrainHandler) -> DrainReport {
        let mut report = DrainReport::default();
        let mut walk = self.0.ready_stack().take_all_seen();
        if let Some(link) = walk.next() {
            let place = walk.place();
            if self.serve_link(link, handler, &mut report) && place.0 != 0 {
                return self.drain_rest(place, handler, report);
            }
        }
        report
    }

    /// The rest of a chain of more than one packet, from the place its walk had reached after
    /// the first.
    #[inline(never)]
    fn drain_rest(
        &self,
        place: (u64, u32),
        handler: &mut impl DrainHandler,
        mut report: DrainReport,
    ) -> DrainReport {
        for link in self.0.ready_stack().resume(place) {
            if !self.serve_link(link, handler, &mut report) {
                break;
            }
        }
        report
    }

    /// Serves one link of the walk: a packet whose READY bit is set is served and its `control`
    /// stored with READY clear (and [`CONTROL_HOST_ERROR`] if an error reply was written); one
    /// without it is skipped, a broken link ends the walk (`false`). Each is counted in `report`.
    #[inline(always)]
    fn serve_link(
        &self,
        link: Result<TaggedPtr, ChainError>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> bool {
        let ptr = match link {
            Ok(ptr) => ptr,
            Err(e) => {
                report.malformed += 1;
                handler.malformed(DrainError::Chain(e));
                return false;
            }
        };
        // SAFETY: the walk of this view's ready-stack decoded `ptr` with the view's geometry.
        let (header, payload) = unsafe { self.0.packet_unchecked(ptr) };
        // Relaxed: the Acquire swap in `take_all` ordered the producer's writes before us.
        if header.control.load(Ordering::Relaxed) & CONTROL_READY == 0 {
            report.malformed += 1;
            handler.malformed(DrainError::NotSubmitted { index: ptr.index() as u32 });
            return true;
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
        true
    }
}
