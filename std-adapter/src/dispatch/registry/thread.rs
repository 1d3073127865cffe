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
    /// The thread's copy of the registry's entries and buffer tallies.
    cache: RefCell<Cache>,
    /// When the poll in progress started ([`ThreadDispatch::poll_started`]), in clock ticks.
    poll_start: Cell<Option<u64>>,
}

/// What a [`ThreadDispatch`] copied from its registry, and the look-ups of the last packet: the
/// packets of a drain mostly come from one buffer and call one service, so a packet like the last
/// one skips the hash look-up of its service and the search for its buffer.
struct Cache {
    /// The registry's generation when `entries` was copied (`u64::MAX`: never).
    generation: u64,
    /// The registered entries, and the index in it of each service id.
    entries: Vec<Arc<Entry>>,
    ids: IdMap<usize>,
    /// The buffer counters' generation when `buffers` was copied, and the copy, sorted by base
    /// address.
    buffers_generation: u64,
    buffers: SortedTallies,
    /// The last packet's service id and its index in `entries` (`None`: not registered).
    last_service: Option<(u32, Option<usize>)>,
    /// The last packet's buffer and its index in `buffers` (`None`: not counted).
    last_buffer: Option<(usize, Option<usize>)>,
}

impl Cache {
    /// The index in `entries` of service `id`, if registered.
    #[inline]
    fn entry_index(&mut self, id: u32) -> Option<usize> {
        match self.last_service {
            Some((last, at)) if last == id => at,
            _ => {
                let at = self.ids.get(&id).copied();
                self.last_service = Some((id, at));
                at
            }
        }
    }

    /// The index in `buffers` of the buffer at `base`, if counted.
    #[inline]
    fn buffer_index(&mut self, base: usize) -> Option<usize> {
        match self.last_buffer {
            Some((last, at)) if last == base => at,
            _ => {
                let at = self.buffers.binary_search_by_key(&base, |(b, _)| *b).ok();
                self.last_buffer = Some((base, at));
                at
            }
        }
    }
}

impl<'a> ThreadDispatch<'a> {
    /// A dispatcher with nothing cached yet (the first packet copies the registry).
    pub(super) fn new(services: &'a Services) -> Self {
        ThreadDispatch {
            services,
            cache: RefCell::new(Cache {
                generation: u64::MAX,
                entries: Vec::new(),
                ids: IdMap::default(),
                buffers_generation: u64::MAX,
                buffers: Vec::new(),
                last_service: None,
                last_buffer: None,
            }),
            poll_start: Cell::new(None),
        }
    }

    /// Copies the registry again if it changed since the last copy (and forgets the last
    /// packet's look-ups with it).
    #[inline]
    fn refresh(&self, cache: &mut Cache) {
        // Acquire: pairs with the Release increments in `insert` and `unregister`. (A packet
        // submitted after a registration returned is served after it anyway: the packet's own
        // Release/Acquire hand-off orders the increment before this load.)
        let generation = self.services.generation.load(Ordering::Acquire);
        if cache.generation != generation {
            let entries = self.services.entries.read().unwrap_or_else(|p| p.into_inner());
            cache.entries = entries.values().cloned().collect();
            // The same map's keys, in the same order as its values just above.
            cache.ids = entries.keys().enumerate().map(|(at, &id)| (id, at)).collect();
            cache.generation = generation;
            cache.last_service = None;
        }
        let generation = self.services.buffers.generation();
        if cache.buffers_generation != generation {
            cache.buffers = self.services.buffers.copy();
            cache.buffers_generation = generation;
            cache.last_buffer = None;
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
        // Served through a borrow of the cached `Arc`, not a clone of it: a clone would be an
        // atomic add on the entry's reference count, a line every thread writes. (Handlers cannot
        // dispatch, so nothing borrows the cache meanwhile.)
        let mut cache = self.cache.borrow_mut();
        self.refresh(&mut cache);
        let (buffer, entry) = (cache.buffer_index(packet.buffer()), cache.entry_index(packet.service()));
        let buffer = buffer.map(|i| &*cache.buffers[i].1);
        match entry.map(|i| &*cache.entries[i]) {
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
