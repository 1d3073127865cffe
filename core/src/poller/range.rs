//! The range API of [`Poller`]: registering a phase, line or RPC buffer of which this poller serves
//! only a range of packet indices, so that several pollers (one per host thread) share one buffer
//! (see the module docs of `poller`).

use super::{Poller, PollerError};
use crate::any::{AnyView, Protocol};
use crate::scan::DrainScope;

impl<const N: usize> Poller<N> {
    /// Registers an initialised buffer of a range-capable `protocol` (phase, line or RPC, see
    /// [`Protocol::range_capable`]) of which this poller serves only the packets `range` (clamped
    /// to the buffer). Several pollers (one per host thread) may serve one buffer this way, each
    /// with its own, disjoint range; every packet of the buffer must be in some poller's range or
    /// the waves that claim it wait forever. Ranges are scanned whole on every poll (no
    /// [`ScanWindow`](crate::ScanWindow)). A stack buffer is refused
    /// ([`PollerError::NotRangeCapable`]).
    ///
    /// ```
    /// use hostcall_core::{line, Poller, PollerError, Protocol};
    /// let len = line::buffer_size(32).unwrap();
    /// #[repr(C, align(64))]
    /// struct Line([u64; 8]);
    /// let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
    /// let base = memory.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `memory` outlives the registrations (removed below); only the pollers touch it.
    /// let view = unsafe { line::View::from_raw(base, len, 32) }.unwrap();
    /// view.init(base as u64, 0);
    /// let (low, high) = (Poller::<1>::new(), Poller::<1>::new());
    /// // SAFETY: as above; the two ranges are disjoint.
    /// unsafe {
    ///     low.add_range(Protocol::Line, base, len, 32, 0..16).unwrap();
    ///     high.add_range(Protocol::Line, base, len, 32, 16..32).unwrap();
    ///     assert_eq!(
    ///         Poller::<1>::new().add_range(Protocol::Stack, base, len, 32, 0..16),
    ///         Err(PollerError::NotRangeCapable { protocol: Protocol::Stack })
    ///     );
    /// }
    /// low.remove(base).unwrap();
    /// high.remove(base).unwrap();
    /// ```
    ///
    /// # Safety
    /// As for [`Poller::add`]; and no other poller (or thread) may serve an index of `range` of
    /// this buffer while it is registered here.
    pub unsafe fn add_range(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_range_on_device(protocol, base, len, num_packets, range, 0) }
    }

    /// [`Poller::add_range`] for a buffer of device `device` (see [`Poller::add_on_device`]).
    ///
    /// # Safety
    /// As for [`Poller::add_range`].
    pub unsafe fn add_range_on_device(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
        device: u32,
    ) -> Result<(), PollerError> {
        if !protocol.range_capable() {
            return Err(PollerError::NotRangeCapable { protocol });
        }
        // SAFETY: forwarded from this function's contract; the registration keeps the view, which
        // polls use only while the buffer is registered (see `Registered::view`).
        let view =
            unsafe { AnyView::from_raw(protocol, base, len, num_packets) }.map_err(PollerError::Layout)?;
        self.push(base, len, num_packets, view, device, DrainScope::range(range))
    }

    /// [`Poller::add_range`] for a phase-protocol buffer.
    ///
    /// # Safety
    /// As for [`Poller::add_range`].
    pub unsafe fn add_phase_range(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_range_on_device(Protocol::Phase, base, len, num_packets, range, 0) }
    }

    /// [`Poller::add_range_on_device`] for a phase-protocol buffer.
    ///
    /// # Safety
    /// As for [`Poller::add_range`].
    pub unsafe fn add_phase_range_on_device(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
        device: u32,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_range_on_device(Protocol::Phase, base, len, num_packets, range, device) }
    }
}
