//! The LLVM-RPC buffers a listener serves, each with its [`RpcHost`]: the calls in progress on the
//! ports this listener serves, the buffer's policy and budgets, where its output goes. Every RPC
//! buffer added to a listener gets one (its [`BufferOptions::rpc`], or the defaults), so every
//! opcode the host serves reaches it through the poller, whatever other buffers the listener
//! serves beside it.
//!
//! The poll loop is not changed: the listener thread's dispatch ([`ListenerDispatch`]) answers
//! the core's [`Dispatch::rpc_turn`] by finding the buffer's host in a small per-thread cache
//! (refreshed when a buffer is added or removed) and taking the turn under the host's own lock,
//! which nobody else takes while the buffer is served but the readers of its counters.

use crate::dispatch::registry::{Services, ThreadDispatch};
use crate::observe::Reason;
use crate::services::rpc::{RpcCounters, RpcHost, RpcOptions, SharedSink};
use hostcall_core::rpc::Turn;
use hostcall_core::{Dispatch, DrainError, PacketRequest};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a listener serves one buffer, given when it is added ([`crate::Listener::add_buffer_with`]).
///
/// ```
/// use hostcall::services::rpc::{RpcOptions, RpcPolicy};
/// use hostcall::threads::listener::BufferOptions;
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
    /// The host's counters as last turned into [`Reason`] counts.
    reported: RpcCounters,
}

impl RpcServing {
    pub(super) fn new(ports: u32, options: &RpcOptions) -> Self {
        Self { host: options.host(ports), sink: options.sink.clone(), reported: RpcCounters::default() }
    }

    /// One turn; the host's refusals since the last turn are counted for the buffer.
    fn turn(
        &mut self,
        buffer: usize,
        turn: &mut Turn<'_>,
        packets: &dyn Dispatch,
        services: &Services,
    ) -> bool {
        let (port, (_, opcode)) = (turn.port(), turn.header());
        let served = self.host.take_turn(turn, &mut self.sink, &Packets(packets));
        if !served {
            packets.malformed(buffer, DrainError::UnhandledOpcode { port, opcode });
        }
        let now = self.host.counters();
        if now != self.reported {
            let refused = now.refused_lanes - self.reported.refused_lanes;
            let over = now.over_limit_lanes - self.reported.over_limit_lanes;
            let files = now.open_files_refused - self.reported.open_files_refused;
            for (reason, n) in [
                (Reason::RpcRefused, refused),
                (Reason::RpcStreamLength, over),
                (Reason::RpcOpenFiles, files),
            ] {
                if n > 0 {
                    services.count_refusal(reason, n, buffer);
                }
            }
            self.reported = now;
        }
        served
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
type Hosts = Vec<(usize, Arc<Mutex<RpcServing>>)>;

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
        hosts.push((base, Arc::new(Mutex::new(serving))));
        // Release: pairs with the Acquire load in `ListenerDispatch::refresh`; the cache then copies
        // the list under its lock anyway.
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Forgets the buffer at `base` (once the poller no longer touches it).
    pub(super) fn remove(&self, base: usize) {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        for (_, host) in hosts.iter().filter(|(b, _)| *b == base) {
            // Files closed and calls dropped now, not when the thread's cache lets go of the host.
            host.lock().unwrap_or_else(|p| p.into_inner()).host.retire();
        }
        hosts.retain(|(b, _)| *b != base);
        // Release: as in `insert`.
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The counters of the buffer at `base`'s host, if it is an RPC buffer served here.
    pub(super) fn counters(&self, base: usize) -> Option<RpcCounters> {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        let (_, host) = hosts.iter().find(|(b, _)| *b == base)?;
        let counters = host.lock().unwrap_or_else(|p| p.into_inner()).host.counters();
        Some(counters)
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
        let (_, host) = cache.1.iter().find(|(b, _)| *b == buffer)?;
        let mut serving = host.lock().unwrap_or_else(|p| p.into_inner());
        Some(serving.turn(buffer, turn, packets, self.registry.services()))
    }
}
