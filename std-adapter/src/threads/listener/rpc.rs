//! The LLVM-RPC buffers a listener serves, each with its [`RpcHost`]: the calls in progress on the
//! ports this listener serves, the buffer's policy and budgets, where its output goes. Every RPC
//! buffer added to a listener gets one (its [`BufferOptions::rpc`], or the defaults), so every
//! opcode the host serves reaches it through the poller, whatever other buffers the listener
//! serves beside it.
//!
//! The poll loop is not changed: the listener thread's dispatch ([`ListenerDispatch`]) answers
//! the core's [`Dispatch::rpc_turn`] by finding the buffer's host in a small per-thread cache
//! (refreshed when a buffer is added or removed) and taking the turn with no lock.
//!
//! # Why a turn needs no lock
//!
//! A host ([`RpcSlot`]) is touched by turns, and once by [`RpcBuffers::remove`] (its `retire`);
//! the readers of its counters read a published copy ([`PublishedCounters`]), never the host.
//! Turns on one buffer's host never overlap, and each happens before the next: a turn is taken
//! only inside a drain of the buffer by the poller it is registered with (the core calls
//! `rpc_turn` from `Poller::poll_once` alone); one poller's polls are serialised by its poll
//! lock; and one poller drains a buffer at a time, the contract of `Served::register` (which the
//! line buffers' incomplete-request memory relies on too): a buffer moves to another thread's
//! poller only while its old thread is inside a stuck call of another buffer and will drain no
//! other buffer again (`watch.rs`), the move ordered after that thread's last drain by the
//! watch's Release/Acquire, or back through `relay::hand_back` once that thread's poll ended.
//! `remove` comes after the buffer's removal from the poller that drains it (whose `remove`
//! waits for the poll in progress), or after its thread ended. So no lock is taken on a turn: a
//! `Mutex` there would put locked instructions between the reply words and the mailbox flip, and
//! make a reader of the counters wait for a stuck turn.

use crate::dispatch::registry::{Services, ThreadDispatch};
use crate::observe::Reason;
use crate::services::held::HeldAccount;
use crate::services::rpc::{RpcCounters, RpcHost, RpcOptions, SharedSink};
use hostcall_core::rpc::Turn;
use hostcall_core::{Dispatch, DrainError, PacketRequest};
use std::cell::{RefCell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a listener serves one buffer, given when it is added ([`crate::BufferRegistration::with_options`]).
///
/// ```
/// use hostcall::services::rpc::{RpcOptions, RpcPolicy};
/// use hostcall::BufferOptions;
/// let options = BufferOptions::default().with_rpc(RpcOptions::default().with_policy(RpcPolicy::none()));
/// assert_eq!(options.rpc.policy, RpcPolicy::none());
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct BufferOptions {
    /// For an LLVM-RPC buffer: its policy, budgets and output (ignored for the other protocols).
    pub rpc: RpcOptions,
}

setters!(BufferOptions {
    with_rpc: rpc: RpcOptions,
});

/// One RPC buffer's host, as one listener serves it (all its ports, or a pool's stripe of them).
pub(super) struct RpcServing {
    host: RpcHost,
    sink: SharedSink,
    /// The host's refusal counters (refused lanes, over-limit lanes, refused opens, lanes over
    /// the held budget) as last turned into [`Reason`] counts.
    reported: [u64; 4],
}

impl RpcServing {
    /// The host of a buffer of `ports` ports served as `options` say, its held bytes charged to
    /// `all` too (the registry's account of every RPC buffer).
    pub(super) fn new(ports: u32, options: &RpcOptions, all: Arc<HeldAccount>) -> Self {
        Self { host: options.host(ports, all), sink: options.sink.clone(), reported: [0; 4] }
    }

    /// One turn; the host's refusals since the last turn are counted for the buffer, and its
    /// counters published to `published`.
    fn turn(
        &mut self,
        buffer: usize,
        turn: &mut Turn<'_>,
        packets: &dyn Dispatch,
        services: &Services,
        published: &PublishedCounters,
    ) -> bool {
        let (port, (_, opcode)) = (turn.port(), turn.header());
        let served = self.host.take_turn(turn, &mut self.sink, &Packets(packets));
        if !served {
            packets.malformed(buffer, DrainError::UnhandledOpcode { port, opcode });
        }
        let counters = self.host.counters();
        published.publish(&counters);
        let now = [
            counters.refused_lanes,
            counters.over_limit_lanes,
            counters.open_files_refused,
            counters.held_refused_lanes,
        ];
        // Only when a refusal was counted (rare): most turns change only the turn and call counts.
        if now != self.reported {
            let reasons =
                [Reason::RpcRefused, Reason::RpcStreamLength, Reason::RpcOpenFiles, Reason::HeldBytes];
            for ((reason, now), before) in reasons.into_iter().zip(now).zip(self.reported) {
                if now > before {
                    services.count_refusal(reason, now - before, buffer);
                }
            }
            self.reported = now;
        }
        served
    }
}

/// One RPC buffer's host in a listener, found by every thread of the listener by base address,
/// used by one at a time (see the module docs: why a turn needs no lock).
pub(super) struct RpcSlot {
    /// The host: touched by turns and by [`RpcBuffers::remove`] alone.
    serving: UnsafeCell<RpcServing>,
    /// Its counters as of its last turn, for [`RpcBuffers::counters`].
    published: PublishedCounters,
}

// SAFETY: `serving` is accessed by one thread at a time, each access ordered after the one before
// (the module docs); `RpcServing` is `Send`, so moving that access between threads is sound. The
// rest is atomics.
unsafe impl Sync for RpcSlot {}

/// An [`RpcCounters`] written by the thread taking turns, read by any: one word each, stored
/// after every turn.
#[derive(Default)]
pub(super) struct PublishedCounters([AtomicU64; 10]);

impl PublishedCounters {
    fn publish(&self, c: &RpcCounters) {
        let words = [
            c.turns,
            c.calls,
            c.calls_done,
            c.unhandled,
            c.refused_lanes,
            c.over_limit_lanes,
            c.open_files_refused,
            c.held_refused_lanes,
            c.deferred_turns,
            c.held_bytes,
        ];
        for (word, value) in self.0.iter().zip(words) {
            // Relaxed: statistics with one writer; a reader that saw a turn's reply (the mailbox
            // flip, a Release store after this) sees them.
            word.store(value, Ordering::Relaxed);
        }
    }

    fn read(&self) -> RpcCounters {
        // Relaxed: as in `publish`.
        let [turns, calls, calls_done, unhandled, refused_lanes, over_limit_lanes, open_files_refused, held_refused_lanes, deferred_turns, held_bytes] =
            self.0.each_ref().map(|word| word.load(Ordering::Relaxed));
        RpcCounters {
            turns,
            calls,
            calls_done,
            unhandled,
            refused_lanes,
            over_limit_lanes,
            open_files_refused,
            held_refused_lanes,
            deferred_turns,
            held_bytes,
        }
    }
}

/// The core's `&dyn Dispatch` as the `Dispatch + Sized` the host's generic calls take.
struct Packets<'d>(&'d dyn Dispatch);

