//! The listener: a thread around the core's [`Poller`], serving any number of buffers.
//!
//! The loop: poll every buffer; after work, poll again at once; when idle, spin for
//! [`ListenerConfig::spin_polls`] polls, then sleep on the doorbell with an adaptive timeout
//! (from [`ListenerConfig::min_wait`] after work, doubling up to [`ListenerConfig::max_wait`]).
//! Every wake-up, a ring or a timeout, polls all buffers, so a missed ring (a device that pushed
//! without ringing, or a lost signal) delays a wave by at most one timeout and never hangs it.
//!
//! Shutdown is bounded, whatever the device does: [`Listener::shutdown`] (and `Drop`) stops the
//! loop, goes on serving for [`ListenerConfig::shutdown_grace`] ([`Listener::shutdown_timeout`]:
//! for a grace of the caller's choosing; less once no packet has been found for
//! [`ListenerConfig::min_wait`], so an idle listener stops at once), then answers every packet still submitted with the
//! shutdown error ([`ErrorCode::ShuttingDown`], through [`reply_error_all`], so DEVMEM gets
//! `[0, 5]`) and joins the thread. It returns after the grace plus at most one packet's service
//! time (a service already running is not interrupted) plus one poll. A packet submitted after
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
//! [`ErrorCode::ShuttingDown`]: hostcall_core::ErrorCode::ShuttingDown
//! [`reply_error_all`]: crate::dispatch::registry::reply_error_all

use crate::buffer::HostcallBuffer;
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::observe::Stats;
use crate::threads::claims::Claim;
use hostcall_core::line::Incomplete;
use hostcall_core::{Poller, Protocol};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};
use std::time::Duration;

mod buffers;
mod rpc;
mod thread;

pub use rpc::BufferOptions;

/// Most buffers one listener serves at once (the core poller's fixed capacity). Start more
/// listeners for more; one buffer is never served by two (a second add is refused).
pub const MAX_BUFFERS: usize = 256;

/// How a listener waits.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ListenerConfig {
    /// Polls without work before sleeping on the doorbell. `u32::MAX`: never sleep (a spinning
    /// listener: lowest latency, one core busy).
    pub spin_polls: u32,
    /// The doorbell timeout right after work.
    pub min_wait: Duration,
    /// The longest doorbell timeout when idle: the bound on what a missed ring costs.
    pub max_wait: Duration,
    /// After shutdown is asked, packets are served normally for this long (or until no packet
    /// has been found for `min_wait`); then whatever is still submitted is answered with
    /// [`ErrorCode::ShuttingDown`] and the thread ends.
    ///
    /// [`ErrorCode::ShuttingDown`]: hostcall_core::ErrorCode::ShuttingDown
    pub shutdown_grace: Duration,
    /// The thread's name.
    pub thread_name: String,
    /// The CPUs the thread runs on (empty: wherever the scheduler puts it). Best effort: see
    /// [`crate::threads::affinity`]. A [`crate::ListenerPool`] gives each of its threads one of
    /// them while there are enough.
    pub cpus: Vec<usize>,
}

setters!(ListenerConfig {
    with_spin_polls: spin_polls: u32,
    with_min_wait: min_wait: Duration,
    with_max_wait: max_wait: Duration,
    with_shutdown_grace: shutdown_grace: Duration,
    with_thread_name: thread_name: String,
    with_cpus: cpus: Vec<usize>,
});

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            spin_polls: 64,
            min_wait: Duration::from_micros(200),
            max_wait: Duration::from_millis(10),
            shutdown_grace: Duration::from_millis(20),
            thread_name: "hostcall-listener".into(),
            cpus: Vec::new(),
        }
    }
}

impl ListenerConfig {
    /// A listener that never sleeps: it polls its buffers in a loop.
    pub fn spinning() -> Self {
        Self { spin_polls: u32::MAX, ..Self::default() }
    }
}

struct Shared {
    poller: Poller<MAX_BUFFERS>,
    services: Arc<Services>,
    doorbell: Arc<dyn Doorbell>,
    /// Keeps each registered buffer alive while the poller may touch it (the contract of
    /// `Poller::add`). Keyed by base address.
    owned: Mutex<HashMap<usize, Arc<HostcallBuffer>>>,
    /// What each buffer served (owned or raw, keyed by base address) holds while it is served:
    /// its process-wide claim and its packets in the registry's lane capacity. Released when the
    /// buffer is removed or the thread has been joined.
    served: Mutex<HashMap<usize, Served>>,
    /// The LLVM-RPC buffers' hosts (the calls in progress on their ports).
    rpc: rpc::RpcBuffers,
    /// Names this listener in the process-wide claims.
    id: u64,
    stop: AtomicBool,
    /// The grace of the shutdown asked, in nanoseconds; written before `stop` is set.
    grace_nanos: AtomicU64,
    config: ListenerConfig,
}

/// What a served buffer holds (dropped when it is no longer served).
struct Served {
    _claim: Claim,
    /// The packets served here (all of them, or a range).
    packets: u64,
    /// Its per-buffer counters in the registry.
    _counted: crate::observe::ServedBuffer,
    /// A line buffer's memory of the requests found incomplete, given to the poller.
    incomplete: Option<IncompleteMemory>,
}

/// One entry per packet served of a line buffer ([`hostcall_core::line::Incomplete`]), which the
/// poller reads and writes through a raw pointer while the buffer is registered: held as that
/// pointer (a `Box` moved into a map would claim unique access to it), freed on drop, which
/// comes only after the poller let go of it (the buffer removed, or the thread joined).
struct IncompleteMemory(NonNull<[Incomplete]>);

