//! The listener's logic without a thread: a fixed-capacity set of registered buffers behind a
//! spin lock, and [`Poller::poll_once`], which drains every buffer and dispatches each packet.
//!
//! Buffers of both protocols are served side by side: [`Poller::add`] registers a buffer of either
//! [`Protocol`]; each is drained through the one protocol switch ([`AnyView`]) and every packet
//! reaches the same [`Dispatch`]. A phase buffer keeps its host-private
//! [`ScanWindow`](crate::phase::ScanWindow) in its
//! registration (its [`DrainScope`]).
//!
//! A runtime without threads (firmware, a bare-metal loop) calls `poll_once` from its main loop;
//! the std crate's listener is a loop around it that waits on a doorbell in between.
//!
//! No lock is held while a service runs: a poll copies the registrations under the table lock,
//! pins each one, and drains without the lock, so a service may call every other method of its
//! poller (and of whatever wraps it) from inside a poll. [`Poller::remove`] waits until no poll
//! uses the buffer, so once it returns the poller will not touch that buffer again and the caller
//! may free it (the protocol and its ordering: `poller/table.rs`). Polls are serialised by a second lock,
//! held only by [`Poller::poll_once`]: a poll asked while another is in progress (on another
//! thread, or from a service of this poller) returns at once with nothing served.
//!
//! One phase buffer may be served by several pollers at once (one per host thread), each
//! registered with [`Poller::add_phase_range`] for a disjoint range of packet indices: the host
//! writes only `host_phase[i]` and the reply words of the packets it serves, so pollers with
//! disjoint ranges never write the same word. A stack buffer is served by one poller only (its
//! host side swaps the whole ready-stack).

use crate::any::{AnyView, DrainScope};
use crate::dispatch::Dispatch;
use crate::host::{DrainError, DrainHandler, DrainReport, LayoutError, PacketRequest, Protocol};
use core::fmt;
use table::{Pins, Registered, Table};

mod table;

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

impl core::error::Error for PollerError {}

/// A fixed-capacity set of up to `N` buffers and the loop body that serves them.
pub struct Poller<const N: usize> {
    /// Which buffers are registered, in which slot. Taken briefly by every method, never held
    /// while a service runs.
    table: spin::Mutex<Table<N>>,
    /// Which slots the poll in progress has still to drain (the removal protocol of `poller/table.rs`).
    pins: Pins<N>,
    /// The host-private drain state of each slot (the registration generation it belongs to, and
    /// its scope). Held for a whole poll and taken only by `poll_once`: it serialises polls.
    scopes: spin::Mutex<[(u64, DrainScope); N]>,
}

// SAFETY: the raw pointers are only dereferenced through `AnyView`, whose accesses are all
// atomic, and `add`'s contract keeps the memory valid until `remove` returns; `remove` waits
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

impl<const N: usize> Poller<N> {
    /// An empty poller.
    pub const fn new() -> Self {
        Self {
            table: spin::Mutex::new(Table::new()),
            pins: Pins::new(),
            scopes: spin::Mutex::new([(0, DrainScope::Whole); N]),
        }
    }

    /// Registers an initialised buffer of `protocol` of `num_packets` packets at `base` (of `len`
    /// bytes). The layout is checked as the protocol's `from_raw` checks it. A phase buffer is
    /// scanned through a [`ScanWindow`](crate::phase::ScanWindow) of its own.
    ///
    /// # Safety
    /// `base..base + len` must stay valid for reads and writes, and be accessed only atomically,
    /// until [`Poller::remove`] for it returns (or the poller is dropped).
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
    pub unsafe fn add_on_device(
        &self,
        protocol: Protocol,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        device: u32,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract; the view is dropped at once.
        let view =
            unsafe { AnyView::from_raw(protocol, base, len, num_packets) }.map_err(PollerError::Layout)?;
        self.push(base, len, num_packets, protocol, device, view.scope())
    }

