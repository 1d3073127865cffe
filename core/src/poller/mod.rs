//! The listener's logic without a thread: a fixed-capacity set of registered buffers behind a
//! spin lock, and [`Poller::poll_once`], which drains every buffer and dispatches each packet.
//!
//! Buffers of every protocol are served side by side: [`Poller::add`] registers a buffer of any
//! [`Protocol`]; each is drained through the one protocol switch ([`AnyView`]) and every packet
//! reaches the same [`Dispatch`]. A buffer whose host scans keeps its host-private
//! [`ScanWindow`](crate::ScanWindow) in its registration (its [`DrainScope`]).
//!
//! A runtime without threads (firmware, a bare-metal loop) calls `poll_once` from its main loop;
//! the std crate's listener is a loop around it that waits on a doorbell in between.
//!
//! No lock is held while a service runs: a poll pins the registrations under the table lock
//! (refreshing its own copy of them first if the table changed since its last poll) and drains
//! without the lock, so a service may call every other method of its
//! poller (and of whatever wraps it) from inside a poll. [`Poller::remove`] waits until no poll
//! uses the buffer, so once it returns the poller will not touch that buffer again and the caller
//! may free it (the protocol and its ordering: `poller/table.rs`). Polls are serialised by a second lock,
//! held only by [`Poller::poll_once`]: a poll asked while another is in progress (on another
//! thread, or from a service of this poller) returns at once with nothing served.
//!
//! One phase or line buffer may be served by several pollers at once (one per host thread), each
//! registered with [`Poller::add_range`] for a disjoint range of packet indices: the host writes
//! only the per-packet host word (`host_phase[i]`, `served[i]`) and the reply words of the
//! packets it serves, so pollers with disjoint ranges never write the same word. A stack buffer
//! is served by one poller only (its host side swaps the whole ready-stack).

use crate::any::{AnyView, HostScratch, Protocol};
#[cfg(doc)]
use crate::dispatch::Dispatch;
#[cfg(doc)]
use crate::host::{DrainError, PacketRequest};
#[cfg(doc)]
use crate::line;
use crate::scan::DrainScope;
use crate::sync::Lock;
use core::fmt;
use poll::PollState;
use table::{Pins, Registered, Table};

mod error;
#[cfg(loom)]
pub(crate) mod model;
mod poll;
#[cfg(not(loom))]
mod range;
mod table;

pub use error::PollerError;

/// A fixed-capacity set of up to `N` buffers and the loop body that serves them.
pub struct Poller<const N: usize> {
    /// Which buffers are registered, in which slot. Taken briefly by every method, never held
    /// while a service runs.
    table: Lock<Table<N>>,
    /// Which slots the poll in progress has still to drain (the removal protocol of `poller/table.rs`).
    pins: Pins<N>,
    /// The host-private state of the polls. Held for a whole poll and taken only by `poll_once`:
    /// it serialises polls.
    polling: Lock<PollState<N>>,
}

// SAFETY: the buffers are only accessed through the `AnyView`s built by `add`, whose accesses are
// all atomic, and `add`'s contract keeps the memory valid until `remove` returns; `remove` waits
// until no poll has the buffer pinned (see `table`), so no poll can be using a buffer after it is
// removed.
unsafe impl<const N: usize> Send for Poller<N> {}
// SAFETY: as for `Send`: all shared state is behind the two spin locks or accessed atomically.
unsafe impl<const N: usize> Sync for Poller<N> {}

/// The capacity and the buffers served (base, packets, protocol, device, scope); `<locked>` while
/// another thread holds the table lock, rather than waiting for it.
impl<const N: usize> fmt::Debug for Poller<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Serving<'t, const N: usize>(&'t Table<N>);
        impl<const N: usize> fmt::Debug for Serving<'_, N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.0.serving.iter().map(|(_, registered)| registered)).finish()
            }
        }
        let mut s = f.debug_struct("Poller");
        s.field("capacity", &N);
        match self.table.try_lock() {
            Some(table) => s.field("buffers", &Serving(&table)),
            None => s.field("buffers", &format_args!("<locked>")),
        };
        s.finish()
    }
}

impl<const N: usize> Default for Poller<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The fields of an empty poller, for both builds of [`Poller::new`].
macro_rules! empty_poller {
    () => {
        Self {
            table: Lock::new(Table::new()),
            pins: Pins::new(),
            polling: Lock::new(PollState {
                version: 0,
                serving: heapless::Vec::new(),
                scopes: [(0, DrainScope::Whole); N],
                scratch: HostScratch::new(),
            }),
        }
    };
}

