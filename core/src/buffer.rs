//! A view of one stack-protocol buffer: initialisation, the producer's path and the host's drain.
//!
//! The view holds its own [`Geometry`] (packet count and index mask) and its own idea of where the
//! headers and payloads are; it never reads the shared `headers`, `payloads` or `index_mask`
//! words back. Everything read from shared memory is checked before use, so whatever bytes the
//! device writes, the host's [`BufferView::drain`] does no undefined behaviour, cannot index out
//! of bounds, ends in at most `num_packets` steps, and reports what it found as [`DrainError`]s.

use crate::layout::{
    BufferPrefix, PacketHeader, Payload, CONTROL_HOST_ERROR, CONTROL_READY, LANE_MASK, REPLY_WORDS,
    SLOT_WORDS,
};
use crate::packet::Claimed;
use crate::service::ErrorCode;
use crate::stack::{StackError, TaggedStack};
use crate::sync::Ordering;
use crate::tagged::{Geometry, TaggedPtr};
use core::fmt;

/// A view of a buffer: the prefix, `num_packets` headers and `num_packets` payloads.
#[derive(Clone, Copy)]
pub struct BufferView<'a> {
    prefix: &'a BufferPrefix,
    headers: &'a [PacketHeader],
    payloads: &'a [Payload],
    geometry: Geometry,
}

/// Why memory cannot be viewed as a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// The packet count is refused (see [`Geometry::new`]).
    Geometry(crate::tagged::GeometryError),
    /// The header or payload array does not have `num_packets` entries.
    LengthMismatch {
        /// The packet count.
        num_packets: u32,
        /// Headers given.
        headers: usize,
        /// Payloads given.
        payloads: usize,
    },
    /// The memory is smaller than [`crate::layout::buffer_size`] for the packet count.
    TooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        given: usize,
    },
    /// The memory is not aligned to [`crate::layout::buffer_align`].
    Misaligned {
        /// The address given.
        address: usize,
    },
    /// A null address.
    Null,
    /// A per-packet array of a phase buffer (see [`crate::phase`]) has the wrong length.
    ArrayLength {
        /// Which array (`"device_phase"`, `"host_phase"`, `"occupied"`, `"headers"`, `"payloads"`).
        array: &'static str,
        /// Entries the packet count needs.
        expected: usize,
        /// Entries given.
        given: usize,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Geometry(e) => e.fmt(f),
            Self::LengthMismatch { num_packets, headers, payloads } => write!(
                f,
                "{num_packets} packets need as many headers and payloads, got {headers} and {payloads}"
            ),
            Self::TooSmall { needed, given } => {
                write!(f, "buffer of {given} bytes is too small: {needed} needed")
            }
            Self::Misaligned { address } => {
                write!(f, "buffer at {address:#x} is not aligned to {} bytes", crate::layout::buffer_align())
            }
            Self::Null => f.write_str("buffer address is null"),
            Self::ArrayLength { array, expected, given } => {
                write!(f, "phase buffer array `{array}` has {given} entries, {expected} needed")
            }
        }
    }
}

impl From<crate::tagged::GeometryError> for LayoutError {
    fn from(e: crate::tagged::GeometryError) -> Self {
        Self::Geometry(e)
    }
}

/// Something malformed the host found in shared memory while draining.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainError {
    /// The ready chain was broken (bad index or a cycle); the walk stopped there. Packets after
    /// the break cannot be found; their waves will not be answered until the buffer is reset.
    Chain(StackError),
    /// A packet on the ready chain did not have READY set (a duplicate in a corrupt chain, or a
    /// device that pushed without submitting). It was skipped, not served.
    NotReady {
        /// The packet's index.
        index: u32,
    },
    /// Phase protocol: a pending packet's phase words had bits other than bit 0 set. Only bit 0
    /// is compared; the packet was served, and `host_phase` was set to `device_phase` as read.
    PhaseBits {
        /// The packet's index.
        index: u32,
        /// `device_phase[index]` as read.
        device_phase: u32,
        /// `host_phase[index]` as read.
        host_phase: u32,
    },
}