    /// Registers an initialised phase-protocol buffer of which this poller serves only the
    /// packets `range` (clamped to the buffer). Several pollers (one per host thread) may serve
    /// one buffer this way, each with its own, disjoint range; every packet of the buffer must be
    /// in some poller's range or the waves that claim it wait forever. Ranges are scanned whole
    /// on every poll (no [`ScanWindow`](crate::phase::ScanWindow)).
    ///
    /// # Safety
    /// As for [`Poller::add`]; and no other poller (or thread) may serve an index of `range` of
    /// this buffer while it is registered here.
    pub unsafe fn add_phase_range(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
    ) -> Result<(), PollerError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_phase_range_on_device(base, len, num_packets, range, 0) }
    }

    /// [`Poller::add_phase_range`] for a buffer of device `device` (see
    /// [`Poller::add_on_device`]).
    ///
    /// # Safety
    /// As for [`Poller::add_phase_range`].
    pub unsafe fn add_phase_range_on_device(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        range: core::ops::Range<u32>,
        device: u32,
    ) -> Result<(), PollerError> {
        let protocol = Protocol::Phase;
        // SAFETY: forwarded from this function's contract; the view is dropped at once.
        unsafe { AnyView::from_raw(protocol, base, len, num_packets) }.map_err(PollerError::Layout)?;
        self.push(base, len, num_packets, protocol, device, DrainScope::range(range))
    }

    fn push(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        protocol: Protocol,
        device: u32,
        scope: DrainScope,
    ) -> Result<(), PollerError> {
        let mut table = self.table.lock();
        if table.get(base).is_some() {
            return Err(PollerError::AlreadyRegistered { base: base as usize });
        }
        table
            .insert(Registered { base, len, num_packets, protocol, device, scope, generation: 0 })
            .ok_or(PollerError::Full { capacity: N })
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

    /// Drains every registered buffer once, each with its own protocol, dispatching each packet.
    /// Phase buffers are scanned through their [`ScanWindow`](crate::phase::ScanWindow)s (ranges
    /// whole). Returns at once with nothing served if another poll is in progress.
    pub fn poll_once<D: Dispatch + ?Sized>(&self, dispatch: &D) -> DrainReport {
        let Some(mut scopes) = self.scopes.try_lock() else {
            return DrainReport::default();
        };
        let mut pinned = self.pin_all();
        let mut report = DrainReport::default();
        while let Some((slot, r)) = pinned.next() {
            let (generation, scope) = &mut scopes[slot];
            if *generation != r.generation {
                (*generation, *scope) = (r.generation, r.scope);
            }
            let mut to = DispatchTo { dispatch, base: r.base as usize, device: r.device };
            // SAFETY: `add`'s contract keeps the memory valid while registered, and the slot is
            // pinned: `remove` returns only after `unpin` below. `add` checked the layout for this
            // protocol, so `from_raw` cannot fail. For a range, `add_phase_range`'s contract
            // makes this poller the only host writer of the range's `host_phase` words and reply
            // words; the `scopes` lock makes this poll the only one of this poller.
            if let Ok(view) = unsafe { AnyView::from_raw(r.protocol, r.base, r.len, r.num_packets) } {
                report += view.drain_scope(scope, &mut to);
            }
            self.pins.unpin(slot);
        }
        report
    }

    /// Copies every serving registration and pins its slot, under the table lock.
    fn pin_all(&self) -> PinnedSlots<'_, N> {
        let table = self.table.lock();
        for &(slot, _) in &table.serving {
            self.pins.pin(slot);
        }
        PinnedSlots { pins: &self.pins, slots: table.serving.clone(), next: 0 }
    }
}

/// The registrations a poll pinned, handed out one at a time; whatever is still pinned when it is
/// dropped (a service panicked through the poll) is unpinned, so no remover waits forever.
struct PinnedSlots<'p, const N: usize> {
    pins: &'p Pins<N>,
    slots: heapless::Vec<(usize, Registered), N>,
    next: usize,
}

