//! Memory both the host and the device can reach.
//!
//! [`DeviceMemory`] is the seam every backend implements: [`HostMemory`](crate::HostMemory)
//! (ordinary host memory, what emulated waves and embedded runtimes use; in [`crate::backend::host`])
//! is the default; the HSA backend allocates ROCm fine-grained memory.
//! [`DeviceAllocation`] owns one allocation and frees it on drop.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// Why memory could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryError {
    /// Size zero, or an alignment that is not a power of two.
    BadRequest {
        /// Bytes asked for.
        size: usize,
        /// Alignment asked for.
        align: usize,
    },
    /// The backend had no memory to give.
    OutOfMemory {
        /// Bytes asked for.
        size: usize,
    },
    /// The backend failed for its own reason (e.g. an HSA status with its text).
    Backend(String),
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadRequest { size, align } => {
                write!(f, "cannot allocate {size} bytes aligned to {align}: size must be > 0, alignment a power of two")
            }
            Self::OutOfMemory { size } => write!(f, "out of memory allocating {size} bytes"),
            Self::Backend(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for MemoryError {}

/// Memory that both sides of the hostcall protocol can reach with atomics.
///
/// Memory that buffers are allocated from must be cacheable (write-back) to the host's CPU, as
/// every backend's buffer memory here is: the line protocol's take loads two words with one
/// 16-byte access, atomic only on cacheable memory (`line::View::from_raw`'s safety contract).
/// Device-local memory the host never reads (a backend's `device_memory`) may be anything.
pub trait DeviceMemory: Send + Sync + fmt::Debug {
    /// A short name for logs ("host", "hsa-fine-grained", ...).
    fn name(&self) -> &'static str;

    /// Allocates `size` bytes aligned to `align`, zeroed.
    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError>;

    /// Frees an allocation.
    ///
    /// # Safety
    /// `ptr` must come from `self.allocate(size, align)` with these `size` and `align`, not be
    /// freed yet, and not be used afterwards.
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize);

    /// The address the device uses for the host address `host` inside an allocation.
    fn device_address(&self, host: *const u8) -> u64;
}

/// One allocation of a [`DeviceMemory`], freed on drop.
pub struct DeviceAllocation {
    memory: Arc<dyn DeviceMemory>,
    ptr: NonNull<u8>,
    size: usize,
    align: usize,
}

// SAFETY: the allocation is plain memory owned by this value; the backend is Send + Sync.
unsafe impl Send for DeviceAllocation {}
// SAFETY: `&DeviceAllocation` only hands out the raw pointer; accesses through it are the
// caller's responsibility (the buffer view accesses it atomically).
unsafe impl Sync for DeviceAllocation {}

impl DeviceAllocation {
    /// Allocates `size` zeroed bytes aligned to `align` from `memory`.
    pub fn new(memory: Arc<dyn DeviceMemory>, size: usize, align: usize) -> Result<Self, MemoryError> {
        let ptr = memory.allocate(size, align)?;
        Ok(Self { memory, ptr, size, align })
    }

    /// The host address of the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Whether the allocation is empty (never: sizes are > 0).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The device's address of the first byte.
    pub fn device_address(&self) -> u64 {
        self.memory.device_address(self.ptr.as_ptr())
    }

    /// The backend this came from.
    pub fn memory(&self) -> &Arc<dyn DeviceMemory> {
        &self.memory
    }
}

impl Drop for DeviceAllocation {
    fn drop(&mut self) {
        // SAFETY: `ptr`, `size` and `align` are those `allocate` returned and accepted, and the
        // allocation is freed only here, once.
        unsafe { self.memory.free(self.ptr, self.size, self.align) }
    }
}

impl fmt::Debug for DeviceAllocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAllocation")
            .field("memory", &self.memory.name())
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .finish()
    }
}