impl fmt::Display for DrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chain(e) => write!(f, "ready-stack: {e}"),
            Self::NotReady { index } => {
                write!(f, "packet {index} is on the ready-stack without READY set; skipped")
            }
            Self::PhaseBits { index, device_phase, host_phase } => write!(
                f,
                "packet {index}: phase words {device_phase:#x} (device) and {host_phase:#x} (host) \
                 have bits above bit 0 set; compared on bit 0 only"
            ),
        }
    }
}

/// What one drain did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Packets served (stack protocol: READY cleared; phase protocol: `host_phase` flipped).
    pub packets: u32,
    /// Active lanes over those packets.
    pub lane_calls: u32,
    /// Malformed things found (each was passed to [`DrainHandler::malformed`]).
    pub malformed: u32,
}

impl core::ops::AddAssign for DrainReport {
    fn add_assign(&mut self, other: Self) {
        self.packets += other.packets;
        self.lane_calls += other.lane_calls;
        self.malformed += other.malformed;
    }
}

/// The host's side of a drain: serve each packet, hear about malformed state.
pub trait DrainHandler {
    /// Serve one packet: read its lanes' requests and write their replies. Lanes left unanswered
    /// keep whatever their slot holds.
    fn serve(&mut self, packet: &mut PacketRequest<'_>);
    /// Something malformed was found and skipped.
    fn malformed(&mut self, error: DrainError) {
        let _ = error;
    }
}

impl<F: FnMut(&mut PacketRequest<'_>)> DrainHandler for F {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self(packet)
    }
}

/// One packet handed to the host's service code during a drain.
pub struct PacketRequest<'a> {
    index: u32,
    service: u32,
    activemask: u64,
    payload: &'a Payload,
    error: bool,
}

impl<'a> PacketRequest<'a> {
    /// A request for packet `index` (shared by every protocol's host side). `activemask` is
    /// masked to the lanes that exist.
    #[inline]
    pub(crate) fn new(index: u32, service: u32, activemask: u64, payload: &'a Payload) -> Self {
        Self { index, service, activemask: activemask & LANE_MASK, payload, error: false }
    }

    /// The packet's index in its buffer.
    #[inline]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The service id the device asked for (not validated: any `u32`).
    #[inline]
    pub fn service(&self) -> u32 {
        self.service
    }

    /// The active lanes (only bits of lanes that exist).
    #[inline]
    pub fn activemask(&self) -> u64 {
        self.activemask
    }

    /// The active lanes, lowest first.
    pub fn lanes(&self) -> impl Iterator<Item = usize> {
        let mut mask = self.activemask;
        core::iter::from_fn(move || {
            (mask != 0).then(|| {
                let lane = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                lane
            })
        })
    }

    /// Lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES` (lanes from [`PacketRequest::lanes`] never are).
    #[inline]
    pub fn request(&self, lane: usize) -> [u64; SLOT_WORDS] {
        crate::packet::read_words(self.payload, lane)
    }

    /// Writes lane `lane`'s reply (the first [`REPLY_WORDS`] words of its slot).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        crate::packet::write_words(self.payload, lane, &reply);
    }

    /// Answers lane `lane` with an error reply `[ERROR_REPLY, code]` (`[0, code]` for DEVMEM:
    /// see [`ErrorCode::reply_for`]) and flags the packet. The stack protocol stores the flag as
    /// [`crate::layout::CONTROL_HOST_ERROR`]; the phase protocol has no control word, so there
    /// the reply words are the only signal (see [`crate::phase`]).
    pub fn reply_error(&mut self, lane: usize, code: ErrorCode) {
        self.reply(lane, code.reply_for(self.service));
        self.error = true;
    }

    /// Writes `reply` to lane `lane` and flags the packet as answered with an error, for services
    /// whose failure reply is not `[ERROR_REPLY, code]` (DEVMEM answers a failed allocation with a
    /// null address, which device code checks).
    pub fn reply_with_error(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.reply(lane, reply);
        self.error = true;
    }

    /// Answers every active lane with an error reply.
    pub fn reply_error_all(&mut self, code: ErrorCode) {
        let mut mask = self.activemask;
        while mask != 0 {
            self.reply_error(mask.trailing_zeros() as usize, code);
            mask &= mask - 1;
        }
        self.error = true;
    }

    /// Whether an error reply was written.
    #[inline]
    pub fn has_error(&self) -> bool {
        self.error
    }

    /// Read-only access to lane `lane`'s raw payload words (for per-packet services).
    pub fn payload(&self) -> &Payload {
        self.payload
    }
}

