//! The listener: a thread around the core's [`Poller`], serving any number of buffers.
//!
//! The loop: poll every buffer; after work, poll again at once; when idle, go on polling for
//! [`WaitPolicy::spin_polls`] polls, then nap on the doorbell: first for [`WaitPolicy::min_wait`],
//! each further nap twice as long, never longer than [`WaitPolicy::max_wait`]. Every wake-up, a
//! ring or the end of a nap, polls all buffers, so a call whose device never rings (LLVM libc's
//! RPC client does not), a missed ring or a lost signal is served within one `max_wait` (plus the
//! timer slack and a wake-up) after any idle gap, and never hangs.
//!
//! # Wait policies
//!
//! [`ListenerConfig::wait`] is the [`WaitPolicy`]; three presets state their bound and cost:
//!
//! | preset | naps | a call that rings nothing is polled within | idle listener |
//! |---|---|---|---|
//! | [`WaitPolicy::bounded_latency`] (default) | 50 µs doubling to 200 µs, timer slack 5 µs | about 200 µs plus a wake-up | about 5,000 wake-ups a second |
//! | [`WaitPolicy::spinning`] ([`ListenerConfig::spinning`]) | none | one poll | one core busy |
//! | [`WaitPolicy::power_saving`] ([`ListenerConfig::power_saving`]) | 1 ms doubling to 10 ms, the inherited slack | about 10 ms | about 100 wake-ups a second |
//!
//! Each idle wake-up costs one doorbell nap (a system call: [`Doorbell::nap`]) and one poll of
//! every buffer served; the measured figures (one call after gaps of 0.1 ms to 1 s, the idle
//! listener's share of a core) are in `docs/performance.md`, "Wait policies". The timer slack
//! ([`WaitPolicy::timer_slack`], `prctl(PR_SET_TIMERSLACK)` on each listener thread) matters for
//! short naps: Linux lets a thread's sleep end up to its slack late (50 µs by default), a quarter
//! of the default's bound.
//!
//! A rung doorbell and the policy: a ring that can wake a sleeper ends the nap at once
//! ([`crate::ParkingDoorbell`] rung by [`Doorbell::ring`]: emulated waves, host code; an HSA
//! signal rung by ROCm's device code during a nap of 2 ms or more, which blocks in ROCr), and the
//! listener spins again from the first nap. A ring that wakes nobody (a device's raw add to a
//! host-memory signal; the CUDA doorbell's store, which the host re-reads every 20 µs) is seen at
//! the end of the nap or at the next re-read, whichever is first. So a device that rings is
//! served at once, or within a re-read, under every preset that naps, and the policy's bound is
//! what a device that does not ring pays.
//!
//! [`Listener::set_wait_policy`] changes the policy of a running listener (the C ABI's
//! `hostcall_set_wait_policy` does it for the default runtime): its threads take it before their
//! next nap, woken by a ring to do so at once.
//!
//! Shutdown is bounded, whatever the device does: [`Listener::shutdown`] (and `Drop`) stops the
//! loop, goes on serving for [`ListenerConfig::shutdown_grace`] ([`Listener::shutdown_timeout`]:
//! for a grace of the caller's choosing; less once no packet has been found for
//! [`WaitPolicy::max_wait`], so an idle listener stops at once), then answers every packet still submitted with the
//! shutdown error ([`ErrorCode::ShuttingDown`], through [`reply_error_all`], so DEVMEM gets
//! `[0, 5]`) and joins the thread. It returns after the grace plus at most one packet's service
//! time or [`ListenerConfig::stuck_after`] (and a watchdog tick), whichever is less, plus one
//! poll: a service call already running is not interrupted, and one past `stuck_after` is left
//! to finish on its own (see "Stuck services" below). A packet submitted after
//! that last poll is not answered by this listener (it stays submitted, for the next listener of
//! the buffer); a device that may still call should use a timeout. The thread is stopped by a
//! flag of this listener's own and woken with a [`Doorbell::ring`]: other listeners sleeping on
//! the same doorbell (a [`crate::ListenerPool`], or listeners given one doorbell) see one
//! spurious ring, poll once, and sleep again. Nothing is stored into the doorbell that would keep
//! them awake.
//!
//! No lock is held while a service runs (the core poller pins buffers instead, see
//! [`Poller`]): a service may call this listener's read-only methods ([`Listener::buffer_count`],
//! [`Listener::stats`], [`Listener::is_shut_down`], `Debug`) and add buffers. Removing a buffer
//! from a service is refused ([`Error::CalledFromListener`]): it waits for the poll in progress.
//!
//! One buffer is served by one listener at a time, process-wide: every add takes a claim on the
//! buffer's memory (see `threads::claims`), and a buffer another listener serves is refused with
//! [`Error::AlreadyServed`].
//!
//! # Stuck services
//!
//! A service call that blocks does not stall the listener's other buffers (PROTOCOL.md 7.9; the
//! mechanism in `relay.rs`, the thread's side in `watch.rs`). A process-wide watchdog thread sees
//! a call running past [`ListenerConfig::stuck_after`]: it counts it
//! ([`Reason::StuckService`](crate::observe::Reason::StuckService), in [`Stats::refusals`] and the
//! buffer's), warns (rate-limited: the thread, the service id, the buffer, how long so far; and
//! once more when the call returns, how long it took), and hands every other buffer to a new
//! thread, while fewer than [`ListenerConfig::stuck_threads`] threads of the listener are inside
//! stuck calls. The stuck thread keeps only the buffer of its call; when the call returns it
//! hands that buffer back and ends. The cost on the listener thread is a few words it writes
//! around each packet (two stores and an uncontended swap).
//!
//! While its call runs, a buffer stays claimed by this listener and served by the thread inside
//! the call: its other packets wait, removing it waits for the call, and after a shutdown the
//! thread answers what is left on it with the shutdown error and releases its claim once the
//! call has returned. Until then the listener's state (its services, the [`HostcallBuffer`]s it
//! holds) stays alive; memory given with [`BufferRegistration::raw`] must stay valid until the claim is
//! released (another add of it succeeds).
//!
//! [`ErrorCode::ShuttingDown`]: hostcall_core::ErrorCode::ShuttingDown
//! [`reply_error_all`]: crate::dispatch::registry::reply_error_all
//! [`Poller`]: hostcall_core::Poller

