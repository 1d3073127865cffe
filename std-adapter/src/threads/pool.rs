//! [`ListenerPool`]: several listener threads sharing one service registry, splitting each
//! phase-, line- or RPC-protocol buffer's packets (ports) between them.
//!
//! One listener thread serves a few million warp-calls a second; a GPU with thousands of waves
//! wants more. The phase and line protocols
//! ([`Protocol::range_capable`](hostcall_core::Protocol::range_capable)) let several host threads
//! serve one buffer without talking to each other: the host writes only its per-packet word
//! (`host_phase[i]`, `served[i]`) and packet `i`'s reply words, so threads that serve disjoint
//! ranges of packet indices never write the same word. The pool gives each of its `N`
//! listeners one contiguous stripe of every such buffer ([`stripes`]), its boundaries on
//! multiples of [`STRIPE_ALIGN`] packets so that no two threads scan or write the same cache line
//! of the per-packet `u32` arrays. Waves that claim from an index of their own (a GPU warp from its warp id)
//! then spread over the threads.
//!
//! A stack-protocol buffer cannot be split (its host side swaps the whole ready-stack): the pool
//! gives each one whole to one listener, round robin.

use crate::buffer::HostcallBuffer;
use crate::dispatch::registry::Services;
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::observe::Stats;
use crate::threads::affinity;
use crate::threads::listener::registration::Memory;
use crate::threads::listener::{BufferOptions, BufferRegistration, Listener, ListenerConfig};
use hostcall_core::PollerError;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Stripe boundaries fall on multiples of this many packets: 16 `u32` per-packet words (phase or
/// line) are one 64-byte cache line.
pub const STRIPE_ALIGN: u32 = 16;

/// The stripes of a buffer of `num_packets` packets over `threads` threads: contiguous, disjoint,
/// covering `0..num_packets`, boundaries on multiples of [`STRIPE_ALIGN`] (so the last stripes may
/// be empty for small buffers).
///
/// ```
/// use hostcall::stripes;
/// assert_eq!(stripes(1056, 4), vec![0..272, 272..544, 544..816, 816..1056]);
/// assert_eq!(stripes(20, 4), vec![0..16, 16..20, 20..20, 20..20]);
/// assert_eq!(stripes(7, 1), vec![0..7]);
/// ```
pub fn stripes(num_packets: u32, threads: usize) -> Vec<Range<u32>> {
    let threads = threads.max(1) as u32;
    let per = num_packets.div_ceil(threads).div_ceil(STRIPE_ALIGN) * STRIPE_ALIGN;
    (0..threads)
        .map(|k| {
            let start = k.saturating_mul(per).min(num_packets);
            start..start.saturating_add(per).min(num_packets)
        })
        .collect()
}

/// `N` listener threads sharing one [`Services`] registry and one doorbell.
///
/// ```
/// use hostcall::prelude::*;
/// use hostcall::{HostMemory, HostcallBuffer, ListenerConfig, ListenerPool, ParkingDoorbell, Protocol, Wave};
/// use std::sync::Arc;
///
/// let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
/// let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::default()).unwrap();
/// pool.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
/// let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), 64, doorbell, Protocol::Phase);
/// let buffer = Arc::new(buffer.unwrap());
/// pool.add(buffer.clone()).unwrap(); // packets 0..32 to one thread, 32..64 to the other
/// let reply = Wave::new(buffer, 4).call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
/// assert_eq!(reply.lane(3), [43, 0]);
/// pool.shutdown();
/// ```
pub struct ListenerPool {
    listeners: Vec<Listener>,
    services: Arc<Services>,
    /// Where the next stack-protocol buffer goes.
    next_whole: AtomicUsize,
}

impl ListenerPool {
    /// Starts `threads` (at least 1) listener threads sleeping on `doorbell`, named
    /// `config.thread_name` with `-0`, `-1`, ... appended, placed on `config.cpus`
    /// (one CPU each while there are enough).
    pub fn start(threads: usize, doorbell: Arc<dyn Doorbell>, config: ListenerConfig) -> Result<Self, Error> {
        Self::start_with_services(threads, doorbell, config, Arc::new(Services::new()))
    }

    /// As [`ListenerPool::start`], dispatching through `services`.
    pub fn start_with_services(
        threads: usize,
        doorbell: Arc<dyn Doorbell>,
        config: ListenerConfig,
        services: Arc<Services>,
    ) -> Result<Self, Error> {
        let listeners = (0..threads.max(1))
            .map(|k| {
                let config = ListenerConfig {
                    thread_name: format!("{}-{k}", config.thread_name),
                    cpus: affinity::thread_cpus(&config.cpus, threads.max(1), k),
                    ..config.clone()
                };
                Listener::start_with_services(doorbell.clone(), config, services.clone())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { listeners, services, next_whole: AtomicUsize::new(0) })
    }

    /// The shared registry.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Number of listener threads.
    pub fn threads(&self) -> usize {
        self.listeners.len()
    }

    /// The listeners, one per thread.
    pub fn listeners(&self) -> &[Listener] {
        &self.listeners
    }

    /// Starts serving what `registration` says: a phase-, line- or RPC-protocol buffer split into
    /// [`stripes`] over the threads (threads whose stripe is empty do not get it), a stack buffer
    /// whole to one thread. An LLVM-RPC buffer's ports are striped as a phase buffer's packets
    /// are; each thread's host follows the calls on its own ports, all of them with the
    /// registration's options (and one output sink, one file table).
    ///
    /// Refused as [`Listener::add`] refuses, and with [`Error::Unsupported`] for a registration
    /// with a [`range`](BufferRegistration::range): the pool splits a buffer itself. When one
    /// stripe is refused, the stripes added before it are removed again.
    pub fn add(&self, registration: impl Into<BufferRegistration>) -> Result<(), Error> {
        let registration = registration.into();
        if registration.range.is_some() {
            return Err(Error::Unsupported(
                "a pool splits a buffer between its threads itself: register the whole buffer".into(),
            ));
        }
        if !registration.protocol().range_capable() {
            // Relaxed: only spreads buffers over threads; any value is correct.
            let k = self.next_whole.fetch_add(1, Ordering::Relaxed) % self.listeners.len();
            return self.listeners[k].add(registration);
        }
        // The stripes of an RPC buffer share its file table: a `FILE` opened on one port is good
        // on every port.
        let options = &registration.options;
        let options = BufferOptions { rpc: options.rpc.clone().with_one_file_table(), ..options.clone() };
        let ranges = stripes(registration.num_packets() as u32, self.listeners.len());
        for (k, (listener, range)) in self.listeners.iter().zip(ranges).enumerate() {
            if range.is_empty() {
                continue;
            }
            if let Err(e) = listener.add(registration.stripe(range, options.clone())) {
                for earlier in &self.listeners[..k] {
                    let _ = remove_registered(earlier, &registration);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Stops serving `buffer` on every thread. When this returns no thread touches it.
    pub fn remove_buffer(&self, buffer: &HostcallBuffer) -> Result<(), Error> {
        self.remove_everywhere(buffer.as_ptr() as usize, |listener| listener.remove_buffer(buffer).map(drop))
    }

    /// Stops serving memory added with a [`BufferRegistration::raw`] on every thread. When this
    /// returns no thread touches it.
    pub fn remove_raw(&self, base: *mut u8) -> Result<(), Error> {
        self.remove_everywhere(base as usize, |listener| listener.remove_raw(base))
    }

    /// The counters of the LLVM-RPC buffer at `base`'s hosts, summed over the threads that serve
    /// a stripe of it (`None`: no thread serves it as an RPC buffer).
    pub fn rpc_counters(&self, base: *const u8) -> Option<crate::services::rpc::RpcCounters> {
        self.listeners.iter().filter_map(|l| l.rpc_counters(base)).reduce(|a, b| a + b)
    }

    /// `remove` on every thread: done if one of them served the buffer at `base`.
    fn remove_everywhere(
        &self,
        base: usize,
        remove: impl Fn(&Listener) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut removed = false;
        for listener in &self.listeners {
            match remove(listener) {
                Ok(()) => removed = true,
                Err(Error::Poller(PollerError::NotRegistered { .. })) => {}
                Err(e) => return Err(e),
            }
        }
        if removed {
            Ok(())
        } else {
            Err(Error::Poller(PollerError::NotRegistered { base }))
        }
    }

    /// The counters so far (all threads together: they share the registry).
    pub fn stats(&self) -> Stats {
        self.services.stats()
    }

    /// Stops every thread (each answers what is in flight first), joins them and returns the
    /// counters. Idempotent.
    pub fn shutdown(&self) -> Stats {
        for listener in &self.listeners {
            listener.shutdown();
        }
        self.stats()
    }
}

/// Removes `registration`'s memory from `listener`, by the removal its kind of memory takes.
fn remove_registered(listener: &Listener, registration: &BufferRegistration) -> Result<(), Error> {
    match &registration.memory {
        Memory::Buffer(buffer) => listener.remove_buffer(buffer).map(drop),
        Memory::Raw { base, .. } => listener.remove_raw(*base as *mut u8),
    }
}

impl std::fmt::Debug for ListenerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerPool").field("threads", &self.listeners.len()).finish()
    }
}
