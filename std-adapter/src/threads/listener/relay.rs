//! Stuck services: a listener's buffers handed to a new thread while one thread is held up
//! inside a service call, and the process-wide watchdog that notices.
//!
//! A listener serves its buffers from one thread at a time, through that thread's [`Seat`] (its
//! own poller of the buffers, and the [`CallWatch`] of its call in progress). The watchdog thread
//! (one per process, started with the first listener, ended when no listener is left) looks at
//! every seat every [`tick`]. A call it sees running for [`ListenerConfig::stuck_after`] is
//! *stuck*: counted once ([`Reason::StuckService`], for the registry and the buffer), warned about
//! (rate-limited, naming the service id, the buffer and how long so far, again at twice, four
//! times ... that long), and, if the seat is the listener's active one and fewer than
//! [`ListenerConfig::stuck_threads`] of its threads are inside stuck calls already, *relieved*:
//!
//! 1. a thread is started on a new, empty seat, waiting for a go;
//! 2. the stuck call is marked abandoned (a compare-exchange that succeeds only while that very
//!    call runs; if it ended meanwhile, the new thread is told to quit);
//! 3. every buffer of the old seat but the stuck call's is registered with the new seat's poller
//!    (a fresh registration: its scan state starts over; its host state, a line buffer's memory
//!    of incomplete requests or an LLVM-RPC buffer's calls in progress, goes with it) and the new
//!    seat becomes the active one (adds go there); the new thread is told to go.
//!
//! The old thread, once its call returns, finishes the drain of the stuck buffer (its other
//! packets of that drain included) and drains no other buffer ([`Watched::proceed`]); then
//! ([`hand_back`]) it gives the stuck buffer to the active seat and ends. So every buffer is
//! drained by one thread at a time, and a buffer whose call is still running stays claimed by the
//! listener, served by the thread inside the call, until that call returns. The old seat's
//! poller still holds registrations of the buffers it gave away, and drains none of them again
//! (its thread polls no more): a buffer removed meanwhile is removed from its new seat only.
//!
//! Shutdown ([`Listener::shutdown`](super::Listener::shutdown)) waits for the active seat's
//! thread only: a stuck active seat is relieved at once during shutdown (whatever the budget),
//! and the new thread serves and answers the other buffers within the grace. A thread still
//! inside a stuck call after that finishes its call on its own, answers what is still submitted
//! on its buffer with the shutdown error, releases that buffer's claim and ends.
//!
//! [`Reason::StuckService`]: crate::observe::Reason::StuckService
//! [`ListenerConfig::stuck_after`]: super::ListenerConfig::stuck_after
//! [`ListenerConfig::stuck_threads`]: super::ListenerConfig::stuck_threads

use super::watch::{CallWatch, Running, ABANDONED, REPORTED};
use super::{Shared, MAX_BUFFERS};
use crate::observe::Reason;
use crate::rate_limit::warn_limited;
use hostcall_core::Poller;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One thread's share of a listener: its poller and its call in progress.
pub(super) struct Seat {
    pub(super) id: u64,
    pub(super) poller: Poller<MAX_BUFFERS>,
    pub(super) watch: CallWatch,
    /// The thread's name: the listener's (every seat's thread has it, so a thread is told by its
    /// name whatever seat it serves).
    pub(super) thread_name: String,
    /// The seat's name in the log: the thread's, and which relief it is.
    pub(super) name: String,
    /// The seat's thread, until it is joined.
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
    /// What the watchdog saw of the current call (the watchdog's and the reporting thread's).
    seen: Mutex<Seen>,
    /// The buffers this seat gave to another seat when it was relieved (their registrations stay
    /// in `poller`, never drained again).
    given_away: Mutex<Vec<usize>>,
}

/// The call the watchdog saw last on a seat.
#[derive(Default)]
struct Seen {
    /// Its sequence number and when the watchdog first saw it.
    call: Option<(u64, Instant)>,
    /// Warnings given for it so far.
    warnings: u32,
    /// When the call reported stuck last was first seen (kept until its thread takes it).
    reported: Option<Instant>,
}

