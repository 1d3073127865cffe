//! [`ThreadDispatch`]: one listener thread's cached view of a [`Services`] registry.

use hostcall_core::{Dispatch, DrainError, PacketRequest};
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::serve::serve_entry;
use super::{Entry, IdMap, Services};
use crate::observe::histogram::ticks;
use crate::observe::SortedTallies;

/// One listener thread's view of a [`Services`] registry (see [`Services::dispatcher`]). Not
/// `Sync`: each thread makes its own.
pub struct ThreadDispatch<'a> {
    services: &'a Services,
    /// The registry's generation when last copied, and the copy.
    cache: RefCell<(u64, IdMap<Arc<Entry>>)>,
    /// The buffer counters' generation when last copied, and the copy, sorted by base address
    /// (a binary search a packet: no hashing on the serving path).
    buffers: RefCell<(u64, SortedTallies)>,
    /// When the poll in progress started ([`ThreadDispatch::poll_started`]), in clock ticks.
    poll_start: Cell<Option<u64>>,
}

impl<'a> ThreadDispatch<'a> {
    /// A dispatcher with nothing cached yet (the first packet copies the registry).
    pub(super) fn new(services: &'a Services) -> Self {
        ThreadDispatch {
            services,
            cache: RefCell::new((u64::MAX, IdMap::default())),
            buffers: RefCell::new((u64::MAX, Vec::new())),
            poll_start: Cell::new(None),
        }
    }

    /// Copies the registry again if it changed since the last copy.
    fn refresh(&self) {
        // Acquire: pairs with the Release increments in `insert` and `unregister`. (A packet
        // submitted after a registration returned is served after it anyway: the packet's own
        // Release/Acquire hand-off orders the increment before this load.)
        let generation = self.services.generation.load(Ordering::Acquire);
        let mut cache = self.cache.borrow_mut();
        if cache.0 != generation {
            let entries = self.services.entries.read().unwrap_or_else(|p| p.into_inner());
            *cache = (generation, entries.clone());
        }
        let generation = self.services.buffers.generation();
        let mut buffers = self.buffers.borrow_mut();
        if buffers.0 != generation {
            *buffers = (generation, self.services.buffers.copy());
        }
    }

    /// A poll starts now: the queue wait of the packets it finds counts from here.
    pub(crate) fn poll_started(&self) {
        self.poll_start.set(Some(ticks()));
    }

    /// The registry this dispatcher serves.
    pub(crate) fn services(&self) -> &Services {
        self.services
    }
}

impl Dispatch for ThreadDispatch<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.refresh();
        // Served through a borrow of the cached `Arc`, not a clone of it: a clone would be an
        // atomic add on the entry's reference count, a line every thread writes. (Handlers cannot
        // dispatch, so nothing borrows the cache mutably meanwhile.)
        let cache = self.cache.borrow();
        let buffers = self.buffers.borrow();
        let served = &buffers.1;
        let buffer =
            served.binary_search_by_key(&packet.buffer(), |(base, _)| *base).ok().map(|i| &*served[i].1);
        match cache.1.get(&packet.service()) {
            Some(entry) => serve_entry(entry, packet, &self.services.reasons, buffer, self.poll_start.get()),
            None => self.services.answer_unknown(packet, buffer),
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.services.count_malformed(buffer, error);
    }
}

impl std::fmt::Debug for ThreadDispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadDispatch").finish_non_exhaustive()
    }
}
