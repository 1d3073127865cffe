//! [`View`]: a checked view of one LLVM-RPC buffer and its initialisation. The host's turns are
//! in `host.rs`, the client's side in `client.rs`.

use super::layout::{check_geometry, Header, LaneBuffer};
use crate::lane::LANE_MASK;
use crate::sync::{AtomicU32, Ordering};
use crate::view::LayoutError;

/// A view of an LLVM-RPC buffer: both mailboxes, the headers and the lane buffers, with the
/// host's own copy of the geometry (it never reads a port count or lane count from shared
/// memory).
///
/// Every view is made by [`View::from_parts`] (or copied from one), which checks the arrays'
/// lengths against the geometry; `View::turn` and `Turn::lane_buffers` index without bounds
/// checks on that account, so no other constructor may leave them unchecked.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub(super) lanes: u32,
    /// The bits of the lanes that exist, from `lanes` (read at every turn).
    lane_mask: u64,
    /// Mailbox A: written by the host only (the client's inbox).
    pub(super) host_mailbox: &'a [AtomicU32],
    /// Mailbox B: written by the client only (the client's outbox).
    pub(super) device_mailbox: &'a [AtomicU32],
    pub(super) headers: &'a [Header],
    /// `ports * lanes` lane buffers, port-major.
    pub(super) buffers: &'a [LaneBuffer],
    /// The client's lock bits, one per port ([`View::with_locks`]): not part of the buffer (on a
    /// GPU they are in the device's client object), so empty in a view the host serves, which
    /// never reads them.
    pub(super) locks: &'a [AtomicU32],
}

/// The parts of a buffer held separately (loom models and tests allocate them normally).
#[derive(Clone, Copy)]
pub struct Parts<'a> {
    /// Lanes per port.
    pub lanes: u32,
    /// Mailbox A, `u32[ports]` (host only).
    pub host_mailbox: &'a [AtomicU32],
    /// Mailbox B, `u32[ports]` (client only).
    pub device_mailbox: &'a [AtomicU32],
    /// `Header[ports]`.
    pub headers: &'a [Header],
    /// `LaneBuffer[ports * lanes]`.
    pub buffers: &'a [LaneBuffer],
}

/// The lengths; the arrays are not read.
impl core::fmt::Debug for Parts<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("rpc::Parts")
            .field("lanes", &self.lanes)
            .field("ports", &self.host_mailbox.len())
            .field("buffers", &self.buffers.len())
            .finish()
    }
}

/// The geometry (ports, lanes); the arrays are not read.
impl core::fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("rpc::View").field("ports", &self.ports()).field("lanes", &self.lanes).finish()
    }
}

impl<'a> View<'a> {
    /// A view over separately held parts. The port count is `host_mailbox.len()`; every other
    /// array must match it and `lanes`.
    pub fn from_parts(parts: Parts<'a>) -> Result<Self, LayoutError> {
        let (ports, lanes) = check_geometry(parts.host_mailbox.len() as u64, u64::from(parts.lanes))?;
        let (p, l) = (ports as usize, lanes as usize);
        let lengths = [
            ("device_mailbox", p, parts.device_mailbox.len()),
            ("headers", p, parts.headers.len()),
            ("buffers", p * l, parts.buffers.len()),
        ];
        for (array, expected, given) in lengths {
            if expected != given {
                return Err(LayoutError::ArrayLength { array, expected, given });
            }
        }
        let Parts { host_mailbox, device_mailbox, headers, buffers, .. } = parts;
        let lane_mask = if lanes as usize >= 64 { LANE_MASK } else { ((1u64 << lanes) - 1) & LANE_MASK };
        Ok(Self { lanes, lane_mask, host_mailbox, device_mailbox, headers, buffers, locks: &[] })
    }

    /// The same view with the client's lock bits `locks` (at least `ceil(ports / 32)` words, one
    /// bit per port: memory only the client side touches, zeroed while no client runs), so that
    /// it can [`claim`](View::claim) ports as a [`Client`](super::Client) does: what emulated
    /// waves on an RPC buffer use. The host's side never reads them.
    pub fn with_locks(self, locks: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        let expected = self.ports().div_ceil(32) as usize;
        if locks.len() < expected {
            return Err(LayoutError::ArrayLength { array: "locks", expected, given: locks.len() });
        }
        Ok(Self { locks, ..self })
    }

