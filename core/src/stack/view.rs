//! A view of one stack-protocol buffer: initialisation and the producer's claim. The host's side
//! is [`Host`](super::Host), in `host.rs`.
//!
//! The view holds its own [`Geometry`] (packet count and index mask) and its own idea of where the
//! headers and payloads are; it never reads the shared `headers`, `payloads` or `index_mask`
//! words back. Everything read from shared memory is checked before use, so whatever bytes the
//! device writes, the host's [`Host::drain`](crate::Host::drain) does no undefined behaviour,
//! cannot index out of bounds, ends in at most `num_packets` steps, and reports what it found as
//! [`DrainError`](crate::DrainError)s.

use super::layout::{self, Header, Prefix};
use super::producer::{Claimed, PacketWords};
use super::tagged::{Geometry, TaggedPtr};
use super::treiber::TaggedStack;
use crate::host::ChainError;
use crate::lane::Payload;
use crate::sync::Ordering;
use crate::view::{check_lengths, LayoutError};
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

impl<'a> View<'a> {
    /// A view over separately held parts (loom models and tests allocate them normally). The
    /// packet count is `headers.len()`; `payloads` must match it.
    pub fn from_parts(
        prefix: &'a Prefix,
        headers: &'a [Header],
        payloads: &'a [Payload],
    ) -> Result<Self, LayoutError> {
        let geometry = Geometry::new(crate::packet_count(headers.len() as u64)?)?;
        check_lengths(&[("payloads", headers.len(), payloads.len())])?;
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
    pub unsafe fn from_raw(base: *mut u8, len: usize, num_packets: u32) -> Result<Self, LayoutError> {
        use crate::view::raw::RawBuffer;
        let geometry = Geometry::new(num_packets)?;
        let n = geometry.num_packets() as usize;
        let size = layout::buffer_size(geometry.num_packets());
        let (raw, _size) = RawBuffer::check(base, len, layout::buffer_align(), size, |&size| size)?;
        // SAFETY: the memory is valid for 'a and only accessed atomically (caller), aligned to 8
        // (checked; every offset below is a multiple of 8), and holds the prefix, `n` headers and
        // `n` payloads (`buffer_size`, checked to fit `len`). The layout types are made only of
        // the facade's atomics.
        unsafe {
            let prefix = &raw.slice::<Prefix>(0, 1)[0];
            let headers = raw.slice(layout::HEADERS_OFFSET, n);
            let payloads = raw.slice(layout::payloads_offset(n), n);
            Ok(Self { prefix, headers, payloads, geometry })
        }
    }

    /// The view's private geometry.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The host's side of this buffer.
    #[inline]
    pub fn host(&self) -> super::Host<'a> {
        super::Host(*self)
    }

    /// The host's side of this buffer, lent: the view itself, not a copy of it (as
    /// [`phase::View`](crate::phase::View)'s).
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

    /// Packet `ptr`'s header and payload, not bounds-checked again: the host's drain, for a
    /// pointer its walk of this view's ready-stack decoded.
    ///
    /// # Safety
    /// `ptr` was decoded by this view's [`Geometry`] (so `ptr.index() < num_packets`).
    #[inline(always)]
    pub(crate) unsafe fn packet_unchecked(&self, ptr: TaggedPtr) -> (&'a Header, &'a Payload) {
        // SAFETY: `ptr.index() < num_packets` (the contract), and both arrays hold `num_packets`
        // entries: `from_parts` checked `payloads` against `headers`, whose length the geometry
        // was made from; `from_raw` made both from the geometry.
        unsafe { (self.headers.get_unchecked(ptr.index()), self.payloads.get_unchecked(ptr.index())) }
    }

    /// The free-list (internal: the loom models reach it through `__internal`).
    #[inline(always)]
    pub(crate) fn free_list(&self) -> TaggedStack<'a> {
        // SAFETY: the constructors made `geometry` from `headers.len()` (`from_parts`) or
        // `headers` from `geometry` (`from_raw`): their lengths agree.
        unsafe { TaggedStack::new(&self.prefix.free_stack, self.headers, self.geometry) }
    }

    /// The ready-stack (the host takes it whole, see [`Host`](super::Host)).
    #[inline]
    pub(crate) fn ready_stack(&self) -> TaggedStack<'a> {
        // SAFETY: as in `free_list`.
        unsafe { TaggedStack::new(&self.prefix.ready_stack, self.headers, self.geometry) }
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
    #[inline(always)]
    pub fn claim(&self) -> Result<Option<Claimed<'a>>, ChainError> {
        Ok(self.free_list().pop()?.map(|ptr| Claimed::new(PacketWords::new(self, ptr))))
    }
}
