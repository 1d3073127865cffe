//! [`Registration`]: one buffer as a [`Poller`] is to serve it (its memory, checked once; the
//! device its packets report; the packets this poller serves of it; the host state its drains
//! keep), handed to [`Poller::add`], the one way in.

use super::{Poller, PollerError};
#[cfg(not(loom))]
use crate::any::Protocol;
use crate::any::{AnyState, AnyView};
use crate::scan::DrainScope;
use core::ops::Range;

/// One buffer as a poller is to serve it: built by [`Registration::new`] (whose contract is the
/// memory's), given a device ([`Registration::on_device`]), a range of packets
/// ([`Registration::range`]) and its host state ([`Registration::with_state`]) as needed, and
/// consumed by [`Poller::add`]. Not `Clone`: one registration is one poller's.
///
/// One phase, line or RPC buffer may be served by several pollers at once (one per host thread),
/// each registered for a disjoint range of packet indices: the host writes only the per-packet
/// host word and the reply words of the packets it serves, so pollers with disjoint ranges never
/// write the same word.
///
/// ```
/// use hostcall_core::{line, Poller, PollerError, Protocol, Registration};
/// let len = line::buffer_size(32).unwrap();
/// #[repr(C, align(64))]
/// struct Line([u64; 8]);
/// let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
/// let base = memory.as_mut_ptr().cast::<u8>();
/// // SAFETY: `memory` outlives the registrations (removed below); only the pollers touch it, and
/// // the two ranges are disjoint.
/// let registration = |range| unsafe { Registration::new(Protocol::Line, base, len, 32) }.map(|r| r.range(range));
/// // SAFETY: as above.
/// unsafe { line::View::from_raw(base, len, 32) }.unwrap().init(base as u64, 0);
/// let (low, high) = (Poller::<1>::new(), Poller::<1>::new());
/// low.add(registration(0..16).unwrap().on_device(3)).unwrap();
/// high.add(registration(16..32).unwrap()).unwrap();
/// assert_eq!((low.device(base), high.device(base)), (Some(3), Some(0)));
/// // SAFETY: as above (the view is not used: refused).
/// let stack = unsafe { Registration::new(Protocol::Stack, base, len, 32) }.unwrap();
/// assert_eq!(
///     Poller::<1>::new().add(stack.range(0..16)),
///     Err(PollerError::NotRangeCapable { protocol: Protocol::Stack })
/// );
/// low.remove(base).unwrap();
/// high.remove(base).unwrap();
/// ```
#[derive(Debug)]
#[must_use = "a registration does nothing until it is added to a poller"]
pub struct Registration {
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) num_packets: u64,
    /// The checked view of `base..base + len`. Its `'static` is a lie the constructor's contract
    /// and the removal protocol make safe (see `Registered::view`).
    pub(super) view: AnyView<'static>,
    pub(super) device: u32,
    pub(super) range: Option<(u32, u32)>,
    pub(super) state: AnyState,
}

impl Registration {
    /// The registration of the initialised buffer of `protocol` of `num_packets` packets at
    /// `base` (of `len` bytes), served whole, on device 0, without host state. The layout is
    /// checked here, as the protocol's `from_raw` checks it ([`PollerError::Layout`]). A buffer
    /// whose host scans (phase, line) is scanned through a [`ScanWindow`](crate::ScanWindow) of
    /// its own.
    ///
    /// # Safety
    /// `base..base + len` must stay valid for reads and writes, and be accessed only atomically,
    /// until [`Poller::remove`] for it returns from the poller it is added to (or that poller is
    /// dropped, or will poll no more). If it is given a [range](Registration::range), no other
    /// poller (or thread) may serve an index of that range of this buffer while it is registered.
    #[cfg(not(loom))]
    pub unsafe fn new(
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u32,
    ) -> Result<Self, PollerError> {
        // SAFETY: forwarded from this function's contract; the registration keeps the view, which
        // polls use only while the buffer is registered (see `Registered::view`).
        let view =
            unsafe { AnyView::from_raw(protocol, base, len, num_packets) }.map_err(PollerError::Layout)?;
        Ok(Self::of(base, len, u64::from(num_packets), view))
    }

