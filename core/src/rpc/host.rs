//! The host's side of the handshake: which ports are pending, and a [`Turn`] on one of them (read
//! the client's lane buffers, write the host's, hand the port back with one flip).
//!
//! Upstream's server is a sequence of blocking `recv`/`send` calls per opcode. The host here never
//! waits on a device: each time a port is the host's (mailboxes differ), it takes one turn, which
//! is everything upstream's server does between two waits for ownership. A turn is one of
//!
//! - *receive*: the client sent a packet; the host reads it, and flips (upstream: the flip that
//!   begins the server's next `recv`, or its `close` after a final `recv`);
//! - *receive, then send*: the host reads the packet, writes its answer in place, and flips
//!   (upstream: a `recv` followed by a `send`);
//! - *send*: the client acknowledged the host's previous packet (its `recv` after a `recv` flips
//!   with no data); the host writes the next packet and flips (a `send` after a `send`).
//!
//! Every turn ends with exactly one flip of the host's mailbox, so a call of `k` turns is `k`
//! round trips, as upstream. What a turn does is the conversation's business (the caller's, with
//! state of its own per port); this module only hands turns out.

use super::layout::LaneBuffer;
use super::view::View;
use crate::host::{sealed, DrainError, DrainHandler, DrainReport};
use crate::lane::{lanes, Lanes, Payload, SLOT_WORDS};
use crate::scan::{clamped, DrainScope};
use crate::sync::{fence, AtomicU32, Ordering};

/// Whether a mailbox word says "flipped an odd number of times". Each side stores only 0 or 1;
/// any other value a hostile device stores reads as 1, as upstream's `!old` does.
#[inline]
pub(super) const fn bit(word: u32) -> bool {
    word != 0
}

/// The calls in progress on an LLVM-RPC buffer's ports, kept by a host that serves LLVM libc's
/// multi-packet opcodes (the std crate's listener keeps one per buffer, over its `RpcHost`): the
/// [`Host`](crate::Host) state of an RPC buffer. Without one, an RPC buffer's host keeps no call
/// state: ROCm's `'r'` opcodes and this project's `'h'` are served as one hostcall packet each,
/// any other opcode is handed back untouched and reported [`DrainError::UnhandledOpcode`].
pub trait Calls {
    /// Takes one turn on the port of `turn` (continues its call, or begins one from the header),
    /// serving the hostcall packets the turn makes (`'r'`, `'h'`, `MALLOC`) through `packets`,
    /// with the buffer's origin set. Returns the lanes the turn served (0 for a turn it
    /// [deferred](Turn::defer)), counted in the drain's [`DrainReport::lane_calls`], or `None`
    /// for an opcode this host has no handler for (the port must then be left untouched: the
    /// drain hands it back and reports [`DrainError::UnhandledOpcode`]). The drain finishes the
    /// turn (unless it was deferred).
    fn turn(&mut self, turn: &mut Turn<'_>, packets: &mut dyn DrainHandler) -> Option<u32>;
}

/// The host's side of an LLVM-RPC buffer ([`View::host`]): each port the device has handed over
/// is one turn, taken by the buffer's [`Calls`] (its [`Host`](crate::Host) state), or without
/// one by the stateless default (see [`Calls`]). Its scratch is where the stateless default
/// copies a hostcall packet for the services (built at the first turn that needs it).
#[derive(Clone, Copy, Debug)]
pub struct Host<'a>(&'a View<'a>);

impl sealed::Sealed for Host<'_> {}

impl crate::host::Host for Host<'_> {
    type State = dyn Calls;
    type Scratch = Option<Payload>;

    /// One turn on every port of `scope` (a [`DrainScope::Range`]'s ports, clamped; the whole
    /// buffer for any other scope) that the device has handed over.
    #[inline]
    fn drain_scope(
        &self,
        scope: &mut DrainScope,
        scratch: Option<&mut Option<Payload>>,
        mut state: Option<&mut Self::State>,
        handler: &mut impl DrainHandler,
    ) -> DrainReport {
        let ports = self.0.ports() as usize;
        let range = match *scope {
            DrainScope::Range { start, end } => start as usize..end as usize,
            DrainScope::Whole | DrainScope::Window(_) => 0..ports,
        };
        let mut own = None;
        let scratch = scratch.unwrap_or(&mut own);
        let mut report = DrainReport::default();
        for port in clamped(range, ports) {
            let Some(mut turn) = self.0.turn(port as u32) else {
                continue;
            };
            let (mask, opcode) = turn.header();
            // A turn the host defers counts too: the poll found work, and the port is still
            // pending, so the caller polls again rather than napping.
            report.packets += 1;
            let served = match state.as_deref_mut() {
                Some(calls) => calls.turn(&mut turn, handler),
                None => stateless_turn(&mut turn, mask, opcode, scratch, handler),
            };
            if let Some(lanes) = served {
                report.lane_calls += lanes;
            } else {
                report.malformed += 1;
                handler.malformed(DrainError::UnhandledOpcode { port: port as u32, opcode });
            }
            turn.finish();
        }
        report
    }
}

