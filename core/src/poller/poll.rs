//! Polls: a [`PollSession`] holds the poll lock and keeps the slots of its copy of the table
//! pinned from one poll to the next, so a poll in steady state takes no lock and writes no shared
//! word; [`PollSession::poll_once`] drains each registration, dispatching every packet with its
//! buffer's origin set. [`Poller::poll_once`] is one poll in a session of its own.

use super::table::Registered;
use super::Poller;
use crate::any::HostScratch;
use crate::dispatch::Dispatch;
use crate::host::{DrainError, DrainHandler, DrainReport, OwnWork, PacketRequest};
use crate::scan::DrainScope;
use crate::sync::{LockGuard, Ordering};

/// What polls keep from one to the next, behind the poll lock.
pub(super) struct PollState<const N: usize> {
    /// The table's version that `serving` was copied at (0: never; the table's starts at 1).
    pub(super) version: u64,
    /// `version` while the slots of `serving` are pinned (from a session's first poll to its
    /// end), 0 while they are not: a poll in steady state compares this one word with the
    /// published version, which is never 0 ([`PollState::is_pinned`] says which it is).
    pub(super) pinned: u64,
    /// The poll's copy of the table's serving registrations, each `scope` the registration's
    /// drain state as of the last poll (the copy is the session's own: its drains update it in
    /// place).
    pub(super) serving: heapless::Vec<(usize, Registered), N>,
    /// Each slot's drain state while a refresh replaces the copy (the registration generation it
    /// belongs to, and its scope): a registration still serving keeps its scope across the
    /// refresh, a new one starts with its registered scope.
    pub(super) scopes: [(u64, DrainScope); N],
    /// Where requests are copied for the services, for the protocols that copy them (one per
    /// poller: polls take turns).
    pub(super) scratch: HostScratch,
}

impl<const N: usize> PollState<N> {
    /// Whether the slots of `serving` are pinned.
    #[inline(always)]
    pub(super) fn is_pinned(&self) -> bool {
        self.pinned != 0
    }
}

/// The right to poll a [`Poller`], held by one thread for as many polls as it likes
/// ([`Poller::session`]): it holds the poll lock, and the registrations of its last poll stay
/// pinned between polls. A poll in steady state (no `add` or `remove` since the last) takes no
/// lock and writes no shared word: it reads the table's version and drains its copy.
///
/// While a session is held, [`Poller::remove`] waits for its next poll (or its drop), and every
/// other poll of the poller returns at once with nothing served. Drop a session before waiting for
/// anything but the device (a doorbell, a sleep): a remover would wait for it meanwhile.
///
/// ```
/// use hostcall_core::{Poller, ServiceTable};
/// let poller = Poller::<4>::new();
/// let services = ServiceTable::<1>::new();
/// let mut session = poller.session().expect("no other poll in progress");
/// for _ in 0..3 {
///     assert_eq!(session.poll_once(&services).packets, 0); // nothing registered
/// }
/// assert!(poller.session().is_none(), "one session at a time");
/// assert_eq!(poller.poll_once(&services).packets, 0, "a poll meanwhile returns at once");
/// drop(session);
/// assert!(poller.session().is_some());
/// ```
pub struct PollSession<'p, const N: usize> {
    pub(super) poller: &'p Poller<N>,
    pub(super) state: LockGuard<'p, PollState<N>>,
}

/// The poller it polls (its `Debug`: capacity and buffers, `<locked>` while another thread holds
/// the table lock).
impl<const N: usize> core::fmt::Debug for PollSession<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PollSession").field("poller", self.poller).finish()
    }
}