static NEXT_SEAT: AtomicU64 = AtomicU64::new(1);

impl Seat {
    /// Seat `relief` (0: the listener's first) of the listener whose threads are `thread_name`.
    pub(super) fn new(thread_name: &str, relief: u64) -> Arc<Self> {
        let name = match relief {
            0 => thread_name.to_owned(),
            n => format!("{thread_name} (relief {n})"),
        };
        Arc::new(Self {
            // Relaxed: only uniqueness matters.
            id: NEXT_SEAT.fetch_add(1, Ordering::Relaxed),
            poller: Poller::new(),
            watch: CallWatch::default(),
            thread_name: thread_name.to_owned(),
            name,
            thread: Mutex::new(None),
            seen: Mutex::new(Seen::default()),
            given_away: Mutex::new(Vec::new()),
        })
    }
}

/// A listener's seats: the active one (serving every buffer but those of stuck calls) and the
/// relieved ones whose thread is still inside a call.
pub(super) struct Crew {
    pub(super) active: Arc<Seat>,
    pub(super) stuck: Vec<Arc<Seat>>,
    /// Relieved seats so far (names the next one's thread).
    relieved: u64,
}

impl Crew {
    pub(super) fn new(active: Arc<Seat>) -> Self {
        Self { active, stuck: Vec::new(), relieved: 0 }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update under these locks leaves the state whole before anything that can panic.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Looks at every seat of `shared` (see the module docs); `seats` is scratch space, kept from
/// call to call so that an idle tick allocates nothing.
fn check(shared: &Arc<Shared>, now: Instant, seats: &mut Vec<Arc<Seat>>) {
    seats.clear();
    {
        let crew = lock(&shared.crew);
        seats.push(crew.active.clone());
        seats.extend(crew.stuck.iter().cloned());
    }
    let stuck_after = shared.config.stuck_after;
    for seat in seats.drain(..) {
        let mut seen = lock(&seat.seen);
        let Some(mut running) = seat.watch.running() else {
            seen.call = None;
            continue;
        };
        let since = match seen.call {
            Some((sequence, since)) if sequence == running.sequence() => since,
            _ => {
                (seen.call, seen.warnings) = (Some((running.sequence(), now)), 0);
                continue;
            }
        };
        let elapsed = now.duration_since(since);
        if elapsed < stuck_after {
            continue;
        }
        if running.state & REPORTED == 0 {
            if !seat.watch.flag(running, REPORTED) {
                continue; // it returned meanwhile
            }
            running.state |= REPORTED;
            seen.reported = Some(since);
            shared.services.count_refusal(Reason::StuckService, 1, running.buffer);
        }
        let due = stuck_after.saturating_mul(1u32.checked_shl(seen.warnings).unwrap_or(u32::MAX));
        if elapsed >= due {
            seen.warnings += 1;
            warn_limited!(
                "{}: service {} on buffer {:#x} has been running for {elapsed:.1?} (stuck: its listener's \
                 other buffers are served by another thread while threads are left)",
                seat.name,
                running.service,
                running.buffer
            );
        }
        drop(seen);
        relieve(shared, &seat, running);
    }
}

/// Hands every buffer of `seat` but `running`'s to a new seat and thread, if `seat` is active and
/// the budget allows (whatever it says during shutdown).
fn relieve(shared: &Arc<Shared>, seat: &Arc<Seat>, running: Running) {
    if running.state & ABANDONED != 0 {
        return;
    }
    let mut served = lock(&shared.served);
    let mut crew = lock(&shared.crew);
    if !Arc::ptr_eq(&crew.active, seat) {
        return;
    }
    // Acquire: pairs with the Release store of `stop` in `Listener::shutdown_timeout`, so a
    // relief or hand-back that sees the stop also sees the grace stored before it.
    let stopping = shared.stop.load(Ordering::Acquire);
    if crew.stuck.len() >= shared.config.stuck_threads && !stopping {
        warn_limited!(
            "{}: service {} on buffer {:#x} is stuck and {} threads of this listener are inside stuck \
             calls already (stuck_threads): its other buffers wait",
            seat.name,
            running.service,
            running.buffer,
            crew.stuck.len()
        );
        return;
    }
    let next = Seat::new(&shared.config.thread_name, crew.relieved + 1);
    let (go, gate) = mpsc::channel::<bool>();
    let Ok(thread) = super::thread::spawn_gated(shared.clone(), next.clone(), gate) else {
        warn_limited!("{}: could not start a thread to serve the other buffers; they wait", seat.name);
        return;
    };
    if !seat.watch.flag(running, ABANDONED) {
        let _ = go.send(false); // the call returned: nothing to hand over
        let _ = thread.join();
        return;
    }
    let mut given = lock(&seat.given_away);
    for (base, entry) in served.iter_mut() {
        if entry.home != seat.id || *base == running.buffer || entry.leaving {
            continue;
        }
        // SAFETY: the buffer stays valid while it is in `served` (its add's contract, or
        // `owned`); its new seat's thread drains it, the old one never again (see `Watched`).
        match unsafe { entry.register(&next.poller) } {
            Ok(()) => {
                entry.home = next.id;
                given.push(*base);
            }
            Err(e) => log::error!("{}: buffer {base:#x} could not be handed over: {e}", seat.name),
        }
    }
    drop(given);
    *lock(&next.thread) = Some(thread);
    crew.relieved += 1;
    let relieved = std::mem::replace(&mut crew.active, next);
    crew.stuck.push(relieved);
    drop((crew, served));
    let _ = go.send(true);
    // The new thread may be asleep on the doorbell's last value: ring so it polls at once.
    shared.doorbell.ring();
}

/// Called by `seat`'s thread once its poll has ended after it was abandoned: gives the buffer(s)
/// it kept to the active seat (unless the listener is stopping: then they stay, for the thread's
/// own last answers) and forgets the registrations it gave away. Returns whether the thread
/// should answer what is left on its seat before it ends (the listener is stopping).
pub(super) fn hand_back(shared: &Shared, seat: &Arc<Seat>) -> bool {
    let mut served = lock(&shared.served);
    let mut crew = lock(&shared.crew);
    for base in lock(&seat.given_away).drain(..) {
        let _ = seat.poller.remove(base as *mut u8); // not polling: returns at once
    }
    // Acquire: pairs with the Release store of `stop` in `Listener::shutdown_timeout`, so a
    // relief or hand-back that sees the stop also sees the grace stored before it.
    let stopping = shared.stop.load(Ordering::Acquire);
    if stopping {
        return true; // `finish` answers, then `release` lets go
    }
    for (base, entry) in served.iter_mut() {
        if entry.home != seat.id || entry.leaving {
            continue;
        }
        if seat.poller.remove(*base as *mut u8).is_err() {
            continue;
        }
        // SAFETY: as in `relieve`: valid while in `served`; this seat's thread drains it no more.
        match unsafe { entry.register(&crew.active.poller) } {
            Ok(()) => entry.home = crew.active.id,
            Err(e) => log::error!("{}: buffer {base:#x} could not be handed back: {e}", seat.name),
        }
    }
    crew.stuck.retain(|s| !Arc::ptr_eq(s, seat));
    false
}

/// Called by `seat`'s thread as it ends (after shutdown): the claims of the buffers it served are
/// released, and the seat leaves the crew.
pub(super) fn release(shared: &Shared, seat: &Arc<Seat>) {
    let mine: Vec<usize> = {
        let served = lock(&shared.served);
        served.iter().filter(|(_, entry)| entry.home == seat.id).map(|(base, _)| *base).collect()
    };
    for base in mine {
        let entry = lock(&shared.served).remove(&base);
        shared.let_go(entry);
        lock(&shared.ended).insert(base);
    }
    lock(&shared.crew).stuck.retain(|s| !Arc::ptr_eq(s, seat));
}

/// The warning when a call the watchdog reported returns, from the thread that made it.
pub(super) fn returned(seat: &Seat, service: u32, buffer: usize) {
    let since = lock(&seat.seen).reported.take();
    let took = since.map_or(Duration::ZERO, |since| since.elapsed());
    warn_limited!(
        "{}: service {service} on buffer {buffer:#x} returned after at least {took:.1?}",
        seat.name
    );
}

/// The process-wide watchdog: the listeners it looks at, and whether its thread runs.
struct Watchdog {
    listeners: Vec<Weak<Shared>>,
    running: bool,
}

static WATCHDOG: Mutex<Watchdog> = Mutex::new(Watchdog { listeners: Vec::new(), running: false });

/// Puts `shared` under the watchdog, starting its thread if none runs. A thread it starts has
/// made its first look (its thread start-up and its lists' first allocations) before this returns,
/// so that a listener's warm calls never share a window with the watchdog's one-time allocations.
pub(super) fn watch(shared: &Arc<Shared>) {
    let started = {
        let mut watchdog = lock(&WATCHDOG);
        watchdog.listeners.push(Arc::downgrade(shared));
        if watchdog.running {
            None
        } else {
            let (ready, first_look) = std::sync::mpsc::sync_channel(1);
            let spawned = std::thread::Builder::new()
                .name("hostcall-watchdog".into())
                .spawn(move || watchdog_loop(ready));
            match spawned {
                Ok(_) => {
                    watchdog.running = true;
                    Some(first_look)
                }
                Err(e) => {
                    log::error!("no watchdog thread ({e}): stuck services will not be noticed");
                    None
                }
            }
        }
    };
    // Outside the lock: the first look takes it. Bounded, so a start never hangs on it.
    if let Some(first_look) = started {
        let _ = first_look.recv_timeout(Duration::from_secs(1));
    }
}

/// Takes `shared` from the watchdog (a listener being dropped). Once this returns the watchdog
/// holds no reference to it and takes none again: the listener's registry and buffers are let go
/// of by the time the drop returns. A call still stuck on one of its threads is no longer warned
/// about while it runs (its thread still warns when it returns).
pub(super) fn unwatch(shared: &Arc<Shared>) {
    let mut watchdog = lock(&WATCHDOG);
    watchdog.listeners.retain(|l| l.strong_count() > 0 && !std::ptr::eq(l.as_ptr(), Arc::as_ptr(shared)));
}

/// How often the watchdog looks: a quarter of the shortest `stuck_after`, within 1..=100 ms.
fn tick(listeners: &[Arc<Shared>]) -> Duration {
    let shortest = listeners.iter().map(|l| l.config.stuck_after).min().unwrap_or(Duration::from_millis(100));
    (shortest / 4).clamp(Duration::from_millis(1), Duration::from_millis(100))
}

fn watchdog_loop(ready: std::sync::mpsc::SyncSender<()>) {
    // Kept from tick to tick: an idle tick allocates nothing.
    let (mut listeners, mut seats) = (Vec::<Arc<Shared>>::with_capacity(8), Vec::with_capacity(8));
    let mut ready = Some(ready);
    loop {
        let pause = {
            // Held through the look: the watchdog holds a listener (its registry, its buffers)
            // only under this lock, so `unwatch` returning means it holds that one no more.
            let mut watchdog = lock(&WATCHDOG);
            watchdog.listeners.retain(|l| l.strong_count() > 0);
            if watchdog.listeners.is_empty() {
                watchdog.running = false;
                return;
            }
            listeners.extend(watchdog.listeners.iter().filter_map(Weak::upgrade));
            let now = Instant::now();
            for shared in &listeners {
                check(shared, now, &mut seats);
            }
            let pause = tick(&listeners);
            listeners.clear();
            pause
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(()); // the starter may have stopped waiting: nothing to do then
        }
        std::thread::sleep(pause);
    }
}
