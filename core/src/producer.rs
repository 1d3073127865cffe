//! The producer's skeleton, written once for every protocol: the typestate handles [`Claimed`],
//! [`Submitted`] and [`Completed`], generic over the protocol's [`Wire`] (its `PacketWords`: the
//! shared words of the one packet a handle holds, and what the call knows of it), which says what
//! each step does to those words.
//!
//! The handles are the packet's life on the device side: only a `Claimed` packet can be filled
//! and submitted (once: `submit` consumes it), only a `Submitted` one waited on, only a
//! `Completed` one read and released. What a protocol's words do at each step, and what dropping a
//! handle does, is the protocol's [`Wire`]; the order of the steps, the wait loop and the producer
//! traits ([`ClaimedPacket`], [`SubmittedPacket`], [`CompletedPacket`]) are here. Each protocol
//! names its handles (`stack::Claimed<'a>` is `Claimed<stack::PacketWords<'a>>`) and adds what only
//! it has (the stack's tagged pointer, the line protocol's sequence and its `keep`).
//!
//! A handle holds its packet's words, not the buffer's view: a claim finds them once, and every
//! later step reaches them without an index or a bounds check, and the handle is a few words that
//! a move copies.
//!
//! Every step of the device's path (the claim, these handles' methods, each protocol's [`Wire`]
//! steps and the [`AnyClaimed`](crate::AnyClaimed) arms over them) is `#[inline(always)]`: left to
//! the inliner, each step is a call that moves the handle through memory, which costs a call more
//! than the step's own atomics (`docs/performance.md`, "The emulated device's path, cut alone").
//!
//! ```
//! use hostcall_core::{producer, stack, Host as _, Payload};
//! /// Any protocol's claimed packet is a `producer::Claimed<W>`.
//! fn lane_zero<W: producer::Wire>(mut packet: producer::Claimed<W>) -> producer::Submitted<W> {
//!     packet.write_lane(0, &[1, 2, 3, 4, 5, 6, 7, 8]);
//!     packet.submit(7, 1)
//! }
//! let (prefix, headers) = (stack::Prefix::default(), [stack::Header::default(), stack::Header::default()]);
//! let payloads = [Payload::default(), Payload::default()];
//! let view = stack::View::from_parts(&prefix, &headers, &payloads).unwrap();
//! view.init(0, 0);
//! let claimed: stack::Claimed<'_> = view.claim().unwrap().expect("a free packet");
//! let submitted = lane_zero(claimed);
//! assert!(!submitted.is_served());
//! view.host().drain(&mut |p: &mut hostcall_core::PacketRequest<'_>| p.reply(0, [p.request(0)[7], 0]));
//! assert_eq!(submitted.wait(|| {}).reply(0), [8, 0]);
//! ```

use crate::host::ErrorCode;
use crate::lane::{
    lanes, poll_until, ClaimedPacket, CompletedPacket, SubmittedPacket, REPLY_WORDS, SLOT_WORDS,
};
use core::fmt;

/// What one protocol's shared words do at each step of a producer's call: implemented by each
/// protocol's `PacketWords`, the words of the one packet a handle holds and what the call knows
/// of it (a phase bit, a sequence, a tagged pointer); sealed: the protocols of this crate only.
/// Each method documents its orderings in the protocol's implementation.
pub trait Wire: Copy + fmt::Debug + sealed::Sealed {
    /// What the wait learns from the answer (the stack protocol's control word; nothing in the
    /// others).
    type Answer: Copy + fmt::Debug;

    /// The packet's index in the buffer.
    fn index(&self) -> usize;
    /// Writes lane `lane`'s request words. Panics if `lane >= LANES`.
    fn write_lane(&self, lane: usize, words: &[u64; SLOT_WORDS]);
    /// Hands the packet to the host with its service id and activemask; updates what the words
    /// know of the call to the submitted call's.
    fn submit(&mut self, service: u32, activemask: u64);
    /// One poll for the host's answer to the submitted call: `Some` once it is there (with the
    /// Acquire that makes the replies visible).
    fn answered(&self, activemask: u64) -> Option<Self::Answer>;
    /// Lane `lane`'s reply words, once answered. Panics if `lane >= LANES`.
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS];
    /// Whether the host answered some lane with an error: by default, whether any active lane's
    /// reply is an error reply (the protocols without a control word).
    #[inline(always)]
    fn host_error(&self, activemask: u64, answer: Self::Answer) -> bool {
        let _ = answer;
        lanes(activemask).any(|lane| ErrorCode::from_reply(self.reply(lane)).is_some())
    }
    /// A claimed packet dropped unsent.
    fn drop_unsent(&self);
    /// A submitted packet dropped before its answer (leaked, or freed for later, as the protocol
    /// allows).
    fn drop_submitted(&self);
    /// An answered packet released (or dropped).
    fn release(&self);
}

pub(crate) mod sealed {
    /// Only this crate's protocols implement [`Wire`](super::Wire).
    pub trait Sealed {}
}

