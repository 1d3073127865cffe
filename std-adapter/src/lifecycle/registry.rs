//! The process-wide registry of enabled buffers, shared by every [`super::HostcallRuntime`].
//!
//! It is what turns misuse into errors: a buffer address is enabled at most once in the process
//! (on one runtime, for one queue), no two enabled buffers overlap, and a queue has at most one
//! buffer. The lock is held only for lookups and updates, never while waiting for a listener, so
//! a slow service on one listener never blocks another runtime's enable or disable.

use super::options::Bitmap;
use super::QueueId;
use crate::buffer::Protocol;
use crate::doorbell::Doorbell;
use crate::error::Error;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

/// One enabled buffer.
pub(super) struct Enabled {
    /// Bytes it spans (`buffer_size(num_packets)`).
    pub len: usize,
    /// Its packet count.
    pub num_packets: u32,
    /// The queue it is enabled for.
    pub queue: QueueId,
    /// The id of the runtime whose listener serves it.
    pub runtime: u64,
    /// The doorbell of that runtime (what emulated waves ring).
    pub doorbell: Arc<dyn Doorbell>,
    /// False while `enable` is still initialising it: emulated waves must not use it yet.
    pub ready: bool,
    /// Its wire protocol.
    pub protocol: Protocol,
    /// A phase buffer's `occupied` bitmap (an owned one is freed when the entry is dropped).
    pub bitmap: Bitmap,
    /// The device it serves ([`super::EnableOptions::device_ordinal`]).
    pub device_ordinal: u32,
}

/// Enabled buffers by base address, and the queues they serve.
pub(super) struct Registry {
    buffers: BTreeMap<usize, Enabled>,
    queues: BTreeMap<QueueId, usize>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { buffers: BTreeMap::new(), queues: BTreeMap::new() });

/// The listener threads of all runtimes: enable and disable refuse to run on them. A lock of its
/// own, because a listener thread must be able to check it while the registry is held.
static LISTENER_THREADS: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());

/// Locks the registry. A panic while it was held cannot leave it inconsistent (every update is a
/// single insert or remove pair done without calls that can panic in between), so poisoning is
/// ignored.
pub(super) fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

fn listener_threads() -> MutexGuard<'static, Vec<ThreadId>> {
    LISTENER_THREADS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a runtime's listener thread.
pub(super) fn add_listener_thread(id: ThreadId) {
    listener_threads().push(id);
}

/// Forgets a listener thread (before it is joined).
pub(super) fn remove_listener_thread(id: ThreadId) {
    listener_threads().retain(|t| *t != id);
}

/// `Err(CalledFromListener)` on a runtime's listener thread (a service handler calling enable or
/// disable would wait for its own poll to end).
pub(super) fn refuse_listener_thread() -> Result<(), Error> {
    let me = std::thread::current().id();
    // Any thread of any listener (a runtime's listener hands its buffers to another thread while
    // one is stuck in a service: `threads/listener/relay.rs`).
    if crate::threads::listener::listener_of_this_thread() != 0 || listener_threads().contains(&me) {
        return Err(Error::CalledFromListener);
    }
    Ok(())
}

impl Registry {
    /// Reserves `base` for `entry` (not yet ready), or says why it cannot be enabled.
    pub fn reserve(&mut self, base: usize, entry: Enabled) -> Result<(), Error> {
        self.check_free(base, entry.len, entry.queue, entry.runtime)?;
        if let Bitmap::Given(address) = entry.bitmap {
            // A bitmap inside another enabled buffer would have the device scribble on it.
            if let Some(other) = self.overlapping(address, super::options::occupied_size(entry.num_packets)) {
                return Err(Error::Overlaps { buffer: base, enabled: other });
            }
        }
        self.queues.insert(entry.queue, base);
        self.buffers.insert(base, entry);
        Ok(())
    }

    fn check_free(&self, base: usize, len: usize, queue: QueueId, runtime: u64) -> Result<(), Error> {
        if let Some(e) = self.buffers.get(&base) {
            return Err(if e.runtime == runtime {
                Error::AlreadyEnabled { buffer: base, queue: e.queue.0 }
            } else {
                Error::EnabledOnOtherListener { buffer: base }
            });
        }
        if let Some(other) = self.overlapping(base, len) {
            return Err(Error::Overlaps { buffer: base, enabled: other });
        }
        if let Some(&other) = self.queues.get(&queue) {
            return Err(Error::QueueTaken { queue: queue.0, buffer: other });
        }
        Ok(())
    }

    /// The enabled buffer that `start..start + len` overlaps, if any.
    fn overlapping(&self, start: usize, len: usize) -> Option<usize> {
        let end = start.saturating_add(len);
        if let Some((&other, e)) = self.buffers.range(..start).next_back() {
            if other.saturating_add(e.len) > start {
                return Some(other);
            }
        }
        self.buffers.range(start..).next().map(|(&other, _)| other).filter(|&other| other < end)
    }

    /// Marks a reserved buffer as initialised and served.
    pub fn mark_ready(&mut self, base: usize) {
        if let Some(e) = self.buffers.get_mut(&base) {
            e.ready = true;
        }
    }

    /// Checks that `runtime` may disable `base` for `queue`.
    pub fn check_disable(&self, base: usize, queue: QueueId, runtime: u64) -> Result<(), Error> {
        let e = self.buffers.get(&base).ok_or(Error::NotEnabled { buffer: base })?;
        if e.runtime != runtime {
            return Err(Error::EnabledOnOtherListener { buffer: base });
        }
        if e.queue != queue {
            return Err(Error::WrongQueue { buffer: base, enabled_for: e.queue.0, given: queue.0 });
        }
        Ok(())
    }

    /// Forgets `base` and frees its queue. Returns the entry, to be dropped (freeing an owned
    /// bitmap) once the registry is unlocked.
    #[must_use = "drop the entry after unlocking the registry"]
    pub fn remove(&mut self, base: usize) -> Option<Enabled> {
        let e = self.buffers.remove(&base)?;
        self.queues.remove(&e.queue);
        Some(e)
    }

    /// Forgets every buffer of `runtime` (it is being dropped); returns their entries, as
    /// [`Registry::remove`].
    #[must_use = "drop the entries after unlocking the registry"]
    pub fn remove_runtime(&mut self, runtime: u64) -> Vec<Enabled> {
        let bases: Vec<usize> =
            self.buffers.iter().filter(|(_, e)| e.runtime == runtime).map(|(b, _)| *b).collect();
        bases.into_iter().filter_map(|base| self.remove(base)).collect()
    }

    /// The enabled buffer at `base`, if any.
    pub fn get(&self, base: usize) -> Option<&Enabled> {
        self.buffers.get(&base)
    }
}
