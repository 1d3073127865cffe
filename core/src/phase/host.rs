//! [`Host`]: the host's side of the phase protocol, the scan that serves every packet whose phase
//! words differ and answers by copying `device_phase[i]` into `host_phase[i]`.

use super::view::{View, PHASE_BIT};
use crate::host::{sealed, DrainError, DrainHandler, DrainReport, PacketRequest};
use crate::lane::Payload;
use crate::scan::{clamped, DrainScope};
use crate::sync::{fence, Ordering};
use core::ops::Range;

/// The host's side of a phase buffer ([`View::host`]): it reads `device_phase`, the headers and
/// the requests, and writes only `host_phase` and the reply words. It keeps no state and no
/// scratch (its [`Host`](crate::Host) state and scratch are `()`): a windowed host keeps its
/// [`ScanWindow`](crate::ScanWindow) (or [`DrainScope`]) itself.
///
/// Since the host writes only `host_phase[i]` and packet `i`'s reply words, threads that split
/// one buffer into disjoint ranges ([`Host::drain_range`](crate::Host::drain_range),
/// [`DrainScope::Range`]) never write the same word (and none reads what another writes).
///
/// Transparent over its view, so that the crate's poller can borrow a view as its host, without
/// a copy.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Host<'a>(pub(super) View<'a>);

impl sealed::Sealed for Host<'_> {}

impl crate::host::Host for Host<'_> {
    type State = ();
    type Scratch = ();

    /// Scans the packets of `scope` once and serves those the device has submitted.
    ///
    /// For each index `i` whose phase words differ in bit 0: an Acquire fence, `handler.serve`
    /// reads the requests and writes the replies, then `host_phase[i]` is stored (Release) with
    /// the value read from `device_phase[i]`, which hands the packet back. The host does no
    /// read-modify-write on shared words and never reads `occupied`.
    #[inline(never)]
    fn drain_scope(
        &self,
        scope: &mut DrainScope,
        _scratch: Option<&mut ()>,
        _state: Option<&mut ()>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        scope.drain(self.0.headers.len(), |range, report| self.scan(range, handler, report))
    }
}

impl Host<'_> {
    /// Serves every pending packet in `range` once; returns the highest index served.
    ///
    /// The range is clamped to the buffer here, once, and every per-packet word below is then
    /// read without a bounds check of its own: the view's five per-packet arrays all hold
    /// `num_packets` entries (its constructors check it), so an index below the clamped end is
    /// in bounds in each of them.
    #[inline(always)]
    fn scan(
        &self,
        range: Range<usize>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> Option<u32> {
        let mut highest = None;
        for index in clamped(range, self.0.headers.len()) {
            // SAFETY: `index < num_packets` (the clamp above), the length of both phase arrays.
            let (device_phase, host_phase) =
                unsafe { (self.0.device_phase.get_unchecked(index), self.0.host_phase.get_unchecked(index)) };
            // Relaxed: a poll. If it shows a submit, the Acquire fence in `serve_packet` makes it
            // synchronise with the device's Release store of this value.
            let device = device_phase.load(Ordering::Relaxed);
            // Relaxed: the host is the only (correct) writer of `host_phase`; this reads back its
            // own last store.
            let host = host_phase.load(Ordering::Relaxed);
            if (device ^ host) & PHASE_BIT == 0 {
                continue;
            }
            if (device | host) & !PHASE_BIT != 0 {
                report.malformed += 1;
                let found =
                    DrainError::StrayBits { index: index as u32, device_word: device, host_word: host };
                handler.malformed(found);
            }
            // SAFETY: `index < num_packets`, as above.
            unsafe { self.serve_packet(index, device, handler, report) };
            highest = Some(index as u32);
        }
        highest
    }

    /// Serves packet `index`, whose `device_phase` was read as `device` and differs from
    /// `host_phase` in bit 0.
    ///
    /// # Safety
    /// `index < num_packets` (the scan's clamped range): its words are read unchecked.
    unsafe fn serve_packet(
        &self,
        index: usize,
        device: u32,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) {
        // SAFETY: `index < num_packets` (this function's contract), the length of the headers,
        // the payloads and `host_phase` (the view's constructors check it).
        let (header, payload, host_phase) = unsafe {
            (
                self.0.headers.get_unchecked(index),
                self.0.payloads.get_unchecked(index),
                self.0.host_phase.get_unchecked(index),
            )
        };
        // Lane 0's slot, before the header: its miss then overlaps the header's instead of
        // waiting for the activemask (the likeliest first lane; the others follow the mask).
        crate::sync::prefetch(&payload.slots[0]);
        // Acquire: pairs with the Release store of `device_phase` in `Claimed::submit`, whose
        // value the caller read: the wave's header and payload writes happen before our reads.
        fence(Ordering::Acquire);
        // Relaxed: ordered by the fence above.
        let (service, activemask) =
            (header.service.load(Ordering::Relaxed), header.activemask.load(Ordering::Relaxed));
        // Lane 0's slot is on its way already.
        prefetch_lanes(payload, activemask & !1);
        let mut request = PacketRequest::new(index as u32, service, activemask, payload);
        handler.serve(&mut request);
        // Release: publishes the reply words and orders our reads of the request before the
        // device's next writes; pairs with the Acquire load of `host_phase` in
        // `Submitted::wait_until` (and in `try_claim`). Storing the value read from `device_phase`
        // is `host_phase ^= 1` for a correct device (its phases are 0 or 1 and differed), done
        // without a read-modify-write; for a device with garbage in the upper bits it is the value
        // most likely to satisfy whatever comparison it spins on. From here on the device owns
        // the packet.
        host_phase.store(device, Ordering::Release);
        report.packets += 1;
        report.lane_calls += crate::lane_count(request.activemask());
    }
}

/// Hints the CPU to fetch the request slot of every lane in `activemask` (only the lanes that
/// exist), so a packet's cache misses overlap instead of coming one lane at a time. A device
/// that just wrote the slots owns their lines, so each would otherwise be a miss in series.
/// Inlined: for a one-lane packet (no lane past lane 0) it is a test of the mask, not a call.
#[inline(always)]
fn prefetch_lanes(payload: &Payload, activemask: u64) {
    for lane in crate::lane::lanes(activemask) {
        crate::sync::prefetch(&payload.slots[lane]);
    }
}