impl IncompleteMemory {
    fn new(packets: u64) -> Self {
        let entries = vec![Incomplete::default(); packets as usize].into_boxed_slice();
        Self(NonNull::from(Box::leak(entries)))
    }
}

impl Drop for IncompleteMemory {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`; no poll uses it any more (see the type's docs).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// SAFETY: the memory is plain data, touched only by the poller's polls (one at a time) while
// registered, and freed by whichever thread drops it after that.
unsafe impl Send for IncompleteMemory {}

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
/// listener.add_buffer(buffer.clone()).unwrap();
///
/// let wave = Wave::new(buffer, 4);
/// let reply = wave.call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
/// assert_eq!(reply.lane(2), [42, 0]);
/// listener.shutdown();
/// ```
pub struct Listener {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The listener thread's id (also after it has been joined).
    thread_id: ThreadId,
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
        let shared = Arc::new(Shared {
            poller: Poller::new(),
            services,
            doorbell,
            owned: Mutex::new(HashMap::new()),
            served: Mutex::new(HashMap::new()),
            rpc: rpc::RpcBuffers::default(),
            // Relaxed: only uniqueness matters.
            id: NEXT_LISTENER_ID.fetch_add(1, Ordering::Relaxed),
            stop: AtomicBool::new(false),
            grace_nanos: AtomicU64::new(0),
            config,
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(shared.config.thread_name.clone())
                .spawn(move || thread::run(&shared))
                .map_err(|e| Error::Thread(e.to_string()))?
        };
        let thread_id = thread.thread().id();
        Ok(Self { shared, thread: Mutex::new(Some(thread)), thread_id })
    }

    /// The service registry (register services before or while waves run).
    pub fn services(&self) -> &Services {
        &self.shared.services
    }

    /// The doorbell this listener sleeps on; buffers it serves should ring it.
    pub fn doorbell(&self) -> &Arc<dyn Doorbell> {
        &self.shared.doorbell
    }

    /// The id of the listener thread, `None` once it has been joined.
    pub fn thread_id(&self) -> Option<std::thread::ThreadId> {
        self.thread.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|t| t.thread().id())
    }

    /// Number of buffers served.
    pub fn buffer_count(&self) -> usize {
        self.shared.poller.len()
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.shared.services.stats()
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
    /// normally for `grace` (or until no packet has been found for [`ListenerConfig::min_wait`],
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
        // Release: pairs with the Acquire load in `run`. Then a ring wakes this listener's thread
        // if it sleeps on the doorbell; to any other listener on the doorbell it is a spurious
        // ring (one poll), so they keep working.
        self.shared.stop.store(true, Ordering::Release);
        self.shared.doorbell.ring();
        if std::thread::current().id() == self.thread_id {
            return self.stats();
        }
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                log::error!("the listener thread panicked");
            }
            // The thread is gone: nothing serves the buffers any more.
            let _owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.served.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        self.stats()
    }

    fn refuse_own_thread(&self) -> Result<(), Error> {
        if std::thread::current().id() == self.thread_id {
            return Err(Error::CalledFromListener);
        }
        Ok(())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("buffers", &self.buffer_count()).finish()
    }
}

impl Shared {
    /// What serving the buffer at `base` (of `protocol`, `num_packets` packets; `packets` of them
    /// served here) holds: `claim`, the count served, its per-buffer counters.
    fn hold(
        &self,
        claim: Claim,
        protocol: Protocol,
        base: *const u8,
        packets: u64,
        num_packets: u64,
    ) -> Served {
        let counted = self.services.count_buffer(base as usize, protocol, num_packets);
        let incomplete = (protocol == Protocol::Line).then(|| IncompleteMemory::new(packets));
        Served { _claim: claim, packets, _counted: counted, incomplete }
    }

    /// Keeps the buffer at `base` claimed and counted in the registry until it is removed; an
    /// RPC buffer (`protocol`, `ports`) gets its host, served as `options` say; a line buffer's
    /// memory of incomplete requests is given to the poller.
    fn note_served(
        &self,
        base: *const u8,
        served: Served,
        protocol: Protocol,
        ports: u64,
        options: &BufferOptions,
    ) {
        if let Protocol::Rpc { .. } = protocol {
            let ports = u32::try_from(ports).unwrap_or(u32::MAX);
            self.rpc.insert(base as usize, rpc::RpcServing::new(ports, &options.rpc));
        }
        if let Some(memory) = &served.incomplete {
            // SAFETY: `served` keeps the memory until the buffer is removed from the poller
            // (`forget_served` after `Poller::remove`) or the thread has been joined; nothing
            // else touches it.
            let given = unsafe { self.poller.set_incomplete_memory(base.cast_mut(), memory.0) };
            debug_assert!(given.is_ok(), "the buffer was just registered");
        }
        log::info!(
            "{}: serving buffer {base:p} ({:?}, {} packets)",
            self.config.thread_name,
            self.poller.protocol(base.cast_mut()).unwrap_or(Protocol::Stack),
            served.packets
        );
        self.served.lock().unwrap_or_else(|p| p.into_inner()).insert(base as usize, served);
    }

    /// The buffer at `base` is no longer served: its claim is released, its counters left.
    fn forget_served(&self, base: *const u8) {
        log::info!("{}: no longer serving buffer {base:p}", self.config.thread_name);
        self.rpc.remove(base as usize);
        self.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&(base as usize));
    }
}
