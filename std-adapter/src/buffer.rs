//! An owned, initialised hostcall buffer in device-visible memory, of any wire protocol.

use crate::doorbell::Doorbell;
use crate::error::Error;
use crate::memory::{DeviceAllocation, DeviceMemory};
use hostcall_core::sync::AtomicU32;
pub(crate) use hostcall_core::Protocol;
use hostcall_core::{AnyView, LayoutError};
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
    /// Device address of a phase or line buffer's `occupied` bitmap kept outside the buffer (0:
    /// the bitmap inside it). See [`HostcallBuffer::set_device_occupied`] and
    /// [`HostcallBuffer::set_line_device_state`].
    occupied: AtomicU64,
    /// Device address of a line buffer's `device_seq` array kept outside the buffer (0: the
    /// array inside it). See [`HostcallBuffer::set_line_device_state`].
    device_seq: AtomicU64,
    /// The device-memory bitmap at `occupied`, where this buffer owns it
    /// ([`HostcallBuffer::with_device_occupied`]).
    device_occupied: Option<DeviceAllocation>,
    /// The device ordinal its packets report to services ([`HostcallBuffer::with_device_ordinal`]).
    device_ordinal: u32,
    /// An RPC buffer's client lock bits, one per port (empty for the other protocols): the
    /// emulated waves' own memory, beside the buffer (on a GPU they are in the device's client
    /// object), which [`HostcallBuffer::view`] hands them through
    /// ([`rpc::View::with_locks`](hostcall_core::rpc::View::with_locks)).
    rpc_locks: Box<[AtomicU32]>,
}

