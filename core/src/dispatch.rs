//! How a packet reaches the code that answers it: the host's [`Dispatch`] trait, the one
//! lane-service type ([`LaneService`]), a fixed-capacity [`ServiceTable`], and the one routine that
//! serves a packet lane by lane ([`serve_lanes`]), all re-exported at the crate root. The service
//! ids (PROTOCOL.md section 3) and the error reply this project answers with ([`ErrorCode`]) sit
//! beside the request and reply types, also at the crate root.
//!
//! Every host walks a packet's lanes with [`serve_lanes_from`] ([`serve_lanes`] is it from lane
//! 0): through [`LaneService::serve_lanes`], one call a packet, the [`ServiceTable`] here and the
//! std crate's registry, which adds only a panic guard around that call. A protocol's host whose
//! work for a buffer is more than serving packets hands it to [`Dispatch::own_work`] (through the
//! poller's drain), so a dispatch that watches its calls sees it as one; nothing here names a
//! protocol.

use crate::host::{DrainError, ErrorCode, OwnWork, PacketRequest};
use crate::lane::{REPLY_WORDS, SLOT_WORDS};
use crate::sync::PlainSlots;
use core::cell::Cell;
use core::fmt;

/// How the host serves packets: a poller hands it every packet of every buffer.
pub trait Dispatch {
    /// Serve one packet (write a reply, or an error reply, for each active lane).
    fn dispatch(&self, packet: &mut PacketRequest<'_>);
    /// Malformed shared state found in the buffer at `buffer` (its base address).
    fn malformed(&self, buffer: usize, error: DrainError) {
        let _ = (buffer, error);
    }
    /// Runs `work`, a piece of a host's own work for the buffer at `buffer` (its base address),
    /// named `name`, with the way to serve the packets it makes (see
    /// [`DrainHandler::own_work`](crate::DrainHandler::own_work), which a poller's drain turns
    /// into this with the buffer named). A dispatch that watches its calls watches it as one
    /// call, the packets inside it included; the default only runs it, serving its packets with
    /// [`Dispatch::dispatch`].
    fn own_work(&self, buffer: usize, name: u32, work: &mut OwnWork<'_>) {
        let _ = (buffer, name);
        work(&mut |packet| self.dispatch(packet));
    }
    /// Whether [`Poller::poll_once`](crate::Poller::poll_once) goes on to drain the next buffer:
    /// asked before each buffer of a poll. `false` ends the poll there (the buffers not yet
    /// drained are left to a later poll, or to another poller): a host whose thread was held up
    /// in a service hands its other buffers to another thread this way. The default is `true`.
    #[inline]
    fn proceed(&self) -> bool {
        true
    }
}

/// A service that answers one lane at a time from its request words: the one lane-service type
/// of every host (the std crate's registry stores these too). Any
/// `Fn(&[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode> + Send + Sync` is one.
pub trait LaneService: Send + Sync {
    /// The reply to one lane's request, or the error to answer with.
    fn serve(&self, request: &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode>;

    /// Serves the active lanes of `packet` from lane `first` on with [`serve`](Self::serve), as
    /// [`serve_lanes_from`] does, storing each lane in `serving` before serving it (so a host that
    /// catches a panic knows the lane it happened on). Returns the error count.
    ///
    /// One call serves the packet: a host that holds its services as `dyn LaneService` pays one
    /// indirect call a packet, not one a lane, and this body is compiled for each service, with
    /// its `serve` inline. There is no reason to override it.
    ///
    /// ```
    /// use core::cell::Cell;
    /// use hostcall_core::{ErrorCode, Host as _, LaneService};
    /// # let prefix = hostcall_core::stack::Prefix::default();
    /// # let headers = [hostcall_core::stack::Header::default(), hostcall_core::stack::Header::default()];
    /// # let payloads = [hostcall_core::Payload::default(), hostcall_core::Payload::default()];
    /// # let view = hostcall_core::stack::View::from_parts(&prefix, &headers, &payloads).unwrap();
    /// # view.init(0, 0);
    /// # let mut packet = view.claim().unwrap().unwrap();
    /// # packet.write_lane(0, &[4, 0, 0, 0, 0, 0, 0, 0]);
    /// # packet.write_lane(3, &[5, 0, 0, 0, 0, 0, 0, 0]);
    /// # let submitted = packet.submit(9, 0b1001);
    /// let halve = |r: &[u64; 8]| if r[0] % 2 == 0 { Ok([r[0] / 2, 0]) } else { Err(ErrorCode::BadRequest) };
    /// let service: &dyn LaneService = &halve;
    /// let serving = Cell::new(0);
    /// view.host().drain(&mut |p: &mut hostcall_core::PacketRequest<'_>| {
    ///     assert_eq!(service.serve_lanes(p, 0, &serving), 1, "lane 3 sent an odd number");
    ///     assert_eq!(serving.get(), 3, "the last lane served");
    /// });
    /// # let done = submitted.wait(|| {});
    /// # assert_eq!(done.reply(0), [2, 0]);
    /// ```
    fn serve_lanes(&self, packet: &mut PacketRequest<'_>, first: usize, serving: &Cell<usize>) -> u32 {
        // The lane stored by `mark`, before the lane's request is borrowed: see `serve_marked`.
        serve_marked(packet, first, |lane| serving.set(lane), |_, request| self.serve(request))
    }
}

impl<F> LaneService for F
where
    F: Fn(&[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode> + Send + Sync,
{
    fn serve(&self, request: &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode> {
        self(request)
    }
}

/// Serves every active lane of `packet`, lowest first: `serve(lane, request)` answers each, an
/// `Err(code)` becomes the error reply `[ERROR_REPLY, code]`. Returns how many lanes got an error
/// reply.
///
/// The one lane-by-lane dispatch: [`ServiceTable`] calls it with its [`LaneService`]; a host that
/// must survive a panicking service wraps `serve` in its panic guard and nothing else.
///
/// ```
/// use hostcall_core::serve_lanes;
/// use hostcall_core::{ErrorCode, Host as _, LaneService};
/// # let prefix = hostcall_core::stack::Prefix::default();
/// # let headers = [hostcall_core::stack::Header::default(), hostcall_core::stack::Header::default()];
/// # let payloads = [hostcall_core::Payload::default(), hostcall_core::Payload::default()];
/// # let view = hostcall_core::stack::View::from_parts(&prefix, &headers, &payloads).unwrap();
/// # view.init(0, 0);
/// # let mut packet = view.claim().unwrap().unwrap();
/// # packet.write_lane(0, &[1, 0, 0, 0, 0, 0, 0, 0]);
/// # let submitted = packet.submit(9, 0b11);
/// let halve = |r: &[u64; 8]| if r[0] % 2 == 0 { Ok([r[0] / 2, 0]) } else { Err(ErrorCode::BadRequest) };
/// view.host().drain(&mut |p: &mut hostcall_core::PacketRequest<'_>| {
///     let errors = serve_lanes(p, |_lane, request| halve.serve(request));
///     assert_eq!(errors, 1, "lane 0 sent 1, lane 1 sent 0");
/// });
/// # assert!(submitted.wait(|| {}).host_error());
/// ```
pub fn serve_lanes(
    packet: &mut PacketRequest<'_>,
    serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode>,
) -> u32 {
    serve_lanes_from(packet, 0, serve)
}

/// [`serve_lanes`] for the active lanes from `first` up only (none when `first >= LANES`): a
/// host that catches a panicking service once per packet, not once per lane, goes on with the
/// lanes after the one that panicked (the std crate's registry).
///
/// Where the packet's payload is memory of the host's own (the line host's scratch, into which it
/// decoded the request), `serve` reads each lane's request in place and the reply is written
/// there as plain words; elsewhere (a payload the device shares) each lane's words are copied
/// out first, one atomic load each.
///
/// ```
/// use hostcall_core::serve_lanes_from;
/// use hostcall_core::Host as _;
/// # let prefix = hostcall_core::stack::Prefix::default();
/// # let headers = [hostcall_core::stack::Header::default(), hostcall_core::stack::Header::default()];
/// # let payloads = [hostcall_core::Payload::default(), hostcall_core::Payload::default()];
/// # let view = hostcall_core::stack::View::from_parts(&prefix, &headers, &payloads).unwrap();
/// # view.init(0, 0);
/// # let packet = view.claim().unwrap().unwrap();
/// # let submitted = packet.submit(9, 0b1011);
/// view.host().drain(&mut |p: &mut hostcall_core::PacketRequest<'_>| {
///     let mut served = Vec::new();
///     serve_lanes_from(p, 1, |lane, _| { served.push(lane); Ok([0, 0]) });
///     assert_eq!(served, [1, 3]);
/// });
/// # drop(submitted);
/// ```
#[inline]
pub fn serve_lanes_from(
    packet: &mut PacketRequest<'_>,
    first: usize,
    serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode>,
) -> u32 {
    serve_marked(packet, first, |_| {}, serve)
}

/// [`serve_lanes_from`], calling `mark(lane)` before each lane's request is borrowed for `serve`
/// ([`LaneService::serve_lanes`] stores the lane for its panic guard there).
///
/// Why not in `serve`: the request `serve` gets is a reference no other pointer writes while
/// `serve` runs, so a store `serve` makes (the guard's lane) may be ordered after `serve`'s loads
/// of the request, and LLVM then does, in some builds and not others: a service that adds to a
/// request word and stores it back in place (the bench's echo) became a load, an add and a store
/// instead of one add to memory (17 instructions two lanes instead of 13). Made before the
/// borrow, the store is one the loads must follow, in every build.
#[inline]
fn serve_marked(
    packet: &mut PacketRequest<'_>,
    first: usize,
    mut mark: impl FnMut(usize),
    mut serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode>,
) -> u32 {
    let from = if first < crate::lane::LANES { u64::MAX << first } else { 0 };
    let mut errors = 0;
    let mask = packet.activemask() & from;
    if let Some(slots) = packet.plain_slots() {
        return serve_in_place(packet, mask, slots, mark, serve);
    }
    // The same words `PacketRequest::request` and `reply` read and write.
    let payload = packet.payload_words();
    for lane in crate::lane::lanes(mask) {
        mark(lane);
        match serve(lane, &payload.read_lane(lane)) {
            Ok(reply) => payload.write_lane(lane, &reply),
            Err(code) => {
                errors += 1;
                packet.reply_error(lane, code);
            }
        }
    }
    errors
}

/// [`serve_lanes_from`]'s loop for a packet whose payload is memory of the host's own (`slots`,
/// the slots of its payload): each lane served from its slot in place, the lanes of `mask` only.
/// Not inlined: the other protocols' loop, beside which it would be compiled, keeps its few
/// registers.
#[inline(never)]
fn serve_in_place(
    packet: &mut PacketRequest<'_>,
    mask: u64,
    slots: PlainSlots<'_>,
    mut mark: impl FnMut(usize),
    mut serve: impl FnMut(usize, &[u64; SLOT_WORDS]) -> Result<[u64; REPLY_WORDS], ErrorCode>,
) -> u32 {
    let mut errors = 0;
    // The host's own memory: each lane served from its slot in place.
    let mut serve_lane = |packet: &mut PacketRequest<'_>, lane: usize| {
        mark(lane);
        // SAFETY: `lane` is a lane that exists (from `lanes` or `runs`), and the slot is only
        // read while `serve` runs (which reaches neither the packet nor its memory).
        match serve(lane, unsafe { slots.request(lane) }) {
            // SAFETY: as above; the reference `serve` had is gone.
            Ok(reply) => unsafe { slots.write(lane, reply) },
            Err(code) => {
                errors += 1;
                packet.reply_error(lane, code);
            }
        }
    };
    if mask & mask.wrapping_sub(1) == 0 {
        // One lane (or none): no run to find.
        for lane in crate::lane::lanes(mask) {
            serve_lane(packet, lane);
        }
    } else {
        // A run of adjacent lanes (adjacent slots) at a time.
        for run in crate::lane::runs(mask) {
            for lane in run {
                serve_lane(packet, lane);
            }
        }
    }
    errors
}

/// A fixed-capacity table from service id to [`LaneService`], for runtimes without allocation.
/// Unknown ids are answered with [`ErrorCode::UnknownService`].
///
/// Both constructors are `const`, so a table can live in a `static` built at compile time:
///
/// ```
/// use hostcall_core::{ErrorCode, ServiceTable, SLOT_WORDS};
/// fn double(r: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
///     r[0].checked_mul(2).map(|d| [d, 0]).ok_or(ErrorCode::Refused)
/// }
/// static SERVICES: ServiceTable<'static, 4> = ServiceTable::new().with(42, &double);
/// assert!(format!("{SERVICES:?}").contains("ids: [42]"));
/// ```
pub struct ServiceTable<'a, const N: usize> {
    /// `entries[..len]` are the registered services, each `Some`; the rest are `None`.
    entries: [Option<(u32, &'a dyn LaneService)>; N],
    len: usize,
}

/// The registered ids and the capacity (services are closures, so only their ids are shown).
impl<const N: usize> fmt::Debug for ServiceTable<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Ids<'t, 'a, const N: usize>(&'t ServiceTable<'a, N>);
        impl<const N: usize> fmt::Debug for Ids<'_, '_, N> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list().entries(self.0.registered().map(|(id, _)| id)).finish()
            }
        }
        f.debug_struct("ServiceTable").field("ids", &Ids(self)).field("capacity", &N).finish()
    }
}

impl<const N: usize> Default for ServiceTable<'_, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a, const N: usize> ServiceTable<'a, N> {
    /// An empty table (`const`: a `static` can hold one).
    pub const fn new() -> Self {
        Self { entries: [None; N], len: 0 }
    }

