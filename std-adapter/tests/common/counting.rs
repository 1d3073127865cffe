//! A counting global allocator: `System`, keeping the live heap bytes of the process, for tests
//! that check what a device can make the host keep. A test binary installs it with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: common::counting::Counting = common::counting::Counting;
//! ```
//!
//! The count is process-wide: tests that compare it around work must not run beside others that
//! allocate (take turns, or keep one such test per binary).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// `System`, keeping the bytes live.
pub struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to `System` unchanged; counting touches only an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic, read by the test thread around work it waited for.
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Relaxed: as in `alloc`.
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: as in `alloc`.
        LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Relaxed: as in `alloc`.
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The heap bytes live now (of a binary that installed [`Counting`]).
pub fn live_bytes() -> isize {
    // Relaxed: see `alloc`.
    LIVE_BYTES.load(Ordering::Relaxed)
}
