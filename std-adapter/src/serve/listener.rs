//! The listener: a thread around the core's [`Poller`], serving any number of buffers.
//!
//! The loop: poll every buffer; after work, poll again at once; when idle, spin for
//! [`ListenerConfig::spin_polls`] polls, then sleep on the doorbell with an adaptive timeout
//! (from [`ListenerConfig::min_wait`] after work, doubling up to [`ListenerConfig::max_wait`]).
//! Every wake-up, a ring or a timeout, polls all buffers, so a missed ring (a device that pushed
//! without ringing, or a lost signal) delays a wave by at most one timeout and never hangs it.
//!
//! [`Listener::shutdown`] (and `Drop`) stops the loop, goes on answering until no packet has
//! arrived for [`ListenerConfig::shutdown_grace`], and joins the thread. It stops the loop by a
//! flag of this listener's own and wakes the thread with a [`Doorbell::ring`]: other listeners
//! sleeping on the same doorbell (a [`crate::ListenerPool`], or listeners given one doorbell)
//! see one spurious ring, poll once, and sleep again. Nothing is stored into the doorbell that
//! would keep them awake.

use crate::buffer::HostcallBuffer;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::serve::capacity::ServedPackets;
use crate::serve::registry::{Services, Stats, ThreadDispatch};
use hostcall_core::{DrainReport, Poller, Protocol};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most buffers one listener serves at once (the core poller's fixed capacity). Start more
/// listeners for more; one buffer must never be registered with two.
pub const MAX_BUFFERS: usize = 256;

/// How a listener waits.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    /// Polls without work before sleeping on the doorbell. `u32::MAX`: never sleep (a spinning
    /// listener: lowest latency, one core busy).
    pub spin_polls: u32,
    /// The doorbell timeout right after work.
    pub min_wait: Duration,
    /// The longest doorbell timeout when idle: the bound on what a missed ring costs.
    pub max_wait: Duration,
    /// After shutdown is asked, answering goes on until no packet arrived for this long.
    pub shutdown_grace: Duration,
    /// The thread's name.
    pub thread_name: String,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            spin_polls: 64,
            min_wait: Duration::from_micros(200),
            max_wait: Duration::from_millis(10),
            shutdown_grace: Duration::from_millis(20),
            thread_name: "hostcall-listener".into(),
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
    /// The packets of each buffer served (owned or raw, keyed by base address), counted in the
    /// registry's lane capacity while they are served (and until the listener is dropped).
    served: Mutex<HashMap<usize, ServedPackets>>,
    stop: AtomicBool,
    config: ListenerConfig,
}

