//! Emulated waves: CPU threads that make hostcalls through the core's real producer path, so
//! tests, examples, benchmarks and firmware-like embedders exercise the protocol a GPU speaks.

use crate::buffer::HostcallBuffer;
use crate::doorbell::Doorbell;
use crate::error::Error;
use hostcall_core::lanes;
use hostcall_core::message::MessageWriter;
use hostcall_core::phase::{self, occupied_words};
use hostcall_core::sync::AtomicU32;
use hostcall_core::{AnyCompleted, AnyView, ClaimedPacket, LayoutError, Protocol, SubmittedPacket};
use hostcall_core::{LANES, SLOT_WORDS};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod reply;

pub use reply::Reply;

/// One wave of 1..=64 lanes bound to a buffer.
#[derive(Clone, Debug)]
pub struct Wave {
    buffer: Arc<HostcallBuffer>,
    /// `buffer`'s view, checked once here rather than at every call (the check costs a call about
    /// as much as its own steps). It points into `buffer`, which the `Arc` keeps alive and in
    /// place as long as the wave; handed out only for as long as `&self` (see `call_lanes`).
    view: AnyView<'static>,
    activemask: u64,
    timeout: Option<Duration>,
    spin_wait: bool,
    /// Where a phase-protocol claim starts looking: waves spread over the packets, as GPU waves
    /// do by their wave id, so they collide less on the `occupied` bitmap. Below the packet count
    /// (the claim then needs no division to wrap it).
    start: usize,
}

/// Numbers the waves of the process, to spread their phase-protocol claims.
static NEXT_WAVE: AtomicUsize = AtomicUsize::new(0);

impl Wave {
    /// A wave of `lanes` active lanes (the low bits of the activemask).
    ///
    /// # Panics
    /// If `lanes` is not in 1..=64.
    pub fn new(buffer: Arc<HostcallBuffer>, lanes: u32) -> Self {
        assert!((1..=LANES as u32).contains(&lanes), "a wave has 1..={LANES} lanes, not {lanes}");
        let activemask = if lanes == 64 { u64::MAX } else { (1u64 << lanes) - 1 };
        Self::with_activemask(buffer, activemask)
    }

    /// A wave with an arbitrary activemask (divergent lanes).
    pub fn with_activemask(buffer: Arc<HostcallBuffer>, activemask: u64) -> Self {
        let view = buffer.view();
        // Relaxed: a hint, ordered with nothing.
        let start = NEXT_WAVE.fetch_add(1, Ordering::Relaxed) % view.num_packets().max(1) as usize;
        // SAFETY: only the lifetime changes. The view points into `buffer`'s allocation and lock
        // bits, which live and stay in place while an `Arc` to the buffer does; the wave holds
        // this one for as long as it holds the view (neither field is ever replaced), and lends
        // the view out only for the lifetime of a borrow of the wave.
        let view = unsafe { std::mem::transmute::<AnyView<'_>, AnyView<'static>>(view) };
        Self { buffer, view, activemask, timeout: None, spin_wait: false, start }
    }

    /// Waits for packets and replies by spinning only (a CPU pause between polls), never yielding
    /// or sleeping: what a GPU wave does, and what latency benchmarks need. It burns the wave's
    /// core while it waits, so use it only where every waiting wave has a core of its own; the
    /// default waiting (spin, then yield, then sleep) leaves the host's core alone on small
    /// machines. A timeout set with [`Wave::with_timeout`] still applies.
    pub fn with_spin_wait(mut self) -> Self {
        self.spin_wait = true;
        self
    }

    /// Gives up with [`Error::TimedOut`] after `timeout` waiting for a packet or a reply (for
    /// tests that break the host on purpose). A timed-out packet is leaked, never reused.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The active lanes.
    pub fn activemask(&self) -> u64 {
        self.activemask
    }

    fn waiting(&self) -> Waiting {
        Waiting { timeout: self.timeout, spin_only: self.spin_wait }
    }

    /// The buffer.
    pub fn buffer(&self) -> &Arc<HostcallBuffer> {
        &self.buffer
    }

    /// One hostcall: every active lane sends `request(lane)` to service `service`; returns when
    /// the host has answered.
    #[inline]
    pub fn call(&self, service: u32, request: impl Fn(usize) -> [u64; SLOT_WORDS]) -> Result<Reply, Error> {
        self.call_lanes(service, self.activemask, request)
    }