    /// The registration of `view`, its memory `base..base + len`.
    pub(super) fn of(base: *mut u8, len: usize, num_packets: u64, view: AnyView<'static>) -> Self {
        Self { base, len, num_packets, view, device: 0, range: None, state: AnyState::None }
    }

    /// This registration for a buffer of device `device`: every packet served from it reports that
    /// ordinal as [`PacketRequest::device`](crate::PacketRequest::device) (ROCm's sanitizer
    /// report names the device by it).
    pub fn on_device(mut self, device: u32) -> Self {
        self.device = device;
        self
    }

    /// This registration serving only the packets `range` (clamped to the buffer; an inverted
    /// range is empty) of a range-capable buffer ([`Protocol::range_capable`](crate::Protocol::range_capable):
    /// [`Poller::add`] refuses any other with [`PollerError::NotRangeCapable`]). Every packet of
    /// the buffer must be in some poller's range or the waves that claim it wait forever. Ranges
    /// are scanned whole on every poll (no [`ScanWindow`](crate::ScanWindow)).
    pub fn range(mut self, range: Range<u32>) -> Self {
        self.range = Some((range.start, range.end.max(range.start)));
        self
    }

    /// This registration with the buffer's host state, which every drain of it keeps
    /// ([`Host::State`](crate::Host::State)): a line buffer's memory of incomplete requests (one
    /// entry per packet this poller serves of it: all of them, or its range's), an RPC buffer's
    /// calls in progress. A state of another protocol than the buffer's is no state.
    ///
    /// # Safety
    /// The state's memory must be valid for reads and writes and initialised (a line memory
    /// zeroed: [`line::Incomplete::default`](crate::line::Incomplete)), and be accessed by nothing
    /// but the drains of this buffer by the poller this is added to, until [`Poller::remove`]
    /// for it returns from that poller or that poller drains the buffer no more (dropped, or never
    /// polled again). The same state may then go to another poller's registration of the buffer
    /// (a buffer moving between host threads), provided the new poller's drains of it happen
    /// after the old one's last.
    pub unsafe fn with_state(mut self, state: AnyState) -> Self {
        self.state = state;
        self
    }

    /// The buffer's base address (the key it is registered under).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The scope a fresh registration starts with.
    pub(super) fn scope(&self) -> DrainScope {
        match self.range {
            Some((start, end)) => DrainScope::Range { start, end },
            None => self.view.scope(),
        }
    }
}

impl<const N: usize> Poller<N> {
    /// Starts serving `registration`'s buffer. Refused when a buffer is registered at its base
    /// already ([`PollerError::AlreadyRegistered`]), when the poller is full
    /// ([`PollerError::Full`]), or for a range of a buffer that cannot be split
    /// ([`PollerError::NotRangeCapable`]).
    ///
    /// ```
    /// use hostcall_core::{stack, Poller, Protocol, Registration};
    /// let len = stack::buffer_size(2).unwrap();
    /// let mut memory = vec![0u64; len / 8];
    /// let base = memory.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `memory` outlives the registration (removed below); only the poller touches it.
    /// let view = unsafe { stack::View::from_raw(base, len, 2) }.unwrap();
    /// view.init(base as u64, 0);
    /// let poller = Poller::<1>::new();
    /// // SAFETY: as above.
    /// let registration = unsafe { Registration::new(Protocol::Stack, base, len, 2) }.unwrap();
    /// poller.add(registration.on_device(3)).unwrap();
    /// assert_eq!(poller.device(base), Some(3));
    /// poller.remove(base).unwrap();
    /// ```
    pub fn add(&self, registration: Registration) -> Result<(), PollerError> {
        let protocol = registration.view.protocol();
        if registration.range.is_some() && !protocol.range_capable() {
            return Err(PollerError::NotRangeCapable { protocol });
        }
        let scope = registration.scope();
        let Registration { base, len, num_packets, view, device, state, .. } = registration;
        let mut table = self.table.lock();
        if table.get(base).is_some() {
            return Err(PollerError::AlreadyRegistered { base: base as usize });
        }
        table
            .insert(super::table::Registered {
                base,
                len,
                num_packets,
                protocol,
                view,
                device,
                scope,
                state,
                generation: 0,
            })
            .ok_or(PollerError::Full { capacity: N })?;
        self.publish(&table);
        Ok(())
    }
}