/// A listener thread serving hostcall buffers.
///
/// ```
/// use hostcall::prelude::*;
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
            stop: AtomicBool::new(false),
            config,
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(shared.config.thread_name.clone())
                .spawn(move || run(&shared))
                .map_err(|e| Error::Thread(e.to_string()))?
        };
        Ok(Self { shared, thread: Mutex::new(Some(thread)) })
    }

    /// The service registry (register services before or while waves run).
    pub fn services(&self) -> &Services {
        &self.shared.services
    }

    /// The doorbell this listener sleeps on; buffers it serves should ring it.
    pub fn doorbell(&self) -> &Arc<dyn Doorbell> {
        &self.shared.doorbell
    }

    /// Starts serving `buffer` (while running is fine). Its packets report the buffer's
    /// [`device_ordinal`](HostcallBuffer::device_ordinal) to services.
    pub fn add_buffer(&self, buffer: Arc<HostcallBuffer>) -> Result<(), Error> {
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        let served = self.shared.services.lane_capacity().serve(buffer.num_packets());
        // SAFETY: `owned` keeps the buffer alive until `remove_buffer` has removed it from the
        // poller; a `HostcallBuffer` is accessed only atomically.
        unsafe {
            let (base, len, n) = (buffer.as_ptr(), buffer.len(), buffer.num_packets());
            self.shared.poller.add_on_device(buffer.protocol(), base, len, n, buffer.device_ordinal())
        }?;
        self.shared.note_served(buffer.as_ptr(), served);
        owned.insert(buffer.as_ptr() as usize, buffer);
        Ok(())
    }

    /// Starts serving only the packets `range` of the phase-protocol buffer `buffer`, so that
    /// several listeners (threads) can share one buffer, each serving its own disjoint range
    /// ([`crate::serve::pool::ListenerPool`] does the split). The caller makes sure no other listener
    /// serves an index of `range`, and that every packet of the buffer is served by some
    /// listener. The stack protocol cannot be split ([`Error::Unsupported`]).
    pub fn add_buffer_range(
        &self,
        buffer: Arc<HostcallBuffer>,
        range: std::ops::Range<u32>,
    ) -> Result<(), Error> {
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        if buffer.protocol() != Protocol::Phase {
            return Err(Error::Unsupported(
                "only a phase-protocol buffer can be split between listeners".into(),
            ));
        }
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        let served =
            self.shared.services.lane_capacity().serve(u64::from(range.end.saturating_sub(range.start)));
        // SAFETY: `owned` keeps the buffer alive until `remove_buffer` has removed it from the
        // poller; a `HostcallBuffer` is accessed only atomically; the caller keeps the ranges of
        // the listeners serving this buffer disjoint (see above).
        unsafe {
            let (base, len, n) = (buffer.as_ptr(), buffer.len(), buffer.num_packets());
            self.shared.poller.add_phase_range_on_device(base, len, n, range, buffer.device_ordinal())
        }?;
        self.shared.note_served(buffer.as_ptr(), served);
        owned.insert(buffer.as_ptr() as usize, buffer);
        Ok(())
    }

    /// Stops serving `buffer`. When this returns the listener no longer touches it.
    pub fn remove_buffer(&self, buffer: &HostcallBuffer) -> Result<Arc<HostcallBuffer>, Error> {
        let mut owned = self.shared.owned.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.poller.remove(buffer.as_ptr())?;
        self.shared.forget_served(buffer.as_ptr());
        Ok(owned.remove(&(buffer.as_ptr() as usize)).expect("registered buffers are owned"))
    }

    /// Starts serving a stack-protocol buffer in memory the caller manages (the C ABI's path).
    ///
    /// # Safety
    /// `base..base + len` must stay valid, and be accessed only atomically, until
    /// [`Listener::remove_raw`] for it returns or the listener is dropped.
    pub unsafe fn add_raw(&self, base: *mut u8, len: usize, num_packets: u64) -> Result<(), Error> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.add_raw_on_device(base, len, num_packets, 0) }
    }

    /// [`Listener::add_raw`] for a buffer of device `device` (the ordinal its packets report to
    /// services, as [`HostcallBuffer::with_device_ordinal`]).
    ///
    /// # Safety
    /// As for [`Listener::add_raw`].
    pub unsafe fn add_raw_on_device(
        &self,
        base: *mut u8,
        len: usize,
        num_packets: u64,
        device: u32,
    ) -> Result<(), Error> {
        if self.is_shut_down() {
            return Err(Error::ShutDown);
        }
        let served = self.shared.services.lane_capacity().serve(num_packets);
        // SAFETY: forwarded from this function's contract.
        unsafe { self.shared.poller.add_on_device(Protocol::Stack, base, len, num_packets, device) }?;
        self.shared.note_served(base, served);
        Ok(())
    }

    /// Stops serving a buffer added with [`Listener::add_raw`].
    pub fn remove_raw(&self, base: *mut u8) -> Result<(), Error> {
        self.shared.poller.remove(base)?;
        self.shared.forget_served(base);
        Ok(())
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

    /// Stops the thread after answering what is in flight, joins it, and returns the counters.
    /// Idempotent.
    pub fn shutdown(&self) -> Stats {
        // Release: pairs with the Acquire load in `run`. Then a ring wakes this listener's thread
        // if it sleeps on the doorbell; to any other listener on the doorbell it is a spurious
        // ring (one poll), so they keep working.
        self.shared.stop.store(true, Ordering::Release);
        self.shared.doorbell.ring();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            if thread.join().is_err() {
                log::error!("the listener thread panicked");
            }
        }
        self.stats()
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
    /// Keeps the buffer at `base` counted in the registry's lane capacity until it is removed.
    fn note_served(&self, base: *const u8, served: ServedPackets) {
        self.served.lock().unwrap_or_else(|p| p.into_inner()).insert(base as usize, served);
    }

    /// The buffer at `base` is no longer served: its packets leave the lane capacity.
    fn forget_served(&self, base: *const u8) {
        self.served.lock().unwrap_or_else(|p| p.into_inner()).remove(&(base as usize));
    }
}

fn poll(shared: &Shared, dispatch: &ThreadDispatch<'_>) -> DrainReport {
    shared.poller.poll_once(dispatch)
}

fn run(shared: &Shared) {
    let config = &shared.config;
    let dispatch = shared.services.dispatcher();
    let poll = |shared: &Shared| poll(shared, &dispatch);
    let mut last_seen = shared.doorbell.value();
    let mut wait = config.min_wait;
    let mut idle_polls = 0u32;
    // Acquire: pairs with the Release store in `shutdown`.
    while !shared.stop.load(Ordering::Acquire) {
        if poll(shared).packets > 0 {
            idle_polls = 0;
            wait = config.min_wait;
            continue;
        }
        if idle_polls < config.spin_polls {
            idle_polls += 1;
            std::hint::spin_loop();
            continue;
        }
        let now = shared.doorbell.wait(last_seen, wait);
        if now == last_seen {
            wait = (wait * 2).min(config.max_wait); // idle: back off; the next poll happens anyway
        } else {
            wait = config.min_wait;
            idle_polls = 0;
        }
        last_seen = now;
    }
    drain_until_quiet(shared, &dispatch);
}

/// Answers in-flight packets until none arrived for the grace period.
fn drain_until_quiet(shared: &Shared, dispatch: &ThreadDispatch<'_>) {
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < shared.config.shutdown_grace {
        if poll(shared, dispatch).packets > 0 {
            quiet_since = Instant::now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
