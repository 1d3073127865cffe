//! What the loom models of the [`Poller`] need and production has no use for (built under
//! `--cfg loom` only, reached through the crate's `__internal` module): registering a view built
//! from separately allocated parts ([`Registration::of_view`]) (loom's atomics cannot view raw
//! memory), and the broken twins of [`Poller::remove`] (without waiting, without its fence) and of
//! a [`PollSession`]'s pins (let go between polls, re-pinned without the fence) that the models
//! must catch.

use super::{PollSession, Poller, PollerError, Registration};
use crate::any::AnyView;
use crate::dispatch::Dispatch;
use crate::host::DrainReport;
use crate::sync::Ordering;

impl Registration {
    /// The registration of `view` under the key `base` (any address unique to the buffer, e.g.
    /// its prefix's), as [`Registration::new`] registers a buffer it viewed from raw memory.
    ///
    /// # Safety
    /// The memory `view` refers to must outlive the registration: until [`Poller::remove`] for
    /// `base` returns (or the poller is dropped).
    pub unsafe fn of_view(base: *mut u8, view: AnyView<'_>) -> Self {
        // SAFETY: only the lifetime changes; the caller keeps the memory valid while registered,
        // and a poll reads through the view only while registered (the removal protocol of
        // `table.rs`).
        let view = unsafe { core::mem::transmute::<AnyView<'_>, AnyView<'static>>(view) };
        Self::of(base, 0, u64::from(view.num_packets()), view)
    }
}

/// The broken twin of [`Poller::remove`]: it deregisters the buffer but does not wait for a poll
/// that has it pinned, so a poll may still read and write the buffer after this returns. The loom
/// models must catch it; nothing else may call it.
pub fn remove_without_waiting<const N: usize>(poller: &Poller<N>, base: *mut u8) -> Result<(), PollerError> {
    let mut table = poller.table.lock();
    let slot = table.retire(base).ok_or(PollerError::NotRegistered { base: base as usize })?;
    table.free(slot); // BUG: `remove` waits here until no poll has the slot pinned
    Ok(())
}

/// The broken twin of [`Poller::remove`] against a session's lock-free re-pin: it retires the
/// slot, publishes the new version and waits for the slot's pin as `remove` does, but without the
/// SeqCst fence between the publish and its read of the pin, so a re-pin may read the old version
/// while this reads the slot unpinned (store buffering), and return while that poll drains the
/// buffer. The loom models must catch it; nothing else may call it.
pub fn remove_without_fence<const N: usize>(poller: &Poller<N>, base: *mut u8) -> Result<(), PollerError> {
    let slot = poller.retire(base)?;
    // BUG: `remove` has a SeqCst fence here, the pair of the re-pin's (`Poller::repin`)
    poller.free_unpinned(slot);
    Ok(())
}

/// The broken twin of a new session's first poll ([`PollSession::poll_once`] with the copy
/// unpinned and its version unchanged): it re-pins the copy without the table lock as the poll
/// does, but without the SeqCst fence between its pins and its second read of the version, so it
/// may read the old version while a remover reads the slot unpinned (store buffering), then
/// drains. The loom models must catch it; nothing else may call it.
pub fn repin_without_fence<const N: usize, D: Dispatch + ?Sized>(
    session: &mut PollSession<'_, N>,
    dispatch: &D,
) -> DrainReport {
    let (poller, state) = (session.poller, &mut *session.state);
    // Relaxed: as in `PollSession::poll_once`.
    if !state.is_pinned() && state.version == poller.published.load(Ordering::Relaxed) {
        poller.pin_copy(state);
        // BUG: `Poller::repin` has a SeqCst fence here, the pair of `remove`'s
        poller.confirm_pins(state);
    }
    session.poll_once(dispatch)
}

/// The broken twin of a session's poll: after [`PollSession::poll_once`] it lets go of every pin
/// of the session's copy but keeps the copy as if pinned, so the session's next poll drains
/// without a pin and a remover may return (and free the buffer) meanwhile. The loom models must
/// catch it; nothing else may call it.
pub fn poll_then_unpin<const N: usize, D: Dispatch + ?Sized>(
    session: &mut PollSession<'_, N>,
    dispatch: &D,
) -> DrainReport {
    let report = session.poll_once(dispatch);
    for &(slot, _) in session.state.serving.iter() {
        session.poller.pins.unpin(slot); // BUG: the copy stays `pinned`, its next poll unpinned
    }
    report
}
