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
//! first service call or dispatcher installs a filtering hook in front of the process's); every warning a device
//! can trigger is rate-limited ([`crate::rate_limit`]). An error reply is `[u64::MAX, code]`,
//! except for DEVMEM, whose device code takes any non-zero word 0 as an address: there it is
//! `[0, code]` ([`error_reply`]). FUNCTION_CALL, which jumps to any address the device sends,
//! exists only after the `unsafe` [`Services::enable_function_calls`].
//!
//! Here: the registry ([`Services`]) and its entries. `registry/thread.rs`: [`ThreadDispatch`],
//! a listener thread's cached view of it. `registry/serve.rs`: serving one packet with an entry
//! (the panic guard, the counting) and the error replies ([`error_reply`], [`reply_error_all`]).

use hostcall_core::{Dispatch, DrainError, ErrorCode, LaneService, PacketRequest, SLOT_WORDS};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::dispatch::panics::catch_service_panic;
use crate::dispatch::unknown_ids::UnknownIds;
use crate::error::Error;
use crate::observe::counters::{thread_slot, Counters, EventTally, ShardSlot};
use crate::observe::scope::{Scope, Sink};
use crate::observe::{BufferTallies, BufferTally, Reason, ReasonTally, ServedBuffer, Stats};
use crate::rate_limit::{error_limited, warn_limited};
use serve::{serve_entry, Shards};

mod serve;
#[cfg(test)]
mod tests;
mod thread;

pub use serve::error_reply;
pub(crate) use serve::reply_error_all;
pub(crate) use serve::serve_lanes_guarded;
pub use thread::ThreadDispatch;

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
    /// Every change of it is a new generation of `buffers` ([`BufferTallies::changed`]), so
    /// [`ThreadDispatch`] caches know to refresh.
    entries: RwLock<IdMap<Arc<Entry>>>,
    unknown: Counters,
    unknown_ids: UnknownIds,
    malformed: AtomicU64,
    /// Refusals by reason, of every listener dispatching through this registry.
    reasons: ReasonTally,
    /// Its listeners' doorbell wakes, timeout polls and empty scans.
    events: EventTally,
    /// The buffers its listeners serve, with their counters.
    buffers: Arc<BufferTallies>,
    /// Bytes the LLVM-RPC calls in progress of every buffer its listeners serve hold
    /// (`RpcLimits::max_held_bytes` bounds it).
    rpc_held: Arc<crate::services::held::HeldAccount>,
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

    /// The account of the bytes the LLVM-RPC calls in progress hold, on every buffer of this
    /// registry's listeners (each buffer's host charges it).
    pub(crate) fn rpc_held(&self) -> Arc<crate::services::held::HeldAccount> {
        self.rpc_held.clone()
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
        self.buffers.changed();
        removed
    }

    /// A dispatcher for one listener thread: it caches the registry's entries and refreshes them
    /// only when a service is registered or removed, so threads serving packets in parallel
    /// share no written cache line on the way to a handler (the registry's lock and the
    /// entries' reference counts would be such lines). Dispatches exactly like `Services`.
    pub fn dispatcher(&self) -> ThreadDispatch<'_> {
        ThreadDispatch::new(self)
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
        self.buffers.changed();
        Ok(())
    }

    fn find(&self, id: u32) -> Option<Arc<Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    /// Answers a packet for an unknown service and counts it, in `slot`'s shards.
    fn answer_unknown(&self, packet: &mut PacketRequest<'_>, buffer: Option<&BufferTally>, slot: ShardSlot) {
        reply_error_all(packet, ErrorCode::UnknownService);
        let lanes = u64::from(packet.activemask().count_ones());
        self.unknown.shard(slot).count(lanes, lanes, None, slot.alone);
        self.reasons.add(Reason::UnknownService, lanes);
        if let Some(buffer) = buffer {
            buffer.counters.shard(slot).count(lanes, lanes, None, slot.alone);
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

/// Dispatching through the registry itself (not a listener's [`ThreadDispatch`]): the packet's
/// buffer counters are looked up under a lock (when any buffer is counted), and the queue wait is
/// not known (the registry does not see a poll start).
impl Dispatch for Services {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        // The serving path's guard relies on it (`ThreadDispatch::new` installs it once).
        crate::dispatch::panics::install_filter();
        let buffer = self.buffer_tally(packet.buffer());
        let slot = thread_slot();
        match self.find(packet.service()) {
            Some(entry) => {
                let shards = Shards {
                    service: entry.counters.shard(slot),
                    buffer: buffer.as_deref().map(|tally| tally.counters.shard(slot)),
                    alone: slot.alone,
                    plain: Shards::plain(slot.alone),
                };
                let sink = Sink::new(&self.reasons, buffer.as_deref());
                let _scope = Scope::enter(&sink);
                serve_entry(&entry, packet, || (shards, None))
            }
            None => self.answer_unknown(packet, buffer.as_deref(), slot),
        }
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.count_malformed(buffer, error);
    }
}