    /// Sends one message per active lane (PROTOCOL.md section 4) to a message service such as
    /// PRINTF: lane `i` sends `messages(i)`, chunked 7 words per call; lanes whose message ended
    /// drop out of later calls, as divergent lanes do on a GPU. Returns each lane's reply to its
    /// END chunk (inactive lanes: zeros).
    pub fn send_messages(&self, service: u32, messages: impl Fn(usize) -> Vec<u64>) -> Result<Reply, Error> {
        let mut writers: Vec<(usize, MessageWriter<std::vec::IntoIter<u64>>)> =
            lanes(self.activemask).map(|lane| (lane, MessageWriter::new(messages(lane)))).collect();
        let mut finals = Reply::zeros(self.activemask); // a lane whose stream fails keeps zeros
        while !writers.is_empty() {
            let mut requests = [[0u64; SLOT_WORDS]; LANES];
            let mut mask = 0u64;
            for (lane, writer) in &mut writers {
                requests[*lane] = writer.next_request().map_err(|e| Error::Message(e.to_string()))?;
                mask |= 1 << *lane;
            }
            let reply = self.call_lanes(service, mask, |lane| requests[lane])?;
            finals.or_host_error(reply.host_error());
            let mut still_open = Vec::with_capacity(writers.len());
            for (lane, mut writer) in writers {
                match writer.accept_reply(reply.lane(lane)) {
                    Ok(Some(end)) => finals.set(lane, end),
                    Ok(None) => still_open.push((lane, writer)),
                    Err(_) => finals.set(lane, reply.lane(lane)), // the host refused the stream
                }
            }
            writers = still_open;
        }
        Ok(finals)
    }

    #[inline]
    fn call_lanes(
        &self,
        service: u32,
        activemask: u64,
        request: impl Fn(usize) -> [u64; SLOT_WORDS],
    ) -> Result<Reply, Error> {
        let doorbell = self.buffer.doorbell().as_ref();
        let call = Call { service, activemask, waiting: self.waiting() };
        let view: &AnyView<'_> = &self.view; // as long as `&self`, not `'static`
        let done = call_on(view, self.start, doorbell, call, request)?;
        Ok(Reply::of(&done, activemask))
    }
}

/// A wave on a buffer in memory the caller manages (not a [`HostcallBuffer`]): the producer path
/// for buffers enabled with [`crate::enable`], and the C ABI's emulated wave. The stack or the phase protocol (ROCm's two).
#[derive(Clone, Copy)]
pub struct RawWave<'a> {
    view: AnyView<'a>,
    doorbell: &'a dyn Doorbell,
    activemask: u64,
    timeout: Option<Duration>,
    /// Where a phase-protocol claim starts looking (see [`Wave`]).
    start: usize,
}

impl<'a> RawWave<'a> {
    /// A wave with `activemask` on the stack-protocol buffer of `num_packets` packets at `base`
    /// (`len` bytes), ringing `doorbell` after each submit. Checks the address and the length.
    ///
    /// # Safety
    /// - `base..base + len` must hold a buffer initialised for `num_packets` packets;
    /// - it must stay valid for reads and writes, and be accessed only atomically, for `'a`.
    pub unsafe fn new(
        base: *mut u8,
        len: usize,
        num_packets: u64,
        doorbell: &'a dyn Doorbell,
        activemask: u64,
    ) -> Result<Self, Error> {
        let num_packets = Protocol::Stack.packet_count(num_packets).map_err(|e| Error::Layout(e.into()))?;
        // SAFETY: forwarded from this function's contract.
        let view = unsafe { AnyView::from_raw(Protocol::Stack, base, len, num_packets) }?;
        Ok(Self { view, doorbell, activemask, timeout: None, start: 0 })
    }

    /// A wave on the phase-protocol buffer at `base`, as [`RawWave::new`]. It claims packets
    /// through the bitmap `occupied` points to (`ceil(num_packets / 32)` words: the one the
    /// buffer's prefix names, as device code does), or through the bitmap inside the buffer when
    /// `occupied` is `None`. Checks the address, the length and the bitmap's alignment.
    ///
    /// # Safety
    /// As [`RawWave::new`], for a phase buffer; and `occupied`, if given, must point to
    /// `ceil(num_packets / 32)` `u32`s that stay valid for reads and writes, and are accessed
    /// only atomically (by waves, device code), for `'a`.
    pub unsafe fn new_phase(
        base: *mut u8,
        len: usize,
        num_packets: u64,
        occupied: Option<NonNull<u32>>,
        doorbell: &'a dyn Doorbell,
        activemask: u64,
    ) -> Result<Self, Error> {
        let num_packets = Protocol::Phase.packet_count(num_packets).map_err(|e| Error::Layout(e.into()))?;
        // SAFETY: forwarded from this function's contract.
        let mut view = unsafe { phase::View::from_raw(base, len, num_packets) }?;
        if let Some(bitmap) = occupied {
            if bitmap.as_ptr() as usize % std::mem::align_of::<AtomicU32>() != 0 {
                return Err(Error::Layout(LayoutError::Misaligned { address: bitmap.as_ptr() as usize }));
            }
            let words = occupied_words(view.num_packets());
            // SAFETY: non-null and aligned (checked); the contract gives `words` valid words for
            // 'a, accessed only atomically; `AtomicU32` has the representation of `u32`.
            let bitmap = unsafe { std::slice::from_raw_parts(bitmap.as_ptr().cast::<AtomicU32>(), words) };
            view = view.with_occupied(bitmap)?;
        }
        Ok(Self { view: AnyView::Phase(view), doorbell, activemask, timeout: None, start: 0 })
    }

    /// Starts phase-protocol claims at packet `start % num_packets` (a GPU wave starts at its wave
    /// id); no effect on the stack protocol.
    pub fn with_start(mut self, start: usize) -> Self {
        self.start = start;
        self
    }

    /// Gives up with [`Error::TimedOut`] after `timeout` (see [`Wave::with_timeout`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// One hostcall, as [`Wave::call`].
    pub fn call(&self, service: u32, request: impl Fn(usize) -> [u64; SLOT_WORDS]) -> Result<Reply, Error> {
        let waiting = Waiting { timeout: self.timeout, spin_only: false };
        let call = Call { service, activemask: self.activemask, waiting };
        let done = call_on(&self.view, self.start, self.doorbell, call, request)?;
        Ok(Reply::of(&done, self.activemask))
    }
}

impl std::fmt::Debug for RawWave<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawWave").field("activemask", &self.activemask).finish()
    }
}

