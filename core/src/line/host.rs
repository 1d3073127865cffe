//! [`Host`]: the host's side of the line protocol, the scan that polls each packet's head, takes a request
//! only when every word of it carries the head's sequence, serves it, and answers in line words.

use super::answer::answer_lanes;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
use super::answer::answer_lanes_avx2;
use super::decode::decode_lanes;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
use super::decode::decode_lanes_avx2;
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
        let mut place = match scratch {
            Some(kept) => Place::kept(kept),
            None => Place::own(&mut memory, &mut initialised),
        };
        scope.drain(self.0.requests.len(), |range, report| {
            self.scan(range, place.reborrow(), entries, handler, report)
        })
    }
}

impl Host<'_> {
    /// Serves every complete pending packet in `range` once; returns the highest index served.
    ///
    /// Two copies of one scan ([`Host::scan_with`]): where the CPU runs AVX2 and has `popcnt`
    /// (asked here, once a scan), one built for both, which calls the AVX2 take and answer and
    /// counts lanes with `popcnt` with no check a packet; elsewhere the portable one, whose take,
    /// answer and count ask the CPU themselves. Both serve, refuse, count and remember the same.
    #[inline]
    fn scan(
        &self,
        range: Range<usize>,
        place: Place<'_>,
        entries: &mut Entries<'_>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> Option<u32> {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
        if crate::cpu::has_avx2_and_popcnt() && !portable_scan_only() {
            // SAFETY: the CPU runs AVX2, its OS keeps the registers, and it has `popcnt`
            // (`has_avx2_and_popcnt`).
            return unsafe { self.scan_avx2(range, place, entries, handler, report) };
        }
        self.scan_portable(range, place, entries, handler, report)
    }

    /// [`Host::scan`] for any CPU.
    ///
    /// Never inlined (nor is the AVX2 copy): inlined into the scope's closure, it reaches the host
    /// and its state through the closure's captures and spills what it loads of them; called, it
    /// has them as its arguments (counted in `docs/performance.md`, "The line packet's fixed
    /// cost").
    #[inline(never)]
    fn scan_portable(
        &self,
        range: Range<usize>,
        place: Place<'_>,
        entries: &mut Entries<'_>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> Option<u32> {
        // SAFETY: `VECTOR` is false: the scan assumes nothing of the CPU.
        unsafe { self.scan_with::<false>(range, place, entries, handler, report) }
    }

    /// [`Host::scan`] built for AVX2 and `popcnt`.
    ///
    /// # Safety
    /// The CPU runs AVX2, its OS keeps the registers, and it has `popcnt`.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    #[target_feature(enable = "avx2,popcnt")]
    #[inline(never)]
    unsafe fn scan_avx2(
        &self,
        range: Range<usize>,
        place: Place<'_>,
        entries: &mut Entries<'_>,
        handler: &mut impl DrainHandler,
        report: &mut DrainReport,
    ) -> Option<u32> {
        // SAFETY: the caller's contract is `scan_with::<true>`'s.
        unsafe { self.scan_with::<true>(range, place, entries, handler, report) }
    }

    /// The scan of [`Host::scan`]: with `VECTOR`, the AVX2 take and answer and `count_ones` for
    /// the lane count (`popcnt` in the AVX2 copy), with no check; without, the checked ones.
    ///
    /// # Safety
    /// With `VECTOR`, the CPU runs AVX2, its OS keeps the registers, and it has `popcnt`.
    #[inline(always)]
    unsafe fn scan_with<const VECTOR: bool>(
        &self,
        range: Range<usize>,
        place: Place<'_>,
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
            // SAFETY: with `VECTOR`, the CPU runs AVX2 (the caller's contract).
            let taken = unsafe { Self::take_on::<VECTOR>(request, head, seq, &mut scratch) };
            let Some(activemask) = taken else {
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
            let reply = &self.0.replies[index];
            match VECTOR {
                // SAFETY: the CPU runs AVX2 (the caller's contract); the service has returned, so
                // no reference to the slots is alive.
                #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
                true => unsafe { answer_lanes_avx2(reply, seq, activemask, payload, slots) },
                _ => answer_lanes(reply, seq, activemask, payload, slots),
            }
            // Relaxed: host-only word (several hosts of one buffer serve disjoint ranges).
            self.0.served[index].store(seq, Ordering::Relaxed);
            report.packets += 1;
            // With `VECTOR` the function this is inlined into has `popcnt`: one instruction.
            report.lane_calls += if VECTOR { activemask.count_ones() } else { crate::lane_count(activemask) };
            highest = Some(index as u32);
        }
        highest
    }

    /// [`Host::take`], or its AVX2 copy with `VECTOR`.
    ///
    /// # Safety
    /// With `VECTOR`, the CPU runs AVX2 and its OS keeps the registers.
    #[inline(always)]
    unsafe fn take_on<const VECTOR: bool>(
        request: &Request,
        head: u64,
        seq: u32,
        scratch: &mut Scratch<'_>,
    ) -> Option<u64> {
        match VECTOR {
            // SAFETY: the caller's contract.
            #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
            true => unsafe { Self::take_avx2(request, head, seq, scratch) },
            _ => Self::take(request, head, seq, scratch),
        }
    }

    /// Decodes the active lanes of `request` into `scratch` if the mask word and every word of
    /// them carry `seq` (the head `head` does); returns the activemask (cut to the lanes that
    /// exist), or `None` if any of those words does not (every active lane is read either way).
    ///
    /// Never inlined (nor is its AVX2 copy): inlined into the scan, its lane loop loses registers
    /// to the scan's and spills (counted in `docs/performance.md`, "Line requests that never
    /// complete, and the line take's cost").
    #[inline(never)]
    fn take(request: &Request, head: u64, seq: u32, scratch: &mut Scratch<'_>) -> Option<u64> {
        // SAFETY: `VECTOR` is false: the take assumes nothing of the CPU.
        unsafe { take_with::<false>(request, head, seq, scratch) }
    }

    /// [`Host::take`] built for AVX2, its decode the AVX2 one with no check.
    ///
    /// # Safety
    /// The CPU runs AVX2 and its OS keeps the registers.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    unsafe fn take_avx2(request: &Request, head: u64, seq: u32, scratch: &mut Scratch<'_>) -> Option<u64> {
        // SAFETY: the caller's contract is `take_with::<true>`'s.
        unsafe { take_with::<true>(request, head, seq, scratch) }
    }
}

