//! [`ThreadDispatch`]: one listener thread's cached view of a [`Services`] registry.

use hostcall_core::{Dispatch, DrainError, PacketRequest, Popcnt};
use std::cell::{Cell, RefCell};
use std::num::NonZeroU64;
use std::ptr;
use std::sync::Arc;

use super::serve::{serve_entry, Shards};
use super::{Entry, IdMap, Services};

use crate::observe::counters::{Shard, ShardLease};
use crate::observe::histogram::ticks;
use crate::observe::scope::OwnSink;
use crate::observe::{BufferTallies, SortedTallies};

/// One listener thread's view of a [`Services`] registry (see [`Services::dispatcher`]). Not
/// `Sync`: each thread makes its own.
pub struct ThreadDispatch<'a> {
    services: &'a Services,
    /// The registry's buffer tallies, whose generation every packet reads (one load less than
    /// through `services` and its `Arc`).
    tallies: &'a BufferTallies,
    /// The thread's copy of the registry's entries and buffer tallies.
    cache: RefCell<Cache>,
    /// The last packet's look-ups, checked before the cache is (see [`Hot`]).
    hot: Hot,
    /// When the poll in progress started ([`ThreadDispatch::poll_started`]), in clock ticks (one
    /// word: a reading of 0, which no clock gives after boot, counts as not known).
    poll_start: Cell<Option<NonZeroU64>>,
    /// The refusal scope's sink of the packets served: the registry's reasons, and the hot
    /// buffer's tally (null if it is not counted: an `Arc` in `Cache::buffers`, set by
    /// `look_up` with the rest of `hot`). Its `serving` is how many packets this dispatcher is
    /// serving now (more than one: a service dispatched through it again); `look_up` replaces
    /// the copies `hot` points into only at 0.
    sink: OwnSink<'a>,
    /// The shard of every counter this dispatcher adds to (its own, not its thread's: the
    /// dispatcher is not `Send`, so it is only ever used on one thread, and its shards are found
    /// at a look-up, kept in `hot`).
    lease: ShardLease,
    /// `Shards::plain` of the lease's shards (it adds to them alone, and the processor has
    /// `popcnt`), asked once.
    plain: Option<Popcnt>,
}

/// The last packet's service and buffer and what they were looked up to, with the generation of
/// the copies the look-ups were made in: the packets of a drain mostly come from one buffer and
/// call one service, so a packet like the last one (while nothing was registered or removed) is
/// served with one load of the generation and three compares, no borrow of the cache and no
/// index into it.
struct Hot {
    /// `Cache::generation` when the pointers below were taken (`u64::MAX`: never, so the first
    /// packet takes the slow path).
    generation: Cell<u64>,
    service: Cell<u32>,
    buffer: Cell<usize>,
    /// The service's entry, null if it is not registered: an `Arc` in `Cache::entries`.
    entry: Cell<*const Entry>,
    /// This dispatcher's shards of the entry's counters and of the buffer's tally (null with the
    /// sink's buffer).
    service_shard: Cell<*const Shard>,
    buffer_shard: Cell<*const Shard>,
}

/// What a [`ThreadDispatch`] copied from its registry.
struct Cache {
    /// The generation of the registry's services and buffer counters (one version of both:
    /// `BufferTallies::generation`) when `entries` and `buffers` were copied (`u64::MAX`: never).
    generation: u64,
    /// The registered entries, and the index in it of each service id.
    entries: Vec<Arc<Entry>>,
    ids: IdMap<usize>,
    /// The buffer counters' copy, sorted by base address.
    buffers: SortedTallies,
}

impl<'a> ThreadDispatch<'a> {
    /// A dispatcher with nothing cached yet (the first packet copies the registry).
    pub(super) fn new(services: &'a Services) -> Self {
        // Now, not at every packet: the serving path's guard relies on it (`catch_in_scope`).
        crate::dispatch::panics::install_filter();
        let lease = ShardLease::take();
        ThreadDispatch {
            services,
            tallies: &services.buffers,
            cache: RefCell::new(Cache {
                generation: u64::MAX,
                entries: Vec::new(),
                ids: IdMap::default(),
                buffers: Vec::new(),
            }),
            hot: Hot {
                generation: Cell::new(u64::MAX),
                service: Cell::new(0),
                buffer: Cell::new(0),
                entry: Cell::new(ptr::null()),
                service_shard: Cell::new(ptr::null()),
                buffer_shard: Cell::new(ptr::null()),
            },
            poll_start: Cell::new(None),
            sink: OwnSink::new(&services.reasons),
            plain: Shards::plain(lease.slot().alone),
            lease,
        }
    }

