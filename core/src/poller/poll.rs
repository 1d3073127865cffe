//! One poll: [`Poller::poll_once`] pins the registrations under the table lock (refreshing the
//! poll's own copy of them if the table changed), then drains each without the lock, dispatching
//! every packet with its buffer's origin set.

use super::table::{Pins, Registered};
use super::Poller;
use crate::any::HostScratch;
use crate::dispatch::Dispatch;
use crate::host::{DrainError, DrainHandler, DrainReport, OwnWork, PacketRequest};
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
            // The view was built and checked by the registration. Its memory is valid:
            // `Registration::new`'s contract keeps it valid while registered, and the slot is
            // pinned (`remove` returns only after `unpin` below). For a range, that contract
            // makes this poller the only host writer of the range's host words and reply words;
            // the poll lock makes this poll the only one of this poller.
            // SAFETY: the host state is valid while registered and touched only by this poller's
            // drains of the buffer (`Registration::with_state`); the poll lock makes this drain
            // the only one, so the borrow is the only access while it lives.
            let state = unsafe { r.state.borrow() };
            report += r.view.drain_scope(scope, scratch, state, &mut to);
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
        packet.set_origin(self.device, self.base);
        self.dispatch.dispatch(packet);
    }
    fn malformed(&mut self, error: DrainError) {
        self.dispatch.malformed(self.base, error);
    }
    /// The host's own work, given to the dispatch with the buffer named, its packets' origin set.
    fn own_work(&mut self, name: u32, work: &mut OwnWork<'_>) {
        let (base, device) = (self.base, self.device);
        self.dispatch.own_work(base, name, &mut |serve| {
            work(&mut |packet| {
                packet.set_origin(device, base);
                serve(packet);
            })
        });
    }
}
