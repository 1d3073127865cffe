//! CUDA backend (feature `cuda`): real GPU kernels make hostcalls against this crate's listener.
//!
//! The driver API is loaded at run time (cudarc with `dynamic-loading`), so this module builds
//! without CUDA and [`Cuda::new`] reports "no CUDA" as an error where there is none.
//!
//! - [`Cuda`]: the driver, one device and its primary context; device attributes, and
//!   [`Cuda::check_protocol`], which refuses the stack protocol where the GPU's atomics on host
//!   memory are not atomic with the CPU's (`CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED`).
//! - [`CudaMemory`]: a [`DeviceMemory`] of pinned, device-mapped host memory (`cuMemHostAlloc`
//!   with `DEVICEMAP | PORTABLE`; device addresses from `cuMemHostGetDevicePointer`): what the
//!   host and the GPU share.
//! - [`DeviceBuffer`]: device-local memory (`cuMemAlloc`), for what only the GPU touches: the
//!   phase protocol's `occupied` bitmap and the device state of `include/hostcall_cuda.cuh`.
//! - [`phase_buffer`]: a phase buffer in [`CudaMemory`] whose bitmap lives in a [`DeviceBuffer`].
//! - [`MappedDoorbell`]: a `u64` in mapped host memory the device stores to; the listener may
//!   poll it (a spinning listener ignores it).
//! - [`Module`], [`Kernel`], [`Stream`]: load a PTX or cubin file, launch a kernel.
//!
//! Every driver call runs with the device's primary context current on the calling thread
//! ([`Cuda::make_current`] is done by each method), so any thread may use these types.

use crate::buffer::{HostcallBuffer, Protocol};
use crate::doorbell::{Doorbell, DONE, INIT};
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory, MemoryError};
use cudarc::driver::sys;
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Turns a driver status into a `Result`, naming the call.
fn check(status: sys::CUresult, call: &str) -> Result<(), Error> {
    if status == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static string (or leaves it null) and reads
    // nothing else; the library is loaded (every caller made a driver call before).
    let known = unsafe { sys::cuGetErrorString(status, &mut text) } == sys::CUresult::CUDA_SUCCESS;
    let text = if known && !text.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    } else {
        "unknown error".into()
    };
    Err(Error::Cuda(format!("{call} failed: {status:?} ({text})")))
}

/// Whether a CUDA driver and a device exist here: the number of devices, or why not. Never
/// panics (it checks that `libcuda` can be opened before calling into it).
pub fn probe() -> Result<usize, String> {
    // SAFETY: only tries to open the library.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) found".into());
    }
    // SAFETY: the library is present; cuInit takes flags 0 and may be called more than once.
    check(unsafe { sys::cuInit(0) }, "cuInit").map_err(|e| e.to_string())?;
    let mut count = 0;
    // SAFETY: writes the count into `count`.
    check(unsafe { sys::cuDeviceGetCount(&mut count) }, "cuDeviceGetCount").map_err(|e| e.to_string())?;
    if count <= 0 {
        return Err("the CUDA driver reports no device".into());
    }
    Ok(count as usize)
}

/// The CUDA driver, one device and its retained primary context.
pub struct Cuda {
    device: sys::CUdevice,
    context: sys::CUcontext,
    name: String,
}

// SAFETY: a CUcontext is a handle the driver lets any thread make current; we only pass it to
// the driver.
unsafe impl Send for Cuda {}
// SAFETY: as for Send; `&Cuda` only reads the handles.
unsafe impl Sync for Cuda {}