impl<const N: usize> Poller<N> {
    /// An empty poller.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        empty_poller!()
    }

    /// An empty poller (not `const` under loom, whose locks and atomics are not).
    #[cfg(loom)]
    pub fn new() -> Self {
        empty_poller!()
    }

    /// Registers an initialised buffer of `protocol` of `num_packets` packets at `base` (of `len`
    /// bytes). The layout is checked as the protocol's `from_raw` checks it. A buffer whose host
    /// scans (phase, line) is scanned through a [`ScanWindow`](crate::ScanWindow) of its own.
    ///
    /// # Safety
    /// `base..base + len` must stay valid for reads and writes, and be accessed only atomically,
    /// until [`Poller::remove`] for it returns (or the poller is dropped).
    #[cfg(not(loom))]
    pub unsafe fn add(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_on_device(protocol, base, len, num_packets, 0) }
    }

    /// [`Poller::add`] for a buffer of device `device`: every packet served from it reports that
    /// ordinal as [`PacketRequest::device`] (ROCm's sanitizer report names the device by it).
    ///
    /// ```
    /// use hostcall_core::{stack, Poller, Protocol};
    /// let len = stack::buffer_size(2).unwrap();
    /// let mut memory = vec![0u64; len / 8];
    /// let base = memory.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `memory` outlives the registration (removed below); only the poller touches it.
    /// let view = unsafe { stack::View::from_raw(base, len, 2) }.unwrap();
    /// view.init(base as u64, 0);
    /// let poller = Poller::<1>::new();
    /// // SAFETY: as above.
    /// unsafe { poller.add_on_device(Protocol::Stack, base, len, 2, 3) }.unwrap();
    /// assert_eq!(poller.device(base), Some(3));
    /// poller.remove(base).unwrap();
    /// ```
    ///
    /// # Safety
    /// As for [`Poller::add`].
    #[cfg(not(loom))]
    pub unsafe fn add_on_device(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        device: u32,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract; the registration keeps the view, which
        // polls use only while the buffer is registered (see `Registered::view`).
        let view =
            unsafe { AnyView::from_raw(protocol, base, len, num_packets) }.map_err(PollerError::Layout)?;
        self.push(base, len, num_packets, view, device, view.scope())
    }

    fn push(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        view: AnyView<'static>,
        device: u32,
        scope: DrainScope,
    ) -> Result<(), PollerError> {
        let mut table = self.table.lock();
        if table.get(base).is_some() {
            return Err(PollerError::AlreadyRegistered { base: base as usize });
        }
        table
            .insert(Registered {
                base,
                len,
                num_packets,
                protocol: view.protocol(),
                view,
                device,
                scope,
                incomplete: None,
                generation: 0,
            })
            .ok_or(PollerError::Full { capacity: N })
    }

    /// Gives the line buffer registered at `base` memory for what its host remembers of the
    /// requests it found incomplete ([`line::Incomplete`], one entry per packet this poller serves
    /// of it: all of them, or its range's), so that a request that stays incomplete costs one
    /// word a look and is reported stalled ([`DrainError::Stalled`]) after
    /// [`line::STALL_LOOKS`] looks (see [`line::Host::drain_scope`]). Without it every pending
    /// request is read in full at every look. Polls from the next one on use it; any other
    /// protocol ignores it.
    ///
    /// ```
    /// use hostcall_core::{line, Poller, Protocol};
    /// # #[repr(C, align(64))]
    /// # struct Line([u64; 8]);
    /// let len = line::buffer_size(4).unwrap();
    /// let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
    /// let base = memory.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `memory` outlives the registration (removed below); only the poller touches it.
    /// unsafe { line::View::from_raw(base, len, 4) }.unwrap().init(base as u64, 0);
    /// let poller = Poller::<1>::new();
    /// let incomplete = Box::into_raw(vec![line::Incomplete::default(); 4].into_boxed_slice());
    /// // SAFETY: as above; `incomplete` is freed only after `remove` returns.
    /// unsafe {
    ///     poller.add(Protocol::Line, base, len, 4).unwrap();
    ///     poller.set_incomplete_memory(base, std::ptr::NonNull::new(incomplete).unwrap()).unwrap();
    /// }
    /// poller.remove(base).unwrap();
    /// // SAFETY: made by `Box::into_raw` above, no longer used by the poller.
    /// drop(unsafe { Box::from_raw(incomplete) });
    /// ```
    ///
    /// # Safety
    /// `memory` must be valid for reads and writes, initialised (e.g. zeroed:
    /// [`line::Incomplete::default`]), and accessed by nothing but this poller until
    /// [`Poller::remove`] for `base` returns or no poll of this poller will run again.
    pub unsafe fn set_incomplete_memory(
        &self,
        base: *mut u8,
        memory: core::ptr::NonNull<[crate::line::Incomplete]>,
    ) -> Result<(), PollerError> {
        let mut table = self.table.lock();
        table.set_incomplete(base, memory).ok_or(PollerError::NotRegistered { base: base as usize })
    }

    /// The protocol of the buffer registered at `base`, if any.
    pub fn protocol(&self, base: *mut u8) -> Option<Protocol> {
        self.table.lock().get(base).map(|r| r.protocol)
    }

    /// The device ordinal of the buffer registered at `base`, if any.
    pub fn device(&self, base: *mut u8) -> Option<u32> {
        self.table.lock().get(base).map(|r| r.device)
    }

    /// Deregisters the buffer at `base`. When this returns no poll is using it.
    ///
    /// It waits for a poll that is draining the buffer: called from a service while that service
    /// is serving a packet of this very buffer, it would wait for itself (the std crate's listener
    /// refuses removals from its own thread).
    pub fn remove(&self, base: *mut u8) -> Result<(), PollerError> {
        let slot =
            self.table.lock().retire(base).ok_or(PollerError::NotRegistered { base: base as usize })?;
        self.pins.wait_unpinned(slot);
        self.table.lock().free(slot);
        Ok(())
    }

    /// Whether a buffer is registered at `base`.
    pub fn contains(&self, base: *mut u8) -> bool {
        self.table.lock().get(base).is_some()
    }

    /// Number of registered buffers.
    pub fn len(&self) -> usize {
        self.table.lock().serving.len()
    }

    /// Whether no buffer is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
