//! [`HostMemory`]: buffers in ordinary host memory, where emulated waves and embedded runtimes
//! reach them.

use std::ptr::NonNull;

use crate::memory::{DeviceMemory, MemoryError};

/// Ordinary host memory from the global allocator; device address = host address.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostMemory;

impl DeviceMemory for HostMemory {
    fn name(&self) -> &'static str {
        "host"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let layout = std::alloc::Layout::from_size_align(size, align)
            .ok()
            .filter(|l| l.size() > 0)
            .ok_or(MemoryError::BadRequest { size, align })?;
        // SAFETY: the layout has a non-zero size (checked above).
        NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(MemoryError::OutOfMemory { size })
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        // SAFETY: the caller passes the size and alignment `allocate` accepted, so the layout is
        // valid and is the one the block was allocated with.
        unsafe {
            std::alloc::dealloc(ptr.as_ptr(), std::alloc::Layout::from_size_align_unchecked(size, align))
        }
    }

    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}