use crate::buffer::HostcallBuffer;
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::observe::Stats;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod buffers;
use buffers::Served;
pub(crate) mod registration;
mod relay;
mod rpc;
mod state;
mod thread;
mod wait;
mod watch;

pub(crate) use thread::listener_of_this_thread;
pub(crate) use wait::LiveWait;

pub use registration::BufferRegistration;
pub use rpc::BufferOptions;
pub use wait::WaitPolicy;

/// Most buffers one listener serves at once (the core poller's fixed capacity). Start more
/// listeners for more; one buffer is never served by two (a second add is refused).
pub const MAX_BUFFERS: usize = 256;

/// How a listener waits.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ListenerConfig {
    /// How the listener waits when idle: its polls, its naps and their bound (see "Wait
    /// policies" above). [`Listener::set_wait_policy`] changes it while the listener runs.
    pub wait: WaitPolicy,
    /// After shutdown is asked, packets are served normally for this long (or until no packet
    /// has been found for `wait.max_wait`); then whatever is still submitted is answered with
    /// [`ErrorCode::ShuttingDown`] and the thread ends.
    ///
    /// [`ErrorCode::ShuttingDown`]: hostcall_core::ErrorCode::ShuttingDown
    pub shutdown_grace: Duration,
    /// The thread's name.
    pub thread_name: String,
    /// The CPUs the thread runs on (empty: wherever the scheduler puts it). Best effort: see
    /// [`crate::pin_current_thread`]. A [`crate::ListenerPool`] gives each of its threads one of
    /// them while there are enough.
    pub cpus: Vec<usize>,
    /// A service call running this long is stuck: counted
    /// ([`Reason::StuckService`](crate::observe::Reason::StuckService)), warned about, and the
    /// listener's other buffers are handed to a new thread (see [`Listener`]'s "Stuck services").
    /// Noticed within a quarter of it (at least 1 ms, at most 100 ms later).
    pub stuck_after: Duration,
    /// The most threads of this listener left inside stuck calls at once (each keeps only the
    /// buffer of its call); past it, a stuck call's other buffers wait for it, as with one
    /// thread. Not counted during shutdown, which always hands the other buffers on.
    pub stuck_threads: usize,
}

setters!(ListenerConfig {
    with_wait: wait: WaitPolicy,
    with_shutdown_grace: shutdown_grace: Duration,
    with_thread_name: thread_name: String,
    with_cpus: cpus: Vec<usize>,
    with_stuck_after: stuck_after: Duration,
    with_stuck_threads: stuck_threads: usize,
});

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            wait: WaitPolicy::default(),
            shutdown_grace: Duration::from_millis(20),
            thread_name: "hostcall-listener".into(),
            cpus: Vec::new(),
            stuck_after: Duration::from_millis(100),
            stuck_threads: 4,
        }
    }
}