/// The take of [`Host::take`]: with `VECTOR`, the AVX2 decode with no check.
///
/// # Safety
/// With `VECTOR`, the CPU runs AVX2 and its OS keeps the registers.
#[inline(always)]
unsafe fn take_with<const VECTOR: bool>(
    request: &Request,
    head: u64,
    seq: u32,
    scratch: &mut Scratch<'_>,
) -> Option<u64> {
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
    let all_carry = match VECTOR {
        // SAFETY: the caller's contract.
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
        true => unsafe { decode_lanes_avx2(request, activemask, seq, scratch) },
        _ => decode_lanes(request, activemask, seq, scratch),
    };
    if !all_carry {
        return None;
    }
    scratch.written_whole(activemask);
    Some(activemask)
}

/// Whether this thread's scans run the portable copy whatever the CPU: never outside the tests,
/// which run every line test with both copies (`line/tests.rs`, [`with_portable_scan`]).
#[cfg(not(test))]
#[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))), allow(dead_code))]
#[inline(always)]
const fn portable_scan_only() -> bool {
    false
}

#[cfg(test)]
std::thread_local! {
    static PORTABLE_SCAN_ONLY: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

#[cfg(test)]
extern crate std;

/// Whether this thread's scans run the portable copy whatever the CPU (inside
/// [`with_portable_scan`]).
#[cfg(test)]
#[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))), allow(dead_code))]
fn portable_scan_only() -> bool {
    PORTABLE_SCAN_ONLY.with(core::cell::Cell::get)
}

/// Runs `test` with this thread's scans in the portable copy, whatever the CPU.
#[cfg(test)]
pub(super) fn with_portable_scan<R>(test: impl FnOnce() -> R) -> R {
    PORTABLE_SCAN_ONLY.with(|only| only.set(true));
    let result = test();
    PORTABLE_SCAN_ONLY.with(|only| only.set(false));
    result
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
