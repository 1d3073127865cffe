//! The LLVM-RPC buffers' hosts: every RPC buffer a listener serves gets its [`RpcServing`] (its
//! [`BufferOptions::rpc`]'s `RpcHost`, the calls in progress on the ports this listener serves,
//! the buffer's policy and budgets, where its output goes), owned by the buffer's entry
//! (`Served`, `buffers.rs`, as [`RpcState`]) at a stable address and handed to the buffer's
//! poller registration as its host state (the core's [`Calls`]). The poller's drain of the buffer
//! takes every turn through it; nothing of the listener looks a host up.
//!
//! A turn that is a whole call of one hostcall packet (an `'r'` or `'h'` opcode beginning a call)
//! is served as any packet of the drain ([`DrainHandler::serve`]): the listener's stuck-call watch
//! sees the packet's call, named by its service. Any other turn runs as one piece of the host's
//! own work ([`DrainHandler::own_work`]), named by the hostcall service its opcode carries, or
//! else by the opcode: the watch sees it as one call, its console writes, file calls and
//! allocations (and the packets those serve) inside it, once.
//!
//! # Why a turn needs no lock
//!
//! A host is touched by turns, and once when its entry lets go of it ([`RpcState`]'s drop, which
//! retires it); the readers of its counters read a published copy ([`PublishedCounters`], in an
//! allocation of its own), never the host. Turns on one buffer's host never overlap, and each
//! happens before the next: a turn is taken only inside a drain of the buffer by a poller it is
//! registered with (the registration's state is used by nothing else, the contract of
//! `Registration::with_state`); one poller's polls are serialised by its poll lock; and one
//! poller drains a buffer at a time, the contract of `Served::register`: a buffer moves to
//! another thread's poller, its state with its registration, only while its old thread is inside
//! a stuck call of another buffer and will drain no other buffer again (`watch.rs`), the move
//! ordered after that thread's last drain by the watch's Release/Acquire, or back through
//! `relay::hand_back` once that thread's poll ended. The entry lets go of the host after the
//! buffer's removal from the poller that drains it (whose `remove` waits for the poll in
//! progress), or after its thread ended. The same argument holds for a line buffer's memory of
//! incomplete requests, which the entry owns beside it. So no lock is taken on a turn: a `Mutex`
//! there would put locked instructions between the reply words and the mailbox flip, and make a
//! reader of the counters wait for a stuck turn.

use crate::dispatch::registry::Services;
use crate::observe::Reason;
use crate::services::rpc::{RpcCounters, RpcHost, RpcOptions, SharedSink};
use hostcall_core::rpc::{service_of, Calls, Turn};
use hostcall_core::{AnyState, DrainHandler};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    /// The buffer's base address (its refusals are counted for it).
    buffer: usize,
    /// The registry the refusals are counted in.
    services: Arc<Services>,
    /// The counters as of the last turn, for readers on any thread.
    published: Arc<PublishedCounters>,
}

impl RpcServing {
    /// The refusals since the last turn counted for the buffer, and the counters published.
    fn account(&mut self) {
        let (counters, refused) = self.host.counters_after_turn();
        self.published.publish(counters);
        // Only when the turn counted a refusal (rare): most turns change only the turn and call
        // counts.
        if refused {
            let now = counters.refusals();
            let reasons =
                [Reason::RpcRefused, Reason::RpcStreamLength, Reason::RpcOpenFiles, Reason::HeldBytes];
            for ((reason, now), before) in reasons.into_iter().zip(now).zip(self.reported) {
                if now > before {
                    self.services.count_refusal(reason, now - before, self.buffer);
                }
            }
            self.reported = now;
        }
    }
}

impl Calls for RpcServing {
    /// One turn: a whole hostcall packet's call served as a packet, any other run as one piece of
    /// the host's own work (see the module docs); the host's refusals since the last turn are
    /// counted for the buffer, and its counters published.
    fn turn(&mut self, turn: &mut Turn<'_>, packets: &mut dyn DrainHandler) -> Option<u32> {
        let (mask, opcode) = turn.header();
        let service = service_of(opcode);
        // A whole hostcall packet's call is the packet's own call: served (and watched) as any
        // packet of the drain, with no own work around it.
        if let Some(service) = service {
            if let Some(lanes) = self.host.packet_turn(turn, mask, service, packets) {
                // It refused nothing and holds nothing: only the turn counts changed.
                self.published.publish_turn_counts(self.host.counters_after_turn().0);
                return Some(lanes);
            }
        }
        let (host, sink) = (&mut self.host, &mut self.sink);
        let mut served = None;
        packets.own_work(service.unwrap_or(opcode), &mut |serve| {
            served = host.take_call_turn(turn, sink, &mut &mut *serve);
        });
        self.account();
        served
    }
}

