//! [`View`]: a checked view of one line buffer, its initialisation and the device's claim. The
//! host's side is [`Host`](super::Host), in `host.rs`.

use super::layout::{Layout, Prefix, Reply, Request};
use super::producer::{Claimed, PacketWords};
use crate::scan::ScanWindow;
use crate::sync::{fence, AtomicU32, Ordering};
use crate::view::{check_lengths, debug_parts, packet_count, part, write_prefix, zero_all, LayoutError};

/// A view of a line buffer: the prefix and the five per-packet arrays.
///
/// The view holds its own packet count and its own references to the arrays; it never reads the
/// shared prefix back. The host's scan accepts a packet only when every word it reads carries the
/// packet's sequence, so whatever bytes the device writes, its [`Host`](super::Host) does no
/// undefined behaviour, stays in bounds, serves each packet at most once per scan and returns after one
/// pass.
#[derive(Clone, Copy)]
pub struct View<'a> {
    prefix: &'a Prefix,
    pub(super) device_seq: &'a [AtomicU32],
    occupied: &'a [AtomicU32],
    pub(super) served: &'a [AtomicU32],
    pub(super) requests: &'a [Request],
    pub(super) replies: &'a [Reply],
}

/// The parts of a line buffer held separately (loom models and tests allocate them normally).
#[derive(Clone, Copy)]
pub struct Parts<'a> {
    /// The prefix.
    pub prefix: &'a Prefix,
    /// `device_seq[num_packets]` (device only).
    pub device_seq: &'a [AtomicU32],
    /// The claim bitmap, `ceil(num_packets / 32)` words (device only).
    pub occupied: &'a [AtomicU32],
    /// `served[num_packets]` (host only).
    pub served: &'a [AtomicU32],
    /// `requests[num_packets]`.
    pub requests: &'a [Request],
    /// `replies[num_packets]`.
    pub replies: &'a [Reply],
}

impl<'a> View<'a> {
    /// A view over separately held parts. The packet count is `requests.len()`; every other array
    /// must match it.
    pub fn from_parts(parts: Parts<'a>) -> Result<Self, LayoutError> {
        let n = packet_count(parts.requests.len() as u64)? as usize;
        check_lengths(&[
            ("device_seq", n, parts.device_seq.len()),
            ("occupied", n.div_ceil(32), parts.occupied.len()),
            ("served", n, parts.served.len()),
            ("replies", n, parts.replies.len()),
        ])?;
        let Parts { prefix, device_seq, occupied, served, requests, replies } = parts;
        Ok(Self { prefix, device_seq, occupied, served, requests, replies })
    }

