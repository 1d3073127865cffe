//! The service registry: from a `u32` service id to the code that answers it.
//!
//! Two handler forms: a [lane handler](Services::register_lane) sees one lane's 8 request words
//! and returns its 2 reply words (or an [`ErrorCode`]); a [packet handler](PacketService) sees the
//! whole packet (all lanes at once), for services that want that (e.g. a sanitizer report handled
//! once per packet).
//!
//! What the device cannot do: make the host abort, or make it hold memory or write log lines
//! without bound. An unknown id is answered with [`ErrorCode::UnknownService`] in every lane and
//! counted in a fixed-size table ([`unknown_ids`](super::unknown_ids)); a handler that panics is
//! answered with [`ErrorCode::ServicePanicked`] and the listener goes on; every warning a device
//! can trigger is rate-limited ([`crate::rate_limit`]). An error reply is `[u64::MAX, code]`,
//! except for DEVMEM, whose device code takes any non-zero word 0 as an address: there it is
//! `[0, code]` ([`error_reply`]). FUNCTION_CALL, which jumps to any address the device sends,
//! exists only after the `unsafe` [`Services::enable_function_calls`].

use hostcall_core::dispatch::serve_lanes;
use hostcall_core::{Dispatch, DrainError, ErrorCode, LaneService, PacketRequest, SLOT_WORDS};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::dispatch::unknown_ids::UnknownIds;
use crate::error::Error;
use crate::rate_limit::{error_limited, warn_limited};

/// A service that answers a whole packet at once: write a reply (or error reply) for each lane
/// in `packet.lanes()`.
pub trait PacketService: Send + Sync {
    /// Serve the packet.
    fn serve(&self, packet: &mut PacketRequest<'_>);
}

enum Handler {
    Lane(Box<dyn LaneService>),
    Packet(Box<dyn PacketService>),
}

struct Entry {
    name: String,
    handler: Handler,
    counters: Counters,
}

/// Counters of one service (or of the unknown ids, or of everything), in [`COUNTER_SHARDS`]
/// shards on separate cache lines: each listener thread adds to its own shard, so several threads
/// serving packets of one service do not fight over one line; a snapshot sums the shards.
struct Counters {
    shards: Box<[Shard]>,
}

/// Shards per counter set; threads beyond it share shards (still correct, just contended).
const COUNTER_SHARDS: usize = 16;

/// One thread's share of a service's counters, alone on its (pair of) cache lines.
#[derive(Default)]
#[repr(align(128))]
struct Shard {
    packets: AtomicU64,
    lane_calls: AtomicU64,
    errors: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Self { shards: (0..COUNTER_SHARDS).map(|_| Shard::default()).collect() }
    }
}

/// This thread's shard index, handed out round robin on first use.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: a counter handing out distinct-ish numbers; nothing is published through it.
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % COUNTER_SHARDS;
    }
    SHARD.with(|shard| *shard)
}

