//! What the loom models of the [`Poller`] need and production has no use for (built under
//! `--cfg loom` only, reached through the crate's `__internal` module): registering a view built
//! from separately allocated parts ([`Registration::of_view`]) (loom's atomics cannot view raw memory), and the broken twin of
//! [`Poller::remove`] that the models must catch.

use super::{Poller, PollerError, Registration};
use crate::any::AnyView;

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
