//! The service registry: from a `u32` service id to the code that answers it.
//!
//! Two handler forms: a [lane handler](Services::register_lane) sees one lane's 8 request words
//! and returns its 2 reply words (or an [`ErrorCode`]); a [packet handler](PacketService) sees the
//! whole packet (all lanes at once), for services that want that (e.g. a sanitizer report handled
//! once per packet).
//!
//! What the device cannot do: make the host abort, or make it hold memory or write log lines
//! without bound. An unknown id is answered with [`ErrorCode::UnknownService`] in every lane and
//! counted in a fixed-size table (at most [`REMEMBERED_UNKNOWN_IDS`](super::REMEMBERED_UNKNOWN_IDS) ids); a handler that panics is
//! answered with [`ErrorCode::ServicePanicked`] and the listener goes on, the panic counted and
//! logged as one rate-limited record, never printed by the panic hook (`dispatch/panics.rs`: the
//! first service call installs a filtering hook in front of the process's); every warning a device
//! can trigger is rate-limited ([`crate::rate_limit`]). An error reply is `[u64::MAX, code]`,
//! except for DEVMEM, whose device code takes any non-zero word 0 as an address: there it is
//! `[0, code]` ([`error_reply`]). FUNCTION_CALL, which jumps to any address the device sends,
//! exists only after the `unsafe` [`Services::enable_function_calls`].

use hostcall_core::dispatch::serve_lanes_from;
use hostcall_core::{Dispatch, DrainError, ErrorCode, LaneService, PacketRequest, SLOT_WORDS};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::dispatch::panics::catch_service_panic;
use crate::dispatch::unknown_ids::UnknownIds;
use crate::error::Error;
use crate::observe::counters::{Counters, EventTally, Timing};
use crate::observe::histogram::ticks;
use crate::observe::scope::{Scope, Sink};
use crate::observe::{BufferTallies, BufferTally, Reason, ReasonTally, ServedBuffer, SortedTallies, Stats};
use crate::rate_limit::{error_limited, warn_limited};

/// A service that answers a whole packet at once: write a reply (or error reply) for each lane
/// in `packet.lanes()`.
pub trait PacketService: Send + Sync {
    /// Serve the packet.
    fn serve(&self, packet: &mut PacketRequest<'_>);
    /// The buffer at `buffer` (a [`PacketRequest::buffer`]) is no longer served by any listener
    /// of the registry: drop what is kept for it, so that a buffer registered later at the same
    /// address starts with nothing of it (the message services drop its open messages, DEVMEM
    /// lets go of its ownership of blocks). The default keeps nothing.
    fn forget_buffer(&self, buffer: usize) {
        let _ = buffer;
    }
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
    /// Refusals by reason, of every listener dispatching through this registry.
    reasons: ReasonTally,
    /// Its listeners' doorbell wakes, timeout polls and empty scans.
    events: EventTally,
    /// The buffers its listeners serve, with their counters.
    buffers: Arc<BufferTallies>,
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
        ThreadDispatch {
            services: self,
            cache: RefCell::new((u64::MAX, IdMap::default())),
            buffers: RefCell::new((u64::MAX, Vec::new())),
            poll_start: std::cell::Cell::new(None),
        }
    }

    /// A snapshot of the counters (see [`crate::observe`]).
    pub fn stats(&self) -> Stats {
        let entries = self.entries.read().unwrap_or_else(|p| p.into_inner());
        let (unknown_ids, unknown_ids_not_remembered) = self.unknown_ids.snapshot();
        let (refusals, log_lines_suppressed) = self.reasons.snapshot();
        Stats {
            services: entries.iter().map(|(id, e)| (*id, (e.name.clone(), e.counters.snapshot()))).collect(),
            unknown: self.unknown.snapshot(),
            unknown_ids,
            unknown_ids_not_remembered,
            // Relaxed: a statistic, like the counters; nothing is published through it.
            malformed: self.malformed.load(Ordering::Relaxed),
            refusals,
            events: self.events.snapshot(),
            log_lines_suppressed,
            buffers: self.buffers.snapshot(),
        }
    }

    /// Counts the buffer at `base` (of `protocol`, `num_packets` packets) in the per-buffer
    /// counters while the returned value lives (a listener keeps it while it serves the buffer).
    pub(crate) fn count_buffer(
        &self,
        base: usize,
        protocol: hostcall_core::Protocol,
        num_packets: u64,
    ) -> ServedBuffer {
        self.buffers.serve(base, protocol, num_packets)
    }

    /// Tells every packet service that the buffer at `base` is no longer served
    /// ([`PacketService::forget_buffer`]); a listener calls it when the last of its registrations
    /// in this registry is gone. Not under any listener lock: a service takes its own.
    pub(crate) fn forget_buffer(&self, base: usize) {
        let entries: Vec<Arc<Entry>> =
            self.entries.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for entry in entries {
            if let Handler::Packet(service) = &entry.handler {
                if let Err(panic) = catch_service_panic(|| service.forget_buffer(base)) {
                    error_limited!("service {} panicked forgetting buffer {base:#x} ({panic})", entry.name);
                }
            }
        }
    }

    /// The listener threads' event counters.
    pub(crate) fn events(&self) -> &EventTally {
        &self.events
    }

    /// Counts `n` of `reason` for the registry and for `buffer`'s counters (where the caller
    /// has no service scope: a listener answering with the shutdown error).
    pub(crate) fn count_refusal(&self, reason: Reason, n: u64, buffer: usize) {
        self.reasons.add(reason, n);
        if let Some(tally) = self.buffer_tally(buffer) {
            tally.reasons.add(reason, n);
        }
    }