impl Cuda {
    /// Loads the driver, initialises it, retains device `ordinal`'s primary context and makes it
    /// current on this thread. An error (never a panic) where there is no CUDA: see [`probe`].
    pub fn new(ordinal: usize) -> Result<Arc<Self>, Error> {
        let count = probe().map_err(Error::Cuda)?;
        if ordinal >= count {
            return Err(Error::Cuda(format!("no CUDA device {ordinal} (there are {count})")));
        }
        let mut device = 0;
        // SAFETY: the driver is initialised (probe); writes the handle into `device`.
        check(unsafe { sys::cuDeviceGet(&mut device, ordinal as i32) }, "cuDeviceGet")?;
        let mut context = std::ptr::null_mut();
        // SAFETY: `device` is a valid handle; writes the context into `context`.
        check(unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) }, "cuDevicePrimaryCtxRetain")?;
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: writes at most `name.len()` bytes, NUL-terminated.
        check(
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) },
            "cuDeviceGetName",
        )?;
        // SAFETY: NUL-terminated by the driver within the array.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        let cuda = Arc::new(Self { device, context, name });
        cuda.make_current()?;
        Ok(cuda)
    }

    /// Makes the primary context current on the calling thread.
    pub fn make_current(&self) -> Result<(), Error> {
        // SAFETY: the context is retained until drop.
        check(unsafe { sys::cuCtxSetCurrent(self.context) }, "cuCtxSetCurrent")
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A device attribute.
    pub fn attribute(&self, attribute: sys::CUdevice_attribute) -> Result<i32, Error> {
        let mut value = 0;
        // SAFETY: writes the value; `device` is valid.
        check(
            unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, self.device) },
            "cuDeviceGetAttribute",
        )?;
        Ok(value)
    }

    /// Whether the GPU's atomics on host memory are atomic with the CPU's (platform atomics,
    /// `cudaDevAttrHostNativeAtomicSupported`). The stack protocol needs them.
    pub fn host_native_atomics(&self) -> Result<bool, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)? != 0)
    }

    /// Number of streaming multiprocessors.
    pub fn multiprocessors(&self) -> Result<u32, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32)
    }

    /// The peak SM clock in kHz.
    pub fn clock_khz(&self) -> Result<u32, Error> {
        Ok(self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u32)
    }

    /// Refuses a protocol this device cannot speak with the host: the stack protocol
    /// read-modify-writes `ready_stack` from both sides, which is unsafe without platform
    /// atomics (PROTOCOL.md section 1: packets served twice, waves hung). The phase protocol is
    /// always fine.
    pub fn check_protocol(&self, protocol: Protocol) -> Result<(), Error> {
        if protocol == Protocol::Stack && !self.host_native_atomics()? {
            return Err(Error::Unsupported(format!(
                "the stack protocol needs platform atomics, and {} reports \
                 CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 0: its atomics on host memory are \
                 not atomic with the CPU's, so packets would be served twice or lost; use the phase protocol",
                self.name
            )));
        }
        Ok(())
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: releases the retain of `new`; nothing uses the context afterwards (every type
        // holding one keeps an `Arc<Cuda>`).
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda").field("name", &self.name).finish()
    }
}

/// Pinned, device-mapped host memory: allocations both the CPU and the GPU reach, the GPU over
/// PCIe. The memory is ordinary write-back cacheable host memory to the CPU.
pub struct CudaMemory {
    cuda: Arc<Cuda>,
    /// Host address -> (size, device address) of every live allocation.
    allocations: Mutex<BTreeMap<usize, (usize, u64)>>,
}

