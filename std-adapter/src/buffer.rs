//! An owned, initialised hostcall buffer in device-visible memory, of any wire protocol.

use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
pub use hostcall_core::Protocol;
use hostcall_core::{packet_count, AnyView, LayoutError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Cache-line size the placement below assumes (x86-64 and most GPUs' host links: 64 bytes).
const CACHE_LINE: usize = 64;

/// Where a stack-protocol buffer starts in its allocation, which is aligned to [`CACHE_LINE`]: 32
/// bytes past a line boundary. The ABI puts `free_stack` at offset 24 and `ready_stack` at offset
/// 32; starting here puts them in different cache lines, so a producer's claim and release
/// (free-list) never touch the line the host polls and swaps (ready-stack), which saves a line
/// transfer between the two sides per hostcall. With 2 packets it also puts both headers in the
/// ready-stack's line and each payload slot on a line of its own. Any offset that is a multiple of
/// the stack protocol's alignment is valid for it; this one is only faster. (Phase and line buffers
/// start at the line boundary: their own layouts already separate the words each side writes.)
const STACK_BASE_OFFSET: usize = 32;

/// A buffer of `num_packets` packets speaking one [`Protocol`], allocated from a
/// [`DeviceMemory`] and initialised with a doorbell. Freed on drop (a listener keeps its own `Arc`
/// while it serves it).
pub struct HostcallBuffer {
    /// Holds the buffer at `offset`.
    allocation: DeviceAllocation,
    /// Where the buffer starts in the allocation ([`STACK_BASE_OFFSET`] or 0).
    offset: usize,
    /// Bytes of the buffer proper (the protocol's buffer size for `num_packets`).
    size: usize,
    num_packets: u32,
    doorbell: Arc<dyn Doorbell>,
    protocol: Protocol,
    /// Device address of a phase buffer's `occupied` bitmap kept outside the buffer (0: the
    /// bitmap inside it). See [`HostcallBuffer::set_device_occupied`].
    occupied: AtomicU64,
    /// The device-memory bitmap at `occupied`, where this buffer owns it
    /// ([`HostcallBuffer::with_device_occupied`]).
    device_occupied: Option<DeviceAllocation>,
    /// The device ordinal its packets report to services ([`HostcallBuffer::with_device_ordinal`]).
    device_ordinal: u32,
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
        Self::with_protocol(memory, num_packets, doorbell, Protocol::Stack)
    }

    /// Allocates and initialises a buffer of the given protocol.
    ///
    /// ```
    /// use hostcall::buffer::{HostcallBuffer, Protocol};
    /// use hostcall::core::AnyView;
    /// use hostcall::{doorbell::ParkingDoorbell, memory::HostMemory};
    /// use std::sync::Arc;
    /// let doorbell = Arc::new(ParkingDoorbell::new());
    /// let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, Protocol::Phase).unwrap();
    /// assert!(matches!(buffer.view(), AnyView::Phase(_)));
    /// ```
    pub fn with_protocol(
        memory: Arc<dyn DeviceMemory>,
        num_packets: u64,
        doorbell: Arc<dyn Doorbell>,
        protocol: Protocol,
    ) -> Result<Self, Error> {
        let num_packets = packet_count(num_packets).map_err(|e| Error::Layout(e.into()))?;
        const STACK_ALIGN: usize = Protocol::Stack.buffer_align();
        const _: () = assert!(STACK_BASE_OFFSET % STACK_ALIGN == 0 && CACHE_LINE % STACK_ALIGN == 0);
        const _: () = assert!(CACHE_LINE % Protocol::Phase.buffer_align() == 0);
        const _: () = assert!(CACHE_LINE % Protocol::Line.buffer_align() == 0);
        // Placement only (see `STACK_BASE_OFFSET`); every protocol rule comes from the core.
        let offset = if protocol == Protocol::Stack { STACK_BASE_OFFSET } else { 0 };
        // `packet_count` bounds the count, so the size exists on 64-bit targets.
        let too_big = LayoutError::TooSmall { needed: usize::MAX, given: 0 };
        let size = protocol.buffer_size(num_packets as usize).ok_or(Error::Layout(too_big))?;
        let allocation = DeviceAllocation::new(memory, offset + size, CACHE_LINE)?;
        let occupied = AtomicU64::new(0);
        let buffer = Self {
            allocation,
            offset,
            size,
            num_packets,
            doorbell,
            protocol,
            occupied,
            device_occupied: None,
            device_ordinal: 0,
        };
        buffer.reset();
        Ok(buffer)
    }

    /// The same buffer for device `ordinal`: a listener serving it hands every packet's service
    /// that ordinal ([`PacketRequest::device`](hostcall_core::PacketRequest::device); the
    /// SANITIZER report's device index). The default is 0.
    ///
    /// ```
    /// use hostcall::{buffer::HostcallBuffer, doorbell::ParkingDoorbell, memory::HostMemory};
    /// use std::sync::Arc;
    /// let buffer = HostcallBuffer::new(Arc::new(HostMemory), 4, Arc::new(ParkingDoorbell::new())).unwrap();
    /// assert_eq!(buffer.device_ordinal(), 0);
    /// assert_eq!(buffer.with_device_ordinal(2).device_ordinal(), 2);
    /// ```
    pub fn with_device_ordinal(mut self, ordinal: u32) -> Self {
        self.device_ordinal = ordinal;
        self
    }

    /// The device ordinal its packets report (see [`HostcallBuffer::with_device_ordinal`]).
    pub fn device_ordinal(&self) -> u32 {
        self.device_ordinal
    }

    /// The buffer's protocol.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The buffer's view, through the core's protocol switch (checked once more; cheap).
    pub fn view(&self) -> AnyView<'_> {
        let (base, len, n) = (self.as_ptr(), self.size, self.num_packets());
        // SAFETY: `as_ptr()..as_ptr() + size` lies inside the allocation (`offset + size` bytes),
        // sized for this protocol and packet count in `with_protocol` and aligned for it (the
        // allocation is aligned to a cache line, the offset a multiple of the protocol's
        // alignment); it lives as long as `self` and is only ever accessed through atomics (views
        // and device code).
        let view = unsafe { AnyView::from_raw(self.protocol, base, len, n) };
        view.expect("the allocation was sized and aligned for this geometry")
    }

    /// (Re-)initialises the shared memory: every packet free, nothing submitted. Waves in
    /// flight lose their packets, so call it only when none are (or after corruption).
    pub fn reset(&self) {
        let view = self.view();
        view.init(self.device_address(), self.doorbell.handle());
        // Relaxed: written before the hand-off that publishes it, like `init`'s stores.
        let occupied = self.occupied.load(Ordering::Relaxed);
        if let (Some(phase), true) = (view.phase(), occupied != 0) {
            phase.set_occupied_address(occupied);
        }
    }

    /// Makes the phase buffer's prefix point device code at an `occupied` bitmap outside the
    /// buffer, at device address `address` (device-local memory: only the device touches the
    /// bitmap, PROTOCOL.md section 2), now and on every [`HostcallBuffer::reset`]. The caller
    /// keeps those `ceil(num_packets / 32)` words zeroed while no wave runs, and alive while the
    /// buffer is used. Emulated waves ([`crate::device::Wave`]) use the bitmap inside the buffer
    /// and must not share such a buffer with device code. Call before handing the buffer to any
    /// device. [`Error::Unsupported`] for a stack buffer, which has no bitmap.
    pub fn set_device_occupied(&self, address: u64) -> Result<(), Error> {
        let Some(view) = self.view().phase() else {
            return Err(Error::Unsupported("a stack-protocol buffer has no occupied bitmap".into()));
        };
        // Relaxed: read back only by `reset`, on threads the caller orders after this one.
        self.occupied.store(address, Ordering::Relaxed);
        view.set_occupied_address(address);
        Ok(())
    }

    /// As [`HostcallBuffer::set_device_occupied`] with a bitmap this buffer then owns (and frees
    /// with itself): `bitmap` holds at least `ceil(num_packets / 32)` zeroed `u32`s, in memory
    /// only the device touches (ROCm puts it in the GPU's own memory). [`Error::Unsupported`] for
    /// a stack buffer or a bitmap too small.
    pub fn with_device_occupied(mut self, bitmap: DeviceAllocation) -> Result<Self, Error> {
        let needed = self.num_packets().div_ceil(32) as usize * 4;
        if bitmap.len() < needed {
            return Err(Error::Unsupported(format!(
                "an occupied bitmap of {} bytes for {} packets (needs {needed})",
                bitmap.len(),
                self.num_packets()
            )));
        }
        self.set_device_occupied(bitmap.device_address())?;
        self.device_occupied = Some(bitmap);
        Ok(self)
    }

    /// The device-memory `occupied` bitmap this buffer owns, if any.
    pub fn device_occupied(&self) -> Option<&DeviceAllocation> {
        self.device_occupied.as_ref()
    }

    /// Number of packets.
    pub fn num_packets(&self) -> u64 {
        u64::from(self.num_packets)
    }

    /// The host address of the buffer.
    pub fn as_ptr(&self) -> *mut u8 {
        // SAFETY: the allocation is `offset + size` bytes, so the offset stays inside it.
        unsafe { self.allocation.as_ptr().add(self.offset) }
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
            .field("protocol", &self.protocol)
            .finish()
    }
}