impl<const N: usize> Poller<N> {
    /// A session of polls ([`PollSession`]), or `None` if another session (or poll) is in
    /// progress, on another thread or in a service of this poller.
    #[inline]
    pub fn session(&self) -> Option<PollSession<'_, N>> {
        Some(PollSession { poller: self, state: self.polling.try_lock()? })
    }

    /// One poll in a session of its own ([`PollSession::poll_once`]): every registered buffer
    /// drained once, each with its own protocol, every packet dispatched. Returns at once with
    /// nothing served if another poll is in progress. A loop that polls again and again keeps a
    /// [`session`](Self::session) instead, which saves the poll its locks.
    pub fn poll_once<D: Dispatch + ?Sized>(&self, dispatch: &D) -> DrainReport {
        match self.session() {
            Some(mut session) => session.poll_once(dispatch),
            None => DrainReport::default(),
        }
    }

    /// Re-pins the session's copy after the session was dropped (its slots unpinned, the copy
    /// kept), without the table lock while the table has not changed since the copy was made:
    /// pins the copy's slots, then re-reads the published version; if it still is the copy's,
    /// the pins hold (a remover that published after them sees them), otherwise it falls back to
    /// [`refresh`](Self::refresh), which unpins them and copies the table. Called by a poll whose
    /// copy is unpinned and whose read of the published version found it unchanged (the std
    /// listener's first poll after each nap).
    #[inline]
    fn repin(&self, state: &mut PollState<N>) {
        self.pin_copy(state);
        // SeqCst: pairs with the SeqCst fence in `Poller::remove`, between its publish of the new
        // version and its read of the pin (store buffering): the pin stores of `pin_copy` are
        // ordered before the load of `confirm_pins` in the fences' single total order, so either
        // that load reads the remover's version (and the copy is refreshed under the lock, the
        // slot not drained) or the remover's read of the pin, after its fence, sees the pin (and
        // waits for the Release unpin after this session's drains). Without either fence each
        // side could read the other's old value, and the remover return while this poll drains
        // the slot (the loom model of the re-pin and its broken twins).
        crate::sync::fence(Ordering::SeqCst);
        self.confirm_pins(state);
    }

    /// The re-pin's first half: pins the slots of the (unpinned) copy, without the table lock.
    #[inline(always)]
    pub(super) fn pin_copy(&self, state: &mut PollState<N>) {
        for &(slot, _) in state.serving.iter() {
            self.pins.pin(slot);
        }
        state.pinned = state.version;
    }

    /// The re-pin's second half, after the fence: the copy stands if the published version is
    /// still its own; otherwise it is refreshed under the table lock (which unpins it first).
    #[inline(always)]
    pub(super) fn confirm_pins(&self, state: &mut PollState<N>) {
        // Relaxed: ordered after the pins by the fence before it; a changed version is followed
        // by the lock of `refresh`, which orders the refresh after the change.
        if state.version != self.published.load(Ordering::Relaxed) {
            self.refresh(state);
        }
    }

    /// Brings the session's copy of the serving registrations up to the table, under the table
    /// lock: unpins the slots of the old copy if they are pinned, copies the table's if it
    /// changed since the copy was made, and pins the copy's slots.
    #[cold]
    #[inline(never)]
    pub(super) fn refresh(&self, state: &mut PollState<N>) {
        let table = self.table.lock();
        if state.version != table.version {
            for &(slot, ref r) in state.serving.iter() {
                if state.is_pinned() {
                    self.pins.unpin(slot);
                }
                state.scopes[slot] = (r.generation, r.scope);
            }
            state.serving.clear();
            // Cannot fail: both hold at most `N`.
            let _ = state.serving.extend_from_slice(&table.serving);
            for (slot, r) in state.serving.iter_mut() {
                if let Some(&(generation, scope)) = state.scopes.get(*slot) {
                    if generation == r.generation {
                        r.scope = scope;
                    }
                }
            }
            state.version = table.version;
        } else if state.is_pinned() {
            return;
        }
        for &(slot, _) in state.serving.iter() {
            self.pins.pin(slot);
        }
        state.pinned = state.version;
    }
}

