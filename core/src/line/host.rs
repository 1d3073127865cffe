//! [`Host`]: the host's side of the line protocol, the scan that polls each packet's head, takes a request
//! only when every word of it carries the head's sequence, serves it, and answers in line words.

use super::answer::answer_lanes;
use super::decode::decode_lanes;
use super::incomplete::{Entries, Incomplete, Look, STALL_LOOKS};
use super::layout::Request;
use super::scratch::{own_memory, Place, Scratch, ScratchPayload};
use super::view::View;
use super::word::{carries, decode_activemask, decode_service, seq_of};
use crate::host::{sealed, DrainError, DrainHandler, DrainReport, PacketRequest};
use crate::lane::LANE_MASK;
use crate::scan::DrainScope;
use crate::sync::{fence, Ordering};
use core::ops::Range;

/// The host's side of a line buffer ([`View::host`]): it reads the request blocks and writes
/// only the reply blocks and `served`. Its [`Host`](crate::Host) state is the buffer's memory of
/// the requests it found incomplete (`[Incomplete]`), its scratch a [`ScratchPayload`].
///
/// A host writes only `served[i]` and packet `i`'s reply words, so hosts that split one buffer
/// between threads into disjoint ranges never write the same word.
///
/// Transparent over its view, so that the crate's poller can borrow a view as its host, without
/// a copy.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Host<'a>(pub(super) View<'a>);

impl sealed::Sealed for Host<'_> {}