impl<'a> BufferView<'a> {
    /// A view over separately held parts (loom models and tests allocate them normally).
    pub fn from_parts(
        prefix: &'a BufferPrefix,
        headers: &'a [PacketHeader],
        payloads: &'a [Payload],
    ) -> Result<Self, LayoutError> {
        let geometry = Geometry::new(headers.len() as u64)?;
        if payloads.len() != headers.len() {
            return Err(LayoutError::LengthMismatch {
                num_packets: geometry.num_packets(),
                headers: headers.len(),
                payloads: payloads.len(),
            });
        }
        Ok(Self { prefix, headers, payloads, geometry })
    }

    /// A view over raw memory laid out as [`crate::layout`] describes.
    ///
    /// Checks the address (not null, aligned) and that `len` covers `num_packets` packets.
    ///
    /// # Safety
    /// - `base..base + len` must be valid for reads and writes for `'a`, and only accessed
    ///   through atomics (views like this one, or device code) while the view lives.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, len: usize, num_packets: u64) -> Result<Self, LayoutError> {
        let geometry = Geometry::new(num_packets)?;
        let n = geometry.num_packets() as usize;
        if base.is_null() {
            return Err(LayoutError::Null);
        }
        if base as usize % crate::layout::buffer_align() != 0 {
            return Err(LayoutError::Misaligned { address: base as usize });
        }
        // `Geometry` bounds n, so the size cannot overflow on 64-bit targets; treat it as too
        // small where it would.
        let needed = crate::layout::buffer_size(n).unwrap_or(usize::MAX);
        if len < needed {
            return Err(LayoutError::TooSmall { needed, given: len });
        }
        // SAFETY: the memory is valid for 'a (caller), aligned to 8 (checked above, and every
        // offset below is a multiple of 8), and large enough for the prefix, `n` headers and `n`
        // payloads (checked above). The layout types are made only of atomics with the
        // representation of plain integers, for which every bit pattern is valid, and the caller
        // promises every access is atomic, so shared references to them are sound.
        unsafe {
            let prefix = &*(base as *const BufferPrefix);
            let headers = core::slice::from_raw_parts(
                base.add(crate::layout::HEADERS_OFFSET) as *const PacketHeader,
                n,
            );
            let payloads =
                core::slice::from_raw_parts(base.add(crate::layout::payloads_offset(n)) as *const Payload, n);
            Ok(Self { prefix, headers, payloads, geometry })
        }
    }

    /// The view's private geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The shared prefix (for the doorbell word and for tests).
    pub fn prefix(&self) -> &'a BufferPrefix {
        self.prefix
    }

    /// Packet header `index`.
    ///
    /// # Panics
    /// If `index >= num_packets`.
    #[inline]
    pub fn header(&self, index: usize) -> &'a PacketHeader {
        &self.headers[index]
    }

    /// Packet payload `index`.
    ///
    /// # Panics
    /// If `index >= num_packets`.
    #[inline]
    pub fn payload(&self, index: usize) -> &'a Payload {
        &self.payloads[index]
    }

    /// The free-list.
    pub fn free_list(&self) -> TaggedStack<'a> {
        TaggedStack::new(&self.prefix.free_stack, self.headers, self.geometry)
    }

    /// The ready-stack.
    pub fn ready_stack(&self) -> TaggedStack<'a> {
        TaggedStack::new(&self.prefix.ready_stack, self.headers, self.geometry)
    }

    /// Initialises the buffer (PROTOCOL.md section 1): every packet on the free-list, the
    /// ready-stack empty, the prefix written with the device addresses of the arrays.
    ///
    /// `device_base` is the buffer's address as the device sees it (for host memory, the host
    /// address); `doorbell` the handle device code signals. Call it before the buffer is handed to
    /// any producer: the hand-off (thread start, registration, kernel dispatch) publishes it.
    pub fn init(&self, device_base: u64, doorbell: u64) {
        let n = self.geometry.num_packets() as usize;
        let relaxed = Ordering::Relaxed; // published by the hand-off, see above
        let p = self.prefix;
        p.headers.store(device_base.wrapping_add(crate::layout::HEADERS_OFFSET as u64), relaxed);
        p.payloads.store(device_base.wrapping_add(crate::layout::payloads_offset(n) as u64), relaxed);
        p.doorbell.store(doorbell, relaxed);
        p.index_mask.store(self.geometry.index_mask(), relaxed);
        p.ready_stack.store(0, relaxed);
        let mut prev = self.geometry.tag_step(); // index 0 with tag 1: not null
        for (i, header) in self.headers.iter().enumerate() {
            header.next.store(if i == 0 { 0 } else { prev }, relaxed);
            header.activemask.store(0, relaxed);
            header.service.store(0, relaxed);
            header.control.store(0, relaxed);
            if i > 0 {
                prev = i as u64;
            }
        }
        p.free_stack.store(n as u64 - 1, relaxed);
    }

    /// Producer: claims a free packet. `Ok(None)`: none is free (more waves than packets; retry).
    pub fn claim(&self) -> Result<Option<Claimed<'a>>, StackError> {
        Ok(self.free_list().pop()?.map(|ptr| Claimed::new(*self, ptr)))
    }

    /// Producer: pushes a packet it owns back on the free-list with its tag advanced.
    pub(crate) fn release(&self, ptr: TaggedPtr) {
        self.free_list().push(self.geometry.advance_tag(ptr));
    }

    /// Host: takes the whole ready-stack and serves every packet on it.
    ///
    /// For each packet (its `next` read first: once served, the device owns it again) whose READY
    /// bit is set, `handler.serve` writes the replies; then `control` is stored with READY clear
    /// (and [`CONTROL_HOST_ERROR`] if an error reply was written). Malformed state goes to
    /// `handler.malformed` and is counted; the drain never panics, loops or leaves the buffer.
    pub fn drain(&self, handler: &mut impl DrainHandler) -> DrainReport {
        let mut report = DrainReport::default();
        for link in self.ready_stack().take_all() {
            let ptr = match link {
                Ok(ptr) => ptr,
                Err(e) => {
                    report.malformed += 1;
                    handler.malformed(DrainError::Chain(e));
                    break;
                }
            };
            let header = &self.headers[ptr.index()];
            // Relaxed: the Acquire swap in `take_all` ordered the producer's writes before us.
            if header.control.load(Ordering::Relaxed) & CONTROL_READY == 0 {
                report.malformed += 1;
                handler.malformed(DrainError::NotReady { index: ptr.index() as u32 });
                continue;
            }
            let mut request = PacketRequest::new(
                ptr.index() as u32,
                header.service.load(Ordering::Relaxed),
                header.activemask.load(Ordering::Relaxed),
                &self.payloads[ptr.index()],
            );
            handler.serve(&mut request);
            let control = if request.error { CONTROL_HOST_ERROR } else { 0 };
            // Release: publishes the reply words; pairs with the Acquire load of `control` in
            // `Submitted::wait_until`. From here on the producer owns the packet.
            header.control.store(control, Ordering::Release);
            report.packets += 1;
            report.lane_calls += request.activemask().count_ones();
        }
        report
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