/// One hostcall's parameters: the service, the lanes that call, and how to wait.
#[derive(Clone, Copy)]
struct Call {
    service: u32,
    activemask: u64,
    waiting: Waiting,
}

/// The producer path, one for every protocol: claim (from `start`, where the protocol uses it),
/// fill, submit, ring, wait; returns the answered packet, whose replies the caller reads
/// ([`Reply::of`]) before dropping it releases the packet. The core's protocol switch
/// ([`AnyView`]) picks the protocol; everything here goes through the producer traits every
/// protocol's handles implement.
fn call_on<'v>(
    view: &AnyView<'v>,
    start: usize,
    doorbell: &dyn Doorbell,
    call: Call,
    request: impl Fn(usize) -> [u64; SLOT_WORDS],
) -> Result<AnyCompleted<'v>, Error> {
    let Call { service, activemask, waiting } = call;
    let outside = activemask & !view.lane_mask();
    if outside != 0 {
        return Err(Error::Unsupported(format!(
            "lanes {outside:#x} of the activemask are outside the buffer's packets (lanes {:#x}: an \
             RPC port is as wide as its client's warp)",
            view.lane_mask()
        )));
    }
    let mut backoff = Backoff::new(waiting.timeout, waiting.spin_only);
    let mut claimed = loop {
        match view.claim(start)? {
            Some(packet) => break packet,
            None => backoff.wait(false)?, // more waves than packets, or all busy: wait for one
        }
    };
    for lane in lanes(activemask) {
        claimed.write_lane(lane, &request(lane));
    }
    let submitted = claimed.submit(service, activemask);
    doorbell.ring();
    backoff.restart();
    // On a timeout the handle is dropped as its protocol says: a stack packet is leaked (the host
    // still owns it; never released, never reused), a phase packet's claim is freed but the packet
    // is not reused before the host answers (the phases must agree again). `wait(true)`:
    // `wait_until` pauses the CPU once per poll itself.
    submitted.wait_until(|_| backoff.wait(true).is_ok()).map_err(|_still_submitted| Error::TimedOut)
}

/// How a wave waits: its timeout, and whether it only spins ([`Wave::with_spin_wait`]).
#[derive(Clone, Copy)]
struct Waiting {
    timeout: Option<Duration>,
    spin_only: bool,
}

/// Spin, then yield, then sleep: a waiting wave must leave the host's core alone on small
/// machines, yet answer within microseconds on an idle one. With `spin_only` (see
/// [`Wave::with_spin_wait`]) it never leaves the spin phase.
///
/// The phases are short on purpose: the spin covers a round trip to an awake listener (about a
/// microsecond), and only a few yields follow, because with more waves than cores a yielding wave
/// is still runnable and takes turns with the listener, which then gets a sliver of a core (the
/// `bench` example's `throughput_64w_1l` row measures it: `docs/performance.md`, "Hot-path
/// changes").
struct Backoff {
    polls: u32,
    /// The call's start, read only when there is a timeout to check (it costs a clock read).
    started: Option<Instant>,
    timeout: Option<Duration>,
    spin_only: bool,
}

impl Backoff {
    /// Polls spent spinning (a few microseconds).
    const SPINS: u32 = 64;
    /// Polls after which the wave sleeps instead of yielding (`YIELDS - SPINS` yields).
    const YIELDS: u32 = 96;
    /// One sleep between polls once yielding is over (the timer slack of the OS comes on top).
    const SLEEP: Duration = Duration::from_micros(50);

    fn new(timeout: Option<Duration>, spin_only: bool) -> Self {
        Self { polls: 0, started: timeout.map(|_| Instant::now()), timeout, spin_only }
    }

    /// Back to the spin phase (the deadline stays the call's).
    fn restart(&mut self) {
        self.polls = 0;
    }

    /// One wait between polls. `paused`: the caller already paused the CPU once for this poll,
    /// so the spin phase adds nothing (one pause per poll, like the ping-pong floor).
    fn wait(&mut self, paused: bool) -> Result<(), Error> {
        self.polls = self.polls.saturating_add(1);
        if self.polls < Self::SPINS || self.spin_only {
            if !paused {
                std::hint::spin_loop();
            }
        } else if self.polls < Self::YIELDS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Self::SLEEP);
        }
        match (self.timeout, self.started) {
            (Some(limit), Some(started)) if self.polls % 64 == 0 && started.elapsed() > limit => {
                Err(Error::TimedOut)
            }
            _ => Ok(()),
        }
    }
}