impl crate::host::Host for Host<'_> {
    type State = [Incomplete];
    type Scratch = ScratchPayload;

    /// Scans the packets of `scope` once and serves those whose request is complete.
    ///
    /// For each index: read the head; if its sequence is neither 0 nor `served[i]`, read the mask
    /// word and every active lane's words, and take the request only if every one of them carries
    /// that sequence (a packet still arriving is left for a later scan). Serve it, write each
    /// active lane's reply as line words, and record the sequence in `served[i]`. No
    /// read-modify-write on shared words; `occupied` and `device_seq` are never read.
    ///
    /// Requests are decoded into `scratch`; without one the drain uses scratch of its own, zeroed
    /// in part whenever a scan serves something (4,032 bytes for a 1-lane packet): a host that
    /// keeps one `scratch` for every drain zeroes it once.
    ///
    /// `state` is this buffer's memory of the requests it found incomplete, one entry per
    /// packet of the scope (entry `k` for packet `start + k` of a [`DrainScope::Range`], packet
    /// `k` otherwise), kept by the host across drains of this buffer and zeroed before the first.
    /// With it a request that stays incomplete costs one word a look, and after [`STALL_LOOKS`]
    /// looks it is reported once as [`DrainError::Stalled`] and then looked at every
    /// [`STALLED_LOOK_PERIOD`](super::STALLED_LOOK_PERIOD)th scan (still served if it completes); the
    /// packets without an entry (all, without a state) are read in full at every look. What is
    /// served is the same either way (`line/incomplete.rs` says why).
    ///
    /// ```
    /// use hostcall_core::line::{Incomplete, Parts, Prefix, Reply, Request, ScratchPayload, View, STALLED_LOOK_PERIOD, STALL_LOOKS};
    /// use hostcall_core::{sync::AtomicU32, DrainError, DrainScope, Host as _, PacketRequest};
    ///
    /// let (prefix, words) = (Prefix::default(), |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
    /// let (device_seq, occupied, served) = (words(2), words(1), words(2));
    /// let (requests, replies): (Vec<Request>, Vec<Reply>) = (vec![Request::default(), Request::default()],
    ///     vec![Reply::default(), Reply::default()]);
    /// let parts = Parts { prefix: &prefix, device_seq: &device_seq, occupied: &occupied, served: &served,
    ///     requests: &requests, replies: &replies };
    /// let buffer = View::from_parts(parts).unwrap();
    /// buffer.init(0, 0);
    /// let mut packet = buffer.claim(0).expect("a free packet");
    /// packet.write_lane(0, &[1, 2, 3, 4, 5, 6, 7, 8]);
    /// let submitted = packet.submit(7, 1);
    /// // The device's last word never arrives (it still carries sequence 0)...
    /// let last = &requests[0].lanes[0][8];
    /// let stored = last.load(std::sync::atomic::Ordering::Relaxed);
    /// last.store(0, std::sync::atomic::Ordering::Relaxed);
    /// let (mut scope, mut scratch) = (DrainScope::Whole, ScratchPayload::new());
    /// let mut incomplete = [Incomplete::default(); 2];
    /// let mut stalled = Vec::new();
    /// struct Host<'s>(&'s mut Vec<DrainError>);
    /// impl hostcall_core::DrainHandler for Host<'_> {
    ///     fn serve(&mut self, p: &mut PacketRequest<'_>) { p.reply(0, [p.request(0)[7], 0]); }
    ///     fn malformed(&mut self, e: DrainError) { self.0.push(e); }
    /// }
    /// for _ in 0..STALL_LOOKS {
    ///     let report = buffer.host().drain_scope(&mut scope, Some(&mut scratch), Some(&mut incomplete), &mut Host(&mut stalled));
    ///     assert_eq!(report.packets, 0);
    /// }
    /// assert_eq!(stalled, [DrainError::Stalled { index: 0, seq: 1, looks: u32::from(STALL_LOOKS) }]);
    /// // ... until it does: a late word is served.
    /// last.store(stored, std::sync::atomic::Ordering::Relaxed);
    /// let served: u32 = (0..STALLED_LOOK_PERIOD)
    ///     .map(|_| buffer.host().drain_scope(&mut scope, Some(&mut scratch), Some(&mut incomplete), &mut Host(&mut stalled)).packets)
    ///     .sum();
    /// assert_eq!(served, 1, "within STALLED_LOOK_PERIOD scans");
    /// assert_eq!(submitted.wait(|| {}).reply(0), [8, 0]);
    /// ```
    #[inline]
    fn drain_scope(
        &self,
        scope: &mut DrainScope,
        scratch: Option<&mut ScratchPayload>,
        state: Option<&mut [Incomplete]>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        let first = match *scope {
            DrainScope::Range { start, .. } => start as usize,
            DrainScope::Whole | DrainScope::Window(_) => 0,
        };
        let entries = &mut Entries { first, entries: state.unwrap_or(&mut []) };
        // One scan whichever the place: one instantiation of the scope's drain and of the scan
        // (the poller's, always given a kept scratch, loses the other branch when inlined).
        let (mut memory, mut initialised) = (own_memory(), false);
        let place = &mut match scratch {
            Some(kept) => Place::Kept(kept),
            None => Place::Own(&mut memory, &mut initialised),
        };
        scope.drain(self.0.requests.len(), |range, report| self.scan(range, place, entries, handler, report))
    }
}