/// A turn of a host that keeps no call state: an `'r'` or `'h'` opcode served as one packet of
/// its hostcall service (its lanes returned); `None` (untouched) for any other.
fn stateless_turn(
    turn: &mut Turn<'_>,
    mask: u64,
    opcode: u32,
    scratch: &mut Option<Payload>,
    handler: &mut impl DrainHandler,
) -> Option<u32> {
    let service = super::service_of(opcode)?;
    let payload = scratch.get_or_insert_with(Payload::default);
    super::serve_as_packet(turn, mask, service, payload, handler);
    Some(crate::lane_count(mask))
}

impl<'a> View<'a> {
    /// The host's side of the buffer.
    pub fn host(&self) -> Host<'_> {
        Host(self)
    }

    /// Whether port `port` is the host's: its two mailboxes differ (a Relaxed look at each; see
    /// [`View::turn`] for the Acquire).
    ///
    /// # Panics
    /// If `port >= ports`.
    #[inline]
    pub fn pending(&self, port: u32) -> bool {
        let (host, device) = (&self.host_mailbox[port as usize], &self.device_mailbox[port as usize]);
        // Relaxed: a look only; `turn` orders the reads of the packet with its fence.
        bit(host.load(Ordering::Relaxed)) != bit(device.load(Ordering::Relaxed))
    }

    /// A turn on port `port` if it is the host's, else `None` (nothing read).
    ///
    /// # Panics
    /// If `port >= ports`.
    #[inline]
    pub fn turn(&self, port: u32) -> Option<Turn<'a>> {
        let host_mailbox = &self.host_mailbox[port as usize];
        let (port_wide, lanes) = (port as usize, self.lanes as usize);
        let first = port_wide * lanes;
        // SAFETY: `port < ports` (the index above panics otherwise), and the view's arrays have
        // the lengths `from_parts` checked (every view is made there): `ports` device mailboxes
        // and headers, `ports * lanes` lane buffers, so `first + lanes <= ports * lanes`.
        let (device_mailbox, header, buffers) = unsafe {
            (
                self.device_mailbox.get_unchecked(port_wide),
                self.headers.get_unchecked(port_wide),
                self.buffers.get_unchecked(first..first + lanes),
            )
        };
        let host = bit(host_mailbox.load(Ordering::Relaxed));
        // Relaxed load, then the Acquire fence below: pairs with the Release fence before the
        // client's flip of its mailbox (`ClientPort::flip`), so the client's lane buffer and
        // header stores before that flip are visible to the turn's reads.
        let device = bit(device_mailbox.load(Ordering::Relaxed));
        if host == device {
            return None;
        }
        fence(Ordering::Acquire);
        let lane_mask = self.lane_mask();
        // Relaxed: ordered by the Acquire fence above (the client writes the header before its
        // first flip). Read once here: the drain and the turn's host both look at it.
        let mask = header.mask.load(Ordering::Relaxed) & lane_mask;
        let opcode = header.opcode.load(Ordering::Relaxed);
        Some(Turn { host_mailbox, mask, opcode, buffers, lane_mask, port, host, deferred: false })
    }
}

/// One turn of the host on a port it owns. Read the client's packet with [`Turn::read`], write
/// the host's with [`Turn::write`], then [`Turn::finish`] to hand the port back. A turn dropped
/// without `finish`, or [deferred](Turn::defer), leaves the port the host's (the next scan sees it
/// pending again).
///
/// It holds only its port's words (found once, when the turn is taken), not the buffer's view.
#[must_use = "finish the turn to hand the port back"]
pub struct Turn<'a> {
    /// The port's host mailbox word.
    host_mailbox: &'a AtomicU32,
    /// The port's header as the turn found it: its mask (the lanes that exist among it) and
    /// opcode.
    mask: u64,
    opcode: u32,
    /// The port's lane buffers, one per lane of the buffer.
    buffers: &'a [LaneBuffer],
    /// The bits of the lanes that exist (the view's).
    lane_mask: u64,
    port: u32,
    /// The host mailbox's bit as this turn found it.
    host: bool,
    /// Whether [`Turn::defer`] was called: `finish` then hands nothing back.
    deferred: bool,
}

