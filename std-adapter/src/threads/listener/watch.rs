//! The call in progress on a listener thread, as its watchdog sees it: [`CallWatch`], written by
//! the thread around every packet it dispatches ([`Watched`]), read by the watchdog
//! (`relay.rs`), which marks a call that has run too long as reported and, to hand the thread's
//! other buffers to a new thread, as abandoned.
//!
//! # Who writes what
//!
//! | word | written by | when |
//! | --- | --- | --- |
//! | `state`: 0, or the call's sequence number (low 62 bits) | the thread (Release stores) | around each packet's dispatch, and around each piece of a host's own work (an LLVM-RPC turn, with the packets it serves inside it) |
//! | `flags`: 0, or a call's sequence number with `REPORTED` and/or `ABANDONED` | the watchdog (compare-exchange) | while that very call runs |
//! | `flags` back to 0 | the thread (compare-exchange), taking the flags of its call; or the watchdog, taking a flag back | after the call, rarely |
//! | `service`, `buffer` | the thread, before `begin`'s store | each call |
//!
//! The handshake is Dekker's, with the expensive half on the watchdog's side: the thread stores
//! `state = 0` when a call ends and then loads `flags`; the watchdog sets a flag for the call it
//! saw and then loads `state`. A full barrier between each side's store and load makes sure that
//! at least one of them sees the other's store; on Linux the thread's barrier is only a compiler
//! fence and the watchdog's is `membarrier(2)`'s expedited private command, which runs a full
//! barrier on every thread of the process (the asymmetric fence that Linux's RCU and folly's
//! `asymmetricHeavyBarrier` use); elsewhere, or where `membarrier` is refused, both sides use a
//! `SeqCst` fence. So:
//!
//! - the watchdog loads `state` and sees the call still running: the thread's store comes after
//!   the barrier, and its load of `flags` sees the flag. Set.
//! - the watchdog sees the call ended: the thread may or may not have seen the flag. The one that
//!   saw it takes the flags (a compare-exchange to 0), the watchdog takes its flag back (a
//!   compare-exchange from the value it set to the value before): one of them succeeds. The thread took it: set; the
//!   watchdog took it back: not set (the call returned), as if it had come too late.
//!
//! A thread that took `ABANDONED` drains no other buffer after that call (its
//! [`Watched::proceed`] says no, and its loop stops): the buffers the watchdog gave to another
//! thread are never drained by two. The cost on the thread, per packet: three plain stores, one
//! plain load and a compare (no locked instruction, no clock read, no syscall); the
//! compare-exchanges and the barrier are paid only when the watchdog flags a call.

use crate::dispatch::registry::ThreadDispatch;
use hostcall_core::{Dispatch, DrainError, OwnWork, PacketRequest};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The watchdog reported this call as stuck (counted once, warned about).
pub(super) const REPORTED: u64 = 1 << 62;
/// The watchdog gave this thread's other buffers to another thread while this call ran.
pub(super) const ABANDONED: u64 = 1 << 63;
/// The sequence bits of `state` and `flags`.
const SEQUENCE: u64 = REPORTED - 1;

/// One listener thread's call in progress (see the module docs).
#[derive(Debug)]
pub(super) struct CallWatch {
    state: AtomicU64,
    flags: AtomicU64,
    service: AtomicU32,
    buffer: AtomicUsize,
    /// The process's barrier choice (`barrier::asymmetric`: made before the first watch, never
    /// changed, so the watchdog's too), here so that `end` tests a word beside those it stores.
    asymmetric: bool,
}

impl Default for CallWatch {
    fn default() -> Self {
        barrier::init(); // before the thread that uses this watch starts (it reads the choice)
        Self {
            state: AtomicU64::new(0),
            flags: AtomicU64::new(0),
            service: AtomicU32::new(0),
            buffer: AtomicUsize::new(0),
            asymmetric: barrier::asymmetric(),
        }
    }
}

