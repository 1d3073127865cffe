//! A view of one stack-protocol buffer: initialisation, the producer's path and the host's drain.
//!
//! The view holds its own [`Geometry`] (packet count and index mask) and its own idea of where the
//! headers and payloads are; it never reads the shared `headers`, `payloads` or `index_mask`
//! words back. Everything read from shared memory is checked before use, so whatever bytes the
//! device writes, the host's [`View::drain`] does no undefined behaviour, cannot index out of
//! bounds, ends in at most `num_packets` steps, and reports what it found as [`Malformed`]s.

use super::layout::{self, Header, Prefix, CONTROL_HOST_ERROR, CONTROL_READY};
use super::producer::Claimed;
use super::tagged::{Geometry, TaggedPtr};
use super::treiber::{StackError, TaggedStack};
use crate::host::{DrainHandler, DrainReport, LayoutError, PacketRequest};
use crate::lane::Payload;
use crate::sync::Ordering;
use core::fmt;

/// A view of a stack-protocol buffer: the prefix, `num_packets` headers and `num_packets`
/// payloads.
#[derive(Clone, Copy)]
pub struct View<'a> {
    prefix: &'a Prefix,
    headers: &'a [Header],
    payloads: &'a [Payload],
    geometry: Geometry,
}

/// The buffer's address and geometry (the shared words are not read).
impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("stack::View")
            .field("base", &(self.prefix as *const Prefix))
            .field("num_packets", &self.geometry.num_packets())
            .finish()
    }
}

/// Something malformed a stack-protocol drain found in shared memory (reported as
/// [`DrainError::Stack`](crate::DrainError::Stack)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The ready chain was broken (bad index or a cycle); the walk stopped there. Packets after
    /// the break cannot be found; their waves will not be answered until the buffer is reset.
    Chain(StackError),
    /// A packet on the ready chain did not have READY set (a duplicate in a corrupt chain, or a
    /// device that pushed without submitting). It was skipped, not served.
    NotReady {
        /// The packet's index.
        index: u32,
    },
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chain(e) => write!(f, "ready-stack: {e}"),
            Self::NotReady { index } => {
                write!(f, "packet {index} is on the ready-stack without READY set; skipped")
            }
        }
    }
}

impl core::error::Error for Malformed {}

impl<'a> View<'a> {
    /// A view over separately held parts (loom models and tests allocate them normally). The
    /// packet count is `headers.len()`; `payloads` must match it.
    pub fn from_parts(
        prefix: &'a Prefix,
        headers: &'a [Header],
        payloads: &'a [Payload],
    ) -> Result<Self, LayoutError> {
        let geometry = Geometry::new(headers.len() as u64)?;
        if payloads.len() != headers.len() {
            let (expected, given) = (headers.len(), payloads.len());
            return Err(LayoutError::ArrayLength { array: "payloads", expected, given });
        }
        Ok(Self { prefix, headers, payloads, geometry })
    }

    /// A view over raw memory laid out as [`layout`](super#layout-in-memory) describes.
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
        crate::host::check_raw(base, len, layout::buffer_align(), layout::buffer_size(n), |&size| size)?;
        // SAFETY: the memory is valid for 'a (caller), aligned to 8 (checked above, and every
        // offset below is a multiple of 8), and large enough for the prefix, `n` headers and `n`
        // payloads (checked above). The layout types are made only of atomics with the
        // representation of plain integers, for which every bit pattern is valid, and the caller
        // promises every access is atomic, so shared references to them are sound.
        unsafe {
            let prefix = &*(base as *const Prefix);
            let headers = core::slice::from_raw_parts(base.add(layout::HEADERS_OFFSET) as *const Header, n);
            let payloads =
                core::slice::from_raw_parts(base.add(layout::payloads_offset(n)) as *const Payload, n);
            Ok(Self { prefix, headers, payloads, geometry })
        }
    }

    /// The view's private geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The shared prefix (for the doorbell word and for tests).
    pub fn prefix(&self) -> &'a Prefix {
        self.prefix
    }

    /// Packet header `index`.
    ///
    /// # Panics
    /// If `index >= num_packets`.
    #[inline]
    pub fn header(&self, index: usize) -> &'a Header {
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

    /// The free-list (internal: the loom models reach it through `__internal`).
    pub(crate) fn free_list(&self) -> TaggedStack<'a> {
        TaggedStack::new(&self.prefix.free_stack, self.headers, self.geometry)
    }

    /// The ready-stack.
    pub(crate) fn ready_stack(&self) -> TaggedStack<'a> {
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
        p.headers.store(device_base.wrapping_add(layout::HEADERS_OFFSET as u64), relaxed);
        p.payloads.store(device_base.wrapping_add(layout::payloads_offset(n) as u64), relaxed);
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
                    handler.malformed(Malformed::Chain(e).into());
                    break;
                }
            };
            let header = &self.headers[ptr.index()];
            // Relaxed: the Acquire swap in `take_all` ordered the producer's writes before us.
            if header.control.load(Ordering::Relaxed) & CONTROL_READY == 0 {
                report.malformed += 1;
                handler.malformed(Malformed::NotReady { index: ptr.index() as u32 }.into());
                continue;
            }
            let mut request = PacketRequest::new(
                ptr.index() as u32,
                header.service.load(Ordering::Relaxed),
                header.activemask.load(Ordering::Relaxed),
                &self.payloads[ptr.index()],
            );
            handler.serve(&mut request);
            let control = if request.has_error() { CONTROL_HOST_ERROR } else { 0 };
            // Release: publishes the reply words; pairs with the Acquire load of `control` in
            // `Submitted::wait_until`. From here on the producer owns the packet.
            header.control.store(control, Ordering::Release);
            report.packets += 1;
            report.lane_calls += request.activemask().count_ones();
        }
        report
    }
}