impl HostcallBuffer {
    /// Allocates and initialises a buffer.
    ///
    /// ```
    /// use hostcall::{HostMemory, HostcallBuffer, ParkingDoorbell};
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
    /// use hostcall::{HostcallBuffer, Protocol};
    /// use hostcall_core::AnyView;
    /// use hostcall::{HostMemory, ParkingDoorbell};
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
        // An LLVM-RPC buffer's count is its ports (1 ..= rpc::MAX_PORT_COUNT, its own rule).
        let num_packets = protocol.packet_count(num_packets).map_err(|e| Error::Layout(e.into()))?;
        const STACK_ALIGN: usize = Protocol::Stack.buffer_align();
        const _: () = assert!(STACK_BASE_OFFSET % STACK_ALIGN == 0 && CACHE_LINE % STACK_ALIGN == 0);
        const _: () = assert!(CACHE_LINE % Protocol::Phase.buffer_align() == 0);
        const _: () = assert!(CACHE_LINE % Protocol::Line.buffer_align() == 0);
        // Placement only (see `STACK_BASE_OFFSET`); every protocol rule comes from the core.
        let offset = if protocol == Protocol::Stack { STACK_BASE_OFFSET } else { 0 };
        // `packet_count` bounds the count, so the size exists on 64-bit targets.
        let too_big = LayoutError::TooSmall { needed: usize::MAX, given: 0 };
        let size = protocol.buffer_size(num_packets).ok_or(Error::Layout(too_big))?;
        let allocation = DeviceAllocation::new(memory, offset + size, CACHE_LINE)?;
        let occupied = AtomicU64::new(0);
        let lock_words = match protocol {
            Protocol::Rpc { .. } => num_packets.div_ceil(32) as usize,
            _ => 0,
        };
        let buffer = Self {
            allocation,
            offset,
            size,
            num_packets,
            doorbell,
            protocol,
            occupied,
            device_seq: AtomicU64::new(0),
            device_occupied: None,
            device_ordinal: 0,
            rpc_locks: (0..lock_words).map(|_| AtomicU32::new(0)).collect(),
        };
        buffer.reset();
        Ok(buffer)
    }

    /// The same buffer for device `ordinal`: a listener serving it hands every packet's service
    /// that ordinal ([`PacketRequest::device`](hostcall_core::PacketRequest::device); the
    /// SANITIZER report's device index). The default is 0.
    ///
    /// ```
    /// use hostcall::{HostMemory, HostcallBuffer, ParkingDoorbell};
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

    /// The buffer's view, through the core's protocol switch (checked once more; cheap). An RPC
    /// buffer's view has the emulated client's lock bits, so waves can claim its ports.
    pub fn view(&self) -> AnyView<'_> {
        let (base, len, n) = (self.as_ptr(), self.size, self.num_packets);
        // SAFETY: `as_ptr()..as_ptr() + size` lies inside the allocation (`offset + size` bytes),
        // sized for this protocol and packet count in `with_protocol` and aligned for it (the
        // allocation is aligned to a cache line, the offset a multiple of the protocol's
        // alignment); it lives as long as `self` and is only ever accessed through atomics (views
        // and device code).
        let view = unsafe { AnyView::from_raw(self.protocol, base, len, n) };
        match view.expect("the allocation was sized and aligned for this geometry") {
            AnyView::Rpc(rpc) => {
                AnyView::Rpc(rpc.with_locks(&self.rpc_locks).expect("one lock bit per port, sized above"))
            }
            other => other,
        }
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
        // Relaxed: as `occupied` above.
        let device_seq = self.device_seq.load(Ordering::Relaxed);
        if let (Some(line), true) = (view.line(), device_seq != 0) {
            line.set_device_addresses(device_seq, occupied);
        }
    }

    /// Makes the line buffer's prefix point device code at a `device_seq` array
    /// (`u32[num_packets]`) and an `occupied` bitmap (`u32[ceil(num_packets / 32)]`) outside the
    /// buffer, at device addresses (device-local memory: only the device touches them, PROTOCOL.md
    /// section 9.2), now and on every [`HostcallBuffer::reset`]. The caller keeps the bitmap
    /// zeroed while no wave runs (`device_seq` may keep its values: a reset zeroes every request
    /// and reply word and `served`, so any next sequence is a new call), and both alive while the
    /// buffer is used. Call before handing the buffer to any device. [`Error::Unsupported`] for
    /// a stack or phase buffer.
    pub fn set_line_device_state(&self, device_seq: u64, occupied: u64) -> Result<(), Error> {
        let Some(view) = self.view().line() else {
            return Err(Error::Unsupported(format!(
                "a {:?}-protocol buffer has no device_seq array",
                self.protocol
            )));
        };
        // Relaxed: read back only by `reset`, on threads the caller orders after this one.
        self.device_seq.store(device_seq, Ordering::Relaxed);
        self.occupied.store(occupied, Ordering::Relaxed);
        view.set_device_addresses(device_seq, occupied);
        Ok(())
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
            let what = format!("a {:?}-protocol buffer has no phase occupied bitmap", self.protocol);
            return Err(Error::Unsupported(what));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::host::{HostMemory, ParkingDoorbell};

    fn buffer(protocol: Protocol) -> HostcallBuffer {
        HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, Arc::new(ParkingDoorbell::new()), protocol)
            .unwrap()
    }

    #[test]
    fn a_line_buffer_keeps_its_device_state_addresses_across_a_reset() {
        let buffer = buffer(Protocol::Line);
        let view = buffer.view().line().unwrap();
        let (device_seq, occupied) = (0x7000_0000_0040, 0x7000_0000_0000);
        buffer.set_line_device_state(device_seq, occupied).unwrap();
        buffer.reset();
        let prefix = view.prefix();
        // Relaxed: read on the thread that stored them.
        assert_eq!(prefix.device_seq.load(Ordering::Relaxed), device_seq);
        assert_eq!(prefix.occupied.load(Ordering::Relaxed), occupied);
        assert_eq!(prefix.num_packets.load(Ordering::Relaxed), 4, "the rest re-initialised");
    }

    #[test]
    fn device_state_setters_refuse_the_other_protocols() {
        assert!(matches!(buffer(Protocol::Stack).set_line_device_state(64, 128), Err(Error::Unsupported(_))));
        assert!(matches!(buffer(Protocol::Phase).set_line_device_state(64, 128), Err(Error::Unsupported(_))));
        let refused = buffer(Protocol::Line).set_device_occupied(64);
        assert!(matches!(&refused, Err(Error::Unsupported(why)) if why.contains("Line")), "{refused:?}");
    }
}
