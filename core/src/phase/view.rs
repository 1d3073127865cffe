//! [`View`]: a checked view of one phase buffer, its initialisation and the device's claim. The
//! host's side is [`Host`](super::Host), in `host.rs`.

use super::layout::{occupied_len, Header, Layout, Prefix};
use super::producer::{Claimed, PacketWords};
use crate::lane::Payload;
use crate::scan::ScanWindow;
use crate::sync::{AtomicU32, Ordering};
use crate::view::{check_lengths, debug_parts, packet_count, part, write_prefix, zero_all, LayoutError};
use core::fmt;

/// A view of a phase buffer: the prefix and the five per-packet arrays.
///
/// The view holds its own packet count and its own references to the arrays; it never reads the
/// shared prefix back. Everything it reads from shared memory is checked or masked before use,
/// so whatever bytes the device writes, its [`Host`](super::Host) does no undefined behaviour,
/// stays in bounds, serves each packet at most once per scan and returns after one pass.
#[derive(Clone, Copy)]
pub struct View<'a> {
    prefix: &'a Prefix,
    pub(super) device_phase: &'a [AtomicU32],
    pub(super) host_phase: &'a [AtomicU32],
    occupied: &'a [AtomicU32],
    pub(super) headers: &'a [Header],
    pub(super) payloads: &'a [Payload],
}

/// The parts of a phase buffer held separately (loom models and tests allocate them normally).
#[derive(Clone, Copy)]
pub struct Parts<'a> {
    /// The prefix.
    pub prefix: &'a Prefix,
    /// `device_phase[num_packets]`.
    pub device_phase: &'a [AtomicU32],
    /// `host_phase[num_packets]`.
    pub host_phase: &'a [AtomicU32],
    /// The bitmap, `ceil(num_packets / 32)` words.
    pub occupied: &'a [AtomicU32],
    /// `headers[num_packets]`.
    pub headers: &'a [Header],
    /// `payloads[num_packets]`.
    pub payloads: &'a [Payload],
}

/// The buffer's address and packet count (the shared words are not read).
impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("phase::View")
            .field("prefix", &(self.prefix as *const Prefix))
            .field("num_packets", &self.headers.len())
            .finish()
    }
}

/// Where each part is and its length (the shared words are not read).
impl fmt::Debug for Parts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let arrays = [
            part("device_phase", self.device_phase),
            part("host_phase", self.host_phase),
            part("occupied", self.occupied),
            part("headers", self.headers),
            part("payloads", self.payloads),
        ];
        debug_parts(f, "phase::Parts", self.prefix, &arrays)
    }
}

/// Bit 0 of a phase word: the only bit either side compares.
pub(super) const PHASE_BIT: u32 = 1;

impl<'a> View<'a> {
    /// A view over separately held parts. The packet count is `headers.len()`; every other array
    /// must match it.
    pub fn from_parts(parts: Parts<'a>) -> Result<Self, LayoutError> {
        let n = packet_count(parts.headers.len() as u64)? as usize;
        check_lengths(&[
            ("device_phase", n, parts.device_phase.len()),
            ("host_phase", n, parts.host_phase.len()),
            ("occupied", occupied_len(n), parts.occupied.len()),
            ("payloads", n, parts.payloads.len()),
        ])?;
        let Parts { prefix, device_phase, host_phase, occupied, headers, payloads } = parts;
        Ok(Self { prefix, device_phase, host_phase, occupied, headers, payloads })
    }