struct Shared {
    /// The seats: the active one serving the buffers, and those whose thread is inside a stuck
    /// call (`relay.rs`). Lock order: `owned`, then `served`, then `crew`.
    crew: Mutex<relay::Crew>,
    services: Arc<Services>,
    doorbell: Arc<dyn Doorbell>,
    /// Keeps each registered buffer alive while the poller may touch it (the contract of
    /// `Poller::add`). Keyed by base address.
    owned: Mutex<HashMap<usize, Arc<HostcallBuffer>>>,
    /// What each buffer served (owned or raw, keyed by base address) holds while it is served:
    /// its process-wide claim, its per-buffer counters in the registry, and its host state (the
    /// line memory or the RPC host its poller registration points to). Released when the
    /// buffer is removed or the thread has been joined.
    served: Mutex<HashMap<usize, Served>>,
    /// The buffers let go of by their thread when it ended after a shutdown: removing one of
    /// them is still answered `Ok` (as it would have been before the shutdown), once.
    ended: Mutex<std::collections::HashSet<usize>>,
    /// Names this listener in the process-wide claims.
    id: u64,
    stop: AtomicBool,
    /// The grace of the shutdown asked, in nanoseconds; written before `stop` is set.
    grace_nanos: AtomicU64,
    /// When the shutdown was asked (the grace counts from it, on every thread); set before `stop`.
    stop_asked: std::sync::OnceLock<std::time::Instant>,
    config: ListenerConfig,
    /// The wait policy now (`config.wait` at the start, then whatever `set_wait_policy` gave).
    wait: Arc<LiveWait>,
}

static NEXT_LISTENER_ID: AtomicU64 = AtomicU64::new(1);

/// A listener thread serving hostcall buffers.
///
/// ```
/// use hostcall::prelude::*;
/// use hostcall::{HostcallBuffer, HostMemory, Listener, ListenerConfig, ParkingDoorbell, Wave};
/// use std::sync::Arc;
///
/// let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
/// let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
/// listener.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
/// let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 8, doorbell).unwrap());
/// listener.add(buffer.clone()).unwrap();
///
/// let wave = Wave::new(buffer, 4);
/// let reply = wave.call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
/// assert_eq!(reply.lane(2), [42, 0]);
/// listener.shutdown();
/// ```
pub struct Listener {
    shared: Arc<Shared>,
}

impl Listener {
    /// Starts a listener thread that sleeps on `doorbell`.
    pub fn start(doorbell: Arc<dyn Doorbell>, config: ListenerConfig) -> Result<Self, Error> {
        Self::start_with_services(doorbell, config, Arc::new(Services::new()))
    }

    /// Starts a listener thread that dispatches through `services`, a registry that may outlive
    /// it (a runtime that stops and restarts its listener keeps its services).
    pub fn start_with_services(
        doorbell: Arc<dyn Doorbell>,
        config: ListenerConfig,
        services: Arc<Services>,
    ) -> Result<Self, Error> {
        let wait = Arc::new(LiveWait::new(config.wait));
        Self::start_live(doorbell, config, services, wait)
    }

    /// As [`Listener::start_with_services`], the wait policy taken from `wait` (shared with a
    /// runtime that outlives this listener), not from `config.wait`.
    pub(crate) fn start_live(
        doorbell: Arc<dyn Doorbell>,
        config: ListenerConfig,
        services: Arc<Services>,
        wait: Arc<LiveWait>,
    ) -> Result<Self, Error> {
        let first = relay::Seat::new(&config.thread_name, 0);
        let shared = Arc::new(Shared {
            crew: Mutex::new(relay::Crew::new(first.clone())),
            services,
            doorbell,
            owned: Mutex::new(HashMap::new()),
            served: Mutex::new(HashMap::new()),
            ended: Mutex::new(std::collections::HashSet::new()),
            // Relaxed: only uniqueness matters.
            id: NEXT_LISTENER_ID.fetch_add(1, Ordering::Relaxed),
            stop: AtomicBool::new(false),
            grace_nanos: AtomicU64::new(0),
            stop_asked: std::sync::OnceLock::new(),
            config,
            wait,
        });
        let thread =
            thread::spawn(shared.clone(), first.clone()).map_err(|e| Error::Thread(e.to_string()))?;
        *first.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
        relay::watch(&shared);
        Ok(Self { shared })
    }

    /// The service registry (register services before or while waves run).
    pub fn services(&self) -> &Services {
        &self.shared.services
    }

    /// The doorbell this listener sleeps on; buffers it serves should ring it.
    pub fn doorbell(&self) -> &Arc<dyn Doorbell> {
        &self.shared.doorbell
    }