impl Counters {
    fn count(&self, packet: &PacketRequest<'_>, errors: u64) {
        let shard = &self.shards[shard_index()];
        // Relaxed: statistics only; no other memory is published through them. A wave that got
        // its reply still sees them counted: the host's Release store of the reply's phase (or
        // READY clear) comes after these adds.
        shard.packets.fetch_add(1, Ordering::Relaxed);
        shard.lane_calls.fetch_add(u64::from(packet.activemask().count_ones()), Ordering::Relaxed);
        if errors != 0 {
            shard.errors.fetch_add(errors, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> ServiceStats {
        let mut total = ServiceStats::default();
        for shard in self.shards.iter() {
            // Relaxed: statistics, see `count`.
            total.packets += shard.packets.load(Ordering::Relaxed);
            total.lane_calls += shard.lane_calls.load(Ordering::Relaxed);
            total.errors += shard.errors.load(Ordering::Relaxed);
        }
        total
    }
}

/// What one service (or all of them) did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Packets dispatched.
    pub packets: u64,
    /// Lanes over those packets.
    pub lane_calls: u64,
    /// Lanes answered with an error reply.
    pub errors: u64,
}

/// Counters of a listener's services.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Per registered service id: its name and counters.
    pub services: BTreeMap<u32, (String, ServiceStats)>,
    /// Packets whose service id was not registered.
    pub unknown: ServiceStats,
    /// The first [`REMEMBERED_UNKNOWN_IDS`](super::unknown_ids::REMEMBERED_UNKNOWN_IDS) distinct
    /// unknown service ids seen, with their packet counts.
    pub unknown_ids: BTreeMap<u32, u64>,
    /// Packets of unknown ids seen after that table was full (not remembered one by one).
    pub unknown_ids_not_remembered: u64,
    /// Malformed shared state found (broken chains, packets without READY).
    pub malformed: u64,
}

impl Stats {
    /// Everything together.
    pub fn total(&self) -> ServiceStats {
        let mut total = self.unknown;
        for (_, s) in self.services.values() {
            total.packets += s.packets;
            total.lane_calls += s.lane_calls;
            total.errors += s.errors;
        }
        total
    }
}

/// Hashes a service id with one multiply, for the lookup each packet pays. The default SipHash
/// guards a table against keys chosen to collide; here only the host inserts keys (`register_*`)
/// and the device only looks ids up, so a device cannot make the table degrade.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        // Fibonacci hashing: the multiply spreads the id into the high bits (the table's tag
        // bits); folding them down spreads it into the low bits (the bucket index).
        let h = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// The registry a listener dispatches through.
#[derive(Default)]
pub struct Services {
    entries: RwLock<IdMap<Arc<Entry>>>,
    /// Bumped on every change of `entries`, so [`ThreadDispatch`] caches know to refresh.
    generation: AtomicU64,
    unknown: Counters,
    unknown_ids: UnknownIds,
    malformed: AtomicU64,
}

/// The registered services, by id with their names, in id order.
impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        let names: BTreeMap<u32, &str> = entries.iter().map(|(&id, e)| (id, e.name.as_str())).collect();
        f.debug_struct("Services").field("services", &names).finish_non_exhaustive()
    }
}

