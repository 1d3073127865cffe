//! [`BufferRegistration`]: what a buffer's server is asked to serve, and how. One value, built
//! step by step, and one entry point on each type that serves buffers: [`Listener::add`],
//! [`ListenerPool::add`] and [`DeviceListeners::add`].
//!
//! [`Listener::add`]: super::Listener::add
//! [`ListenerPool::add`]: crate::threads::pool::ListenerPool::add
//! [`DeviceListeners::add`]: crate::threads::devices::DeviceListeners::add

use super::BufferOptions;
use crate::buffer::HostcallBuffer;
use crate::error::Error;
use crate::services::rpc::RpcOptions;
use hostcall_core::Protocol;
use std::ops::Range;
use std::sync::Arc;

/// A buffer to serve and how to serve it: its memory (a [`HostcallBuffer`], or memory the caller
/// manages: [`BufferRegistration::raw`]), the device its packets report, the packets served (all,
/// or a [`range`](BufferRegistration::range) of them) and its [`BufferOptions`].
///
/// A `HostcallBuffer` converts into one, so the common case stays one line:
/// `listener.add(buffer)`. The unsafety of raw memory sits on [`BufferRegistration::raw`]; adding
/// any registration is safe.
///
/// ```
/// use hostcall::prelude::*;
/// use hostcall::{BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig};
/// use hostcall::{ParkingDoorbell, Protocol, Services, Wave};
/// use std::sync::Arc;
///
/// let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
/// let services = Arc::new(Services::new());
/// services.register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
/// let start = || Listener::start_with_services(doorbell.clone(), ListenerConfig::default(), services.clone());
/// let (first, second) = (start().unwrap(), start().unwrap());
/// let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), 32, doorbell, Protocol::Phase);
/// let buffer = Arc::new(buffer.unwrap());
/// // Each listener serves half of the packets.
/// first.add(BufferRegistration::new(buffer.clone()).range(0..16)).unwrap();
/// second.add(BufferRegistration::new(buffer.clone()).range(16..32)).unwrap();
/// let reply = Wave::new(buffer, 4).call(100, |lane| [lane as u64, 40, 0, 0, 0, 0, 0, 0]).unwrap();
/// assert_eq!(reply.lane(3), [43, 0]);
/// ```
#[derive(Debug)]
#[must_use = "a registration does nothing until it is added"]
pub struct BufferRegistration {
    pub(crate) memory: Memory,
    /// The ordinal given by [`BufferRegistration::on_device`].
    device: Option<u32>,
    /// The packets served, for a buffer shared with other listeners.
    pub(crate) range: Option<Range<u32>>,
    pub(crate) options: BufferOptions,
}

/// The memory a registration serves.
#[derive(Clone, Debug)]
pub(crate) enum Memory {
    /// Held by the listener while it serves it.
    Buffer(Arc<HostcallBuffer>),
    /// Kept valid by the caller ([`BufferRegistration::raw`]'s contract).
    Raw { protocol: Protocol, base: usize, len: usize, num_packets: u64 },
}

impl BufferRegistration {
    /// Serve all of `buffer`: its packets report the buffer's
    /// [`device_ordinal`](HostcallBuffer::device_ordinal) to services; default options.
    pub fn new(buffer: Arc<HostcallBuffer>) -> Self {
        Self { memory: Memory::Buffer(buffer), device: None, range: None, options: BufferOptions::default() }
    }

    /// Serve `num_packets` packets of `protocol` in memory the caller manages (the C ABI's path),
    /// on device 0 unless [`on_device`](BufferRegistration::on_device) says otherwise; remove it
    /// with `remove_raw`.
    ///
    /// # Safety
    /// `base..base + len` is a `protocol` buffer of `num_packets` packets, initialised for it, and
    /// stays valid, accessed only atomically, while a listener serves it: from each add of this
    /// registration until `remove_raw` for it returns on that listener (every listener of a
    /// pool), or the listener is dropped.
    pub unsafe fn raw(protocol: Protocol, base: *mut u8, len: usize, num_packets: u64) -> Self {
        let memory = Memory::Raw { protocol, base: base as usize, len, num_packets };
        Self { memory, device: None, range: None, options: BufferOptions::default() }
    }

