//! [`CudaDeviceMemory`]: device-local memory from a stream-ordered pool of our own, for what a
//! service allocates and frees while kernels run (DEVMEM, and LLVM libc's `MALLOC` / `FREE`
//! through it).

use super::driver::{check, Cuda};
use crate::backend::DeferredFree;
use crate::error::Error;
use crate::memory::{DeviceMemory, MemoryError};
use cudarc::driver::sys;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Device memory from a stream-ordered pool of our own, on a non-blocking side stream.
///
/// # Why this memory, and why these calls
///
/// The blocks are the device's heap: only the GPU touches them (ROCm's host hands out the GPU's
/// own memory for DEVMEM, and llvm-gpu-loader device memory for `MALLOC`), so they live in device
/// memory. They are allocated and freed while the kernel that asked waits for the reply, so no
/// call here may wait for that kernel. `cuMemAlloc` / `cuMemFree` and `cuMemFreeHost` synchronise
/// the context (a free waits for every kernel). The stream-ordered allocator does not: an
/// allocation or a free is an operation queued on a stream, ordered after that stream's earlier
/// work only, and our stream is created `CU_STREAM_NON_BLOCKING`, so it waits for no other
/// stream, the legacy default stream included. This is what llvm-gpu-loader does (its comment:
/// a separate stream "or else it will deadlock with the executing kernel").
///
/// - A pool of our own (`cuMemPoolCreate` on the device), not the device's default pool, so the
///   application's own `cudaMallocAsync` memory and ours never mix, with its release threshold
///   at the maximum: by default a pool gives memory back to the system at the next
///   synchronisation of any stream, which would put that work into our own waits. What the pool
///   keeps is bounded by DEVMEM's budget; it is given back when this memory is dropped.
/// - An allocation: `cuMemAllocFromPoolAsync` and a `cuMemsetD8Async` to zero it (a block may have
///   held another device's data) on the side stream, then `cuStreamQuery` of that stream until it
///   is done (bounded by [`CudaDeviceMemory::COMPLETION_LIMIT`]), so the kernel that gets the
///   address, on another stream, sees the memory allocated and zeroed.
/// - A free: `cuMemFreeAsync` on the side stream; its memory may be reused by the next allocation
///   on that stream, which is ordered after it.
/// - Alignment: the allocator's own (256 bytes asked for at most; larger alignments are refused,
///   and DEVMEM then takes a block that happens to be aligned or pads one: `services::devmem`).
///
/// Given to DEVMEM through [`CudaDeviceMemory::for_services`], which also puts its frees on a
/// side thread ([`DeferredFree`]): the driver's documentation allows any call to block for its own
/// reasons, so even `cuMemFreeAsync` is kept off the serving thread.
///
/// The host cannot read or write these blocks (device memory): their host address, as
/// [`DeviceMemory`] hands it out, is the device address, for bookkeeping only.
pub struct CudaDeviceMemory {
    cuda: Arc<Cuda>,
    pool: sys::CUmemoryPool,
    stream: sys::CUstream,
}

// SAFETY: the pool and the stream are driver handles any thread may use with the context
// current (every method makes it current); the driver serialises their use.
unsafe impl Send for CudaDeviceMemory {}
// SAFETY: as for Send; `&self` only passes the handles to the driver.
unsafe impl Sync for CudaDeviceMemory {}

/// The largest alignment the stream-ordered allocator is asked for (what `cuMemAlloc` documents
/// for every allocation).
const POOL_ALIGN: usize = 256;

impl CudaDeviceMemory {
    /// How long an allocation waits for the side stream to complete it (a watchdog: the stream
    /// holds nothing but our own allocations and memsets).
    pub const COMPLETION_LIMIT: Duration = Duration::from_secs(10);