    /// The entry of `service` and the tally of `buffer` (null where none), with this
    /// dispatcher's shards of their counters, as of `generation` (of the registry's services and
    /// buffer counters): copies both again if it changed since the last copy, looks both up in
    /// the copy and keeps them in `hot` (where the packet is served from, read again: copied out
    /// through a return value, they would be one more copy on the hot path's stack).
    #[cold]
    #[inline(never)]
    fn look_up(&self, generation: u64, service: u32, buffer: usize) {
        let mut cache = self.cache.borrow_mut();
        if cache.generation != generation {
            let entries = self.services.entries.read().unwrap_or_else(|p| p.into_inner());
            cache.entries = entries.values().cloned().collect();
            // The same map's keys, in the same order as its values just above.
            cache.ids = entries.keys().enumerate().map(|(at, &id)| (id, at)).collect();
            drop(entries);
            cache.buffers = self.services.buffers.copy();
            cache.generation = generation;
        }
        let slot = self.lease.slot();
        let entry = cache.ids.get(&service).map(|&at| &*cache.entries[at]);
        let tally =
            cache.buffers.binary_search_by_key(&buffer, |(b, _)| *b).ok().map(|at| &*cache.buffers[at].1);
        let hot = &self.hot;
        hot.generation.set(generation);
        hot.service.set(service);
        hot.buffer.set(buffer);
        hot.entry.set(entry.map_or(ptr::null(), ptr::from_ref));
        // SAFETY: null or an `Arc` of `cache.buffers`, which only the next `look_up` replaces,
        // and then sets the sink again; no reference from the sink is in use: `look_up` runs
        // only while no packet is served (the sink's `serving` is 0).
        unsafe { self.sink.set_buffer(tally.map_or(ptr::null(), ptr::from_ref)) };
        hot.service_shard.set(entry.map_or(ptr::null(), |entry| entry.counters.shard(slot)));
        hot.buffer_shard.set(tally.map_or(ptr::null(), |tally| tally.counters.shard(slot)));
    }

    /// Serves `packet` with `entry` (`hot`'s), the refusal scope's thread-local pointing at this
    /// dispatcher's sink already: the scope is the sink's `serving` count, held while the packet
    /// is served, so that a dispatch re-entered from inside the service does not `look_up` and
    /// replace the copies `entry` and the sink point into; undone also when the service unwinds.
    #[inline(always)]
    fn serve(&self, entry: &Entry, packet: &mut PacketRequest<'_>) {
        let _serving = self.sink.enter();
        let hot = &self.hot;
        // Read after the service (still the look-up's: `_serving` kept `look_up` out).
        let counting = || {
            let shards = Shards {
                // SAFETY: a non-null `entry` comes with its shard, in the entry's counters: as
                // for `entry`.
                service: unsafe { &*hot.service_shard.get() },
                // SAFETY: non-null with the sink's buffer, in its tally's counters: as for
                // `entry`, with the tally in `cache.buffers`.
                buffer: unsafe { hot.buffer_shard.get().as_ref() },
                alone: self.lease.slot().alone,
                plain: self.plain,
            };
            (shards, self.poll_start.get())
        };
        serve_entry(entry, packet, counting);
    }

    /// [`ThreadDispatch::serve`] after pointing the scope's thread-local at this dispatcher's
    /// sink: the first packet, or one after another sink took the thread-local (another
    /// dispatcher's, or a service's dispatch through the registry itself); the sink replaced is
    /// put back after the packet if it was counting.
    #[cold]
    #[inline(never)]
    fn serve_claiming(&self, entry: &Entry, packet: &mut PacketRequest<'_>) {
        let _claim = self.sink.claim();
        self.serve(entry, packet);
    }

    /// A poll starts now: the queue wait of the packets it finds counts from here.
    pub(crate) fn poll_started(&self) {
        self.poll_start.set(NonZeroU64::new(ticks()));
    }

    /// A poll found no packet: counted in this dispatcher's shard (a listener thread counts
    /// everything it counts through its dispatcher, so it holds one shard, not two).
    pub(crate) fn empty_scan(&self) {
        self.services.events.empty_scan(self.lease.slot());
    }

    /// The registry this dispatcher serves.
    pub(crate) fn services(&self) -> &Services {
        self.services
    }
}

impl Dispatch for ThreadDispatch<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        // Acquire (in `generation`): pairs with the Release increments of `BufferTallies::changed`
        // (from `Services::insert` and `unregister`), `BufferTallies::serve` and
        // `ServedBuffer::release`, so a copy made after seeing a generation holds what that
        // generation names. (A packet submitted after a registration returned is served after it
        // anyway: the packet's own Release/Acquire hand-off orders the increment before this load.)
        let generation = self.tallies.generation();
        let (service, buffer) = (packet.service(), packet.buffer());
        let hot = &self.hot;
        if hot.generation.get() != generation || hot.service.get() != service || hot.buffer.get() != buffer {
            if self.sink.serving() != 0 {
                // Re-entered from inside a service: the copies stay as they are (the outer
                // packet points into them), and this packet is served by the registry itself.
                return self.services.dispatch(packet);
            }
            self.look_up(generation, service, buffer);
        }
        // SAFETY: a non-null `entry` points into an `Arc` of `cache.entries`, which only
        // `look_up` replaces (and sets `hot` again), and the sink's `serving`, counted from here
        // until the packet is served (`serve`), keeps `look_up` out: the `Arc` outlives this
        // reference. Served through this borrow, not a clone of the `Arc`: a clone would be an
        // atomic add on the entry's reference count, a line every thread writes.
        let Some(entry) = (unsafe { hot.entry.get().as_ref() }) else {
            return self.services.answer_unknown(packet, self.sink.buffer(), self.lease.slot());
        };
        if !self.sink.is_current() {
            return self.serve_claiming(entry, packet);
        }
        self.serve(entry, packet);
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