    /// The device ordinal its packets report to services (as
    /// [`HostcallBuffer::with_device_ordinal`]), and whose group of [`DeviceListeners`] serves
    /// it. A `HostcallBuffer` carries its own: a different ordinal for one is refused when it is
    /// added ([`Error::Unsupported`]).
    ///
    /// [`DeviceListeners`]: crate::threads::devices::DeviceListeners
    pub fn on_device(mut self, device: u32) -> Self {
        self.device = Some(device);
        self
    }

    /// Serve only the packets (an LLVM-RPC buffer: the ports) `packets`, so that several
    /// listeners (threads) can share one buffer, each serving its own disjoint range
    /// ([`ListenerPool`](crate::ListenerPool) does the split). Only for a protocol whose
    /// [`range_capable`](Protocol::range_capable) is true: the stack protocol cannot be split, and
    /// is refused when added ([`Error::Unsupported`]). Whoever adds the ranges makes sure every
    /// packet of the buffer is served by some listener; a range overlapping one another listener
    /// serves (or the whole buffer served elsewhere) is refused ([`Error::AlreadyServed`]).
    pub fn range(mut self, packets: Range<u32>) -> Self {
        self.range = Some(packets);
        self
    }

    /// Served as `options` say.
    pub fn with_options(mut self, options: BufferOptions) -> Self {
        self.options = options;
        self
    }

    /// An LLVM-RPC buffer's policy, budgets and output ([`BufferOptions::rpc`]).
    pub fn with_rpc(mut self, rpc: RpcOptions) -> Self {
        self.options.rpc = rpc;
        self
    }

    /// The protocol of its memory.
    pub(crate) fn protocol(&self) -> Protocol {
        match &self.memory {
            Memory::Buffer(buffer) => buffer.protocol(),
            Memory::Raw { protocol, .. } => *protocol,
        }
    }

    /// Its memory's address.
    pub(crate) fn base(&self) -> usize {
        match &self.memory {
            Memory::Buffer(buffer) => buffer.as_ptr() as usize,
            Memory::Raw { base, .. } => *base,
        }
    }

    /// Packets (ports) of the whole buffer.
    pub(crate) fn num_packets(&self) -> u64 {
        match &self.memory {
            Memory::Buffer(buffer) => buffer.num_packets(),
            Memory::Raw { num_packets, .. } => *num_packets,
        }
    }

    /// The ordinal its packets report: [`BufferRegistration::on_device`]'s, or the buffer's own.
    /// A `HostcallBuffer` given another ordinal is refused.
    pub(crate) fn device(&self) -> Result<u32, Error> {
        match (&self.memory, self.device) {
            (Memory::Buffer(buffer), Some(device)) if device != buffer.device_ordinal() => {
                Err(Error::Unsupported(format!(
                    "a HostcallBuffer of device {} registered on device {device}: its ordinal is \
                     given by HostcallBuffer::with_device_ordinal",
                    buffer.device_ordinal()
                )))
            }
            (Memory::Buffer(buffer), _) => Ok(buffer.device_ordinal()),
            (Memory::Raw { .. }, device) => Ok(device.unwrap_or(0)),
        }
    }

    /// This registration for the packets `range` (a pool's stripe), with `options`.
    pub(crate) fn stripe(&self, range: Range<u32>, options: BufferOptions) -> Self {
        Self { memory: self.memory.clone(), device: self.device, range: Some(range), options }
    }
}

impl From<Arc<HostcallBuffer>> for BufferRegistration {
    fn from(buffer: Arc<HostcallBuffer>) -> Self {
        Self::new(buffer)
    }
}