impl Services {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a lane handler under `id`: any closure of the core's [`LaneService`] shape (the
    /// one lane-service type; the bound is spelled out so closures infer their argument type).
    /// `Err` if the id is taken.
    pub fn register_lane(
        &self,
        id: u32,
        name: &str,
        handler: impl Fn(&[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        self.insert(id, name, Handler::Lane(Box::new(handler)))
    }

    /// Registers a packet handler under `id`. `Err` if the id is taken.
    pub fn register_packet(
        &self,
        id: u32,
        name: &str,
        service: impl PacketService + 'static,
    ) -> Result<(), Error> {
        self.insert(id, name, Handler::Packet(Box::new(service)))
    }

    /// Removes the service under `id`; later packets for it get [`ErrorCode::UnknownService`].
    pub fn unregister(&self, id: u32) -> bool {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        let removed = entries.remove(&id).is_some();
        // Release: pairs with the Acquire load in `ThreadDispatch::entry`.
        self.generation.fetch_add(1, Ordering::Release);
        removed
    }

    /// A dispatcher for one listener thread: it caches the registry's entries and refreshes them
    /// only when a service is registered or removed, so threads serving packets in parallel
    /// share no written cache line on the way to a handler (the registry's lock and the
    /// entries' reference counts would be such lines). Dispatches exactly like `Services`.
    pub fn dispatcher(&self) -> ThreadDispatch<'_> {
        ThreadDispatch { services: self, cache: RefCell::new((u64::MAX, IdMap::default())) }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        let (unknown_ids, unknown_ids_not_remembered) = self.unknown_ids.snapshot();
        Stats {
            services: entries.iter().map(|(id, e)| (*id, (e.name.clone(), e.counters.snapshot()))).collect(),
            unknown: self.unknown.snapshot(),
            unknown_ids,
            unknown_ids_not_remembered,
            // Relaxed: a statistic, like the counters; nothing is published through it.
            malformed: self.malformed.load(Ordering::Relaxed),
        }
    }

    fn insert(&self, id: u32, name: &str, handler: Handler) -> Result<(), Error> {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if entries.contains_key(&id) {
            return Err(Error::ServiceTaken(id));
        }
        entries.insert(id, Arc::new(Entry { name: name.to_owned(), handler, counters: Counters::default() }));
        // Release: pairs with the Acquire load in `ThreadDispatch::entry`.
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    fn find(&self, id: u32) -> Option<Arc<Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    fn answer_unknown(&self, packet: &mut PacketRequest<'_>) {
        reply_error_all(packet, ErrorCode::UnknownService);
        self.unknown.count(packet, u64::from(packet.activemask().count_ones()));
        self.unknown_ids.record(packet.service());
    }
}

/// The reply words of an error for a lane of service `service`: `[ERROR_REPLY, code]`
/// ([`ErrorCode::reply`]), except for DEVMEM, `[0, code]`: ROCm's device allocator checks the
/// address for null and takes any other value, `u64::MAX` included, as memory it may use.
///
/// ```
/// use hostcall::dispatch::registry::error_reply;
/// use hostcall::core::dispatch::{ErrorCode, DEVMEM, PRINTF};
/// assert_eq!(error_reply(PRINTF, ErrorCode::Refused), [u64::MAX, 4]);
/// assert_eq!(error_reply(DEVMEM, ErrorCode::Refused), [0, 4]);
/// ```
pub fn error_reply(service: u32, code: ErrorCode) -> [u64; 2] {
    // The core's rule, which `PacketRequest::reply_error` (lane handlers' errors) applies too.
    code.reply_for(service)
}

/// Answers every active lane of `packet` with [`error_reply`] for its service, flagging the packet.
pub fn reply_error_all(packet: &mut PacketRequest<'_>, code: ErrorCode) {
    let reply = error_reply(packet.service(), code);
    for lane in packet.lanes() {
        packet.reply_with_error(lane, reply);
    }
}

/// Serves every active lane with `serve`: the core's [`serve_lanes`], with a panic guard around
/// each lane's call (a panic answers that lane with [`ErrorCode::ServicePanicked`]; `name` names
/// the service in the log). Returns the error count. Lane handlers are served through it, and
/// packet services that answer lane by lane (the message services) use it too.
pub(crate) fn serve_lanes_guarded(
    name: &str,
    packet: &mut PacketRequest<'_>,
    mut serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode>,
) -> u64 {
    let errors = serve_lanes(packet, |lane, request| {
        catch_unwind(AssertUnwindSafe(|| serve(lane, request))).unwrap_or_else(|_| {
            error_limited!("service {name} panicked on lane {lane}; answered with an error");
            Err(ErrorCode::ServicePanicked)
        })
    });
    u64::from(errors)
}

impl Dispatch for Services {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        match self.find(packet.service()) {
            Some(entry) => serve_entry(&entry, packet),
            None => self.answer_unknown(packet),
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        // Relaxed: a statistic; nothing is published through it.
        self.malformed.fetch_add(1, Ordering::Relaxed);
        warn_limited!("buffer {buffer:#x}: {error}");
    }
}

/// One listener thread's view of a [`Services`] registry (see [`Services::dispatcher`]). Not
/// `Sync`: each thread makes its own.
pub struct ThreadDispatch<'a> {
    services: &'a Services,
    /// The registry's generation when last copied, and the copy.
    cache: RefCell<(u64, IdMap<Arc<Entry>>)>,
}

impl ThreadDispatch<'_> {
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
    }
}

impl Dispatch for ThreadDispatch<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.refresh();
        // Served through a borrow of the cached `Arc`, not a clone of it: a clone would be an
        // atomic add on the entry's reference count, a line every thread writes. (Handlers cannot
        // dispatch, so nothing borrows the cache mutably meanwhile.)
        let cache = self.cache.borrow();
        match cache.1.get(&packet.service()) {
            Some(entry) => serve_entry(entry, packet),
            None => {
                drop(cache);
                self.services.answer_unknown(packet)
            }
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.services.malformed(buffer, error);
    }
}

impl std::fmt::Debug for ThreadDispatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadDispatch").finish_non_exhaustive()
    }
}

/// Serves a packet with a registered service and counts it.
fn serve_entry(entry: &Entry, packet: &mut PacketRequest<'_>) {
    let errors = match &entry.handler {
        Handler::Lane(handler) => {
            serve_lanes_guarded(&entry.name, packet, |_lane, request| handler.serve(request))
        }
        Handler::Packet(service) => {
            if catch_unwind(AssertUnwindSafe(|| service.serve(packet))).is_err() {
                error_limited!("service {} panicked; packet answered with errors", entry.name);
                reply_error_all(packet, ErrorCode::ServicePanicked);
                u64::from(packet.activemask().count_ones())
            } else {
                u64::from(packet.has_error())
            }
        }
    };
    entry.counters.count(packet, errors);
}
