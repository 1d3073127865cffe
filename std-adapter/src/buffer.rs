//! An owned, initialised hostcall buffer in device-visible memory.

use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use hostcall_core::buffer::BufferView;
use hostcall_core::layout::{buffer_align, buffer_size};
use hostcall_core::tagged::Geometry;
use std::sync::Arc;

/// A stack-protocol buffer of `num_packets` packets, allocated from a [`DeviceMemory`] and
/// initialised with a doorbell. Freed on drop (a listener keeps its own `Arc` while it serves it).
pub struct HostcallBuffer {
    allocation: DeviceAllocation,
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
        let allocation = DeviceAllocation::new(memory, size, buffer_align())?;
        let buffer = Self { allocation, geometry, doorbell };
        buffer.reset();
        Ok(buffer)
    }

    /// The buffer's view (checked once more; cheap).
    pub fn view(&self) -> BufferView<'_> {
        // SAFETY: the allocation is `buffer_size(n)` bytes aligned to `buffer_align()`, lives as
        // long as `self`, and is only ever accessed through atomics (views and device code).
        unsafe { BufferView::from_raw(self.allocation.as_ptr(), self.allocation.len(), self.num_packets()) }
            .expect("the allocation was sized and aligned for this geometry")
    }

    /// (Re-)initialises the shared memory: every packet free, the ready-stack empty. Waves in
    /// flight lose their packets, so call it only when none are (or after corruption).
    pub fn reset(&self) {
        self.view().init(self.allocation.device_address(), self.doorbell.handle());
    }

    /// Number of packets.
    pub fn num_packets(&self) -> u64 {
        u64::from(self.geometry.num_packets())
    }

    /// The host address of the buffer.
    pub fn as_ptr(&self) -> *mut u8 {
        self.allocation.as_ptr()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.allocation.len()
    }

    /// Always false (a buffer has at least 2 packets).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The address the device uses: what a runtime writes into the kernel's implicit arguments
    /// (see [`crate::IMPLICITARG_OFFSET_V4`]).
    pub fn device_address(&self) -> u64 {
        self.allocation.device_address()
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