impl CudaMemory {
    /// Memory of `cuda`'s device.
    pub fn new(cuda: Arc<Cuda>) -> Self {
        Self { cuda, allocations: Mutex::new(BTreeMap::new()) }
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
        let mut host: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: writes the allocation's address into `host`.
        check(unsafe { sys::cuMemHostAlloc(&mut host, size, flags) }, "cuMemHostAlloc")
            .map_err(|e| MemoryError::Backend(e.to_string()))?;
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
        f.debug_struct("CudaMemory").field("device", &self.cuda.name).finish()
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
    /// use hostcall::cuda::DeviceStateLayout;
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

/// A phase buffer for CUDA kernels: the buffer in pinned, mapped host memory ([`CudaMemory`]),
/// its `occupied` bitmap and the device state of `include/hostcall_cuda.cuh` in device memory
/// (returned; keep it alive as long as the buffer is used).
pub fn phase_buffer(
    cuda: &Arc<Cuda>,
    memory: Arc<CudaMemory>,
    num_packets: u64,
    doorbell: Arc<dyn Doorbell>,
) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
    let state = DeviceBuffer::new(cuda.clone(), DeviceStateLayout::new(num_packets as usize).size)?;
    let buffer = HostcallBuffer::with_protocol(memory, num_packets, doorbell, Protocol::Phase)?;
    buffer.set_device_occupied(state.device_address())?;
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
    Ok(Arc::new(HostcallBuffer::with_protocol(memory, num_packets, doorbell, Protocol::Stack)?))
}

/// A doorbell the GPU can ring: one `u64` in pinned, mapped host memory. `include/hostcall_cuda.cuh`
/// stores the GPU's global timer into it (odd, never [`DONE`]), at most once per 10 us.
///
/// The host side polls: [`Doorbell::wait`] re-reads the word every 20 us until it changes or
/// the timeout passes (a device cannot wake a sleeping thread). A spinning listener never
/// waits on it. The device's stores and the host's [`Doorbell::ring`]/[`Doorbell::stop`] are
/// not atomic with each other (no platform atomics): a ring may be lost, which the listener's
/// poll on every timeout covers, as for any missed ring.
pub struct MappedDoorbell {
    allocation: DeviceAllocation,
}

impl MappedDoorbell {
    /// A doorbell at [`INIT`] in `memory`.
    pub fn new(memory: Arc<CudaMemory>) -> Result<Self, Error> {
        let allocation = DeviceAllocation::new(memory, 128, 128)?;
        let doorbell = Self { allocation };
        // Relaxed: published by the launch of any kernel that rings it.
        doorbell.word().store(INIT, Ordering::Relaxed);
        Ok(doorbell)
    }

    fn word(&self) -> &AtomicU64 {
        // SAFETY: the allocation is 128 bytes, 128-aligned, lives as long as `self`, and is only
        // accessed atomically (here, and by device code with system-scope stores).
        unsafe { &*self.allocation.as_ptr().cast::<AtomicU64>() }
    }
}

impl Doorbell for MappedDoorbell {
    fn handle(&self) -> u64 {
        self.allocation.device_address()
    }

    fn ring(&self) {
        // Release: pairs with the Acquire load in `value`. (The device's ring is a relaxed store:
        // the doorbell only says "look"; packets are published by their own phase stores.)
        self.word().fetch_add(2, Ordering::Release);
    }

    fn value(&self) -> u64 {
        // Acquire: pairs with the Release in `ring` and `stop`.
        self.word().load(Ordering::Acquire)
    }

    fn wait(&self, last_seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.value();
            if now != last_seen || Instant::now() >= deadline {
                return now;
            }
            std::thread::sleep(
                Duration::from_micros(20).min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }

    fn stop(&self) {
        // Release: pairs with the Acquire load in `value`.
        self.word().store(DONE, Ordering::Release);
    }
}

impl fmt::Debug for MappedDoorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedDoorbell").field("handle", &self.handle()).finish()
    }
}

/// A loaded module (a PTX, cubin or fatbin file).
pub struct Module {
    cuda: Arc<Cuda>,
    module: sys::CUmodule,
}

// SAFETY: a CUmodule handle may be used from any thread with the context current.
unsafe impl Send for Module {}
// SAFETY: as for Send.
unsafe impl Sync for Module {}

impl Module {
    /// Loads the module in file `path` into the device's primary context.
    pub fn load(cuda: Arc<Cuda>, path: &Path) -> Result<Arc<Self>, Error> {
        cuda.make_current()?;
        let name = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Cuda(format!("module path {} holds a NUL", path.display())))?;
        let mut module = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; writes the module handle.
        check(
            unsafe { sys::cuModuleLoad(&mut module, name.as_ptr()) },
            &format!("cuModuleLoad({})", path.display()),
        )?;
        Ok(Arc::new(Self { cuda, module }))
    }

    /// The kernel `name` (an `extern "C"` name).
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel, Error> {
        self.cuda.make_current()?;
        let cname =
            CString::new(name).map_err(|_| Error::Cuda(format!("kernel name {name:?} holds a NUL")))?;
        let mut function = std::ptr::null_mut();
        // SAFETY: the module is loaded; writes the function handle.
        check(
            unsafe { sys::cuModuleGetFunction(&mut function, self.module, cname.as_ptr()) },
            &format!("cuModuleGetFunction({name})"),
        )?;
        Ok(Kernel { module: self.clone(), function, name: name.to_owned() })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: loaded in `load`; every `Kernel` holds an `Arc` of us, so none is left.
        let _ = unsafe { sys::cuModuleUnload(self.module) };
    }
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module").finish_non_exhaustive()
    }
}

