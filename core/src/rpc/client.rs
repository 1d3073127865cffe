//! The client's side (device code's, here for emulated waves, tests and the loom models):
//! [`Client::try_open`] takes a port's lock bit and the port, [`ClientPort`] sends and receives
//! packets and streams, and closing unlocks. One wave is one thread: it does for all its lanes
//! what upstream's warp does lane by lane.

use super::host::bit;
use super::layout::{Header, LaneBuffer, LANE_BUFFER_SIZE};
use super::stream::{fill_packet, packet_bytes, Cursor};
use super::view::View;
use crate::lane::{lanes, SLOT_WORDS};
use crate::sync::{fence, spin_hint, AtomicU32, Ordering};
use crate::view::LayoutError;

/// The client of one buffer: the view with the lock bits (one per port; in device code they are
/// part of the `__llvm_rpc_client` object, private to the device; see [`View::with_locks`]).
#[derive(Clone, Copy, Debug)]
pub struct Client<'a> {
    view: View<'a>,
}

/// A client gave up waiting for the host (its `keep_waiting` said stop). The port is left as it
/// was; close it to unlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stalled;

impl<'a> Client<'a> {
    /// A client of `view` with `locks` (at least `ceil(ports / 32)` words, zeroed: no port held).
    pub fn new(view: View<'a>, locks: &'a [AtomicU32]) -> Result<Self, LayoutError> {
        view.with_locks(locks).map(|view| Self { view })
    }

    /// The client of a view that has its lock bits ([`View::with_locks`]), else `None`.
    #[inline(always)]
    pub fn of(view: View<'a>) -> Option<Self> {
        view.has_locks().then_some(Self { view })
    }

    /// Opens a port for a call of `opcode` by the lanes of `mask`: tries each port once from
    /// `start` (upstream scans from 0 every time), takes the first whose lock bit is free and
    /// whose mailboxes are equal (the host has closed its last call); the header is written with
    /// the call's first send. `None` when every port is busy.
    #[inline(always)]
    pub fn try_open(&self, opcode: u32, mask: u64, start: u32) -> Option<ClientPort<'a>> {
        crate::occupied::claim_from(self.view.ports() as usize, start as usize, |port| {
            self.try_open_port(opcode, mask, port as u32)
        })
    }

    #[inline(always)]
    fn try_open_port(&self, opcode: u32, mask: u64, port: u32) -> Option<ClientPort<'a>> {
        let (word, bit_of_port) = (&self.view.locks[port as usize / 32], 1u32 << (port % 32));
        // Acquire: pairs with the Release `fetch_and` of the previous holder's `close`, so this
        // wave's accesses to the port come after that holder's.
        if word.fetch_or(bit_of_port, Ordering::Acquire) & bit_of_port != 0 {
            return None;
        }
        // Relaxed: the first send's wait ends with the Acquire fence that orders the buffer.
        let inbox = bit(self.view.host_mailbox[port as usize].load(Ordering::Relaxed));
        let outbox = bit(self.view.device_mailbox[port as usize].load(Ordering::Relaxed));
        if inbox != outbox {
            // Release: nothing was written; keeps the unlock symmetric with `close`.
            word.fetch_and(!bit_of_port, Ordering::Release);
            return None;
        }
        // The header is written by the first send (`ClientPort::write_header_once` says why).
        let (lanes, at) = (self.view.lanes as usize, port as usize);
        let words = PortWords {
            host_mailbox: &self.view.host_mailbox[at],
            device_mailbox: &self.view.device_mailbox[at],
            header: self.view.header(port),
            buffers: &self.view.buffers[at * lanes..(at + 1) * lanes],
            lock: word,
        };
        Some(ClientPort {
            words,
            port,
            mask: mask & self.view.lane_mask(),
            opcode,
            header_pending: true,
            out: outbox,
            receive: false,
            owns: true,
        })
    }
}

/// An open port of a client: upstream's `rpc::Port<false>`. Every wait polls the host's mailbox
/// and asks `keep_waiting(polls so far)` between polls; `false` gives up with [`Stalled`].
#[derive(Debug)]
#[must_use = "close the port to unlock it"]
pub struct ClientPort<'a> {
    words: PortWords<'a>,
    port: u32,
    mask: u64,
    opcode: u32,
    /// Whether the header (`mask`, `opcode`) is still to be written (by the first send).
    header_pending: bool,
    /// The client mailbox's bit (this side's own word: kept, never read back).
    out: bool,
    /// Whether the last operation was a receive (a receive after it acknowledges first).
    receive: bool,
    /// Whether the client owns the buffer without waiting.
    owns: bool,
}