/// The port, lanes and state; the words are not read.
impl core::fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("rpc::Turn")
            .field("port", &self.port)
            .field("lanes", &self.buffers.len())
            .field("host", &self.host)
            .field("deferred", &self.deferred)
            .finish()
    }
}

impl<'a> Turn<'a> {
    /// The port.
    #[inline]
    pub fn port(&self) -> u32 {
        self.port
    }

    /// The lanes per port of the buffer.
    #[inline]
    pub fn lane_count(&self) -> u32 {
        self.buffers.len() as u32
    }

    /// The header as the client wrote it at `open`: (lanes that exist among its mask, opcode),
    /// read once when the turn was taken, so every look in one turn sees the same words.
    /// Meaningful at a call's first turn; a conversation keeps its own copy for the later ones.
    #[inline]
    pub fn header(&self) -> (u64, u32) {
        (self.mask, self.opcode)
    }

    /// The lanes of `mask` that exist, lowest first.
    #[inline]
    pub fn lanes(&self, mask: u64) -> Lanes {
        lanes(mask & self.lane_mask)
    }

    /// Lane `lane`'s eight words.
    ///
    /// # Panics
    /// If `lane >= lane_count()` (lanes from [`Turn::lanes`] never are).
    #[inline]
    pub fn read(&self, lane: u32) -> [u64; SLOT_WORDS] {
        self.buffers[lane as usize].read()
    }

    /// The lanes of `mask` that exist, lowest first, each with its buffer (not bounds-checked:
    /// every lane of the view's lane mask has one).
    #[inline]
    pub(super) fn lane_buffers(&self, mask: u64) -> impl Iterator<Item = (usize, &LaneBuffer)> + '_ {
        self.lanes(mask).map(|lane| {
            // SAFETY: `lanes` yields only bits of the view's lane mask, whose bits are the low
            // `lanes` of the view (`from_parts`), and the turn's buffers are that port's `lanes`
            // lane buffers (`View::turn`): `lane < self.buffers.len()`.
            (lane, unsafe { self.buffers.get_unchecked(lane) })
        })
    }

    /// Stores lane `lane`'s eight words (published by [`Turn::finish`]).
    ///
    /// # Panics
    /// If `lane >= lane_count()`.
    #[inline]
    pub fn write(&mut self, lane: u32, words: &[u64; SLOT_WORDS]) {
        self.buffers[lane as usize].write(words);
    }

    /// Stores the first `N` words of lane `lane` only (a reply that leaves the rest of the
    /// request in place, and the cache lines past it untouched).
    ///
    /// # Panics
    /// If `lane >= lane_count()` or `N > 8`.
    #[inline]
    pub fn write_first<const N: usize>(&mut self, lane: u32, words: &[u64; N]) {
        let buffer = &self.buffers[lane as usize];
        for (word, value) in buffer.words[..N].iter().zip(words) {
            word.write(*value);
        }
    }

    /// Puts the rest of this turn off to a later scan: [`Turn::finish`] then leaves the port the
    /// host's, so the next scan finds it pending again and takes the turn anew. For a host that
    /// spreads the work of one turn over several polls (the std crate's `RpcHost` bounds what one
    /// poll does); what it wrote to the lane buffers stays, unseen by the device until a later
    /// turn finishes.
    #[inline]
    pub fn defer(&mut self) {
        self.deferred = true;
    }

    /// Whether [`Turn::defer`] was called on this turn.
    #[inline]
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// Hands the port back (unless the turn was [deferred](Turn::defer)): a Release fence, then
    /// the flipped host mailbox (a Relaxed store).
    /// The fence pairs with the client's Acquire fence after it sees the flip
    /// (`ClientPort::wait_for_ownership`): the turn's reads are done and its writes visible
    /// before the client touches the lane buffers again.
    #[inline]
    pub fn finish(self) {
        if self.deferred {
            return; // the port stays the host's; nothing was handed over, nothing to order
        }
        fence(Ordering::Release);
        self.host_mailbox.store(u32::from(!self.host), Ordering::Relaxed);
    }
}