    /// The pool and the side stream of `cuda`'s device. An error where the device has no
    /// stream-ordered allocator (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` = 0).
    pub fn new(cuda: Arc<Cuda>) -> Result<Self, Error> {
        use sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
        if cuda.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? == 0 {
            return Err(Error::Unsupported(format!(
                "{}: no stream-ordered memory allocator (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0), \
                 which device memory served while kernels run needs",
                cuda.name()
            )));
        }
        cuda.make_current()?;
        // SAFETY: an all-zero CUmemPoolProps is valid (no handle types, no security attributes,
        // no size limit); the fields that matter are set below.
        let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = cuda.ordinal() as i32;
        let mut pool = std::ptr::null_mut();
        // SAFETY: `props` is initialised; writes the pool's handle.
        check(unsafe { sys::cuMemPoolCreate(&mut pool, &props) }, "cuMemPoolCreate")?;
        let mut threshold = u64::MAX;
        // SAFETY: the pool was just created; the attribute's value is a u64.
        let kept = check(
            unsafe {
                sys::cuMemPoolSetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    (&mut threshold as *mut u64).cast(),
                )
            },
            "cuMemPoolSetAttribute(RELEASE_THRESHOLD)",
        );
        let mut stream = std::ptr::null_mut();
        let created = kept.and_then(|()| {
            // SAFETY: writes the stream's handle.
            check(
                unsafe {
                    sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
                },
                "cuStreamCreate(NON_BLOCKING)",
            )
        });
        if let Err(e) = created {
            // SAFETY: the pool is ours and holds no allocation.
            unsafe { sys::cuMemPoolDestroy(pool) };
            return Err(e);
        }
        Ok(Self { cuda, pool, stream })
    }

    /// This memory for services that allocate and free while kernels run: its frees on a side
    /// thread ([`DeferredFree`]). What [`Backend::cuda`](crate::backend::Backend::cuda) gives
    /// DEVMEM.
    pub fn for_services(cuda: Arc<Cuda>) -> Result<Arc<DeferredFree<CudaDeviceMemory>>, Error> {
        let memory = Self::new(cuda)?;
        let deferred = DeferredFree::new(memory)
            .map_err(|e| Error::Cuda(format!("cannot spawn the thread that frees device memory: {e}")))?;
        Ok(Arc::new(deferred))
    }

    /// Waits until the side stream has done what was queued on it.
    fn complete(&self) -> Result<(), Error> {
        let start = Instant::now();
        loop {
            // SAFETY: the stream is ours, alive until drop.
            match unsafe { sys::cuStreamQuery(self.stream) } {
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                status => return check(status, "cuStreamQuery"),
            }
            if start.elapsed() > Self::COMPLETION_LIMIT {
                return Err(Error::Cuda(format!(
                    "the side stream did not complete an allocation within {:?}",
                    Self::COMPLETION_LIMIT
                )));
            }
            std::thread::yield_now();
        }
    }

    fn allocate_zeroed(&self, size: usize) -> Result<sys::CUdeviceptr, Error> {
        self.cuda.make_current()?;
        let mut address: sys::CUdeviceptr = 0;
        // SAFETY: the pool and stream are ours; writes the allocation's address.
        check(
            unsafe { sys::cuMemAllocFromPoolAsync(&mut address, size, self.pool, self.stream) },
            "cuMemAllocFromPoolAsync",
        )?;
        // SAFETY: `size` bytes at `address`, ordered after their allocation on the same stream.
        let zeroed = check(unsafe { sys::cuMemsetD8Async(address, 0, size, self.stream) }, "cuMemsetD8Async")
            .and_then(|()| self.complete());
        if let Err(e) = zeroed {
            // SAFETY: allocated above, never handed out.
            unsafe { sys::cuMemFreeAsync(address, self.stream) };
            return Err(e);
        }
        Ok(address)
    }
}

impl DeviceMemory for CudaDeviceMemory {
    fn name(&self) -> &'static str {
        "cuda-device-stream-ordered"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        if size == 0 || !align.is_power_of_two() || align > POOL_ALIGN {
            return Err(MemoryError::BadRequest { size, align });
        }
        let address = self.allocate_zeroed(size).map_err(|e| MemoryError::Backend(e.to_string()))?;
        NonNull::new(address as usize as *mut u8).ok_or(MemoryError::OutOfMemory { size })
    }

    unsafe fn free(&self, ptr: NonNull<u8>, _size: usize, _align: usize) {
        let _ = self.cuda.make_current();
        // SAFETY: the caller passes an allocation of ours, not yet freed and no longer used.
        let _ = unsafe { sys::cuMemFreeAsync(ptr.as_ptr() as usize as sys::CUdeviceptr, self.stream) };
    }

    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

impl Drop for CudaDeviceMemory {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: the stream and the pool are ours; nothing allocates from them any more. Both
        // calls return at once and release the resources once queued work and outstanding
        // allocations are done (the driver's documented behaviour for each).
        unsafe {
            sys::cuStreamDestroy_v2(self.stream);
            sys::cuMemPoolDestroy(self.pool);
        }
    }
}

impl fmt::Debug for CudaDeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDeviceMemory").field("device", &self.cuda.name).finish()
    }
}
