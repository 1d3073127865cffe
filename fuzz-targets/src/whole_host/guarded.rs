//! Host memory with guard bytes around every allocation, for the buffer and for DEVMEM's blocks.
//!
//! Each allocation gets a canary-filled guard line before and after it; the target checks them
//! after every host round and on every free, so a host write just outside an allocation is caught
//! even without AddressSanitizer. It also counts what is live (bytes and allocations), which is
//! how the target sees DEVMEM's budget from outside the service.

use hostcall::{DeviceMemory, MemoryError};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// Guard bytes after an allocation (and at least this many before it).
const GUARD: usize = 64;
/// What the guard bytes hold.
const CANARY: u8 = 0xa5;

/// One live allocation: the user's size and alignment, and the layout behind it.
#[derive(Clone, Copy, Debug)]
struct Block {
    size: usize,
    front: usize,
    layout: Layout,
}

/// A [`DeviceMemory`] over the global allocator whose allocations carry guard lines.
#[derive(Debug, Default)]
pub(crate) struct GuardedMemory {
    /// By the address handed out.
    live: Mutex<BTreeMap<usize, Block>>,
    /// What went wrong in a free (a panic there would unwind through the service under test).
    violations: Mutex<Vec<String>>,
}

impl GuardedMemory {
    /// Bytes live, as asked for.
    pub(crate) fn live_bytes(&self) -> usize {
        self.live.lock().unwrap().values().map(|b| b.size).sum()
    }

    /// Allocations live.
    pub(crate) fn live_count(&self) -> usize {
        self.live.lock().unwrap().len()
    }

    /// Panics if a guard line of a live allocation changed, or a free went wrong. Bytes of an
    /// allocation outside `inside` (the buffer proper inside its allocation) must still be 0.
    pub(crate) fn check(&self, inside: Option<(usize, usize)>) {
        let violations = self.violations.lock().unwrap();
        assert!(violations.is_empty(), "memory misused: {violations:?}");
        for (&address, block) in self.live.lock().unwrap().iter() {
            if let Err(at) = guards_intact(address, block) {
                panic!("guard byte {at:#x} of the allocation at {address:#x} was written");
            }
            if let Some((start, len)) =
                inside.filter(|&(start, _)| start >= address && start < address + block.size)
            {
                let outside = (address..start).chain(start + len..address + block.size);
                for at in outside {
                    assert_eq!(
                        byte(at).load(Ordering::Relaxed),
                        0,
                        "byte {at:#x} outside the buffer was written"
                    );
                }
            }
        }
    }
}

/// The byte at `address`, inside a live allocation of this memory.
fn byte<'a>(address: usize) -> &'a AtomicU8 {
    // SAFETY: callers pass addresses inside a live allocation (guards included), which stays
    // allocated while the map entry exists (callers hold the map or own the block); `AtomicU8`
    // has no alignment requirement; every access to that memory by anyone else is atomic too
    // (the host's views) or happens on the thread that owns the block.
    unsafe { AtomicU8::from_ptr(address as *mut u8) }
}

/// `Err(address)` of the first guard byte that is not the canary.
fn guards_intact(address: usize, block: &Block) -> Result<(), usize> {
    let front = address - GUARD..address;
    let back = address + block.size..address + block.size + GUARD;
    match front.chain(back).find(|&at| byte(at).load(Ordering::Relaxed) != CANARY) {
        Some(at) => Err(at),
        None => Ok(()),
    }
}

impl DeviceMemory for GuardedMemory {
    fn name(&self) -> &'static str {
        "guarded-host"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        if size == 0 || !align.is_power_of_two() {
            return Err(MemoryError::BadRequest { size, align });
        }
        let front = align.max(GUARD);
        let total = front.checked_add(size).and_then(|s| s.checked_add(GUARD));
        let layout = total
            .and_then(|total| Layout::from_size_align(total, front).ok())
            .ok_or(MemoryError::OutOfMemory { size })?;
        // SAFETY: the layout's size is at least 2 * GUARD, not zero.
        let base = unsafe { alloc_zeroed(layout) };
        if base.is_null() {
            return Err(MemoryError::OutOfMemory { size });
        }
        let address = base as usize + front;
        let block = Block { size, front, layout };
        for at in (address - GUARD..address).chain(address + size..address + size + GUARD) {
            byte(at).store(CANARY, Ordering::Relaxed);
        }
        self.live.lock().unwrap().insert(address, block);
        // `address` is inside a non-null allocation, so it is not null.
        Ok(NonNull::new(address as *mut u8).expect("inside an allocation"))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        let address = ptr.as_ptr() as usize;
        let Some(block) = self.live.lock().unwrap().remove(&address) else {
            self.violations.lock().unwrap().push(format!("free of {address:#x}, not allocated here"));
            return;
        };
        if block.size != size || align.max(GUARD) > block.front {
            self.violations
                .lock()
                .unwrap()
                .push(format!("free of {address:#x} with another size or alignment"));
        }
        if let Err(at) = guards_intact(address, &block) {
            self.violations.lock().unwrap().push(format!("guard byte {at:#x} of {address:#x} written"));
        }
        // SAFETY: `address - front` is what `alloc_zeroed(block.layout)` returned (the entry was
        // made by `allocate` and removed just now, so it is freed once).
        unsafe { dealloc((address - block.front) as *mut u8, block.layout) };
    }

    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}
