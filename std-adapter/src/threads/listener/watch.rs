//! The call in progress on a listener thread, as its watchdog sees it: [`CallWatch`], written by
//! the thread around every packet it dispatches ([`Watched`]), read by the watchdog
//! (`relay.rs`), which marks a call that has run too long as reported and, to hand the thread's
//! other buffers to a new thread, as abandoned.
//!
//! # Who writes what
//!
//! | word | written by | when |
//! | --- | --- | --- |
//! | `state`: 0, or the call's sequence number (low 62 bits) and two flags | the thread (`begin`: store; `end`: swap to 0) | around each packet's dispatch, and around each piece of a host's own work (an LLVM-RPC turn, the packets it serves inside it) |
//! | `state`'s `REPORTED` and `ABANDONED` bits | the watchdog (compare-exchange from the value it saw) | while that very call runs |
//! | `service`, `buffer` | the thread, before `begin`'s store | each call |
//!
//! The handshake: the watchdog sets a flag only with a compare-exchange from the value `begin`
//! stored, so it succeeds only while that call is still running; the thread's `end` is a swap, so
//! it reads every flag the watchdog set before it. A thread whose `end` reads `ABANDONED` drains
//! no other buffer after that call (its [`Watched::proceed`] says no, and its loop stops): the
//! buffers the watchdog gave to another thread are never drained by two. The cost on the thread,
//! per packet: two plain stores and one uncontended swap (no clock read, no syscall).

use crate::dispatch::registry::ThreadDispatch;
use hostcall_core::{Dispatch, DrainError, OwnWork, PacketRequest};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The watchdog reported this call as stuck (counted once, warned about).
pub(super) const REPORTED: u64 = 1 << 62;
/// The watchdog gave this thread's other buffers to another thread while this call ran.
pub(super) const ABANDONED: u64 = 1 << 63;
/// The sequence bits of `state`.
const SEQUENCE: u64 = REPORTED - 1;

/// One listener thread's call in progress (see the module docs).
#[derive(Debug, Default)]
pub(super) struct CallWatch {
    state: AtomicU64,
    service: AtomicU32,
    buffer: AtomicUsize,
}

/// A call the watchdog saw running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Running {
    /// `state` as loaded (sequence and flags): the value a flag is set from.
    pub(super) state: u64,
    pub(super) service: u32,
    pub(super) buffer: usize,
}

impl Running {
    /// The call's sequence number (distinguishes it from the thread's next call).
    pub(super) fn sequence(&self) -> u64 {
        self.state & SEQUENCE
    }
}

impl CallWatch {
    /// Call `sequence` of service `service` on the buffer at `buffer` starts.
    #[inline]
    fn begin(&self, sequence: u64, service: u32, buffer: usize) {
        // Relaxed: published by the Release store of `state` just below.
        self.service.store(service, Ordering::Relaxed);
        self.buffer.store(buffer, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `running`: the watchdog that sees this call
        // sees its service and buffer, and everything this thread did before it (its drains of
        // the buffers the watchdog may hand to another thread).
        self.state.store(sequence, Ordering::Release);
    }

    /// The call ended; the flags the watchdog set on it.
    #[inline]
    fn end(&self) -> u64 {
        // Relaxed: an RMW reads the last value of `state`, so it sees every flag whose
        // compare-exchange succeeded (they succeed only before this swap); nothing else is read
        // through it.
        self.state.swap(0, Ordering::Relaxed) & !SEQUENCE
    }

    /// The call running now, if any.
    pub(super) fn running(&self) -> Option<Running> {
        // Acquire: pairs with the Release store in `begin`.
        let state = self.state.load(Ordering::Acquire);
        (state & SEQUENCE != 0).then(|| Running {
            state,
            // Relaxed: ordered by the Acquire load above.
            service: self.service.load(Ordering::Relaxed),
            buffer: self.buffer.load(Ordering::Relaxed),
        })
    }

    /// Sets `flag` on the call `seen` if it is still running (and has not changed since).
    pub(super) fn flag(&self, seen: Running, flag: u64) -> bool {
        // Relaxed: the flag itself is the message, read by the thread's swap in `end`; what the
        // watchdog does next (start another thread) is ordered by that thread's spawn.
        self.state
            .compare_exchange(seen.state, seen.state | flag, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// A listener thread's dispatch: its registry's with every packet's call (and every piece of a
/// host's own work, [`Dispatch::own_work`]: an LLVM-RPC turn, whose host may run a service of its
/// own, a console write, a file, with the packets it serves inside it) shown in its
/// [`CallWatch`] once, and the poll stopped once the watchdog abandoned the thread.
///
/// The watch is protocol-neutral: a host that does more than serve packets says so through the
/// core's `own_work` hook, and the packets that work serves reach the registry through the
/// server `own_work` hands it, unwatched, so that nothing is watched twice and no flag says
/// "inside a turn".
pub(super) struct Watched<'d, 'a> {
    pub(super) dispatch: &'d ThreadDispatch<'a>,
    pub(super) watch: &'d CallWatch,
    sequence: Cell<u64>,
    /// The flags the watchdog set on calls of this thread so far (`ABANDONED` stays).
    flags: Cell<u64>,
    /// Called with the service id and buffer of a call the watchdog reported, when it returns
    /// (rare: the call ran long).
    on_reported: &'d dyn Fn(u32, usize),
}

impl<'d, 'a> Watched<'d, 'a> {
    pub(super) fn new(
        dispatch: &'d ThreadDispatch<'a>,
        watch: &'d CallWatch,
        on_reported: &'d dyn Fn(u32, usize),
    ) -> Self {
        Self { dispatch, watch, sequence: Cell::new(0), flags: Cell::new(0), on_reported }
    }

    /// Whether the watchdog gave this thread's other buffers to another thread.
    pub(super) fn abandoned(&self) -> bool {
        self.flags.get() & ABANDONED != 0
    }
}

impl Watched<'_, '_> {
    /// Runs `call` (service `service` on the buffer at `buffer`) with it shown in the watch.
    #[inline]
    fn watched<R>(&self, service: u32, buffer: usize, call: impl FnOnce() -> R) -> R {
        // Within the 62 sequence bits: after 2^62 calls one is numbered 0 (idle), and the watchdog
        // does not see that one call.
        let sequence = self.sequence.get().wrapping_add(1) & SEQUENCE;
        self.sequence.set(sequence);
        self.watch.begin(sequence, service, buffer);
        let result = call();
        let flags = self.watch.end();
        if flags != 0 {
            self.flags.set(self.flags.get() | (flags & ABANDONED));
            if flags & REPORTED != 0 {
                (self.on_reported)(service, buffer);
            }
        }
        result
    }
}

impl Dispatch for Watched<'_, '_> {
    #[inline]
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.watched(packet.service(), packet.buffer(), || self.dispatch.dispatch(packet));
    }

    fn malformed(&self, buffer: usize, error: DrainError) {
        self.dispatch.malformed(buffer, error);
    }

    /// Watched as one call named `name`; the packets it serves go to the registry unwatched
    /// (this call's watch covers them).
    fn own_work(&self, buffer: usize, name: u32, work: &mut OwnWork<'_>) {
        self.watched(name, buffer, || work(&mut |packet| self.dispatch.dispatch(packet)));
    }

    #[inline]
    fn proceed(&self) -> bool {
        !self.abandoned()
    }
}
