//! [`PacketRequest`]: one packet as the host's service code sees it, the same for every protocol.

use super::ErrorCode;
use crate::lane::{lanes, Lanes, Payload, LANE_MASK, REPLY_WORDS, SLOT_WORDS};
use crate::sync::PlainSlots;
use core::fmt;

/// One packet handed to the host's service code during a drain.
pub struct PacketRequest<'a> {
    index: u32,
    service: u32,
    activemask: u64,
    payload: &'a Payload,
    /// `payload`'s slots as plain words, when the payload is memory of the host's own (the line
    /// host's scratch): the lane loop serves from them in place.
    plain: Option<PlainSlots<'a>>,
    error: bool,
    /// The lanes answered with an error reply, one bit each.
    error_lanes: u64,
    /// The ordinal of the device whose buffer carried the packet (0 unless the buffer was
    /// registered with one: [`Registration::on_device`](crate::Registration::on_device)).
    device: u32,
    /// The base address of the buffer that carried the packet (0 unless a poller set it).
    buffer: usize,
}

/// The packet's header as the host took it (the payload is not read).
impl fmt::Debug for PacketRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketRequest")
            .field("index", &self.index)
            .field("service", &self.service)
            .field("activemask", &format_args!("{:#x}", self.activemask))
            .field("error", &self.error)
            .finish()
    }
}

impl<'a> PacketRequest<'a> {
    /// A request for packet `index` (shared by every protocol's host side). `activemask` is
    /// masked to the lanes that exist.
    #[inline]
    pub(crate) fn new(index: u32, service: u32, activemask: u64, payload: &'a Payload) -> Self {
        Self {
            index,
            service,
            activemask: activemask & LANE_MASK,
            payload,
            plain: None,
            error: false,
            error_lanes: 0,
            device: 0,
            buffer: 0,
        }
    }

    /// This request with `slots`, the slots of its payload as plain words (a host whose payload
    /// is memory of its own: the line host's scratch), from which
    /// [`serve_lanes_from`](crate::serve_lanes_from) serves each lane in place.
    #[inline]
    pub(crate) fn with_plain_slots(mut self, slots: Option<PlainSlots<'a>>) -> Self {
        self.plain = slots;
        self
    }

    /// The packet's index in its buffer.
    #[inline]
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The ordinal of the device whose buffer carried this packet, as the host registered the
    /// buffer ([`Registration::on_device`](crate::Registration::on_device); 0 by default). ROCm's
    /// sanitizer report names the device by it.
    #[inline]
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The base address of the buffer that carried this packet, as the host registered it with
    /// a [`Poller`](crate::Poller) (0 for a packet drained without one). The std crate keys its
    /// per-buffer counters by it, and the state services keep for a device (DEVMEM's blocks, open
    /// messages), so one buffer's device cannot reach another's; several pollers serving ranges
    /// of one buffer see the same address.
    #[inline]
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    /// Sets [`PacketRequest::device`] and [`PacketRequest::buffer`] (the poller does, from the
    /// buffer's registration).
    #[inline]
    pub(crate) fn set_origin(&mut self, device: u32, buffer: usize) {
        self.device = device;
        self.buffer = buffer;
    }

    /// The service id the device asked for (not validated: any `u32`).
    #[inline]
    pub fn service(&self) -> u32 {
        self.service
    }

    /// The active lanes (only bits of lanes that exist).
    #[inline]
    pub fn activemask(&self) -> u64 {
        self.activemask
    }

    /// The active lanes, lowest first.
    #[inline]
    pub fn lanes(&self) -> Lanes {
        lanes(self.activemask)
    }

    /// Lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES` (lanes from [`PacketRequest::lanes`] never are).
    #[inline]
    pub fn request(&self, lane: usize) -> [u64; SLOT_WORDS] {
        self.payload.read_lane(lane)
    }

    /// Writes lane `lane`'s reply (the first [`REPLY_WORDS`] words of its slot).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn reply(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.payload.write_lane(lane, &reply);
    }

    /// Answers lane `lane` with an error reply `[ERROR_REPLY, code]` (`[0, code]` for DEVMEM:
    /// see [`ErrorCode::reply_for`]) and flags the packet ([`PacketRequest::has_error`]). A protocol with a control word stores
    /// the flag there for the wave; in the others the reply words are the only signal (each
    /// protocol's docs say which it is).
    pub fn reply_error(&mut self, lane: usize, code: ErrorCode) {
        self.reply_with_error(lane, code.reply_for(self.service));
    }

    /// Writes `reply` to lane `lane` and flags the packet as answered with an error, for services
    /// whose failure reply is not `[ERROR_REPLY, code]` (DEVMEM answers a failed allocation with a
    /// null address, which device code checks).
    pub fn reply_with_error(&mut self, lane: usize, reply: [u64; REPLY_WORDS]) {
        self.reply(lane, reply);
        self.error = true;
        self.error_lanes |= 1u64 << (lane % crate::LANES);
    }

    /// Answers every active lane with an error reply.
    pub fn reply_error_all(&mut self, code: ErrorCode) {
        for lane in self.lanes() {
            self.reply_error(lane, code);
        }
        self.error = true;
    }

    /// Whether an error reply was written.
    #[inline]
    pub fn has_error(&self) -> bool {
        self.error
    }

    /// How many lanes were answered with an error reply (counted with [`lane_count`](crate::lane_count):
    /// the processor's `popcnt` where it has one, not the portable count's twenty instructions;
    /// the registry reads it for every packet a packet service answers).
    #[inline]
    pub fn error_lanes(&self) -> u32 {
        crate::lane_count(self.error_lanes)
    }

    /// Read-only access to lane `lane`'s raw payload words (for per-packet services).
    pub fn payload(&self) -> &Payload {
        self.payload
    }

    /// The payload with the packet's lifetime, not this borrow's: the lane loop
    /// ([`serve_lanes_from`](crate::serve_lanes_from)) reads and writes lanes through it while it
    /// holds the request mutably for the error replies, and keeps it in a register across the
    /// service calls.
    #[inline]
    pub(crate) fn payload_words(&self) -> &'a Payload {
        self.payload
    }

    /// The payload's slots as plain words, if the host gave them ([`PacketRequest::with_plain_slots`]).
    #[inline]
    pub(crate) fn plain_slots(&self) -> Option<PlainSlots<'a>> {
        self.plain
    }
}