    /// Whether the view has the client's lock bits ([`View::with_locks`]).
    #[inline]
    pub fn has_locks(&self) -> bool {
        !self.locks.is_empty()
    }

    /// A view over raw memory laid out as [`Layout`](super::Layout) describes for `ports` ports of `lanes` lanes.
    ///
    /// Checks the address (not null, aligned to [`MIN_ALIGN`](super::MIN_ALIGN)), the geometry and that `len`
    /// covers the layout.
    ///
    /// # Safety
    /// - `base..base + len` must be valid for reads and writes for `'a`, and only accessed
    ///   through atomics (views like this one, or device code) while the view lives.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, len: usize, ports: u32, lanes: u32) -> Result<Self, LayoutError> {
        use super::layout::{Layout, MIN_ALIGN};
        let layout = Layout::new(ports, lanes).map_err(LayoutError::Geometry)?;
        let (raw, layout) =
            crate::view::raw::RawBuffer::check(base, len, MIN_ALIGN, Some(layout), |l| l.size)?;
        let (p, l) = (layout.ports as usize, layout.lanes as usize);
        // SAFETY: the memory is valid for 'a and only accessed atomically (caller) and covers
        // `layout.size` (checked above); `Layout` keeps the four arrays disjoint and inside
        // `size`, and every offset is a multiple of 8 from an 8-aligned base (checked), which is
        // the alignment of each element type (pinned by the `abi` asserts in `layout`). The element
        // types are atomics (or `PayloadWord`, an atomic in production) with the integers'
        // representation, valid for any bytes.
        let parts = unsafe {
            Parts {
                lanes: layout.lanes,
                host_mailbox: raw.slice(layout.host_mailbox, p),
                device_mailbox: raw.slice(layout.device_mailbox, p),
                headers: raw.slice(layout.headers, p),
                buffers: raw.slice(layout.buffers, p * l),
            }
        };
        Self::from_parts(parts)
    }

    /// Ports (the host's own count).
    #[inline]
    pub fn ports(&self) -> u32 {
        self.host_mailbox.len() as u32
    }

    /// Lanes per port (the host's own count).
    #[inline]
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    /// The bits of the lanes that exist (`lanes` low bits).
    #[inline]
    pub fn lane_mask(&self) -> u64 {
        self.lane_mask
    }

    /// Initialises the buffer: both mailboxes 0 (every port the client's, nothing pending),
    /// headers and lane buffers zeroed, and the lock bits of a view that has them
    /// ([`View::with_locks`]) cleared. Call before the device runs; Relaxed stores, published
    /// by however the runtime hands the buffer to the device (a kernel launch).
    pub fn init(&self) {
        for word in self.host_mailbox.iter().chain(self.device_mailbox).chain(self.locks) {
            word.store(0, Ordering::Relaxed);
        }
        for header in self.headers {
            header.mask.store(0, Ordering::Relaxed);
            header.opcode.store(0, Ordering::Relaxed);
            header.padding.store(0, Ordering::Relaxed);
        }
        for buffer in self.buffers {
            buffer.write(&[0; 8]);
        }
    }

    /// Port `port`'s host mailbox word (the host writes it; a device can write anything there):
    /// for tests and hostile-device models, the host's own reads go through [`View::turn`].
    ///
    /// # Panics
    /// If `port >= ports`.
    #[inline]
    pub fn host_mailbox(&self, port: u32) -> &'a AtomicU32 {
        &self.host_mailbox[port as usize]
    }

    /// Port `port`'s device mailbox word (the client writes it), as [`View::host_mailbox`].
    ///
    /// # Panics
    /// If `port >= ports`.
    #[inline]
    pub fn device_mailbox(&self, port: u32) -> &'a AtomicU32 {
        &self.device_mailbox[port as usize]
    }

    /// Port `port`'s lane `lane` buffer.
    ///
    /// # Panics
    /// If `port >= ports` or `lane >= lanes` (the callers bound both by the host's geometry).
    #[inline]
    pub fn lane_buffer(&self, port: u32, lane: u32) -> &'a LaneBuffer {
        assert!(lane < self.lanes, "lane {lane} of a {}-lane port", self.lanes);
        &self.buffers[port as usize * self.lanes as usize + lane as usize]
    }

    /// Port `port`'s header.
    ///
    /// # Panics
    /// If `port >= ports`.
    #[inline]
    pub fn header(&self, port: u32) -> &'a Header {
        &self.headers[port as usize]
    }
}
