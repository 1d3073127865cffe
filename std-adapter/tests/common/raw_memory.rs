//! Zeroed, aligned memory for the tests that hand buffers to the lifecycle by address, freed on
//! drop.

use hostcall::{buffer_align_for, buffer_size_for, Protocol};
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Zeroed memory of one or more buffers, freed on drop.
pub struct RawMemory {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the memory is owned; tests hand its address to one runtime at a time.
unsafe impl Send for RawMemory {}
// SAFETY: shared only as an address; all accesses while enabled are atomic.
unsafe impl Sync for RawMemory {}

impl RawMemory {
    /// `bytes` zeroed bytes aligned to `align`.
    pub fn new(bytes: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(bytes, align).unwrap();
        assert!(layout.size() > 0, "alloc_zeroed needs a non-zero size");
        // SAFETY: `layout` has a non-zero size (asserted above).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Self { ptr, layout }
    }

    /// One buffer of `packets` packets of `protocol`: its size and alignment.
    pub fn buffer(protocol: Protocol, packets: u32) -> Self {
        Self::new(buffer_size_for(protocol, packets).unwrap(), buffer_align_for(protocol))
    }

    /// The memory's start.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// The address `offset` bytes in (at most the end).
    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.layout.size());
        self.ptr.wrapping_add(offset)
    }

    /// Overwrites everything with 0xff: a listener still reading it would find a corrupt
    /// ready-stack and count it as malformed.
    pub fn scribble(&mut self) {
        // SAFETY: owned, and (callers make sure) no longer enabled.
        unsafe { std::ptr::write_bytes(self.ptr, 0xff, self.layout.size()) };
    }
}

impl Drop for RawMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