/// A kernel of a loaded [`Module`].
pub struct Kernel {
    module: Arc<Module>,
    function: sys::CUfunction,
    name: String,
}

// SAFETY: a CUfunction handle may be used from any thread with the context current.
unsafe impl Send for Kernel {}
// SAFETY: as for Send.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Launches the kernel on `stream` with `grid` blocks of `block` threads (1-D). Each
    /// element of `args` is one kernel parameter: a pointer (device address), a 64-bit integer,
    /// or a 32-bit one in the low half (the driver reads as many bytes as the parameter has, and
    /// the host is little-endian).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number and size (each at most 8 bytes), and
    /// every address in it must be valid for what the kernel does with it until the kernel ends.
    pub unsafe fn launch(&self, stream: &Stream, grid: u32, block: u32, args: &[u64]) -> Result<(), Error> {
        self.module.cuda.make_current()?;
        let mut values = args.to_vec();
        let mut pointers: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        // SAFETY: the caller guarantees the parameters; `pointers` point into `values`, which
        // outlives the call (the driver copies the parameters at launch).
        check(
            unsafe {
                sys::cuLaunchKernel(
                    self.function,
                    grid,
                    1,
                    1,
                    block,
                    1,
                    1,
                    0,
                    stream.stream,
                    pointers.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            &format!("cuLaunchKernel({})", self.name),
        )
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).finish()
    }
}

/// A stream (an ordinary one: it also waits for work on the legacy default stream, such as
/// copies and memsets issued before a launch).
pub struct Stream {
    cuda: Arc<Cuda>,
    stream: sys::CUstream,
}

// SAFETY: a CUstream handle may be used from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as for Send.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new stream.
    pub fn new(cuda: Arc<Cuda>) -> Result<Self, Error> {
        cuda.make_current()?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: writes the stream handle.
        check(
            unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_DEFAULT as u32) },
            "cuStreamCreate",
        )?;
        Ok(Self { cuda, stream })
    }

    /// Waits until everything launched on the stream has finished; a kernel's fault shows here.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.cuda.make_current()?;
        // SAFETY: the stream is live.
        check(unsafe { sys::cuStreamSynchronize(self.stream) }, "cuStreamSynchronize")
    }

    /// Waits like [`Stream::synchronize`], but gives up after `timeout` (a kernel whose waves
    /// wait for a host that never answers would otherwise hang the caller):
    /// `Err(Error::TimedOut)`, the kernel still running.
    pub fn synchronize_for(&self, timeout: Duration) -> Result<(), Error> {
        self.cuda.make_current()?;
        let deadline = Instant::now() + timeout;
        loop {
            // SAFETY: the stream is live.
            let status = unsafe { sys::cuStreamQuery(self.stream) };
            if status != sys::CUresult::CUDA_ERROR_NOT_READY {
                return check(status, "cuStreamQuery");
            }
            if Instant::now() >= deadline {
                return Err(Error::TimedOut);
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.cuda.make_current();
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.stream) };
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_state_layout_matches_the_header_formula() {
        for n in [2usize, 31, 32, 33, 1056, 4224] {
            let l = DeviceStateLayout::new(n);
            let align = |x: usize| x.div_ceil(128) * 128;
            assert_eq!(l.shadow, align(n.div_ceil(32) * 4));
            assert_eq!(l.last_ring, l.shadow + align(4 * n));
            assert_eq!(l.size, l.last_ring + 128);
            assert_eq!(l.shadow % 128, 0);
        }
    }

    #[test]
    fn probe_never_panics() {
        match probe() {
            Ok(count) => println!("{count} CUDA device(s)"),
            Err(why) => println!("SKIPPED: no CUDA device ({why})"),
        }
    }
}
