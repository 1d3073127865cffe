//! [`ThreadDispatch`]: one listener thread's cached view of a [`Services`] registry.

use hostcall_core::{Dispatch, DrainError, PacketRequest};
use std::cell::{Cell, RefCell};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::serve::serve_entry;
use super::{Entry, IdMap, Services};
use crate::observe::histogram::ticks;
use crate::observe::{BufferTally, SortedTallies};

/// One listener thread's view of a [`Services`] registry (see [`Services::dispatcher`]). Not
/// `Sync`: each thread makes its own.
pub struct ThreadDispatch<'a> {
    services: &'a Services,
    /// The thread's copy of the registry's entries and buffer tallies.
    cache: RefCell<Cache>,
    /// The last packet's look-ups, checked before the cache is (see [`Hot`]).
    hot: Hot,
    /// When the poll in progress started ([`ThreadDispatch::poll_started`]), in clock ticks.
    poll_start: Cell<Option<u64>>,
}

/// The last packet's service and buffer and what they were looked up to, with the generations
/// of the copies the look-ups were made in: the packets of a drain mostly come from one buffer
/// and call one service, so a packet like the last one (while nothing was registered or removed)
/// is served with two loads of the generations and four compares, no borrow of the cache and no
/// index into it.
struct Hot {
    /// `Cache::generation` and `Cache::buffers_generation` when the pointers below were taken
    /// (`u64::MAX`: never, so the first packet takes the slow path).
    generation: Cell<u64>,
    buffers_generation: Cell<u64>,
    service: Cell<u32>,
    buffer: Cell<usize>,
    /// The service's entry, null if it is not registered: an `Arc` in `Cache::entries`.
    entry: Cell<*const Entry>,
    /// The buffer's tally, null if it is not counted: an `Arc` in `Cache::buffers`.
    tally: Cell<*const BufferTally>,
}

/// What a [`ThreadDispatch`] copied from its registry.
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
}

impl<'a> ThreadDispatch<'a> {
    /// A dispatcher with nothing cached yet (the first packet copies the registry).
    pub(super) fn new(services: &'a Services) -> Self {
        // Now, not at every packet: the serving path's guard relies on it (`catch_in_scope`).
        crate::dispatch::panics::install_filter();
        ThreadDispatch {
            services,
            cache: RefCell::new(Cache {
                generation: u64::MAX,
                entries: Vec::new(),
                ids: IdMap::default(),
                buffers_generation: u64::MAX,
                buffers: Vec::new(),
            }),
            hot: Hot {
                generation: Cell::new(u64::MAX),
                buffers_generation: Cell::new(u64::MAX),
                service: Cell::new(0),
                buffer: Cell::new(0),
                entry: Cell::new(ptr::null()),
                tally: Cell::new(ptr::null()),
            },
            poll_start: Cell::new(None),
        }
    }

    /// The entry of `service` and the tally of `buffer` (null where none), as of the registry's
    /// `generation` and the buffer counters' `buffers_generation`: copies the registry again if
    /// it changed since the last copy, looks both up in the copy and keeps them in `hot`.
    #[cold]
    #[inline(never)]
    fn look_up(
        &self,
        generation: u64,
        buffers_generation: u64,
        service: u32,
        buffer: usize,
    ) -> (*const Entry, *const BufferTally) {
        let mut cache = self.cache.borrow_mut();
        if cache.generation != generation {
            let entries = self.services.entries.read().unwrap_or_else(|p| p.into_inner());
            cache.entries = entries.values().cloned().collect();
            // The same map's keys, in the same order as its values just above.
            cache.ids = entries.keys().enumerate().map(|(at, &id)| (id, at)).collect();
            cache.generation = generation;
        }
        if cache.buffers_generation != buffers_generation {
            cache.buffers = self.services.buffers.copy();
            cache.buffers_generation = buffers_generation;
        }
        let entry = cache.ids.get(&service).map_or(ptr::null(), |&at| Arc::as_ptr(&cache.entries[at]));
        let tally = cache
            .buffers
            .binary_search_by_key(&buffer, |(b, _)| *b)
            .map_or(ptr::null(), |at| Arc::as_ptr(&cache.buffers[at].1));
        let hot = &self.hot;
        hot.generation.set(generation);
        hot.buffers_generation.set(buffers_generation);
        hot.service.set(service);
        hot.buffer.set(buffer);
        hot.entry.set(entry);
        hot.tally.set(tally);
        (entry, tally)
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
        // Acquire (both): pairs with the Release increments in `Services::insert` and
        // `unregister`, and in `BufferTallies::serve` and `ServedBuffer::release`, so a copy made
        // after seeing a generation holds what that generation names. (A packet submitted after
        // a registration returned is served after it anyway: the packet's own Release/Acquire
        // hand-off orders the increment before these loads.)
        let generation = self.services.generation.load(Ordering::Acquire);
        let buffers_generation = self.services.buffers.generation();
        let (service, buffer) = (packet.service(), packet.buffer());
        let hot = &self.hot;
        let (entry, tally) = if hot.generation.get() == generation
            && hot.buffers_generation.get() == buffers_generation
            && hot.service.get() == service
            && hot.buffer.get() == buffer
        {
            (hot.entry.get(), hot.tally.get())
        } else {
            self.look_up(generation, buffers_generation, service, buffer)
        };
        // Held while the packet is served: a `look_up` from inside the service (a dispatch
        // re-entered through this dispatcher) panics on its `borrow_mut` instead of replacing
        // the copies `entry` and `tally` point into.
        let _serving = self.cache.borrow();
        // SAFETY: a non-null `tally` points into an `Arc` of `cache.buffers`, which only
        // `look_up` replaces (and sets `hot` again), and the borrow just above keeps `look_up`
        // out until the packet is served: the `Arc` outlives this reference.
        let tally = unsafe { tally.as_ref() };
        // SAFETY: as for `tally`, with `entry` in `cache.entries`. Served through this borrow,
        // not a clone of the `Arc`: a clone would be an atomic add on the entry's reference
        // count, a line every thread writes.
        match unsafe { entry.as_ref() } {
            Some(entry) => serve_entry(entry, packet, &self.services.reasons, tally, self.poll_start.get()),
            None => self.services.answer_unknown(packet, tally),
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