/// A call the watchdog saw running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Running {
    /// The call's sequence number and the flags the watchdog set on it so far.
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

    /// The call ended; `Some(flags word)` if the watchdog flagged a call (for
    /// [`CallWatch::take`]).
    #[inline]
    fn end(&self) -> Option<u64> {
        // Release: as in `begin` (the watchdog that sees the call ended sees what it did).
        self.state.store(0, Ordering::Release);
        // The thread's half of the handshake: orders the store above before the load below
        // against the watchdog's half in `flag` (see the module docs).
        barrier::light(self.asymmetric);
        // Relaxed: the flag itself is the message (nothing else is read through it); the
        // barriers above and in `flag` are what make sure a flag is seen by one side or taken
        // back by the other.
        let flags = self.flags.load(Ordering::Relaxed);
        (flags != 0).then_some(flags)
    }

    /// The service and buffer of this thread's last call, as `begin` stored them.
    #[inline]
    fn call(&self) -> (u32, usize) {
        // Relaxed: this thread's own stores (it is their only writer).
        (self.service.load(Ordering::Relaxed), self.buffer.load(Ordering::Relaxed))
    }

    /// Takes the flags `flags` (just loaded, not 0) if they are call `sequence`'s, unless the
    /// watchdog takes them back first (or adds one: then all of them); the flags taken.
    fn take(&self, sequence: u64, mut flags: u64) -> u64 {
        loop {
            // Relaxed: the compare-exchange on `flags` decides alone (against the watchdog's in
            // `flag`); nothing else is published through it.
            if flags & SEQUENCE != sequence {
                return 0; // an earlier call's, that the watchdog is taking back
            }
            match self.flags.compare_exchange(flags, 0, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return flags & (REPORTED | ABANDONED),
                Err(now) if now & SEQUENCE == sequence && now & (REPORTED | ABANDONED) != 0 => flags = now,
                Err(_) => return 0, // taken back
            }
        }
    }

    /// The call running now, if any.
    pub(super) fn running(&self) -> Option<Running> {
        // Acquire: pairs with the Release store in `begin`.
        let state = self.state.load(Ordering::Acquire);
        let sequence = state & SEQUENCE;
        (sequence != 0).then(|| {
            // Relaxed: only this (watchdog) thread sets flags.
            let flags = self.flags.load(Ordering::Relaxed);
            let set = if flags & SEQUENCE == sequence { flags & (REPORTED | ABANDONED) } else { 0 };
            Running {
                state: sequence | set,
                // Relaxed: ordered by the Acquire load above.
                service: self.service.load(Ordering::Relaxed),
                buffer: self.buffer.load(Ordering::Relaxed),
            }
        })
    }

    /// Sets `flag` on the call `seen` if it is still running (and has not changed since); the
    /// watchdog's half of the handshake (the module docs).
    pub(super) fn flag(&self, seen: Running, flag: u64) -> bool {
        let sequence = seen.sequence();
        let before = seen.state & (REPORTED | ABANDONED);
        // The flags word as the watchdog left it: this call's flags, or 0 (an earlier call's
        // flags are taken or taken back before the watchdog looks again).
        // Relaxed: see `end`; only the watchdog and the thread's `take` write the word.
        let expected = self.flags.load(Ordering::Relaxed);
        let set = sequence | before | flag;
        // Relaxed: as in `take`.
        if self.flags.compare_exchange(expected, set, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return false; // the thread took the flags of this call meanwhile: it ended
        }
        if !barrier::heavy() {
            // No barrier: the thread may miss the flag; take it back and say it came too late
            // (the next tick tries again).
            return self.flags.compare_exchange(set, expected, Ordering::Relaxed, Ordering::Relaxed).is_err();
        }
        // Acquire: as in `running`.
        if self.state.load(Ordering::Acquire) & SEQUENCE == sequence {
            return true; // still running: its thread's `end` sees the flag
        }
        // Ended: set only if the thread took it (then this compare-exchange fails).
        self.flags.compare_exchange(set, expected, Ordering::Relaxed, Ordering::Relaxed).is_err()
    }
}

/// The two halves of the handshake's barrier (see the module docs).
mod barrier {
    use std::sync::atomic::{compiler_fence, fence, AtomicBool, Ordering};
    use std::sync::Once;

    /// Whether `membarrier(2)`'s expedited private command is registered for this process (the
    /// thread's half is then a compiler fence). Chosen once, before any watched thread starts
    /// (`init`, from `CallWatch::default`), and never changed.
    static ASYMMETRIC: AtomicBool = AtomicBool::new(false);

    /// Chooses the barrier, once per process.
    pub(super) fn init() {
        static CHOSEN: Once = Once::new();
        // Relaxed: `Once` orders this store before every `init` that returns, and a watched
        // thread is spawned after its watch's `init` (the spawn orders it before its loads).
        CHOSEN.call_once(|| ASYMMETRIC.store(register(), Ordering::Relaxed));
    }

    /// Whether the barrier is asymmetric (see `ASYMMETRIC`).
    #[inline]
    pub(super) fn asymmetric() -> bool {
        // Relaxed: stored before any thread that asks can reach a watch: a watched thread is
        // spawned after its watch was made, and the watchdog finds watches under the listener's
        // crew lock, taken after they were made (see `init`).
        ASYMMETRIC.load(Ordering::Relaxed)
    }

    #[cfg(all(target_os = "linux", not(miri)))]
    fn register() -> bool {
        // SAFETY: `membarrier` takes three integers and touches no memory of the caller.
        unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
    }