impl<const N: usize> PinnedSlots<'_, N> {
    fn next(&mut self) -> Option<(usize, Registered)> {
        let next = self.slots.get(self.next).copied();
        self.next += 1;
        next
    }
}

impl<const N: usize> Drop for PinnedSlots<'_, N> {
    fn drop(&mut self) {
        // The slot handed out last may not have been unpinned yet (a panic in its drain).
        let from = self.next.saturating_sub(1);
        for &(slot, _) in self.slots.iter().skip(from) {
            self.pins.unpin(slot);
        }
    }
}

struct DispatchTo<'d, D: ?Sized> {
    dispatch: &'d D,
    base: usize,
    device: u32,
}

impl<D: Dispatch + ?Sized> DrainHandler for DispatchTo<'_, D> {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        packet.set_device(self.device);
        self.dispatch.dispatch(packet);
    }
    fn malformed(&mut self, error: DrainError) {
        self.dispatch.malformed(self.base, error);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::dispatch::{ErrorCode, ServiceTable, ERROR_REPLY};
    use crate::lane::SLOT_WORDS;
    use crate::{phase, stack};

    extern crate std;
    use std::vec::Vec;

    /// Raw, line-aligned memory for `bytes` bytes.
    #[repr(C, align(64))]
    struct Line([u64; 8]);
    fn raw(bytes: usize) -> Vec<Line> {
        (0..bytes.div_ceil(64)).map(|_| Line([0; 8])).collect()
    }

    fn add_one(request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
        Ok([request[0] + 1, 0])
    }

    #[test]
    fn one_poll_serves_both_protocols_side_by_side() {
        let (n_stack, n_phase) = (3usize, 5usize);
        let stack_len = stack::buffer_size(n_stack).unwrap();
        let phase_len = phase::buffer_size(n_phase).unwrap();
        let (mut stack_mem, mut phase_mem) = (raw(stack_len), raw(phase_len));
        let (stack_base, phase_base) = (stack_mem.as_mut_ptr() as *mut u8, phase_mem.as_mut_ptr() as *mut u8);
        // SAFETY: both allocations outlive the views and the poller (removed below) and are only
        // accessed through atomics.
        let (stack, phase) = unsafe {
            (
                stack::View::from_raw(stack_base, stack_len, n_stack as u64).unwrap(),
                phase::View::from_raw(phase_base, phase_len, n_phase as u64).unwrap(),
            )
        };
        stack.init(stack_base as u64, 0);
        phase.init(phase_base as u64, 0);

        let poller = Poller::<4>::new();
        let mut services = ServiceTable::<2>::new();
        services.register(1, &add_one).ok().unwrap();
        // SAFETY: as above.
        unsafe {
            poller.add(Protocol::Stack, stack_base, stack_len, n_stack as u64).unwrap();
            poller.add(Protocol::Phase, phase_base, phase_len, n_phase as u64).unwrap();
            assert_eq!(
                poller.add(Protocol::Phase, phase_base, phase_len, n_phase as u64),
                Err(PollerError::AlreadyRegistered { base: phase_base as usize })
            );
            assert!(matches!(
                poller.add(Protocol::Phase, stack_base, stack_len, n_phase as u64),
                Err(PollerError::Layout(LayoutError::TooSmall { .. }))
            ));
        }
        assert_eq!(poller.protocol(stack_base), Some(Protocol::Stack));
        assert_eq!(poller.protocol(phase_base), Some(Protocol::Phase));
        assert_eq!(poller.len(), 2);

        for round in 0..40u64 {
            let mut s = stack.claim().unwrap().unwrap();
            s.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
            let s = s.submit(1, 1);
            let mut p = phase.claim(round as usize).unwrap();
            p.write_lane(1, &[round + 100, 0, 0, 0, 0, 0, 0, 0]);
            let p = p.submit(1, 0b10);
            let mut q = phase.claim(round as usize).unwrap();
            q.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
            let q = q.submit(77, 1); // no such service
            assert_eq!(poller.poll_once(&services), DrainReport { packets: 3, lane_calls: 3, malformed: 0 });
            assert_eq!(s.wait(|| {}).reply(0), [round + 1, 0]);
            assert_eq!(p.wait(|| {}).reply(1), [round + 101, 0]);
            assert_eq!(q.wait(|| {}).reply(0), [ERROR_REPLY, ErrorCode::UnknownService as u64]);
        }
        poller.remove(phase_base).unwrap();
        assert_eq!(poller.protocol(phase_base), None);

        // Two pollers split the phase buffer: each serves its own range and nothing else.
        let low = Poller::<4>::new();
        // SAFETY: as above; the ranges are disjoint.
        unsafe {
            low.add_phase_range(phase_base, phase_len, n_phase as u64, 0..2).unwrap();
            poller.add_phase_range(phase_base, phase_len, n_phase as u64, 2..99).unwrap();
        }
        assert_eq!(low.protocol(phase_base), Some(Protocol::Phase));
        for index in 0..n_phase {
            let mut p = phase.claim(index).unwrap();
            assert_eq!(p.index(), index);
            p.write_lane(0, &[index as u64, 0, 0, 0, 0, 0, 0, 0]);
            let p = p.submit(1, 1);
            let (mine, other) = if index < 2 { (&low, &poller) } else { (&poller, &low) };
            assert_eq!(other.poll_once(&services).packets, 0, "packet {index} served by the wrong poller");
            assert_eq!(mine.poll_once(&services), DrainReport { packets: 1, lane_calls: 1, malformed: 0 });
            assert_eq!(p.wait(|| {}).reply(0), [index as u64 + 1, 0]);
        }
        low.remove(phase_base).unwrap();
        poller.remove(phase_base).unwrap();
        poller.remove(stack_base).unwrap();
        assert!(poller.is_empty());
    }

    /// Runs `f` on a thread and fails if it does not return within 10 s (a deadlock fails the
    /// test instead of hanging it).
    fn within_10s(what: &str, f: impl FnOnce() + Send + 'static) {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = done.send(());
        });
        let limit = std::time::Duration::from_secs(10);
        assert!(finished.recv_timeout(limit).is_ok(), "{what} did not return within {limit:?}: a deadlock");
    }

    /// A service that asks the poller about itself from inside a poll, then a removal that waits
    /// for a poll in progress (and only for it).
    #[test]
    fn a_service_may_ask_its_poller_and_removal_waits_for_the_poll() {
        use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};
        use std::sync::Arc;
        use std::time::Duration;

        struct Holder {
            poller: Poller<4>,
            memory: Vec<Line>,
            base: usize,
            len: usize,
            in_service: AtomicBool,
            release: AtomicBool,
        }
        struct Asks(Arc<Holder>);
        impl Dispatch for Asks {
            fn dispatch(&self, packet: &mut PacketRequest<'_>) {
                let h = &self.0;
                // The old poller held its lock here: each of these deadlocked.
                let base = h.base as *mut u8;
                let answer = h.poller.len() as u64
                    + u64::from(h.poller.contains(base))
                    + u64::from(h.poller.protocol(base) == Some(Protocol::Stack))
                    + u64::from(h.poller.poll_once(&ServiceTable::<1>::new()).packets); // nested: nothing
                h.in_service.store(true, StdOrdering::SeqCst);
                while !h.release.load(StdOrdering::SeqCst) {
                    std::thread::yield_now();
                }
                for lane in packet.lanes() {
                    packet.reply(lane, [answer, 0]);
                }
            }
        }

        let n = 2usize;
        let len = stack::buffer_size(n).unwrap();
        let mut memory = raw(len);
        let base = memory.as_mut_ptr() as usize;
        let holder = Arc::new(Holder {
            poller: Poller::new(),
            memory: core::mem::take(&mut memory),
            base,
            len,
            in_service: AtomicBool::new(false),
            release: AtomicBool::new(false),
        });
        assert_eq!(holder.memory.as_ptr() as usize, base);
        // SAFETY: `holder` owns the memory for as long as the poller (also in it) lives.
        let view = unsafe { stack::View::from_raw(base as *mut u8, len, n as u64) }.unwrap();
        view.init(base as u64, 0);
        // SAFETY: as above.
        unsafe { holder.poller.add(Protocol::Stack, base as *mut u8, holder.len, n as u64) }.unwrap();

        let mut claimed = view.claim().unwrap().unwrap();
        claimed.write_lane(0, &[0; 8]);
        let submitted = claimed.submit(1, 1);
        let polling = holder.clone();
        let poll = std::thread::spawn(move || polling.poller.poll_once(&Asks(polling.clone())).packets);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !holder.in_service.load(StdOrdering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "the service deadlocked asking its poller");
            std::thread::yield_now();
        }
        // The service is running: the read-only methods answer at once from here too.
        let asking = holder.clone();
        within_10s("len/contains from another thread during a poll", move || {
            assert_eq!(asking.poller.len(), 1);
            assert!(asking.poller.contains(asking.base as *mut u8));
        });
        // A removal waits for the poll that is draining the buffer.
        let removing = holder.clone();
        let (removed_tx, removed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            removing.poller.remove(removing.base as *mut u8).unwrap();
            let _ = removed_tx.send(());
        });
        assert!(removed.recv_timeout(Duration::from_millis(100)).is_err(), "remove returned during the poll");
        holder.release.store(true, StdOrdering::SeqCst);
        assert!(
            removed.recv_timeout(Duration::from_secs(10)).is_ok(),
            "remove did not return after the poll"
        );
        assert_eq!(poll.join().unwrap(), 1);
        assert_eq!(submitted.wait(|| {}).reply(0), [1 + 1 + 1, 0], "len 1, contains, stack; nested poll 0");
        assert!(holder.poller.is_empty());
    }

    #[test]
    fn packets_report_the_device_of_their_buffer() {
        let n = 2usize;
        let len = stack::buffer_size(n).unwrap();
        let (mut a_mem, mut b_mem) = (raw(len), raw(len));
        let (a_base, b_base) = (a_mem.as_mut_ptr() as *mut u8, b_mem.as_mut_ptr() as *mut u8);
        // SAFETY: both allocations outlive the views and the poller and are only accessed through
        // atomics.
        let (a, b) = unsafe {
            (
                stack::View::from_raw(a_base, len, n as u64).unwrap(),
                stack::View::from_raw(b_base, len, n as u64).unwrap(),
            )
        };
        a.init(a_base as u64, 0);
        b.init(b_base as u64, 0);
        let poller = Poller::<2>::new();
        // SAFETY: as above.
        unsafe {
            poller.add(Protocol::Stack, a_base, len, n as u64).unwrap();
            poller.add_on_device(Protocol::Stack, b_base, len, n as u64, 7).unwrap();
        }
        assert_eq!((poller.device(a_base), poller.device(b_base)), (Some(0), Some(7)));
        let (x, y) = (a.claim().unwrap().unwrap().submit(9, 1), b.claim().unwrap().unwrap().submit(9, 1));
        let mut devices = Vec::new();
        let mut record = |packet: &mut PacketRequest<'_>| {
            devices.push(packet.device());
            packet.reply(0, [u64::from(packet.device()), 0]);
        };
        struct Record<'a, F>(&'a core::cell::RefCell<F>);
        impl<F: FnMut(&mut PacketRequest<'_>)> Dispatch for Record<'_, F> {
            fn dispatch(&self, packet: &mut PacketRequest<'_>) {
                (self.0.borrow_mut())(packet)
            }
        }
        let cell = core::cell::RefCell::new(&mut record);
        assert_eq!(poller.poll_once(&Record(&cell)).packets, 2);
        devices.sort();
        assert_eq!(devices, [0, 7]);
        assert_eq!((x.wait(|| {}).reply(0)[0], y.wait(|| {}).reply(0)[0]), (0, 7));
        poller.remove(a_base).unwrap();
        poller.remove(b_base).unwrap();
    }
}