impl Host<'_> {
    /// Serves every complete pending packet in `range` once; returns the highest index served.
    ///
    /// Never inlined: inlined into the scope's closure, it reaches the host and its state through
    /// the closure's captures and spills what it loads of them; called, it has them as its
    /// arguments (counted in `docs/performance.md`, "The line packet's fixed cost").
    #[inline(never)]
    fn scan(
        &self,
        range: Range<usize>,
        place: &mut Place<'_>,
        entries: &mut Entries<'_>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> Option<u32> {
        // An idle scan costs nothing; the first to serve a packet zeroes what of the scratch is
        // not initialised yet (see `Scratch`).
        let mut scratch = place.scratch();
        let mut highest = None;
        for index in range {
            let mut entry = entries.get(index);
            if entry.as_deref_mut().is_some_and(Incomplete::rests) {
                continue; // a request reported stalled, between two looks (nothing loaded)
            }
            // Relaxed: a poll; the data comes in the same word as its sequence.
            let head = self.0.requests[index].head.load(Ordering::Relaxed);
            let seq = seq_of(head);
            // Relaxed: host-only word, our own last store.
            if seq == 0 || seq == self.0.served[index].load(Ordering::Relaxed) {
                continue;
            }
            // Acquire: pairs with the Release fence of the wave's wrap refresh
            // (`View::refresh`), stored before this head: the refresh's zeroes are visible, so no
            // word older than them is read below.
            fence(Ordering::Acquire);
            let request = &self.0.requests[index];
            if let Some(entry) = entry.as_deref_mut() {
                if let Look::Incomplete = entry.look(request, head, seq) {
                    count_look(entry, index, seq, handler, report);
                    continue; // one word loaded: the one it waits for (`line/incomplete.rs`)
                }
            }
            // The line after the head's, where lane 0's request ends, before the mask word says
            // which lanes take part: its miss then follows the head's at once (lane 0 is the
            // likeliest first lane; the head's line holds its first 6 words).
            let lane0 = &request.lanes[0];
            crate::sync::prefetch(&lane0[lane0.len() - 1]);
            let Some(activemask) = Self::take(request, head, seq, &mut scratch) else {
                // Still arriving, or never complete: not served, looked at again next scan.
                if let Some(entry) = entry {
                    entry.remember(request, head, seq);
                    count_look(entry, index, seq, handler, report);
                }
                continue;
            };
            if let Some(entry) = entry {
                entry.forget();
            }
            let (payload, slots) = scratch.payload();
            let mut request = PacketRequest::new(index as u32, decode_service(head), activemask, payload)
                .with_plain_slots(slots);
            handler.serve(&mut request);
            answer_lanes(&self.0.replies[index], seq, activemask, payload, slots);
            // Relaxed: host-only word (several hosts of one buffer serve disjoint ranges).
            self.0.served[index].store(seq, Ordering::Relaxed);
            report.packets += 1;
            report.lane_calls += crate::lane_count(activemask);
            highest = Some(index as u32);
        }
        highest
    }

    /// Decodes the active lanes of `request` into `scratch` if the mask word and every word of
    /// them carry `seq` (the head `head` does); returns the activemask (cut to the lanes that
    /// exist), or `None` if any of those words does not (every active lane is read either way).
    ///
    /// Never inlined: inlined into the scan, its lane loop loses registers to the scan's and
    /// spills (counted in `docs/performance.md`, "Line requests that never complete, and the line
    /// take's cost").
    #[inline(never)]
    fn take(request: &Request, head: u64, seq: u32, scratch: &mut Scratch<'_>) -> Option<u64> {
        // Relaxed (every load here and below): a line word is read in one access, so its data is
        // the data its sequence was stored with; nothing else needs ordering.
        let mask = request.mask.load(Ordering::Relaxed);
        if !carries(mask, seq) {
            return None;
        }
        let activemask = decode_activemask(head, mask) & LANE_MASK;
        // Every active lane decoded straight into the scratch the service reads, and the
        // sequences of all their words checked once for the take (`line/decode.rs`). The slots
        // are recorded as written whole once, for the whole mask, when every word carried `seq`;
        // a take that fails leaves the slots it wrote not recorded (zeroed before any service
        // sees them, if no later packet of the scan writes them whole).
        if !decode_lanes(request, activemask, seq, scratch) {
            return None;
        }
        scratch.written_whole(activemask);
        Some(activemask)
    }
}

/// Counts a look that found packet `index`'s request of sequence `seq` incomplete, and reports it
/// stalled at the [`STALL_LOOKS`]th.
#[inline]
fn count_look(
    entry: &mut Incomplete,
    index: usize,
    seq: u32,
    handler: &mut impl DrainHandler,
    report: &mut DrainReport,
) {
    if entry.count_look() {
        report.malformed += 1;
        handler.malformed(DrainError::Stalled { index: index as u32, seq, looks: u32::from(STALL_LOOKS) });
    }
}