    #[cfg(any(not(target_os = "linux"), miri))]
    fn register() -> bool {
        false
    }

    /// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration (`linux/membarrier.h`).
    #[cfg(target_os = "linux")]
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    #[cfg(target_os = "linux")]
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// The watched thread's half, between its store of `state` and its load of `flags`;
    /// `asymmetric` is the watch's copy of [`asymmetric`]'s answer.
    #[inline]
    pub(super) fn light(asymmetric: bool) {
        // The compiler keeps the store before the load either way; with the asymmetric barrier
        // that is all this side needs (the watchdog's `membarrier` runs the full one here).
        compiler_fence(Ordering::SeqCst);
        if !asymmetric {
            // SeqCst: pairs with the SeqCst fence in `heavy`.
            fence(Ordering::SeqCst);
        }
    }

    /// The watchdog's half, between its compare-exchange of `flags` and its load of `state`;
    /// `false` if there is no barrier to pair with the thread's (a refused `membarrier`).
    pub(super) fn heavy() -> bool {
        if asymmetric() {
            expedited()
        } else {
            // SeqCst: pairs with the SeqCst fence in `light`.
            fence(Ordering::SeqCst);
            true
        }
    }

    #[cfg(target_os = "linux")]
    fn expedited() -> bool {
        // SAFETY: as in `register`.
        unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) == 0 }
    }

    #[cfg(not(target_os = "linux"))]
    fn expedited() -> bool {
        false
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
        if let Some(flags) = self.watch.end() {
            self.flagged(sequence, flags);
        }
        result
    }

    /// The watchdog flagged call `sequence` (`flags` as loaded): takes what it can
    /// ([`CallWatch::take`]) and acts on it. The call's service and buffer are read back from
    /// the watch (rare), so that the packet's path keeps only the sequence across the call.
    #[cold]
    #[inline(never)]
    fn flagged(&self, sequence: u64, flags: u64) {
        let flags = self.watch.take(sequence, flags);
        self.flags.set(self.flags.get() | (flags & ABANDONED));
        if flags & REPORTED != 0 {
            let (service, buffer) = self.watch.call();
            (self.on_reported)(service, buffer);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A flag set while the call runs is taken by the thread when it ends; one set after it ended
    /// is refused.
    #[test]
    fn a_flag_reaches_the_call_it_was_set_on_and_no_other() {
        let watch = CallWatch::default();
        watch.begin(1, 7, 0x1000);
        let running = watch.running().expect("call 1 runs");
        assert_eq!((running.sequence(), running.service, running.buffer), (1, 7, 0x1000));
        assert!(watch.flag(running, REPORTED));
        assert_eq!(watch.running().unwrap().state & REPORTED, REPORTED, "the watchdog sees its flag");
        assert_eq!(watch.end().map(|flags| watch.take(1, flags)), Some(REPORTED));
        assert!(!watch.flag(running, ABANDONED), "call 1 ended");
        watch.begin(2, 7, 0x1000);
        assert_eq!(watch.running().unwrap().state & (REPORTED | ABANDONED), 0, "call 2 starts unflagged");
        assert_eq!(watch.end(), None);
    }

    /// The watchdog flags calls while the thread runs through many short ones: every flag
    /// `flag` says it set is taken by that call's `end`, and every flag an `end` takes was said
    /// set. (A `flag` that answered "set" for a call that ended before it saw the flag would
    /// leave a thread draining buffers the watchdog gave away.)
    #[test]
    fn the_thread_and_the_watchdog_agree_on_every_flag() {
        let calls: u64 = if cfg!(miri) { 200 } else { 200_000 };
        let watch = CallWatch::default();
        let done = AtomicBool::new(false);
        let (taken, set) = std::thread::scope(|s| {
            let thread = s.spawn(|| {
                let mut taken = 0u64;
                for sequence in 1..=calls {
                    watch.begin(sequence, 1, 0);
                    for _ in 0..(sequence % 8) {
                        std::hint::spin_loop();
                    }
                    let flags = watch.end().map_or(0, |flags| watch.take(sequence, flags));
                    taken += u64::from(flags & ABANDONED != 0);
                }
                done.store(true, Ordering::Release);
                taken
            });
            let mut set = 0u64;
            // Acquire: pairs with the Release store above (the loop ends after the last call).
            while !done.load(Ordering::Acquire) {
                if let Some(running) = watch.running() {
                    if running.state & ABANDONED == 0 {
                        set += u64::from(watch.flag(running, ABANDONED));
                    }
                }
            }
            (thread.join().unwrap(), set)
        });
        assert_eq!(taken, set, "flags set and flags taken");
    }
}
