//! An owned, initialised hostcall buffer in device-visible memory.

use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use hostcall_core::buffer::BufferView;
use hostcall_core::layout::{buffer_align, buffer_size};
use hostcall_core::tagged::Geometry;
use std::sync::Arc;

/// Cache-line size the placement below assumes (x86-64 and most GPUs' host links: 64 bytes).
const CACHE_LINE: usize = 64;

/// Where the buffer starts in its allocation, which is aligned to [`CACHE_LINE`]: 32 bytes past a
/// line boundary. The ABI puts `free_stack` at offset 24 and `ready_stack` at offset 32; starting
/// here puts them in different cache lines, so a producer's claim and release (free-list) never
/// touch the line the host polls and swaps (ready-stack), which saves a line transfer between
/// the two sides per hostcall. With 2 packets it also puts both headers in the ready-stack's line
/// and each payload slot on a line of its own. Any offset that is a multiple of
/// [`buffer_align`] is valid for the protocol; this one is only faster.
const BASE_OFFSET: usize = 32;

/// A stack-protocol buffer of `num_packets` packets, allocated from a [`DeviceMemory`] and
/// initialised with a doorbell. Freed on drop (a listener keeps its own `Arc` while it serves it).
pub struct HostcallBuffer {
    /// Holds the buffer at [`BASE_OFFSET`].
    allocation: DeviceAllocation,
    /// Bytes of the buffer proper (`buffer_size(num_packets)`).
    size: usize,
    geometry: Geometry,
    doorbell: Arc<dyn Doorbell>,
}

impl HostcallBuffer {
    /// Allocates and initialises a buffer.
    ///
    /// ```
    /// use hostcall::{buffer::HostcallBuffer, doorbell::ParkingDoorbell, memory::HostMemory};
    /// use std::sync::Arc;
    /// let buffer = HostcallBuffer::new(Arc::new(HostMemory), 4, Arc::new(ParkingDoorbell::new())).unwrap();
    /// assert_eq!(buffer.num_packets(), 4);
    /// assert!(HostcallBuffer::new(Arc::new(HostMemory), 1, Arc::new(ParkingDoorbell::new())).is_err());
    /// ```
    pub fn new(
        memory: Arc<dyn DeviceMemory>,
        num_packets: u64,
        doorbell: Arc<dyn Doorbell>,
    ) -> Result<Self, Error> {
        let geometry = Geometry::new(num_packets).map_err(|e| Error::Layout(e.into()))?;
        let size = buffer_size(geometry.num_packets() as usize).ok_or(Error::Layout(
            hostcall_core::buffer::LayoutError::TooSmall { needed: usize::MAX, given: 0 },
        ))?;
        const _: () = assert!(BASE_OFFSET % buffer_align() == 0 && CACHE_LINE % buffer_align() == 0);
        let allocation = DeviceAllocation::new(memory, size + BASE_OFFSET, CACHE_LINE)?;
        let buffer = Self { allocation, size, geometry, doorbell };
        buffer.reset();
        Ok(buffer)
    }

    /// The buffer's view (checked once more; cheap).
    pub fn view(&self) -> BufferView<'_> {
        // SAFETY: `as_ptr()..as_ptr() + size` lies inside the allocation (`BASE_OFFSET + size`
        // bytes), is `buffer_size(n)` bytes aligned to `buffer_align()` (the allocation is aligned
        // to a cache line and the offset is a multiple of the alignment), lives as long as `self`,
        // and is only ever accessed through atomics (views and device code).
        unsafe { BufferView::from_raw(self.as_ptr(), self.size, self.num_packets()) }
            .expect("the allocation was sized and aligned for this geometry")
    }

    /// (Re-)initialises the shared memory: every packet free, the ready-stack empty. Waves in
    /// flight lose their packets, so call it only when none are (or after corruption).
    pub fn reset(&self) {
        self.view().init(self.device_address(), self.doorbell.handle());
    }

    /// Number of packets.
    pub fn num_packets(&self) -> u64 {
        u64::from(self.geometry.num_packets())
    }

    /// The host address of the buffer.
    pub fn as_ptr(&self) -> *mut u8 {
        // SAFETY: the allocation is `BASE_OFFSET + size` bytes, so the offset stays inside it.
        unsafe { self.allocation.as_ptr().add(BASE_OFFSET) }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.size
    }

    /// Always false (a buffer has at least 2 packets).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The address the device uses: what a runtime writes into the kernel's implicit arguments
    /// (see [`crate::IMPLICITARG_OFFSET_V4`]).
    pub fn device_address(&self) -> u64 {
        self.allocation.memory().device_address(self.as_ptr())
    }

    /// The doorbell device code rings.
    pub fn doorbell(&self) -> &Arc<dyn Doorbell> {
        &self.doorbell
    }
}

impl std::fmt::Debug for HostcallBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostcallBuffer")
            .field("address", &self.as_ptr())
            .field("num_packets", &self.num_packets())
            .finish()
    }
}
