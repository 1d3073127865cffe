//! Memory: [`CudaMemory`] (pinned, mapped host memory both sides reach), [`DeviceBuffer`]
//! (device-local memory) and the buffers built from them (phase, line, LLVM-RPC, stack).

use super::driver::{check, Cuda};
use super::launch::Module;
use crate::buffer::{HostcallBuffer, Protocol};
use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceMemory, MemoryError};
use crate::threads::affinity;
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Pinned, device-mapped host memory: allocations both the CPU and the GPU reach, the GPU over
/// PCIe. The memory is ordinary write-back cacheable host memory to the CPU.
///
/// The pages are `PORTABLE` (mapped in every context, so another GPU of the process can reach
/// them too) and allocated under the device's primary context. Made with [`CudaMemory::near`],
/// each allocation is made from the calling thread moved for the call onto the CPUs near the
/// device: the driver pins (and so first touches) the pages in `cuMemHostAlloc`, and Linux's
/// default policy takes them from the NUMA node of the CPU that touches them, the GPU's node.
pub struct CudaMemory {
    cuda: Arc<Cuda>,
    /// Host address -> (size, device address) of every live allocation.
    allocations: Mutex<BTreeMap<usize, (usize, u64)>>,
    /// The CPUs near the device, where allocations are made (empty: wherever the caller runs).
    near: Vec<usize>,
}

impl CudaMemory {
    /// Memory of `cuda`'s device, its pages from wherever the allocating thread runs.
    pub fn new(cuda: Arc<Cuda>) -> Self {
        Self::near(cuda, Vec::new())
    }

    /// Memory of `cuda`'s device, its pages from the NUMA node of `cpus` (the CPUs near the
    /// device: [`super::Topology::local_cpus`]). Empty `cpus`: as [`CudaMemory::new`].
    pub fn near(cuda: Arc<Cuda>, cpus: Vec<usize>) -> Self {
        Self { cuda, allocations: Mutex::new(BTreeMap::new()), near: cpus }
    }

    /// `cuMemHostAlloc` from a thread on the CPUs near the device, where they are known (the
    /// calling thread's affinity is put back afterwards).
    fn host_alloc(&self, size: usize, flags: u32) -> Result<*mut c_void, Error> {
        let before = if self.near.is_empty() { Vec::new() } else { affinity::allowed_cpus() };
        let moved = !before.is_empty() && affinity::pin_current_thread(&self.near);
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes the allocation's address into `host`.
        let status = check(unsafe { sys::cuMemHostAlloc(&mut host, size, flags) }, "cuMemHostAlloc");
        if moved {
            affinity::pin_current_thread(&before);
        }
        status.map(|()| host)
    }
}

/// `cuMemHostAlloc` gives page-aligned memory; larger alignments are refused.
const HOST_ALLOC_ALIGN: usize = 4096;

