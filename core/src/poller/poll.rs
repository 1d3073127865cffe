//! One poll: [`Poller::poll_once`] pins the registrations under the table lock (refreshing the
//! poll's own copy of them if the table changed), then drains each without the lock, dispatching
//! every packet with its buffer's origin set.

use super::table::{Pins, Registered};
use super::Poller;
use crate::any::HostScratch;
use crate::dispatch::Dispatch;
use crate::host::{DrainError, DrainHandler, DrainReport, PacketRequest};
use crate::scan::DrainScope;

/// What polls keep from one to the next, behind the poll lock.
pub(super) struct PollState<const N: usize> {
    /// The table's `version` that `serving` was copied at (0: never; the table's starts at 1).
    pub(super) version: u64,
    /// The poll's copy of the table's serving registrations, refreshed under the table lock when
    /// the table's version changed.
    pub(super) serving: heapless::Vec<(usize, Registered), N>,
    /// The drain state of each slot (the registration generation it belongs to, and its scope).
    pub(super) scopes: [(u64, DrainScope); N],
    /// Where requests are copied for the services, for the protocols that copy them (one per
    /// poller: polls take turns).
    pub(super) scratch: HostScratch,
}

impl<const N: usize> Poller<N> {
    /// Drains every registered buffer once, each with its own protocol, dispatching each packet;
    /// before each buffer it asks [`Dispatch::proceed`], and stops the poll when that says no.
    /// Scanned buffers go through their [`ScanWindow`](crate::ScanWindow)s (ranges whole). Returns at once with nothing served if another poll is in progress.
    pub fn poll_once<D: Dispatch + ?Sized>(&self, dispatch: &D) -> DrainReport {
        let Some(mut polling) = self.polling.try_lock() else {
            return DrainReport::default();
        };
        let PollState { version, serving, scopes, scratch } = &mut *polling;
        let mut pinned = self.pin_all(version, serving);
        let mut report = DrainReport::default();
        while let Some(&(slot, ref r)) = pinned.next() {
            if !dispatch.proceed() {
                break; // the rest are unpinned by `pinned`'s drop
            }
            let (generation, scope) = &mut scopes[slot];
            if *generation != r.generation {
                (*generation, *scope) = (r.generation, r.scope);
            }
            let mut to = DispatchTo { dispatch, base: r.base as usize, device: r.device };
            // The view was built and checked by `add`. Its memory is valid: `add`'s contract keeps
            // it valid while registered, and the slot is pinned (`remove` returns only after
            // `unpin` below). For a range, `add_phase_range`'s contract makes this poller the only
            // host writer of the range's `host_phase` words and reply words; the poll lock makes
            // this poll the only one of this poller.
            // The line memory (`set_incomplete_memory`) is this registration's alone, valid while
            // it is registered, and only polls touch it: the poll lock makes this the only access.
            let incomplete = match r.incomplete {
                // SAFETY: as just said (the contract of `set_incomplete_memory`).
                Some(memory) => unsafe { &mut *memory.as_ptr() },
                None => &mut [],
            };
            report += r.view.drain_scope(scope, scratch, incomplete, &mut to);
            self.pins.unpin(slot);
        }
        report
    }

    /// Pins the slot of every serving registration, under the table lock, first refreshing the
    /// poll's copy `serving` of them if the table changed since it was copied (at `version`).
    fn pin_all<'s>(
        &'s self,
        version: &mut u64,
        serving: &'s mut heapless::Vec<(usize, Registered), N>,
    ) -> PinnedSlots<'s, N> {
        let table = self.table.lock();
        if *version != table.version {
            serving.clear();
            // Cannot fail: both hold at most `N`.
            let _ = serving.extend_from_slice(&table.serving);
            *version = table.version;
        }
        for &(slot, _) in serving.iter() {
            self.pins.pin(slot);
        }
        PinnedSlots { pins: &self.pins, slots: serving, next: 0 }
    }
}

/// The registrations a poll pinned, handed out one at a time; whatever is still pinned when it is
/// dropped (a service panicked through the poll) is unpinned, so no remover waits forever.
struct PinnedSlots<'p, const N: usize> {
    pins: &'p Pins<N>,
    slots: &'p [(usize, Registered)],
    next: usize,
}

impl<'p, const N: usize> PinnedSlots<'p, N> {
    fn next(&mut self) -> Option<&'p (usize, Registered)> {
        let next = self.slots.get(self.next);
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
        Dispatch::dispatch(self, packet);
    }
    fn malformed(&mut self, error: DrainError) {
        self.dispatch.malformed(self.base, error);
    }
    /// The dispatch's own turn if it keeps the buffer's calls ([`Dispatch::rpc_turn`]), else the
    /// stateless default.
    fn rpc_turn(&mut self, turn: &mut crate::rpc::Turn<'_>, scratch: &crate::lane::Payload) -> bool {
        match self.dispatch.rpc_turn(self.base, turn, &*self) {
            Some(served) => served,
            None => crate::host::stateless_rpc_turn(self, turn, scratch),
        }
    }
}

/// The packets an RPC turn makes, with the buffer's origin set (for [`Dispatch::rpc_turn`]).
impl<D: Dispatch + ?Sized> Dispatch for DispatchTo<'_, D> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        packet.set_origin(self.device, self.base);
        self.dispatch.dispatch(packet);
    }
    fn malformed(&self, buffer: usize, error: DrainError) {
        let _ = buffer; // always this registration's buffer
        self.dispatch.malformed(self.base, error);
    }
}