    /// This table with `service` registered for `id`: the `const` way to fill a table, for a
    /// `static` built at compile time. Panics (a compile error, in a `static`'s initialiser) when
    /// the table is full or `id` is registered already: a static table that names an id twice is
    /// a mistake, not a replacement.
    pub const fn with(mut self, id: u32, service: &'a dyn LaneService) -> Self {
        let mut i = 0;
        while i < self.len {
            if let Some((registered, _)) = self.entries[i] {
                assert!(registered != id, "ServiceTable::with: this id is registered already");
            }
            i += 1;
        }
        assert!(self.len < N, "ServiceTable::with: the table is full");
        self.entries[self.len] = Some((id, service));
        self.len += 1;
        self
    }

    /// Registers (or replaces) the service for `id`. When the table is full, the error gives the
    /// service back.
    pub fn register(&mut self, id: u32, service: &'a dyn LaneService) -> Result<(), TableFull<'a>> {
        let registered = &mut self.entries[..self.len];
        if let Some(entry) = registered.iter_mut().flatten().find(|(i, _)| *i == id) {
            entry.1 = service;
            return Ok(());
        }
        match self.entries.get_mut(self.len) {
            Some(free) => {
                *free = Some((id, service));
                self.len += 1;
                Ok(())
            }
            None => Err(TableFull { id, service, capacity: N }),
        }
    }

    fn registered(&self) -> impl Iterator<Item = (u32, &'a dyn LaneService)> + '_ {
        self.entries[..self.len].iter().flatten().copied()
    }

    fn find(&self, id: u32) -> Option<&'a dyn LaneService> {
        self.registered().find(|(i, _)| *i == id).map(|(_, s)| s)
    }
}

/// [`ServiceTable::register`]'s error: every entry of the table is taken. It gives the service
/// back ([`TableFull::service`]).
///
/// ```
/// use hostcall_core::{ErrorCode, ServiceTable, SLOT_WORDS};
/// let echo = |r: &[u64; SLOT_WORDS]| -> Result<[u64; 2], ErrorCode> { Ok([r[0], 0]) };
/// let mut table = ServiceTable::<1>::new();
/// table.register(1, &echo).unwrap();
/// let full = table.register(2, &echo).unwrap_err();
/// assert_eq!((full.id(), full.capacity()), (2, 1));
/// assert_eq!(format!("{full:?}"), "TableFull { id: 2, capacity: 1 }");
/// ```
pub struct TableFull<'a> {
    id: u32,
    service: &'a dyn LaneService,
    capacity: usize,
}

impl<'a> TableFull<'a> {
    /// The id that found no free entry.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The service given back.
    pub fn service(&self) -> &'a dyn LaneService {
        self.service
    }

    /// The table's capacity (all of it registered).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// The id and the capacity (the service is a closure, so it is not shown).
impl fmt::Debug for TableFull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableFull").field("id", &self.id).field("capacity", &self.capacity).finish()
    }
}

impl fmt::Display for TableFull<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "service table full: all {} entries taken, none for service id {}", self.capacity, self.id)
    }
}

impl core::error::Error for TableFull<'_> {}

impl<const N: usize> Dispatch for ServiceTable<'_, N> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        let Some(service) = self.find(packet.service()) else {
            packet.reply_error_all(ErrorCode::UnknownService);
            return;
        };
        service.serve_lanes(packet, 0, &Cell::new(0));
    }
}