impl DeviceMemory for CudaMemory {
    fn name(&self) -> &'static str {
        "cuda-pinned-mapped"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        if size == 0 || !align.is_power_of_two() || align > HOST_ALLOC_ALIGN {
            return Err(MemoryError::BadRequest { size, align });
        }
        self.cuda.make_current().map_err(|e| MemoryError::Backend(e.to_string()))?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        let host = self.host_alloc(size, flags).map_err(|e| MemoryError::Backend(e.to_string()))?;
        let Some(ptr) = NonNull::new(host.cast::<u8>()) else {
            return Err(MemoryError::OutOfMemory { size });
        };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` is a live mapped allocation; writes its device address.
        let mapped = check(
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) },
            "cuMemHostGetDevicePointer",
        );
        if let Err(e) = mapped {
            // SAFETY: allocated above, not handed out.
            unsafe { sys::cuMemFreeHost(host) };
            return Err(MemoryError::Backend(e.to_string()));
        }
        // SAFETY: `size` bytes at `ptr` were just allocated and nobody else has them yet.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size) };
        self.allocations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ptr.as_ptr() as usize, (size, device));
        Ok(ptr)
    }

    unsafe fn free(&self, ptr: NonNull<u8>, _size: usize, _align: usize) {
        self.allocations.lock().unwrap_or_else(|p| p.into_inner()).remove(&(ptr.as_ptr() as usize));
        let _ = self.cuda.make_current();
        // SAFETY: the caller passes an allocation of ours, not yet freed and no longer used.
        let _ = unsafe { sys::cuMemFreeHost(ptr.as_ptr().cast()) };
    }

    fn device_address(&self, host: *const u8) -> u64 {
        let allocations = self.allocations.lock().unwrap_or_else(|p| p.into_inner());
        let at = host as usize;
        match allocations.range(..=at).next_back() {
            Some((&base, &(size, device))) if at < base + size => device + (at - base) as u64,
            // Not ours: with unified addressing the device address is the host address.
            _ => host as u64,
        }
    }
}

impl fmt::Debug for CudaMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaMemory").field("device", &self.cuda.name).field("near", &self.near).finish()
    }
}

/// Device-local memory (`cuMemAlloc`), zeroed, freed on drop.
pub struct DeviceBuffer {
    cuda: Arc<Cuda>,
    address: sys::CUdeviceptr,
    size: usize,
}

impl DeviceBuffer {
    /// `size` zeroed bytes of device memory.
    pub fn new(cuda: Arc<Cuda>, size: usize) -> Result<Self, Error> {
        cuda.make_current()?;
        let mut address = 0;
        // SAFETY: writes the allocation's address.
        check(unsafe { sys::cuMemAlloc_v2(&mut address, size.max(1)) }, "cuMemAlloc")?;
        let buffer = Self { cuda, address, size };
        buffer.zero()?;
        Ok(buffer)
    }

    /// Zeroes it (synchronously; no kernel may be using it).
    pub fn zero(&self) -> Result<(), Error> {
        self.cuda.make_current()?;
        // SAFETY: `size` bytes at `address` are ours.
        check(unsafe { sys::cuMemsetD8_v2(self.address, 0, self.size) }, "cuMemsetD8")?;
        // A memset of device memory may still be running when it returns: wait for it, so no
        // kernel (on any stream) sees the old bytes.
        // SAFETY: the context is current.
        check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
    }

    /// The device address.
    pub fn device_address(&self) -> u64 {
        self.address
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Copies the first `out.len()` bytes to the host (synchronously).
    pub fn read(&self, out: &mut [u8]) -> Result<(), Error> {
        if out.len() > self.size {
            return Err(Error::Cuda(format!("read of {} bytes from a buffer of {}", out.len(), self.size)));
        }
        self.cuda.make_current()?;
        // SAFETY: `out` is writable for its length, which is within the allocation.
        check(
            unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.address, out.len()) },
            "cuMemcpyDtoH",
        )
    }

    /// Reads the first `count` `u64`s.
    pub fn read_u64(&self, count: usize) -> Result<Vec<u64>, Error> {
        let mut bytes = vec![0u8; count * 8];
        self.read(&mut bytes)?;
        Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: allocated in `new`, freed once here.
        let _ = unsafe { sys::cuMemFree_v2(self.address) };
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer").field("address", &self.address).field("size", &self.size).finish()
    }
}

/// Where `include/hostcall_cuda.cuh` keeps its device state, after the `occupied` bitmap of a
/// phase buffer of `num_packets` packets (byte offsets from the bitmap; the header's
/// `HOSTCALL_CUDA_*_OFFSET` macros compute the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceStateLayout {
    /// The shadow of `device_phase`: `u32[num_packets]`.
    pub shadow: usize,
    /// The doorbell throttle's last-ring time: one `u64`.
    pub last_ring: usize,
    /// Bytes of the whole device allocation.
    pub size: usize,
}

impl DeviceStateLayout {
    /// The layout for `num_packets` packets.
    ///
    /// ```
    /// use hostcall::backend::cuda::DeviceStateLayout;
    /// let l = DeviceStateLayout::new(1056);
    /// assert_eq!((l.shadow, l.last_ring, l.size), (256, 256 + 4224, 256 + 4224 + 128));
    /// ```
    pub const fn new(num_packets: usize) -> Self {
        const fn align128(x: usize) -> usize {
            (x + 127) & !127
        }
        let occupied = num_packets.div_ceil(32) * 4;
        let shadow = align128(occupied);
        let last_ring = shadow + align128(4 * num_packets);
        Self { shadow, last_ring, size: last_ring + 128 }
    }
}

/// A phase buffer for CUDA kernels, reporting `cuda`'s ordinal as its device
/// ([`HostcallBuffer::with_device_ordinal`]): the buffer in pinned, mapped host memory ([`CudaMemory`]),
/// its `occupied` bitmap and the device state of `include/hostcall_cuda.cuh` in device memory
/// (returned; keep it alive as long as the buffer is used).
pub fn phase_buffer(
    cuda: &Arc<Cuda>,
    memory: Arc<CudaMemory>,
    num_packets: u64,
    doorbell: Arc<dyn Doorbell>,
) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
    let state = DeviceBuffer::new(cuda.clone(), DeviceStateLayout::new(num_packets as usize).size)?;
    let buffer = HostcallBuffer::with_protocol(memory, num_packets, doorbell, Protocol::Phase)?
        .with_device_ordinal(cuda.ordinal() as u32);
    buffer.set_device_occupied(state.device_address())?;
    Ok((Arc::new(buffer), state))
}