impl Dispatch for Packets<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.0.dispatch(packet);
    }
    fn malformed(&self, buffer: usize, error: DrainError) {
        self.0.malformed(buffer, error);
    }
}

/// Each RPC buffer's host, by base address.
type Hosts = Vec<(usize, Arc<RpcSlot>)>;

/// The RPC buffers a listener serves, by base address.
#[derive(Default)]
pub(super) struct RpcBuffers {
    /// Bumped at every insert and remove, so the thread's cache knows to refresh.
    version: AtomicU64,
    hosts: Mutex<Hosts>,
}

impl RpcBuffers {
    pub(super) fn insert(&self, base: usize, serving: RpcServing) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts.retain(|(b, _)| *b != base);
        let published = PublishedCounters::default();
        hosts.push((base, Arc::new(RpcSlot { serving: UnsafeCell::new(serving), published })));
        // Release: pairs with the Acquire load in `ListenerDispatch::refresh`; the cache then copies
        // the list under its lock anyway.
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Forgets the buffer at `base`: once no poller of the listener drains it (removed from the
    /// poller that drained it, or that poller's thread ended), or before any did.
    pub(super) fn remove(&self, base: usize) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        for (_, slot) in hosts.iter().filter(|(b, _)| *b == base) {
            // SAFETY: no turn on it runs now or later (this function's contract), and the last one
            // happened before: the removal from its poller waited for its unpin (Release/Acquire).
            let serving = unsafe { &mut *slot.serving.get() };
            // Files closed and calls dropped now, not when the thread's cache lets go of the host.
            serving.host.retire();
        }
        hosts.retain(|(b, _)| *b != base);
        // Release: as in `insert`.
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The counters of the buffer at `base`'s host, if it is an RPC buffer served here.
    pub(super) fn counters(&self, base: usize) -> Option<RpcCounters> {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        let (_, slot) = hosts.iter().find(|(b, _)| *b == base)?;
        Some(slot.published.read())
    }
}

/// The listener thread's dispatch: its registry's, and the RPC buffers' hosts.
pub(super) struct ListenerDispatch<'a> {
    registry: ThreadDispatch<'a>,
    rpc: &'a RpcBuffers,
    /// The version of `rpc` copied, and the copy.
    cache: RefCell<(u64, Hosts)>,
}

impl<'a> ListenerDispatch<'a> {
    pub(super) fn new(registry: ThreadDispatch<'a>, rpc: &'a RpcBuffers) -> Self {
        Self { registry, rpc, cache: RefCell::new((u64::MAX, Vec::new())) }
    }

    /// The registry's dispatch.
    pub(super) fn registry(&self) -> &ThreadDispatch<'a> {
        &self.registry
    }

    /// Copies the list of hosts again if a buffer was added or removed since the last copy.
    fn refresh(&self) {
        // Acquire: pairs with the Release increments of `RpcBuffers`.
        let version = self.rpc.version.load(Ordering::Acquire);
        if self.cache.borrow().0 != version {
            let hosts = self.rpc.hosts.lock().unwrap_or_else(|p| p.into_inner());
            *self.cache.borrow_mut() = (version, hosts.clone());
        }
    }
}

impl Dispatch for ListenerDispatch<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.registry.dispatch(packet);
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.registry.malformed(buffer, error);
    }

    fn rpc_turn(&self, buffer: usize, turn: &mut Turn<'_>, packets: &dyn Dispatch) -> Option<bool> {
        self.refresh();
        let cache = self.cache.borrow();
        let (_, slot) = cache.1.iter().find(|(b, _)| *b == buffer)?;
        // SAFETY: this is a turn of a drain of `buffer` by the one poller that drains it, so no
        // other access to the host overlaps it and the ones before happened before it (the
        // module docs).
        let serving = unsafe { &mut *slot.serving.get() };
        Some(serving.turn(buffer, turn, packets, self.registry.services(), &slot.published))
    }
}
