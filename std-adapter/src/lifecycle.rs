//! Buffer lifecycle, as ROCm's `rochostcall.hpp` has it: size a buffer, enable it for a hardware
//! queue (the listener starts with the first one), disable it (the listener stops, its thread
//! joined, after the last one).
//!
//! ```
//! // A runtime creating a queue: allocate `buffer_size(n)` bytes aligned to `buffer_align()` in
//! // memory the device reaches, then enable them for the queue.
//! let n = 8;
//! let mut memory = vec![0u64; hostcall::buffer_size(n).unwrap() / 8];
//! let buffer = memory.as_mut_ptr().cast::<u8>();
//! assert_eq!(buffer as usize % hostcall::buffer_align(), 0);
//! let queue = hostcall::QueueId(0x1000); // e.g. the address of the `hsa_queue_t`
//!
//! // SAFETY: `memory` stays allocated and untouched (but by the protocol) until `disable`.
//! unsafe { hostcall::enable(buffer, n, queue) }.unwrap();
//! // ... write the buffer's address into each dispatch's implicit arguments
//! // (`hostcall::IMPLICITARG_OFFSET_V5`), run kernels ...
//! hostcall::disable(buffer, queue).unwrap();
//! drop(memory); // the listener no longer touches it
//! ```
//!
//! [`enable`] is ROCm's `enableHostcalls`: the stack protocol. [`enable_with`] takes
//! [`EnableOptions`]: the protocol (the phase protocol with its `occupied` bitmap passed in or
//! allocated by the runtime) and the device ordinal. Every runtime serves the built-in services
//! PRINTF and DEVMEM from the start, as ROCm's does; FUNCTION_CALL only after the `unsafe`
//! [`HostcallRuntime::enable_function_calls`].
//!
//! Misuse is an [`Error`], never undefined behaviour: see [`HostcallRuntime::enable_with`] and
//! [`HostcallRuntime::disable`] for the list. A program may also end without disabling its
//! buffers: the default runtime is a static that nothing tears down at exit, so no exit handler
//! joins its thread or frees what the thread uses; the thread ends with the process.

mod options;
mod registry;
mod runtime;

pub(crate) use crate::buffer::Protocol;
pub use options::{buffer_align_for, buffer_size_for, occupied_size, EnableOptions};
pub use runtime::HostcallRuntime;

use crate::device::{RawWave, Reply};
use crate::error::Error;
use hostcall_core::{LayoutError, SLOT_WORDS};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A hardware queue, as the key a buffer is enabled for (ROCm passes the `hsa_queue_t*`). Any
/// value will do, as long as each queue has its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId(pub u64);

impl From<u64> for QueueId {
    fn from(id: u64) -> Self {
        Self(id)
    }
}

impl<T> From<*const T> for QueueId {
    fn from(queue: *const T) -> Self {
        Self(queue as usize as u64)
    }
}

impl<T> From<*mut T> for QueueId {
    fn from(queue: *mut T) -> Self {
        Self(queue as usize as u64)
    }
}

/// Bytes a stack-protocol buffer of `num_packets` packets needs (ROCm's
/// `getHostcallBufferSize`; [`buffer_size_for`] for any protocol).
///
/// ```
/// assert_eq!(hostcall::buffer_size(2), Ok(48 + 2 * 24 + 2 * 4096));
/// assert!(hostcall::buffer_size(1).is_err()); // the stack protocol needs 2 packets
/// ```
pub fn buffer_size(num_packets: u32) -> Result<usize, Error> {
    buffer_size_for(Protocol::Stack, num_packets)
}

/// The alignment a stack-protocol buffer needs (ROCm's `getHostcallBufferAlignment`;
/// [`buffer_align_for`] for any protocol).
pub const fn buffer_align() -> usize {
    buffer_align_for(Protocol::Stack)
}