/// An RPC buffer's host as its entry in the listener owns it: the [`RpcServing`] at a stable
/// address, which the buffer's poller registration points to (its host state), and the counters
/// it publishes. Held as a pointer (a `Box` moved into a map would claim unique access to what
/// the poller reaches through the registration); retired and freed on drop, which comes only
/// after the pollers let go of it (see the module docs).
pub(super) struct RpcState {
    serving: NonNull<RpcServing>,
    published: Arc<PublishedCounters>,
}

impl RpcState {
    /// The host of the RPC buffer at `buffer`, of `ports` ports, served as `options` say, its
    /// refusals counted in `services` (and its held bytes charged to its account of every RPC
    /// buffer).
    pub(super) fn new(buffer: usize, ports: u32, options: &RpcOptions, services: &Arc<Services>) -> Self {
        let published = Arc::new(PublishedCounters::default());
        let serving = Box::new(RpcServing {
            host: options.host(ports, services.rpc_held()),
            sink: options.sink.clone(),
            reported: [0; 4],
            buffer,
            services: services.clone(),
            published: published.clone(),
        });
        Self { serving: NonNull::from(Box::leak(serving)), published }
    }

    /// The host state to register the buffer with.
    pub(super) fn state(&self) -> AnyState {
        AnyState::Rpc(self.serving)
    }

    /// The counters as of the host's last turn.
    pub(super) fn counters(&self) -> RpcCounters {
        self.published.read()
    }
}

impl Drop for RpcState {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`; no poller drains the buffer any more, and the
        // last turn happened before this (see the type's docs).
        let mut serving = unsafe { Box::from_raw(self.serving.as_ptr()) };
        // Files closed (also those other hosts of the buffer's ports share) and calls dropped.
        serving.host.retire();
    }
}

/// `RpcState` is `Send` as `RpcServing` is: asserted here.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<RpcServing>();
};

// SAFETY: the host is touched by one thread at a time, each access ordered after the one before
// (the module docs), and `RpcServing` is `Send` (asserted above), so moving that access, or the
// drop, to another thread is sound. The rest is an `Arc` of atomics.
unsafe impl Send for RpcState {}

/// An [`RpcCounters`] written by the thread taking turns, read by any: one word each, stored
/// after every turn.
#[derive(Default)]
pub(super) struct PublishedCounters([AtomicU64; 10]);

/// Where [`PublishedCounters::publish`] stores each count of a turn that refuses nothing and holds
/// nothing (a whole hostcall packet's call): turns, calls begun, calls done, deferred turns.
const TURN_COUNTS: [usize; 4] = [0, 1, 2, 8];

impl PublishedCounters {
    /// Stores only the counts a turn that refuses nothing and holds nothing changes (the
    /// others are as the last [`PublishedCounters::publish`] stored them).
    #[inline]
    fn publish_turn_counts(&self, c: &RpcCounters) {
        let counts = [c.turns, c.calls, c.calls_done, c.deferred_turns];
        for (at, value) in TURN_COUNTS.into_iter().zip(counts) {
            // Relaxed: as in `publish`.
            self.0[at].store(value, Ordering::Relaxed);
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts a packet turn publishes land where `publish` puts them, and only those move.
    #[test]
    fn turn_counts_are_published_in_their_own_words() {
        let published = PublishedCounters::default();
        let mut counters = RpcCounters {
            turns: 1,
            calls: 2,
            calls_done: 3,
            unhandled: 4,
            refused_lanes: 5,
            over_limit_lanes: 6,
            open_files_refused: 7,
            held_refused_lanes: 8,
            deferred_turns: 9,
            held_bytes: 10,
        };
        published.publish(&counters);
        assert_eq!(published.read(), counters);
        counters.turns += 100;
        counters.calls += 200;
        counters.calls_done += 300;
        counters.deferred_turns += 400;
        published.publish_turn_counts(&counters);
        assert_eq!(published.read(), counters);
    }
}
