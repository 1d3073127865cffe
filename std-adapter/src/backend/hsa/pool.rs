//! [`PoolAllocator`]: allocations from one HSA memory pool at any alignment, and
//! [`HsaDeviceMemory`], a GPU's device-local memory.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use hsa_sys::HsaStatus;

use super::placement::{Placement, Pool};
use super::runtime::{Agent, HsaRuntime};
use crate::memory::{DeviceMemory, MemoryError};

/// A live allocation of a pool: the address handed out, and the pool's own block.
#[derive(Clone, Copy, Debug)]
pub(super) struct Block {
    /// Aligned as asked.
    pub(super) ptr: NonNull<u8>,
    /// What `hsa_amd_memory_pool_allocate` returned (what access grants and frees take).
    pub(super) raw: *mut c_void,
}

/// Allocations from one pool. An alignment above the pool's own is had by allocating
/// `size + align` bytes and handing out the first aligned address inside; the pool's block is
/// remembered (keyed by the address handed out) so that `free` frees it.
pub(super) struct PoolAllocator {
    pub(super) runtime: Arc<HsaRuntime>,
    pub(super) pool: Pool,
    /// Address handed out -> the pool's block, for over-aligned allocations only.
    over_aligned: Mutex<HashMap<usize, usize>>,
}

impl PoolAllocator {
    pub(super) fn new(runtime: Arc<HsaRuntime>, pool: Pool) -> Self {
        Self { runtime, pool, over_aligned: Mutex::new(HashMap::new()) }
    }

    /// `size` bytes aligned to `align` (not zeroed).
    pub(super) fn allocate(&self, size: usize, align: usize) -> Result<Block, MemoryError> {
        if size == 0 || !align.is_power_of_two() {
            return Err(MemoryError::BadRequest { size, align });
        }
        let over = align > self.pool.alignment;
        let bytes = if over { size.checked_add(align) } else { Some(size) };
        let bytes = bytes.ok_or(MemoryError::BadRequest { size, align })?;
        let mut raw: *mut c_void = std::ptr::null_mut();
        // SAFETY: the pool allows runtime allocation (checked when it was chosen), flags must be
        // 0, and `raw` is a valid out-pointer.
        let status =
            unsafe { (self.runtime.lib.hsa_amd_memory_pool_allocate)(self.pool.handle, bytes, 0, &mut raw) };
        if status == HsaStatus::ERROR_OUT_OF_RESOURCES {
            return Err(MemoryError::OutOfMemory { size });
        }
        self.runtime
            .check("hsa_amd_memory_pool_allocate", status)
            .map_err(|error| MemoryError::Backend(error.to_string()))?;
        if raw.is_null() {
            return Err(MemoryError::OutOfMemory { size });
        }
        let address = (raw as usize).next_multiple_of(align);
        if over {
            self.lock().insert(address, raw as usize);
        }
        // `address` is inside the block: the block has `align` spare bytes when over-aligned,
        // and is the pool's (aligned enough) address otherwise; so it is not null either.
        let ptr = NonNull::new(address as *mut u8).expect("inside a non-null block");
        Ok(Block { ptr, raw })
    }

    /// Frees what `allocate` handed out at `ptr`.
    pub(super) fn free(&self, ptr: NonNull<u8>) {
        let raw = self.lock().remove(&(ptr.as_ptr() as usize)).unwrap_or(ptr.as_ptr() as usize);
        self.free_block(raw as *mut c_void);
    }

    /// Frees a block of this pool.
    pub(super) fn free_block(&self, raw: *mut c_void) {
        // SAFETY: `raw` came from `hsa_amd_memory_pool_allocate` and is freed once (the callers'
        // contract); the runtime is alive (we hold it).
        let status = unsafe { (self.runtime.lib.hsa_amd_memory_pool_free)(raw) };
        if let Err(error) = self.runtime.check("hsa_amd_memory_pool_free", status) {
            log::warn!("{error}");
        }
    }

    /// Undoes an `allocate` whose block was not handed out.
    pub(super) fn abandon(&self, block: Block) {
        self.lock().remove(&(block.ptr.as_ptr() as usize));
        self.free_block(block.raw);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, usize>> {
        self.over_aligned.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A GPU's device-local memory: its own global, coarse-grained pool, where ROCm keeps the phase
/// protocol's `occupied` bitmap and DEVMEM blocks. The CPU may not reach it, so allocations are
/// zeroed with `hsa_amd_memory_fill` (sizes are rounded up to whole `u32`s for that), and the
/// device address is the pointer itself (HSA's one virtual address space).
pub struct HsaDeviceMemory {
    allocator: PoolAllocator,
    gpu: Agent,
}

impl fmt::Debug for HsaDeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsaDeviceMemory")
            .field("gpu", &self.gpu.name)
            .field("pool", &self.allocator.pool)
            .finish()
    }
}

impl HsaDeviceMemory {
    /// The device-local memory of `placement`'s GPU.
    pub fn new(runtime: Arc<HsaRuntime>, placement: &Placement) -> Self {
        Self { allocator: PoolAllocator::new(runtime, placement.device), gpu: placement.gpu.clone() }
    }

    /// The pool allocations come from.
    pub fn pool(&self) -> Pool {
        self.allocator.pool
    }

    /// The GPU whose memory this is.
    pub fn gpu(&self) -> &Agent {
        &self.gpu
    }
}

impl DeviceMemory for HsaDeviceMemory {
    fn name(&self) -> &'static str {
        "hsa-device-local"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let words = size.div_ceil(4);
        let block = self.allocator.allocate(words.saturating_mul(4), align.max(4))?;
        let lib = &self.allocator.runtime.lib;
        // SAFETY: `block.ptr` is 4-aligned with `words` whole `u32`s of this live allocation
        // behind it; the fill returns when done.
        let status = unsafe { (lib.hsa_amd_memory_fill)(block.ptr.as_ptr().cast(), 0, words) };
        if let Err(error) = self.allocator.runtime.check("hsa_amd_memory_fill", status) {
            self.allocator.abandon(block);
            return Err(MemoryError::Backend(error.to_string()));
        }
        Ok(block.ptr)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, _size: usize, _align: usize) {
        self.allocator.free(ptr);
    }

    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}
