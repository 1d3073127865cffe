//! The listener's logic without a thread: a fixed-capacity set of registered buffers behind a
//! spin lock, and [`Poller::poll_once`], which drains every buffer and dispatches each packet.
//!
//! A runtime without threads (firmware, a bare-metal loop) calls `poll_once` from its main loop;
//! the std crate's listener is a loop around it that waits on a doorbell in between.
//!
//! The lock is held for a whole poll, so once [`Poller::remove`] returns the poller will not touch
//! that buffer again: the caller may free it.

use crate::buffer::{BufferView, DrainError, DrainHandler, DrainReport, LayoutError, PacketRequest};
use crate::layout::SLOT_WORDS;
use crate::service::ErrorCode;
use core::fmt;

/// How the host serves packets: the poller hands it every packet of every buffer.
pub trait Dispatch {
    /// Serve one packet (write a reply, or an error reply, for each active lane).
    fn dispatch(&self, packet: &mut PacketRequest<'_>);
    /// Malformed shared state found in the buffer at `buffer` (its base address).
    fn malformed(&self, buffer: usize, error: DrainError) {
        let _ = (buffer, error);
    }
}

/// A service that answers one lane at a time from its request words.
pub trait LaneService: Sync {
    /// The reply to one lane's request, or the error to answer with.
    fn serve(&self, request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode>;
}

impl<F: Fn(&[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> + Sync> LaneService for F {
    fn serve(&self, request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
        self(request)
    }
}

/// A fixed-capacity table from service id to [`LaneService`], for runtimes without allocation.
/// Unknown ids are answered with [`ErrorCode::UnknownService`].
pub struct ServiceTable<'a, const N: usize> {
    entries: heapless::Vec<(u32, &'a dyn LaneService), N>,
}

impl<const N: usize> Default for ServiceTable<'_, N> {
    fn default() -> Self {
        Self { entries: heapless::Vec::new() }
    }
}

impl<'a, const N: usize> ServiceTable<'a, N> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) the service for `id`. `Err` gives the service back when full.
    pub fn register(&mut self, id: u32, service: &'a dyn LaneService) -> Result<(), &'a dyn LaneService> {
        if let Some(entry) = self.entries.iter_mut().find(|(i, _)| *i == id) {
            entry.1 = service;
            return Ok(());
        }
        self.entries.push((id, service)).map_err(|(_, s)| s)
    }

    fn find(&self, id: u32) -> Option<&'a dyn LaneService> {
        self.entries.iter().find(|(i, _)| *i == id).map(|(_, s)| *s)
    }
}

impl<const N: usize> Dispatch for ServiceTable<'_, N> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        let Some(service) = self.find(packet.service()) else {
            packet.reply_error_all(ErrorCode::UnknownService);
            return;
        };
        let mut lanes = packet.activemask();
        while lanes != 0 {
            let lane = lanes.trailing_zeros() as usize;
            lanes &= lanes - 1;
            match service.serve(&packet.request(lane)) {
                Ok(reply) => packet.reply(lane, reply),
                Err(code) => packet.reply_error(lane, code),
            }
        }
    }
}

/// Why a buffer cannot be added or removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollerError {
    /// The poller already holds its capacity of buffers.
    Full {
        /// The capacity.
        capacity: usize,
    },
    /// The buffer at this address is already registered.
    AlreadyRegistered {
        /// Its base address.
        base: usize,
    },
    /// No buffer is registered at this address.
    NotRegistered {
        /// The address asked for.
        base: usize,
    },
    /// The memory cannot hold a buffer of that many packets.
    Layout(LayoutError),
}

impl fmt::Display for PollerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity } => {
                write!(f, "the poller already serves its capacity of {capacity} buffers")
            }
            Self::AlreadyRegistered { base } => write!(f, "buffer {base:#x} is already registered"),
            Self::NotRegistered { base } => write!(f, "buffer {base:#x} is not registered"),
            Self::Layout(e) => e.fmt(f),
        }
    }
}

#[derive(Clone, Copy)]
struct Registered {
    base: *mut u8,
    len: usize,
    num_packets: u64,
}

/// A fixed-capacity set of up to `N` buffers and the loop body that serves them.
pub struct Poller<const N: usize> {
    buffers: spin::Mutex<heapless::Vec<Registered, N>>,
}

// SAFETY: the raw pointers are only dereferenced through `BufferView`, whose accesses are all
// atomic, and `add`'s contract keeps the memory valid until `remove` returns; `remove` takes the
// same lock as `poll_once`, so no poll can be using a buffer after it is removed.
unsafe impl<const N: usize> Send for Poller<N> {}
// SAFETY: as for `Send`: all shared state is behind the spin lock or accessed atomically.
unsafe impl<const N: usize> Sync for Poller<N> {}

impl<const N: usize> Default for Poller<N> {
    fn default() -> Self {
        Self { buffers: spin::Mutex::new(heapless::Vec::new()) }
    }
}

impl<const N: usize> Poller<N> {
    /// An empty poller.
    pub const fn new() -> Self {
        Self { buffers: spin::Mutex::new(heapless::Vec::new()) }
    }

    /// Registers an initialised buffer of `num_packets` packets at `base` (of `len` bytes).
    ///
    /// # Safety
    /// `base..base + len` must stay valid for reads and writes, and be accessed only atomically,
    /// until [`Poller::remove`] for it returns (or the poller is dropped).
    pub unsafe fn add(&self, base: *mut u8, len: usize, num_packets: u64) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract; the view is dropped at once.
        unsafe { BufferView::from_raw(base, len, num_packets) }.map_err(PollerError::Layout)?;
        let mut buffers = self.buffers.lock();
        if buffers.iter().any(|b| b.base == base) {
            return Err(PollerError::AlreadyRegistered { base: base as usize });
        }
        buffers.push(Registered { base, len, num_packets }).map_err(|_| PollerError::Full { capacity: N })
    }

    /// Deregisters the buffer at `base`. When this returns no poll is using it.
    pub fn remove(&self, base: *mut u8) -> Result<(), PollerError> {
        let mut buffers = self.buffers.lock();
        let at = buffers
            .iter()
            .position(|b| b.base == base)
            .ok_or(PollerError::NotRegistered { base: base as usize })?;
        buffers.swap_remove(at);
        Ok(())
    }

    /// Whether a buffer is registered at `base`.
    pub fn contains(&self, base: *mut u8) -> bool {
        self.buffers.lock().iter().any(|b| b.base == base)
    }

    /// Number of registered buffers.
    pub fn len(&self) -> usize {
        self.buffers.lock().len()
    }

    /// Whether no buffer is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drains every registered buffer once, dispatching each packet.
    pub fn poll_once<D: Dispatch + ?Sized>(&self, dispatch: &D) -> DrainReport {
        let buffers = self.buffers.lock();
        let mut report = DrainReport::default();
        for b in buffers.iter() {
            // SAFETY: `add`'s contract keeps the memory valid while registered, and we hold the
            // lock that `remove` needs. `add` checked the layout, so this cannot fail.
            let Ok(view) = (unsafe { BufferView::from_raw(b.base, b.len, b.num_packets) }) else { continue };
            report += view.drain(&mut DispatchTo { dispatch, base: b.base as usize });
        }
        report
    }
}

struct DispatchTo<'d, D: ?Sized> {
    dispatch: &'d D,
    base: usize,
}

impl<D: Dispatch + ?Sized> DrainHandler for DispatchTo<'_, D> {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self.dispatch.dispatch(packet);
    }
    fn malformed(&mut self, error: DrainError) {
        self.dispatch.malformed(self.base, error);
    }
}