    /// The id of the listener thread serving its buffers now, `None` once it has been joined.
    /// (After a stuck service call, another thread takes over: see "Stuck services" above.)
    pub fn thread_id(&self) -> Option<std::thread::ThreadId> {
        let active = self.shared.active();
        let thread = active.thread.lock().unwrap_or_else(|p| p.into_inner());
        thread.as_ref().map(|t| t.thread().id())
    }

    /// Number of buffers served.
    pub fn buffer_count(&self) -> usize {
        self.shared.served.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.services.stats()
    }

    /// The wait policy in force (see "Wait policies" above).
    pub fn wait_policy(&self) -> WaitPolicy {
        self.shared.wait.get()
    }

    /// Changes the wait policy of the running listener: its threads take it before their next
    /// nap, and a ring wakes them to do so at once (other listeners on the doorbell see one
    /// spurious ring).
    pub fn set_wait_policy(&self, policy: WaitPolicy) {
        self.shared.wait.set(policy);
        self.shared.doorbell.ring();
    }

    /// Whether shutdown has been asked.
    pub fn is_shut_down(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// [`Listener::shutdown_timeout`] with [`ListenerConfig::shutdown_grace`].
    pub fn shutdown(&self) -> Stats {
        self.shutdown_timeout(self.shared.config.shutdown_grace)
    }

    /// Stops the thread and returns the counters, whatever the device does: packets are served
    /// normally for `grace` (or until no packet has been found for [`WaitPolicy::max_wait`],
    /// whichever is first: an idle listener does not wait out its grace), then every packet still
    /// submitted is answered with [`ErrorCode::ShuttingDown`] and the thread is joined. Returns
    /// after at most `grace`, plus one packet's service time and one poll. The buffers' claims are released: other listeners
    /// may serve them. Idempotent (a later call returns at once; the first call's grace holds).
    ///
    /// From the listener's own thread (a service) it only asks the thread to stop.
    ///
    /// [`ErrorCode::ShuttingDown`]: hostcall_core::ErrorCode::ShuttingDown
    pub fn shutdown_timeout(&self, grace: Duration) -> Stats {
        let nanos = u64::try_from(grace.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: published by the Release store of `stop` just below.
        self.shared.grace_nanos.store(nanos, Ordering::Relaxed);
        let asked = *self.shared.stop_asked.get_or_init(std::time::Instant::now);
        // Release: pairs with the Acquire loads in `run` (thread.rs), `is_shut_down` and the
        // watchdog's relief and hand-back (relay.rs). Then a ring wakes this listener's thread
        // if it sleeps on the doorbell; to any other listener on the doorbell it is a spurious
        // ring (one poll), so they keep working.
        self.shared.stop.store(true, Ordering::Release);
        self.shared.doorbell.ring();
        if self.on_own_thread() {
            return self.stats();
        }
        // The active thread ends within the grace, or is relieved within `stuck_after` (and a
        // tick) if it is stuck in a call, and its successor ends within the grace: wait for the
        // thread serving the buffers now, until that is the one that ended.
        let config = &self.shared.config;
        let patience =
            grace.saturating_add(config.stuck_after.saturating_mul(2)).saturating_add(Duration::from_secs(1));
        loop {
            let active = self.shared.active();
            let thread = active.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            let Some(thread) = thread else { break };
            let mut relieved = false;
            while !thread.is_finished() && asked.elapsed() < patience {
                if !Arc::ptr_eq(&self.shared.active(), &active) {
                    relieved = true; // stuck in a call: its successor serves now
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            if relieved {
                // The stuck thread finishes its call, answers and releases its buffer on its own
                // (relay.rs); it is not joined (its handle goes, the thread runs on detached).
                drop(thread);
                continue;
            }
            if !thread.is_finished() {
                log::error!(
                    "{}: the listener thread did not stop within {patience:?}; left running",
                    active.name
                );
                break;
            }
            if thread.join().is_err() {
                log::error!("the listener thread panicked");
            }
            if Arc::ptr_eq(&self.shared.active(), &active) {
                break;
            }
        }
        self.stats()
    }

    fn on_own_thread(&self) -> bool {
        thread::listener_of_this_thread() == self.shared.id
    }

    fn refuse_own_thread(&self) -> Result<(), Error> {
        if self.on_own_thread() {
            return Err(Error::CalledFromListener);
        }
        Ok(())
    }
}

/// Shuts the listener down ([`Listener::shutdown`]) and takes it from the watchdog: when the drop
/// returns, neither holds its registry or its buffers (a thread still inside a stuck call does,
/// until that call returns).
impl Drop for Listener {
    fn drop(&mut self) {
        self.shutdown();
        relay::unwatch(&self.shared);
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("buffers", &self.buffer_count()).finish()
    }
}