    /// The tally of the buffer at `base` (a lookup under a lock; none if no buffer is counted).
    fn buffer_tally(&self, base: usize) -> Option<Arc<BufferTally>> {
        if self.buffers.is_empty() {
            return None;
        }
        self.buffers.find(base)
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

    fn answer_unknown(&self, packet: &mut PacketRequest<'_>, buffer: Option<&BufferTally>) {
        reply_error_all(packet, ErrorCode::UnknownService);
        let lanes = u64::from(packet.activemask().count_ones());
        self.unknown.count(lanes, lanes, None);
        self.reasons.add(Reason::UnknownService, lanes);
        if let Some(buffer) = buffer {
            buffer.counters.count(lanes, lanes, None);
            buffer.reasons.add(Reason::UnknownService, lanes);
        }
        self.unknown_ids.record(packet.service());
    }

    fn count_malformed(&self, buffer: usize, error: DrainError) {
        if let DrainError::Stalled { .. } = error {
            // Not malformed (a slow wave's request completes later and is served): its own count.
            self.count_refusal(Reason::StalledRequest, 1, buffer);
            warn_limited!("buffer {buffer:#x}: {error}");
            return;
        }
        // Relaxed: a statistic; nothing is published through it.
        self.malformed.fetch_add(1, Ordering::Relaxed);
        self.count_refusal(Reason::MalformedPacket, 1, buffer);
        warn_limited!("buffer {buffer:#x}: {error}");
    }
}

/// The reply words of an error for a lane of service `service`: `[ERROR_REPLY, code]`
/// ([`ErrorCode::reply`]), except for DEVMEM, `[0, code]`: ROCm's device allocator checks the
/// address for null and takes any other value, `u64::MAX` included, as memory it may use.
///
/// ```
/// use hostcall::dispatch::registry::error_reply;
/// use hostcall::core::dispatch::{DEVMEM, PRINTF};
/// use hostcall::core::ErrorCode;
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

/// Serves every active lane with `serve`: the core's [`serve_lanes_from`], with a panic guard
/// (a panic answers the lane it happened on with [`ErrorCode::ServicePanicked`] and the lanes
/// after it are served as usual; `name` names the service in the log). Returns the error count.
/// Lane handlers are served through it, and packet services that answer lane by lane (the
/// message services) use it too.
///
/// One guard a packet, not one a lane: the guard's set-up (the hook check and the thread's
/// service depth) cost every lane about 50 host instructions (callgrind, a 32-lane packet:
/// 1,600 of stack's 3,470 in `poll_once`). After a panic the lanes from the next one on are
/// served under a fresh guard.
pub(crate) fn serve_lanes_guarded(
    name: &str,
    packet: &mut PacketRequest<'_>,
    mut serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode>,
) -> u64 {
    let errors = Cell::new(0u64);
    // The lane being served: the one that panicked, when the guard catches a panic.
    let serving = Cell::new(0usize);
    let mut first = 0;
    loop {
        let served = catch_service_panic(|| {
            serve_lanes_from(packet, first, |lane, request| {
                serving.set(lane);
                let reply = serve(lane, request);
                errors.set(errors.get() + u64::from(reply.is_err()));
                reply
            })
        });
        let Err(panic) = served else { return errors.get() };
        let lane = serving.get();
        crate::observe::count(Reason::HandlerPanic);
        error_limited!("service {name} panicked on lane {lane} ({panic}); answered with an error");
        packet.reply_error(lane, ErrorCode::ServicePanicked);
        errors.set(errors.get() + 1);
        // Ends: every panic is at a lane from `first` on.
        first = lane + 1;
    }
}

/// Dispatching through the registry itself (not a listener's [`ThreadDispatch`]): the packet's
/// buffer counters are looked up under a lock (when any buffer is counted), and the queue wait is
/// not known (the registry does not see a poll start).
impl Dispatch for Services {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        let buffer = self.buffer_tally(packet.buffer());
        match self.find(packet.service()) {
            Some(entry) => serve_entry(&entry, packet, &self.reasons, buffer.as_deref(), None),
            None => self.answer_unknown(packet, buffer.as_deref()),
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.count_malformed(buffer, error);
    }
}

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
    poll_start: std::cell::Cell<Option<u64>>,
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

/// Serves a packet with a registered service and counts it: for the service (with its service
/// time, and its queue wait since `poll_start` if known) and for its buffer; refusals the service
/// counts ([`crate::observe::count`]) go to `reasons` and the buffer's.
fn serve_entry(
    entry: &Entry,
    packet: &mut PacketRequest<'_>,
    reasons: &ReasonTally,
    buffer: Option<&BufferTally>,
    poll_start: Option<u64>,
) {
    let start = ticks();
    let sink = Sink { registry: reasons, buffer };
    let scope = Scope::enter(&sink);
    let errors = match &entry.handler {
        Handler::Lane(handler) => {
            serve_lanes_guarded(&entry.name, packet, |_lane, request| handler.serve(request))
        }
        Handler::Packet(service) => {
            if let Err(panic) = catch_service_panic(|| service.serve(packet)) {
                error_limited!("service {} panicked ({panic}); packet answered with errors", entry.name);
                reply_error_all(packet, ErrorCode::ServicePanicked);
                let lanes = u64::from(packet.activemask().count_ones());
                crate::observe::scope::count_n(Reason::HandlerPanic, lanes);
                lanes
            } else {
                u64::from(packet.error_lanes())
            }
        }
    };
    drop(scope);
    let end = ticks();
    let timing = Timing {
        service: end.wrapping_sub(start),
        queue_wait: poll_start.map(|poll| start.saturating_sub(poll)),
    };
    let lanes = u64::from(packet.activemask().count_ones());
    entry.counters.count(lanes, errors, Some(timing));
    if let Some(buffer) = buffer {
        buffer.counters.count(lanes, errors, None);
    }
}
