//! [`DeferredFree`]: memory whose frees run on a thread of their own, never on the thread that
//! serves a device.

use crate::memory::{DeviceMemory, MemoryError};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

#[cfg(test)]
mod tests;

/// The default of [`DeferredFree::max_pending`]: 1 GiB, DEVMEM's default total budget
/// ([`DevMemLimits::max_total`](crate::services::devmem::DevMemLimits::max_total)), so memory
/// freed but not yet given back never holds more than the budget does.
pub const DEFAULT_MAX_PENDING: u64 = 1 << 30;

/// One block waiting to be freed (its address as an integer: a pointer is not `Send`).
struct Pending {
    address: usize,
    size: usize,
    align: usize,
}

/// What the side thread and the allocating threads share.
struct Shared<M> {
    inner: M,
    /// Bytes queued and not yet freed: added by `free` before it queues a block, subtracted by
    /// the side thread after it has freed one. Relaxed everywhere: a count for a bound, ordered
    /// with nothing else (the block itself travels through the channel, which orders it).
    pending: AtomicU64,
}

/// Memory `M` whose frees run on a side thread of their own, never on the thread that serves a
/// device.
///
/// # Why
///
/// A service frees memory while a device waits for it: DEVMEM frees a block on a device's request,
/// and LLVM libc's GPU allocator sends `FREE` on every large `free()` and every slab it gives back,
/// while its kernels run. Some backends' frees wait for the device: CUDA's `cuMemFreeHost`
/// synchronises the context, so it returns only once every kernel has ended, and a kernel waiting
/// for the listener's reply never ends while the listener sits in that free. The CUDA driver's
/// documentation allows any call to block ("Any CUDA API call may block or synchronize for
/// various reasons"), so the rule here is structural: the serving thread hands every free to a
/// side thread and goes on.
///
/// # How
///
/// - [`DeviceMemory::allocate`] runs on the calling thread, on the inner memory, after one check:
///   while more than [`DeferredFree::max_pending`] bytes are waiting to be freed it refuses
///   ([`MemoryError::Backend`], saying so), so a side thread that is itself held up (a free
///   waiting for a kernel) never lets a device grow the memory held beyond that bound.
/// - [`DeviceMemory::free`] queues the block (a channel to the side thread) and returns; the side
///   thread frees it on the inner memory, in the order freed.
/// - Dropping a [`DeferredFree`] closes the queue and joins the side thread, which frees what
///   is still queued first. (Drop it where waiting for the inner memory's frees is fine: not on a
///   serving thread.)
///
/// ```
/// use hostcall::backend::DeferredFree;
/// use hostcall::DeviceMemory;
/// use hostcall::HostMemory;
/// let memory = DeferredFree::new(HostMemory).unwrap();
/// let block = memory.allocate(4096, 64).unwrap();
/// // SAFETY: allocated just above with this size and alignment, not used afterwards.
/// unsafe { memory.free(block, 4096, 64) }; // returns at once; the side thread frees it
/// drop(memory); // joins the side thread once the queue is empty
/// ```
pub struct DeferredFree<M: DeviceMemory + 'static> {
    shared: Arc<Shared<M>>,
    /// `None` once dropping.
    queue: Mutex<Option<Sender<Pending>>>,
    worker: Option<JoinHandle<()>>,
    max_pending: u64,
}

impl<M: DeviceMemory + 'static> DeferredFree<M> {
    /// `inner` with its frees on a new side thread (`hostcall-free`), at most
    /// [`DEFAULT_MAX_PENDING`] bytes waiting. An error only when the thread cannot be spawned.
    pub fn new(inner: M) -> std::io::Result<Self> {
        Self::with_max_pending(inner, DEFAULT_MAX_PENDING)
    }

    /// As [`DeferredFree::new`], allocations refused while more than `max_pending` bytes wait to
    /// be freed.
    pub fn with_max_pending(inner: M, max_pending: u64) -> std::io::Result<Self> {
        let shared = Arc::new(Shared { inner, pending: AtomicU64::new(0) });
        let (queue, blocks) = channel::<Pending>();
        let side = shared.clone();
        let worker = std::thread::Builder::new().name("hostcall-free".into()).spawn(move || {
            for block in blocks {
                // The address came from `free`, whose caller passed an allocation of `inner`
                // (never null: it was a NonNull).
                if let Some(ptr) = NonNull::new(block.address as *mut u8) {
                    // SAFETY: `free`'s contract: an allocation of `inner` with this size and
                    // alignment, freed once (it was queued once), no longer used.
                    unsafe { side.inner.free(ptr, block.size, block.align) };
                }
                // Relaxed: see `Shared::pending`.
                side.pending.fetch_sub(block.size as u64, Ordering::Relaxed);
            }
        })?;
        Ok(Self { shared, queue: Mutex::new(Some(queue)), worker: Some(worker), max_pending })
    }

    /// The memory frees are deferred for.
    pub fn inner(&self) -> &M {
        &self.shared.inner
    }

    /// Bytes freed and not yet given back to the inner memory.
    pub fn pending_bytes(&self) -> u64 {
        // Relaxed: see `Shared::pending`.
        self.shared.pending.load(Ordering::Relaxed)
    }

    /// The most bytes that may wait to be freed before allocations are refused.
    pub fn max_pending(&self) -> u64 {
        self.max_pending
    }
}

impl<M: DeviceMemory + 'static> DeviceMemory for DeferredFree<M> {
    fn name(&self) -> &'static str {
        self.shared.inner.name()
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let pending = self.pending_bytes();
        if pending > self.max_pending {
            return Err(MemoryError::Backend(format!(
                "{}: {pending} bytes freed are still waiting for the side thread to give them back \
                 (more than {}): refused until it does",
                self.name(),
                self.max_pending
            )));
        }
        self.shared.inner.allocate(size, align)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        // Relaxed: see `Shared::pending`.
        self.shared.pending.fetch_add(size as u64, Ordering::Relaxed);
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let block = Pending { address: ptr.as_ptr() as usize, size, align };
        let queued = queue.as_ref().is_some_and(|queue| queue.send(block).is_ok());
        if !queued {
            // The side thread is gone (it panicked in the inner free): the block is leaked
            // rather than freed here, on what may be a serving thread.
            log::error!("{}: the free thread is gone: {size} bytes at {ptr:p} leaked", self.name());
        }
    }

    fn device_address(&self, host: *const u8) -> u64 {
        self.shared.inner.device_address(host)
    }
}

impl<M: DeviceMemory + 'static> Drop for DeferredFree<M> {
    fn drop(&mut self) {
        // Closing the channel ends the side thread's loop once it has freed what is queued.
        drop(self.queue.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl<M: DeviceMemory + 'static> fmt::Debug for DeferredFree<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeferredFree")
            .field("inner", &self.shared.inner)
            .field("pending_bytes", &self.pending_bytes())
            .field("max_pending", &self.max_pending)
            .finish()
    }
}