/// The words of one open port, which its steps touch: the view's parts of that port, found once
/// at open (so a port is a few words, and its steps index nothing but its lanes).
#[derive(Clone, Copy, Debug)]
struct PortWords<'a> {
    host_mailbox: &'a AtomicU32,
    device_mailbox: &'a AtomicU32,
    header: &'a Header,
    /// The port's lane buffers, one per lane of the buffer's ports.
    buffers: &'a [LaneBuffer],
    /// The lock word holding the port's bit.
    lock: &'a AtomicU32,
}

impl<'a> PortWords<'a> {
    /// Lane `lane`'s buffer.
    ///
    /// # Panics
    /// If `lane >= lanes`.
    #[inline(always)]
    fn lane_buffer(&self, lane: u32) -> &'a LaneBuffer {
        let lanes = self.buffers.len();
        assert!((lane as usize) < lanes, "lane {lane} of a {lanes}-lane port");
        &self.buffers[lane as usize]
    }

    /// The bits of the lanes a port has (`lanes` low bits).
    #[inline(always)]
    fn lane_mask(&self) -> u64 {
        match self.buffers.len() {
            lanes @ 0..=63 => (1u64 << lanes) - 1,
            _ => u64::MAX,
        }
    }
}

impl ClientPort<'_> {
    /// The port's index.
    #[inline(always)]
    pub fn port(&self) -> u32 {
        self.port
    }

    /// The lanes of the call.
    #[inline(always)]
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// Writes the header (`mask`, `opcode`) if this call has not sent yet: just before the first
    /// send's lane stores, so the header, the lane words and the flip leave the store buffer
    /// together. Written at open instead, with the call's set-up between it and the flip, a host
    /// polling the mailboxes (which share the header's line in a one-port buffer) takes the line
    /// back in between, and the flip has to win it again: one more transfer per call
    /// (`core_1l_rpc`: 2.6 x the floor with the header at open, beside `llvm_rpc_1l`'s 1.2 x).
    #[inline(always)]
    fn write_header_once(&mut self) {
        if self.header_pending {
            self.header_pending = false;
            let header = self.words.header;
            // Relaxed: published by the Release fence of the flip that follows.
            header.mask.store(self.mask, Ordering::Relaxed);
            header.opcode.store(self.opcode, Ordering::Relaxed);
        }
    }

    /// Flips the client's mailbox: a Release fence, then a Relaxed store. The fence pairs with
    /// the Acquire fence of the host's [`View::turn`](super::View::turn).
    #[inline(always)]
    fn flip(&mut self) {
        fence(Ordering::Release);
        self.out = !self.out;
        self.words.device_mailbox.store(u32::from(self.out), Ordering::Relaxed);
        self.owns = false;
    }

    /// Waits until the host's mailbox equals the client's, then an Acquire fence that pairs with
    /// the Release fence of the host's [`Turn::finish`](super::Turn::finish).
    #[inline(always)]
    fn wait_for_ownership(&mut self, keep_waiting: &mut impl FnMut(u32) -> bool) -> Result<(), Stalled> {
        let inbox = self.words.host_mailbox;
        let mut polls = 0u32;
        // Relaxed polls: the fence below orders what follows.
        while !self.owns && bit(inbox.load(Ordering::Relaxed)) != self.out {
            polls = polls.saturating_add(1);
            if !keep_waiting(polls) {
                return Err(Stalled);
            }
            spin_hint();
        }
        fence(Ordering::Acquire);
        self.owns = true;
        Ok(())
    }

    /// Sends one packet: `fill(lane)` for each lane of the call.
    pub fn send(
        &mut self,
        mut fill: impl FnMut(u32) -> [u64; SLOT_WORDS],
        keep_waiting: &mut impl FnMut(u32) -> bool,
    ) -> Result<(), Stalled> {
        self.wait_for_ownership(keep_waiting)?;
        self.write_header_once();
        for lane in lanes(self.mask) {
            self.words.lane_buffer(lane as u32).write(&fill(lane as u32));
        }
        self.flip();
        self.receive = false;
        Ok(())
    }

    /// Receives one packet: `take(lane, words)` for each lane of the call.
    pub fn recv(
        &mut self,
        take: impl FnMut(u32, [u64; SLOT_WORDS]),
        keep_waiting: &mut impl FnMut(u32) -> bool,
    ) -> Result<(), Stalled> {
        self.recv_first(take, keep_waiting)
    }

    /// [`ClientPort::recv`] reading only the first `N` words of each lane, for a reply known to
    /// be shorter (upstream's client reads its buffer through a pointer, only the words it
    /// uses). A lane buffer of a one-port buffer spans two lines (bytes 24..88): a two-word
    /// reply lies in the first, with the mailboxes, and reading all eight words takes the
    /// second too, which the host read during its turn: one more miss on every call
    /// (the `core_1l_rpc` row of `docs/performance.md`, "RPC client").
    pub fn recv_first<const N: usize>(
        &mut self,
        mut take: impl FnMut(u32, [u64; N]),
        keep_waiting: &mut impl FnMut(u32) -> bool,
    ) -> Result<(), Stalled> {
        if self.receive {
            self.flip();
        }
        self.wait_for_ownership(keep_waiting)?;
        for lane in lanes(self.mask) {
            take(lane as u32, self.words.lane_buffer(lane as u32).read_first());
        }
        self.receive = true;
        Ok(())
    }

    /// Sends `data(lane)` from each lane as a stream (`send_n`).
    pub fn send_n<'d>(
        &mut self,
        data: impl Fn(u32) -> &'d [u8],
        keep_waiting: &mut impl FnMut(u32) -> bool,
    ) -> Result<(), Stalled> {
        let longest = lanes(self.mask).map(|lane| data(lane as u32).len() as u64).max().unwrap_or(0);
        let mut cursor = Cursor::start();
        loop {
            self.send(|lane| fill_packet(&cursor, data(lane)), keep_waiting)?;
            if !cursor.advance(longest) {
                return Ok(());
            }
        }
    }

    /// Receives a stream (`recv_n`): `sink(lane, size, offset, bytes)` for each lane's chunk of
    /// each packet (`size` is the lane's byte count, from the first packet).
    pub fn recv_n(
        &mut self,
        mut sink: impl FnMut(u32, u64, u64, &[u8]),
        keep_waiting: &mut impl FnMut(u32) -> bool,
    ) -> Result<(), Stalled> {
        let mut sizes = [0u64; crate::lane::LANES];
        let mut longest = 0;
        let mut cursor = Cursor::start();
        loop {
            self.recv(
                |lane, words| {
                    if cursor.is_first() {
                        sizes[lane as usize] = words[0];
                        longest = longest.max(words[0]);
                    }
                    let (range, at) = cursor.chunk(sizes[lane as usize]);
                    let len = ((range.end - range.start) as usize).min(LANE_BUFFER_SIZE - at);
                    sink(lane, sizes[lane as usize], range.start, &packet_bytes(&words)[at..at + len]);
                },
                keep_waiting,
            )?;
            if !cursor.advance(longest) {
                return Ok(());
            }
        }
    }

    /// Stores lane `lane`'s words while the port is the client's (between open, or a reply, and
    /// the next send): the producer path, which learns the call's lanes only at submit.
    ///
    /// # Panics
    /// If the port is not the client's without waiting, or `lane >= lanes`.
    #[inline(always)]
    pub fn write_lane(&mut self, lane: u32, words: &[u64; SLOT_WORDS]) {
        assert!(self.owns, "write_lane on a port the host owns");
        self.words.lane_buffer(lane).write(words);
    }

    /// Sends the lane buffers as they are, as a call of `opcode` by the lanes of `mask` (the
    /// header, written with the flip, carries these instead of `try_open`'s).
    ///
    /// # Panics
    /// If the port has already sent (only a port fresh from `try_open` may be retargeted).
    #[inline(always)]
    pub fn send_as(&mut self, opcode: u32, mask: u64) {
        assert!(self.owns && self.header_pending, "send_as on a port that has already sent");
        self.mask = mask & self.words.lane_mask();
        self.opcode = opcode;
        self.write_header_once();
        self.flip();
    }

    /// Whether the host has answered (the port is the client's again); on `true` the Acquire
    /// fence of a completed wait has been issued and [`ClientPort::read_lane`] reads the answer.
    #[inline(always)]
    pub fn poll(&mut self) -> bool {
        self.wait_for_ownership(&mut |_| false).is_ok()
    }

    /// Lane `lane`'s words (meaningful while the port is the client's).
    ///
    /// # Panics
    /// If `lane >= lanes`.
    pub fn read_lane(&self, lane: u32) -> [u64; SLOT_WORDS] {
        self.read_first(lane)
    }

    /// The first `K` words of lane `lane` (see [`ClientPort::recv_first`] for why fewer).
    ///
    /// # Panics
    /// If `lane >= lanes`.
    #[inline(always)]
    pub fn read_first<const K: usize>(&self, lane: u32) -> [u64; K] {
        self.words.lane_buffer(lane).read_first()
    }

    /// Closes the port: unlocks it (the client never flips at close; the host does when its last
    /// turn was a receive).
    #[inline(always)]
    pub fn close(self) {
        // Release: pairs with the Acquire `fetch_or` of the next wave's `try_open`.
        self.words.lock.fetch_and(!(1u32 << (self.port % 32)), Ordering::Release);
    }
}

impl<'a> Client<'a> {
    /// Claims a port for the hostcall producer path (see [`super::Claimed`]): tries each port once
    /// from `start`; the header is written at submit.
    #[inline(always)]
    pub fn claim(&self, start: u32) -> Option<super::Claimed<'a>> {
        self.try_open(0, 0, start).map(super::Claimed::new)
    }
}