    /// A view over raw memory laid out as [`Layout`] describes, after checking the packet count
    /// (2 ..= [`MAX_PACKETS`](crate::MAX_PACKETS)), the address (not null, aligned to
    /// [`MIN_ALIGN`](super::MIN_ALIGN)) and that `len` covers the layout.
    ///
    /// # Safety
    /// `base..base + len` must be valid for reads and writes for `'a`, and only accessed through
    /// atomics (views like this one, or device code) while the view lives.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, len: usize, num_packets: u32) -> Result<Self, LayoutError> {
        let (raw, layout, n) = crate::view::raw::RawBuffer::for_packets(
            base,
            len,
            num_packets,
            super::MIN_ALIGN,
            Layout::new,
            |l| l.size,
        )?;
        // SAFETY: the memory is valid for 'a and only accessed atomically (caller). `Layout`
        // keeps every array inside `size` (checked to fit `len`), each at a multiple of 64 from
        // an 8-aligned base (checked), so aligned for its element (the `abi` asserts in `layout`
        // check the element alignments). The element types are made only of the facade's atomics.
        unsafe {
            Ok(Self {
                prefix: &raw.slice::<Prefix>(0, 1)[0],
                device_phase: raw.slice(layout.device_phase, n),
                host_phase: raw.slice(layout.host_phase, n),
                occupied: raw.slice(layout.occupied, occupied_len(n)),
                headers: raw.slice(layout.headers, n),
                payloads: raw.slice(layout.payloads, n),
            })
        }
    }

    /// The same view, claiming through the `occupied` bitmap `occupied` instead of the one
    /// inside the buffer: the device side of a buffer whose prefix points at a bitmap kept
    /// elsewhere ([`View::set_occupied_address`]), e.g. an emulated wave on a buffer a
    /// runtime enabled with its own bitmap. Only [`View::claim`] and the release of a claim
    /// use the bitmap; the host's scan never reads it. `occupied` must have
    /// `ceil(num_packets / 32)` words.
    pub fn with_occupied(self, occupied: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        let expected = occupied_len(self.headers.len());
        if occupied.len() != expected {
            return Err(LayoutError::ArrayLength { array: "occupied", expected, given: occupied.len() });
        }
        Ok(Self { occupied, ..self })
    }

    /// The view's private packet count.
    pub fn num_packets(&self) -> u32 {
        self.headers.len() as u32
    }

    /// The host's side of this buffer.
    pub fn host(&self) -> super::Host<'a> {
        super::Host(*self)
    }

    /// The host's side of this buffer, lent: the view itself, not a copy of it (the host's
    /// drain is not inlined and takes its host by reference, so a [`View::host`] would be copied
    /// to the stack at every drain).
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

    /// `device_phase[index]`.
    ///
    /// # Panics
    /// If `index >= num_packets` (as do the other per-packet accessors).
    pub fn device_phase(&self, index: usize) -> &'a AtomicU32 {
        &self.device_phase[index]
    }

    /// `host_phase[index]`.
    pub fn host_phase(&self, index: usize) -> &'a AtomicU32 {
        &self.host_phase[index]
    }

    /// The `occupied` bitmap word holding packet `index`'s bit (device side only).
    #[inline(always)]
    pub fn occupied_word(&self, index: usize) -> &'a AtomicU32 {
        &self.occupied[index / 32]
    }

    /// Packet header `index`.
    pub fn header(&self, index: usize) -> &'a Header {
        &self.headers[index]
    }

    /// Packet payload `index`.
    pub fn payload(&self, index: usize) -> &'a Payload {
        &self.payloads[index]
    }

    /// A host-side scan window sized for this buffer (see [`Host::drain_window`](crate::Host::drain_window)).
    pub fn scan_window(&self) -> ScanWindow {
        ScanWindow::new(self.num_packets())
    }

    /// Initialises the buffer (PROTOCOL.md section 2): both phase arrays and the bitmap zeroed
    /// (every packet free and answered), headers cleared, the prefix written with the device
    /// addresses of the arrays ([`Layout`] offsets from `device_base`).
    ///
    /// `device_base` is the buffer's address as the device sees it (for host memory, the host
    /// address); `doorbell` the handle device code signals. Call it before the buffer is handed to
    /// any producer: the hand-off (thread start, registration, kernel dispatch) publishes it.
    pub fn init(&self, device_base: u64, doorbell: u64) {
        let n = self.headers.len();
        // `from_parts`/`from_raw` bounded n, so the layout exists.
        let layout = Layout::new(self.num_packets()).expect("packet count bounded by packet_count");
        let p = self.prefix;
        let addresses = [
            (&p.device_phase, layout.device_phase),
            (&p.host_phase, layout.host_phase),
            (&p.occupied, layout.occupied),
            (&p.headers, layout.headers),
            (&p.payloads, layout.payloads),
        ];
        write_prefix(device_base, &addresses, (&p.doorbell, doorbell), (&p.num_packets, n as u32));
        zero_all(self.device_phase.iter().chain(self.host_phase).chain(self.occupied));
        let relaxed = Ordering::Relaxed; // published by the hand-off, see above
        for header in self.headers {
            header.activemask.store(0, relaxed);
            header.service.store(0, relaxed);
        }
    }

    /// Points the prefix's `occupied` field at `address` instead of the bitmap inside the buffer.
    ///
    /// For devices that keep the bitmap in device-local memory (PROTOCOL.md section 2: only the
    /// device touches it), e.g. a CUDA runtime's `cudaMalloc`ed words. The caller zeroes those
    /// `ceil(num_packets / 32)` words before the hand-off; the host never reads or writes them.
    /// Call it after [`View::init`] (which writes the in-buffer address), before the buffer is
    /// handed to any producer: the hand-off publishes it, as it does `init`'s stores. The
    /// in-buffer bitmap then goes unused, and [`View::claim`] (the emulated device, which
    /// uses the in-buffer bitmap) must not be mixed with device code on such a buffer.
    pub fn set_occupied_address(&self, address: u64) {
        // Relaxed: published by the hand-off, like every store of `init`.
        self.prefix.occupied.store(address, Ordering::Relaxed);
    }

    /// Device: claims a free packet, trying each index once, from `start % num_packets` upwards
    /// and wrapping. `None`: every packet is occupied or still unanswered (retry later).
    ///
    /// Waves that start at different indices (their wave id, say) collide less on the bitmap.
    #[inline(always)]
    pub fn claim(&self, start: usize) -> Option<Claimed<'a>> {
        crate::occupied::claim_from(self.headers.len(), start, |index| self.try_claim(index))
    }

    /// Device: claims packet `index` if it is free and answered.
    #[inline(always)]
    fn try_claim(&self, index: usize) -> Option<Claimed<'a>> {
        // Every word of the packet looked up (and bounds-checked) once, before the atomics; the
        // phase is set below.
        let mut words = PacketWords::new(self, index, 0);
        let word = words.occupied;
        // The hand-off (Acquire, pairing with `release_occupied` of the packet's previous owner):
        // its last reads of the reply (and, for an unsent claim, its writes) happen before our
        // writes to the payload.
        if !crate::occupied::try_take(word, index) {
            return None; // another wave holds it
        }
        // Relaxed: only device code writes `device_phase[index]`, each time as the packet's
        // owner; the Acquire `fetch_or` above ordered the previous owner's store before us.
        let device = words.device_phase.load(Ordering::Relaxed);
        // Acquire: pairs with the host's Release store of `host_phase` in `serve_packet`: when the
        // phases agree the host has finished reading the request and writing the reply of the
        // last submit of this packet, and those accesses happen before ours. (They differ only
        // when a `Submitted` handle was dropped before the host answered.)
        let host = words.host_phase.load(Ordering::Acquire);
        if (device ^ host) & PHASE_BIT != 0 {
            // Relaxed: we touched nothing of the packet but these two atomic loads; the
            // read-modify-write keeps the previous owner's release sequence intact for the next
            // claimer.
            word.fetch_and(!crate::occupied::bit(index), Ordering::Relaxed);
            return None;
        }
        words.phase = device & PHASE_BIT;
        Some(Claimed::new(words))
    }
}