/// ROCm's `enableHostcalls` on the process-wide default runtime ([`HostcallRuntime::global`]).
///
/// # Safety
/// As [`HostcallRuntime::enable`]: `buffer` points to `buffer_size(num_packets)` bytes that stay
/// valid, and are touched only by the protocol, until [`disable`] returns (or the process ends).
pub unsafe fn enable(buffer: *mut u8, num_packets: u32, queue: impl Into<QueueId>) -> Result<(), Error> {
    // SAFETY: forwarded from this function's contract.
    unsafe { HostcallRuntime::global().enable(buffer, num_packets, queue.into()) }
}

/// [`HostcallRuntime::enable_with`] on the process-wide default runtime: either of ROCm's protocols, the
/// phase protocol's bitmap, the device ordinal.
///
/// # Safety
/// As [`HostcallRuntime::enable_with`].
pub unsafe fn enable_with(
    buffer: *mut u8,
    num_packets: u32,
    queue: impl Into<QueueId>,
    options: EnableOptions,
) -> Result<(), Error> {
    // SAFETY: forwarded from this function's contract.
    unsafe { HostcallRuntime::global().enable_with(buffer, num_packets, queue.into(), options) }
}

/// ROCm's `disableHostcalls` on the process-wide default runtime. When it returns the buffer may
/// be freed; after the last buffer the listener thread has been joined.
pub fn disable(buffer: *mut u8, queue: impl Into<QueueId>) -> Result<(), Error> {
    HostcallRuntime::global().disable(buffer, queue.into())
}

/// Whether the buffer at `buffer` is enabled, on any runtime.
pub fn is_enabled(buffer: *const u8) -> bool {
    registry::lock().get(buffer as usize).is_some_and(|e| e.ready)
}

/// The device ordinal the buffer at `buffer` was enabled with ([`EnableOptions::device_ordinal`]),
/// on any runtime; `None` if it is not enabled.
pub fn device_ordinal(buffer: *const u8) -> Option<u32> {
    registry::lock().get(buffer as usize).filter(|e| e.ready).map(|e| e.device_ordinal)
}

/// The protocol the buffer at `buffer` was enabled with, on any runtime; `None` if it is not
/// enabled.
pub fn protocol_of(buffer: *const u8) -> Option<Protocol> {
    registry::lock().get(buffer as usize).filter(|e| e.ready).map(|e| e.protocol)
}

/// The null, alignment and packet-count checks of `enable`; the buffer's length.
fn checked_len(buffer: *mut u8, num_packets: u32, protocol: Protocol) -> Result<usize, Error> {
    if buffer.is_null() {
        return Err(Error::Layout(LayoutError::Null));
    }
    if buffer as usize % buffer_align_for(protocol) != 0 {
        return Err(Error::Layout(LayoutError::Misaligned { address: buffer as usize }));
    }
    let len = buffer_size_for(protocol, num_packets)?;
    if (buffer as usize).checked_add(len).is_none() {
        // The buffer would wrap around the address space: no memory is that large.
        return Err(Error::Layout(LayoutError::TooSmall {
            needed: len,
            given: usize::MAX - buffer as usize,
        }));
    }
    Ok(len)
}

/// An emulated wave on an enabled buffer: the real producer path of the buffer's protocol
/// (claim, fill, submit, ring the doorbell of the runtime serving the buffer, wait), for tests
/// and for the C ABI. On a phase buffer it claims through the buffer's `occupied` bitmap, as
/// device code does.
#[derive(Clone)]
pub struct EmulatedWave {
    buffer: *mut u8,
    len: usize,
    num_packets: u32,
    protocol: Protocol,
    occupied: Option<NonNull<u32>>,
    doorbell: Arc<dyn crate::doorbell::Doorbell>,
    activemask: u64,
    timeout: Option<Duration>,
    /// Where phase-protocol claims start (waves spread over the packets).
    start: usize,
}

/// Numbers emulated waves, to spread their phase-protocol claims.
static NEXT_WAVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: the buffer pointer is only used through `RawWave`, whose accesses are all atomic, and
// `EmulatedWave::new`'s contract keeps the memory valid while the wave is used, from any thread.
unsafe impl Send for EmulatedWave {}
// SAFETY: as for `Send`; `call` takes `&self` and shares nothing else mutable.
unsafe impl Sync for EmulatedWave {}