/// Names a protocol's handles for its `PacketWords` (`Claimed<'a>` is
/// [`Claimed`]`<PacketWords<'a>>`, and so on), each with the protocol's docs, and seals its
/// [`Wire`]. Used once in each protocol's `producer.rs`, next to its `impl Wire for PacketWords`.
macro_rules! handles {
    ($(#[$claimed:meta])* Claimed, $(#[$submitted:meta])* Submitted, $(#[$completed:meta])* Completed $(,)?) => {
        $(#[$claimed])*
        pub type Claimed<'a> = $crate::producer::Claimed<PacketWords<'a>>;
        $(#[$submitted])*
        pub type Submitted<'a> = $crate::producer::Submitted<PacketWords<'a>>;
        $(#[$completed])*
        pub type Completed<'a> = $crate::producer::Completed<PacketWords<'a>>;
        impl $crate::producer::sealed::Sealed for PacketWords<'_> {}
    };
}
pub(crate) use handles;

/// A claimed packet: fill its lanes, then [`Claimed::submit`] it. Dropping it frees the packet
/// unsent.
#[derive(Debug)]
#[must_use = "dropping a claimed packet frees it unsent"]
pub struct Claimed<W: Wire> {
    pub(crate) wire: W,
}

/// A submitted packet: wait for the host's answer. What dropping it does is the protocol's (its
/// `Submitted` docs say).
#[derive(Debug)]
#[must_use = "wait for the reply; dropping a submitted packet abandons it"]
pub struct Submitted<W: Wire> {
    wire: W,
    /// The lanes submitted.
    activemask: u64,
}

/// An answered packet: read the replies, then drop or [`Completed::release`] it.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<W: Wire> {
    pub(crate) wire: W,
    /// The lanes submitted.
    activemask: u64,
    answer: W::Answer,
}

impl<W: Wire> Claimed<W> {
    /// The handle of the packet whose words are `wire`, which a claim took.
    #[inline(always)]
    pub(crate) fn new(wire: W) -> Self {
        Self { wire }
    }

    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.wire.index()
    }

    /// Writes lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES` (and, under loom, as the protocol's transport requires).
    #[inline(always)]
    pub fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.wire.write_lane(lane, words);
    }

    /// Sets the service id and the activemask and hands the packet to the host. The caller rings
    /// the doorbell afterwards (or not: a polling host needs no ring).
    #[inline(always)]
    pub fn submit(self, service: u32, activemask: u64) -> Submitted<W> {
        let mut wire = self.wire;
        core::mem::forget(self);
        wire.submit(service, activemask);
        Submitted { wire, activemask }
    }
}

impl<W: Wire> Drop for Claimed<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.drop_unsent();
    }
}

impl<W: Wire> Submitted<W> {
    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.wire.index()
    }

    /// Whether the host has answered.
    #[inline(always)]
    pub fn is_served(&self) -> bool {
        self.wire.answered(self.activemask).is_some()
    }

    /// Waits until the host answers, calling `backoff` between polls.
    #[inline(always)]
    pub fn wait(self, backoff: impl FnMut()) -> Completed<W> {
        SubmittedPacket::wait(self, backoff)
    }

    /// Waits until the host answers, or until `keep_waiting(polls so far)` returns false, in
    /// which case the packet is handed back still submitted. `keep_waiting` is the backoff: it
    /// may spin, yield or sleep.
    #[inline(always)]
    pub fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<Completed<W>, Self> {
        match poll_until(|| self.wire.answered(self.activemask), keep_waiting) {
            Some(answer) => {
                let (wire, activemask) = (self.wire, self.activemask);
                core::mem::forget(self);
                Ok(Completed { wire, activemask, answer })
            }
            None => Err(self),
        }
    }
}

impl<W: Wire> Drop for Submitted<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.drop_submitted();
    }
}

impl<W: Wire> Completed<W> {
    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.wire.index()
    }

    /// The reply words of lane `lane`.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline(always)]
    pub fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.wire.reply(lane)
    }

    /// Lane `lane`'s reply decoded as an error reply, if it is one.
    #[inline(always)]
    pub fn error(&self, lane: usize) -> Option<ErrorCode> {
        ErrorCode::from_reply(self.reply(lane))
    }

    /// Whether the host answered at least one submitted lane with an error reply (see
    /// [`ErrorCode`]): the protocol's control bit where it has one, else the error replies of
    /// the active lanes.
    #[inline(always)]
    pub fn host_error(&self) -> bool {
        self.wire.host_error(self.activemask, self.answer)
    }

    /// Releases the packet (dropping does the same).
    #[inline(always)]
    pub fn release(self) {}

    /// The packet's words without the handle's `Drop` (for a protocol that keeps the packet).
    #[inline(always)]
    pub(crate) fn into_words(self) -> W {
        let wire = self.wire;
        core::mem::forget(self);
        wire
    }
}

impl<W: Wire> Drop for Completed<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.release();
    }
}

impl<W: Wire> ClaimedPacket for Claimed<W> {
    type Submitted = Submitted<W>;

    #[inline(always)]
    fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        Claimed::write_lane(self, lane, words);
    }

    #[inline(always)]
    fn submit(self, service: u32, activemask: u64) -> Submitted<W> {
        Claimed::submit(self, service, activemask)
    }
}

impl<W: Wire> SubmittedPacket for Submitted<W> {
    type Completed = Completed<W>;

    #[inline(always)]
    fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<Completed<W>, Self> {
        Submitted::wait_until(self, keep_waiting)
    }
}

impl<W: Wire> CompletedPacket for Completed<W> {
    #[inline(always)]
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        Completed::reply(self, lane)
    }

    #[inline(always)]
    fn host_error(&self) -> bool {
        Completed::host_error(self)
    }
}