impl<const N: usize> PollSession<'_, N> {
    /// Drains every registered buffer once, each with its own protocol, dispatching each packet;
    /// before each buffer it asks [`Dispatch::proceed`], and stops the poll when that says no.
    /// Scanned buffers go through their [`ScanWindow`](crate::ScanWindow)s (ranges whole).
    ///
    /// When the table changed since the session's last poll (an `add` or a `remove`), the poll
    /// first refreshes its copy under the table lock; otherwise it takes no lock (a new
    /// session's first poll re-pins the copy its poller kept, with a fence).
    pub fn poll_once<D: Dispatch + ?Sized>(&mut self, dispatch: &D) -> DrainReport {
        let poller = self.poller;
        // Relaxed: the version only says whether to take the table lock, whose acquisition
        // orders the refresh after the `add` or `remove` that changed it. A poll whose copy is
        // pinned and that reads an old version drains that copy, whose slots stay pinned, so a
        // remover waits for a later poll's refresh (or the session's drop) and its Release unpin.
        // A poll whose copy is unpinned (a new session) and that reads the copy's version re-pins
        // it without the lock (`repin`), which reads the version again after its pins and a fence.
        let published = poller.published.load(Ordering::Relaxed);
        // One test for both: `pinned` is the copy's version only while the copy is pinned.
        if self.state.pinned != published {
            let unchanged = self.state.version == published;
            return self.poll_refreshed(unchanged, dispatch);
        }
        self.drain_copy(dispatch)
    }

    /// [`poll_once`](Self::poll_once) for a copy that is unpinned or out of date (`unchanged`:
    /// whether the published version was the copy's): re-pins or refreshes it, then drains it.
    /// A function of its own, so that the steady state's poll holds nothing across these calls
    /// and saves no register for them.
    #[cold]
    #[inline(never)]
    fn poll_refreshed<D: Dispatch + ?Sized>(&mut self, unchanged: bool, dispatch: &D) -> DrainReport {
        if unchanged {
            self.poller.repin(&mut self.state);
        } else {
            self.poller.refresh(&mut self.state);
        }
        self.drain_copy(dispatch)
    }

    /// Drains the session's copy, which is pinned and up to date, asking
    /// [`Dispatch::proceed`] before each buffer.
    #[inline(always)]
    fn drain_copy<D: Dispatch + ?Sized>(&mut self, dispatch: &D) -> DrainReport {
        let PollState { serving, scratch, .. } = &mut *self.state;
        // One registration (the common case) is drained in this frame, which holds nothing
        // across the call but the handler: its protocol's drain (a function of its own) is the
        // only frame of any size; several go through the loop's function.
        match serving.as_mut_slice() {
            [] => DrainReport::default(),
            [(_, r)] if dispatch.proceed() => drain_one(r, scratch, dispatch),
            [_] => DrainReport::default(),
            many => drain_each(many, scratch, dispatch),
        }
    }
}

/// Drains each of `serving` once, asking [`Dispatch::proceed`] before each (the loop of
/// [`PollSession::poll_once`] over several registrations).
#[inline(never)]
fn drain_each<D: Dispatch + ?Sized>(
    serving: &mut [(usize, Registered)],
    scratch: &mut HostScratch,
    dispatch: &D,
) -> DrainReport {
    let mut report = DrainReport::default();
    for (_, r) in serving.iter_mut() {
        if !dispatch.proceed() {
            break;
        }
        report += drain_one(r, scratch, dispatch);
    }
    report
}

/// Drains one registration of the session's copy.
#[inline(always)]
fn drain_one<D: Dispatch + ?Sized>(
    r: &mut Registered,
    scratch: &mut HostScratch,
    dispatch: &D,
) -> DrainReport {
    let mut to = DispatchTo { dispatch, base: r.base as usize, device: r.device };
    // The view was built and checked by the registration. Its memory is valid:
    // `Registration::new`'s contract keeps it valid while registered, and the slot is pinned
    // (`remove` returns only after the session unpins it). For a range, that contract makes this
    // poller the only host writer of the range's host words and reply words; the poll lock (held
    // by the session) makes this poll the only one of this poller.
    // SAFETY: the host state is valid while registered and touched only by this poller's drains
    // of the buffer (`Registration::with_state`); the poll lock makes this drain the only one, so
    // its borrow is the only access while it lives.
    unsafe { r.view.drain_registered(&mut r.scope, scratch, &r.state, &mut to) }
}

/// Unpins every slot of the session's copy (Release, in `Pins::unpin`):
/// every access of its polls to those buffers happens before a remover waiting for them
/// returns. Runs on unwinding too (a service panicked through a poll), so no remover waits
/// forever.
impl<const N: usize> Drop for PollSession<'_, N> {
    fn drop(&mut self) {
        let state = &mut *self.state;
        if state.is_pinned() {
            for &(slot, _) in state.serving.iter() {
                self.poller.pins.unpin(slot);
            }
            state.pinned = 0;
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