impl EmulatedWave {
    /// A wave with `activemask` on the enabled buffer at `buffer`. Refused if the buffer is not
    /// enabled (or still being enabled), or is enabled with another packet count.
    ///
    /// # Safety
    /// The buffer's memory (and a phase buffer's `occupied` bitmap) must stay valid while this
    /// wave (or a clone) is used: do not disable and free the buffer while a call may be in
    /// progress. (A call on a buffer disabled but still allocated waits until its timeout, if it
    /// has one: nobody serves it.) A phase buffer's bitmap must be memory the CPU can reach: the
    /// wave claims packets in it as device code does (host memory is; a GPU's own memory, where
    /// an HSA runtime keeps it, in general is not).
    pub unsafe fn new(buffer: *mut u8, num_packets: u32, activemask: u64) -> Result<Self, Error> {
        let registry = registry::lock();
        let enabled = registry
            .get(buffer as usize)
            .filter(|e| e.ready)
            .ok_or(Error::NotEnabled { buffer: buffer as usize })?;
        if enabled.num_packets != num_packets {
            return Err(Error::PacketCountMismatch {
                buffer: buffer as usize,
                enabled_with: enabled.num_packets,
                given: num_packets,
            });
        }
        Ok(Self {
            buffer,
            len: enabled.len,
            num_packets,
            protocol: enabled.protocol,
            occupied: enabled.bitmap.host_address(),
            doorbell: enabled.doorbell.clone(),
            activemask,
            timeout: None,
            // Relaxed: a hint, ordered with nothing.
            start: NEXT_WAVE.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Whether `start..start + len` overlaps memory the protocol shares with the listener: the
    /// buffer, or a phase buffer's `occupied` bitmap. Memory read or written plainly during a
    /// call (a C caller's request and reply arrays) must not: the listener and device code access
    /// it concurrently, atomically.
    pub fn overlaps_shared(&self, start: usize, len: usize) -> bool {
        let overlaps = |base: usize, size: usize| {
            len > 0 && start < base.saturating_add(size) && base < start.saturating_add(len)
        };
        let bitmap = self.occupied.map_or((0, 0), |o| (o.as_ptr() as usize, occupied_size(self.num_packets)));
        overlaps(self.buffer as usize, self.len) || overlaps(bitmap.0, bitmap.1)
    }

    /// Gives up with [`Error::TimedOut`] after `timeout` waiting for a packet or a reply.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// One hostcall: every active lane sends `request(lane)` to `service`.
    pub fn call(&self, service: u32, request: impl Fn(usize) -> [u64; SLOT_WORDS]) -> Result<Reply, Error> {
        let (base, len, n, doorbell) = (self.buffer, self.len, u64::from(self.num_packets), &*self.doorbell);
        // SAFETY (both arms): `new` checked the buffer was enabled with this protocol and packet
        // count (so initialised, `len` bytes, and for a phase buffer with this bitmap), and its
        // contract keeps the memory and the bitmap valid while `self` is used.
        let wave = match self.protocol {
            Protocol::Stack => unsafe { RawWave::new(base, len, n, doorbell, self.activemask) },
            Protocol::Phase => unsafe {
                RawWave::new_phase(base, len, n, self.occupied, doorbell, self.activemask)
            },
            Protocol::Line => Err(options::line_unsupported()),
            Protocol::Rpc { .. } => Err(options::rpc_unsupported()),
        }?
        .with_start(self.start);
        match self.timeout {
            Some(limit) => wave.with_timeout(limit).call(service, request),
            None => wave.call(service, request),
        }
    }
}

impl std::fmt::Debug for EmulatedWave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmulatedWave")
            .field("buffer", &self.buffer)
            .field("num_packets", &self.num_packets)
            .field("protocol", &self.protocol)
            .field("activemask", &self.activemask)
            .finish()
    }
}