    /// A view over raw memory laid out as [`Layout`] describes. `len` must cover the layout of
    /// `num_packets` packets (2 ..= [`MAX_PACKETS`](crate::MAX_PACKETS)) and `base` be non-null and
    /// aligned to [`MIN_ALIGN`](super::MIN_ALIGN), a cache line; each is checked.
    ///
    /// # Safety
    /// The memory `base..base + len` must stay valid for reads and writes for `'a`, and be
    /// accessed only through atomics (views like this one, or device code) while the view lives.
    /// It must be cacheable (write-back) to this CPU, as host memory, HSA fine-grained system
    /// memory and CUDA pinned host memory are, not write-combined or uncached (a device's memory
    /// mapped through a PCIe BAR): on x86-64 with AVX the take loads two line words with one
    /// 16-byte access, atomic only on cacheable memory (`line/decode/avx2.rs`).
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, len: usize, num_packets: u32) -> Result<Self, LayoutError> {
        use crate::view::raw::RawBuffer;
        let (raw, layout, n) =
            RawBuffer::for_packets(base, len, num_packets, super::MIN_ALIGN, Layout::new, |l| l.size)?;
        // SAFETY: the memory is valid for 'a and only accessed atomically (caller). `Layout`
        // keeps every array inside `size` (checked to fit `len`), each at a multiple of 64 from a
        // 64-aligned base (checked), so aligned for its element (the `abi` asserts in `layout` pin
        // the alignments). The element types are made only of the facade's atomics.
        unsafe {
            Ok(Self {
                prefix: &raw.slice::<Prefix>(0, 1)[0],
                device_seq: raw.slice(layout.device_seq, n),
                occupied: raw.slice(layout.occupied, n.div_ceil(32)),
                served: raw.slice(layout.served, n),
                requests: raw.slice(layout.requests, n),
                replies: raw.slice(layout.replies, n),
            })
        }
    }

    /// The view's private packet count.
    pub fn num_packets(&self) -> u32 {
        self.requests.len() as u32
    }

    /// The host's side of this buffer.
    pub fn host(&self) -> super::Host<'a> {
        super::Host(*self)
    }

    /// The host's side of this buffer, lent: the view itself, not a copy of it (the scan the
    /// drain runs is not inlined and takes its host by reference, so a [`View::host`] would be
    /// copied to the stack at every drain).
    #[inline(always)]
    pub(crate) fn host_ref(&self) -> &super::Host<'a> {
        let host: *const super::Host<'a> = (self as *const Self).cast();
        // SAFETY: `Host` is `repr(transparent)` over `View`: the same layout, and the reference
        // has this borrow's lifetime.
        unsafe { &*host }
    }

    /// The shared prefix (for the doorbell word and for tests).
    pub fn prefix(&self) -> &'a Prefix {
        self.prefix
    }

    /// Packet `index`'s request block.
    ///
    /// # Panics
    /// If `index >= num_packets` (as do the other per-packet accessors).
    pub fn request(&self, index: usize) -> &'a Request {
        &self.requests[index]
    }

    /// Packet `index`'s reply block.
    pub fn reply(&self, index: usize) -> &'a Reply {
        &self.replies[index]
    }

    /// `device_seq[index]`: the sequence of the packet's last call (device only).
    pub fn device_seq(&self, index: usize) -> &'a AtomicU32 {
        &self.device_seq[index]
    }

    /// `served[index]`: the sequence of the packet's last call the host answered (host only).
    pub fn served(&self, index: usize) -> &'a AtomicU32 {
        &self.served[index]
    }

    /// The `occupied` word holding packet `index`'s bit (device only).
    #[inline(always)]
    pub fn occupied_word(&self, index: usize) -> &'a AtomicU32 {
        &self.occupied[index / 32]
    }

    /// A host-side scan window sized for this buffer (see [`Host::drain_window`](crate::Host::drain_window)).
    pub fn scan_window(&self) -> ScanWindow {
        ScanWindow::new(self.num_packets())
    }

    /// Initialises the buffer: every word zeroed (sequence 0 is never a call's, so nothing is
    /// pending and every packet is free), the prefix written with the device addresses of the
    /// arrays ([`Layout`] offsets from `device_base`). Call it before the hand-off, which
    /// publishes it.
    pub fn init(&self, device_base: u64, doorbell: u64) {
        let n = self.requests.len();
        let layout = Layout::new(self.num_packets()).expect("packet count bounded by packet_count");
        let p = self.prefix;
        let addresses = [
            (&p.requests, layout.requests),
            (&p.replies, layout.replies),
            (&p.device_seq, layout.device_seq),
            (&p.occupied, layout.occupied),
            (&p.served, layout.served),
        ];
        write_prefix(device_base, &addresses, (&p.doorbell, doorbell), (&p.num_packets, n as u32));
        zero_all(self.device_seq.iter().chain(self.occupied).chain(self.served));
        let relaxed = Ordering::Relaxed; // published by the hand-off, see above
        for index in 0..n {
            self.requests[index].head.store(0, relaxed);
            self.requests[index].reserved.iter().for_each(|w| w.store(0, relaxed));
            self.zero_words(index, relaxed);
        }
    }

    /// Points device code at `device_seq` and `occupied` arrays kept outside the buffer (a GPU
    /// runtime keeps them in the GPU's own memory: only device code touches them after `init`,
    /// which must have zeroed them). Call it after `init`, before the hand-off, which publishes it.
    pub fn set_device_addresses(&self, device_seq: u64, occupied: u64) {
        // Relaxed: published by the hand-off, like every store of `init`.
        self.prefix.device_seq.store(device_seq, Ordering::Relaxed);
        self.prefix.occupied.store(occupied, Ordering::Relaxed);
    }

    /// Zeroes packet `index`'s mask word, every lane's request words and every lane's reply
    /// words (not the head).
    fn zero_words(&self, index: usize, order: Ordering) {
        zero_packet_words(&self.requests[index], &self.replies[index], order);
    }

    /// Device: claims a free packet, trying each index once from `start % num_packets` upwards.
    /// `None`: every packet is occupied (retry later). Waves that start at different indices (their
    /// wave id, say) collide less on the bitmap.
    #[inline(always)]
    pub fn claim(&self, start: usize) -> Option<Claimed<'a>> {
        crate::occupied::claim_from(self.requests.len(), start, |index| self.try_claim(index))
    }

    /// Device: claims packet `index` if its bit is clear; does the wrap refresh when due.
    #[inline(always)]
    fn try_claim(&self, index: usize) -> Option<Claimed<'a>> {
        // Every word of the packet looked up (and bounds-checked) once, before the atomics; the
        // previous call's sequence is set below.
        let mut words = PacketWords::new(self, index, 0);
        // The hand-off (Acquire, pairing with `release_occupied` of the packet's previous owner):
        // its `device_seq` store and its last reads of the replies happen before our accesses.
        if !crate::occupied::try_take(words.occupied, index) {
            return None;
        }
        // Relaxed: device-only word, ordered by the Acquire above.
        words.seq = words.device_seq.load(Ordering::Relaxed);
        Some(words.begin_call())
    }
}

/// Zeroes a packet's mask word, every lane's request words and every lane's reply words (not the
/// head).
fn zero_packet_words(request: &Request, reply: &Reply, order: Ordering) {
    let lanes = request.lanes.iter().flatten().chain(reply.lanes.iter().flatten());
    core::iter::once(&request.mask).chain(lanes).for_each(|word| word.store(0, order));
}

/// The wrap refresh (the [`crate::line`] docs say why) of the packet whose blocks are `request`
/// and `reply`, which this wave holds: zero every request and reply word, then a Release fence.
pub(super) fn refresh(request: &Request, reply: &Reply) {
    // Relaxed stores: published by the fence below. The reply words are ours to zero: the host
    // answered our packet's last call (we saw every reply word of it) and writes them again
    // only after it takes a complete request of a newer sequence; and we read our own zero or
    // something newer (coherence), never a reply older than it.
    zero_packet_words(request, reply, Ordering::Relaxed);
    // Release: pairs with the host's Acquire fence in `Host::scan` after it reads a pending head:
    // any head this wave (or a later owner) stores after this fence carries the zeroes with
    // it, so no request word older than them can be read for a later call of this cycle.
    fence(Ordering::Release);
}

/// The buffer's address and packet count (the shared words are not read).
impl core::fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("line::View")
            .field("prefix", &(self.prefix as *const Prefix))
            .field("num_packets", &self.requests.len())
            .finish()
    }
}

/// Where each part is and its length (the shared words are not read).
impl core::fmt::Debug for Parts<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let arrays = [
            part("device_seq", self.device_seq),
            part("occupied", self.occupied),
            part("served", self.served),
            part("requests", self.requests),
            part("replies", self.replies),
        ];
        debug_parts(f, "line::Parts", self.prefix, &arrays)
    }
}