/// A line-protocol buffer for CUDA kernels (`hostcall::line_call` in `include/hostcall_cuda.cuh`):
/// the request and reply blocks in pinned, mapped host memory, the device-only words in device
/// memory (returned zeroed; keep it alive as long as the buffer is used), laid out as
/// [`DeviceStateLayout`] with `device_seq` where a phase buffer keeps its shadow phases:
/// `occupied` at 0, `device_seq` at `shadow`, the doorbell throttle at `last_ring`. The host
/// never reads them.
pub fn line_buffer(
    cuda: &Arc<Cuda>,
    memory: Arc<CudaMemory>,
    num_packets: u64,
    doorbell: Arc<dyn Doorbell>,
) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
    let layout = DeviceStateLayout::new(num_packets as usize);
    let state = DeviceBuffer::new(cuda.clone(), layout.size)?;
    let buffer = HostcallBuffer::with_protocol(memory, num_packets, doorbell, Protocol::Line)?
        .with_device_ordinal(cuda.ordinal() as u32);
    let base = state.device_address();
    buffer.set_line_device_state(base + layout.shadow as u64, base)?;
    Ok((Arc::new(buffer), state))
}

/// An LLVM-RPC buffer of `ports` ports (an even count) of 32 lanes (a warp) for CUDA kernels
/// (`include/hostcall_cuda_rpc.cuh`), reporting `cuda`'s ordinal: the buffer in pinned, mapped host
/// memory; the client object built over its device address
/// ([`client_object`](hostcall_core::rpc::client_object)) and copied into `module`'s
/// [`CLIENT_SYMBOL`](hostcall_core::rpc::CLIENT_SYMBOL), whose size is checked first
/// ([`check_client_symbol`](hostcall_core::rpc::check_client_symbol): an
/// [`Error::Unsupported`] when the device code was built against another `rpc.h`); and the CUDA
/// client's port state, `u32[ports]` in device memory (returned zeroed: keep it alive as long as
/// the buffer is used, and pass its address to the kernels, or null for LLVM's open). The module
/// holds one client object: one buffer at a time per module, written before the launches that use it.
pub fn rpc_buffer(
    cuda: &Arc<Cuda>,
    memory: Arc<CudaMemory>,
    ports: u64,
    doorbell: Arc<dyn Doorbell>,
    module: &Module,
) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
    use hostcall_core::rpc::{check_client_symbol, client_object, CLIENT_SYMBOL};
    if ports % 2 != 0 {
        return Err(Error::Unsupported(format!(
            "{ports} RPC ports: the CUDA client needs an even count (it accesses headers and lane buffers 16 bytes at a time)"
        )));
    }
    let (_, symbol_size) = module.global(CLIENT_SYMBOL)?;
    check_client_symbol(symbol_size as u64).map_err(|e| Error::Unsupported(e.to_string()))?;
    let protocol = Protocol::Rpc { lanes: 32 };
    let buffer = HostcallBuffer::with_protocol(memory, ports, doorbell, protocol)?
        .with_device_ordinal(cuda.ordinal() as u32);
    let object = client_object(buffer.num_packets() as u32, buffer.device_address())
        .map_err(|e| Error::Layout(e.into()))?;
    module.write_global(CLIENT_SYMBOL, &object)?;
    let state = DeviceBuffer::new(cuda.clone(), 4 * buffer.num_packets() as usize)?;
    Ok((Arc::new(buffer), state))
}

/// A stack-protocol buffer in pinned, mapped host memory, where the device allows it
/// ([`Cuda::check_protocol`]): an [`Error::Unsupported`] without platform atomics.
pub fn stack_buffer(
    cuda: &Arc<Cuda>,
    memory: Arc<CudaMemory>,
    num_packets: u64,
    doorbell: Arc<dyn Doorbell>,
) -> Result<Arc<HostcallBuffer>, Error> {
    cuda.check_protocol(Protocol::Stack)?;
    let buffer = HostcallBuffer::with_protocol(memory, num_packets, doorbell, Protocol::Stack)?;
    Ok(Arc::new(buffer.with_device_ordinal(cuda.ordinal() as u32)))
}
