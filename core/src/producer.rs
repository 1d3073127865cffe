//! The producer's skeleton, written once for every protocol: the typestate handles [`Claimed`],
//! [`Submitted`] and [`Completed`], generic over the protocol's [`Wire`] (its `View`), which says
//! what each step does to the protocol's shared words.
//!
//! The handles are the packet's life on the device side: only a `Claimed` packet can be filled
//! and submitted (once: `submit` consumes it), only a `Submitted` one waited on, only a
//! `Completed` one read and released. What a protocol's words do at each step, and what dropping a
//! handle does, is the protocol's [`Wire`]; the order of the steps, the wait loop and the producer
//! traits ([`ClaimedPacket`], [`SubmittedPacket`], [`CompletedPacket`]) are here. Each protocol
//! names its handles (`stack::Claimed<'a>` is `Claimed<stack::View<'a>>`) and adds what only it has
//! (the stack's tagged pointer, the line protocol's sequence and its `keep`).
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
/// protocol's `View` (sealed: the protocols of this crate only). Each method documents its
/// orderings in the protocol's implementation.
pub trait Wire: Copy + fmt::Debug + sealed::Sealed {
    /// What a claim knows of its call beside the packet's index (a phase bit, a sequence, a
    /// tagged pointer): the [`Ticket`]'s state.
    type State: Copy + fmt::Debug;
    /// What the wait learns from the answer (the stack protocol's control word; nothing in the
    /// others).
    type Answer: Copy + fmt::Debug;

    /// Writes lane `lane`'s request words. Panics if `lane >= LANES`.
    fn write_lane(&self, ticket: &Ticket<Self::State>, lane: usize, words: &[u64; SLOT_WORDS]);
    /// Hands the packet to the host with its service id and activemask; updates the ticket to the
    /// submitted call's.
    fn submit(&self, ticket: &mut Ticket<Self::State>, service: u32, activemask: u64);
    /// One poll for the host's answer to the submitted call: `Some` once it is there (with the
    /// Acquire that makes the replies visible).
    fn answered(&self, ticket: &Ticket<Self::State>, activemask: u64) -> Option<Self::Answer>;
    /// Lane `lane`'s reply words, once answered. Panics if `lane >= LANES`.
    fn reply(&self, ticket: &Ticket<Self::State>, lane: usize) -> [u64; REPLY_WORDS];
    /// Whether the host answered some lane with an error: by default, whether any active lane's
    /// reply is an error reply (the protocols without a control word).
    fn host_error(&self, ticket: &Ticket<Self::State>, activemask: u64, answer: Self::Answer) -> bool {
        let _ = answer;
        lanes(activemask).any(|lane| ErrorCode::from_reply(self.reply(ticket, lane)).is_some())
    }
    /// A claimed packet dropped unsent.
    fn drop_unsent(&self, ticket: &Ticket<Self::State>);
    /// A submitted packet dropped before its answer (leaked, or freed for later, as the protocol
    /// allows).
    fn drop_submitted(&self, ticket: &Ticket<Self::State>);
    /// An answered packet released (or dropped).
    fn release(&self, ticket: &Ticket<Self::State>);
}

/// A claimed packet's index and the protocol's state for its call ([`Wire::State`]).
#[derive(Clone, Copy, Debug)]
pub struct Ticket<S> {
    /// The packet's index in the buffer.
    pub(crate) index: usize,
    /// The protocol's state for the call.
    pub(crate) state: S,
}

pub(crate) mod sealed {
    /// Only this crate's protocols implement [`Wire`](super::Wire).
    pub trait Sealed {}
}

/// Names a protocol's handles for its `View` (`Claimed<'a>` is [`Claimed`]`<View<'a>>`, and so
/// on), each with the protocol's docs, and seals its [`Wire`]. Used once in each protocol's
/// `producer.rs`, next to its `impl Wire for View`.
macro_rules! handles {
    ($(#[$claimed:meta])* Claimed, $(#[$submitted:meta])* Submitted, $(#[$completed:meta])* Completed $(,)?) => {
        $(#[$claimed])*
        pub type Claimed<'a> = $crate::producer::Claimed<View<'a>>;
        $(#[$submitted])*
        pub type Submitted<'a> = $crate::producer::Submitted<View<'a>>;
        $(#[$completed])*
        pub type Completed<'a> = $crate::producer::Completed<View<'a>>;
        impl $crate::producer::sealed::Sealed for View<'_> {}
    };
}
pub(crate) use handles;

/// A claimed packet: fill its lanes, then [`Claimed::submit`] it. Dropping it frees the packet
/// unsent.
#[derive(Debug)]
#[must_use = "dropping a claimed packet frees it unsent"]
pub struct Claimed<W: Wire> {
    pub(crate) wire: W,
    pub(crate) ticket: Ticket<W::State>,
}

/// A submitted packet: wait for the host's answer. What dropping it does is the protocol's (its
/// `Submitted` docs say).
#[derive(Debug)]
#[must_use = "wait for the reply; dropping a submitted packet abandons it"]
pub struct Submitted<W: Wire> {
    wire: W,
    ticket: Ticket<W::State>,
    /// The lanes submitted.
    activemask: u64,
}

/// An answered packet: read the replies, then drop or [`Completed::release`] it.
#[derive(Debug)]
#[must_use = "read the reply before releasing the packet"]
pub struct Completed<W: Wire> {
    pub(crate) wire: W,
    pub(crate) ticket: Ticket<W::State>,
    /// The lanes submitted.
    activemask: u64,
    answer: W::Answer,
}

impl<W: Wire> Claimed<W> {
    /// The handle of packet `index`, which `wire`'s claim took, with the protocol's `state`.
    #[inline(always)]
    pub(crate) fn new(wire: W, index: usize, state: W::State) -> Self {
        Self { wire, ticket: Ticket { index, state } }
    }

    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.ticket.index
    }

    /// Writes lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES` (and, under loom, as the protocol's transport requires).
    #[inline(always)]
    pub fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]) {
        self.wire.write_lane(&self.ticket, lane, words);
    }

    /// Sets the service id and the activemask and hands the packet to the host. The caller rings
    /// the doorbell afterwards (or not: a polling host needs no ring).
    #[inline(always)]
    pub fn submit(self, service: u32, activemask: u64) -> Submitted<W> {
        let (wire, mut ticket) = (self.wire, self.ticket);
        core::mem::forget(self);
        wire.submit(&mut ticket, service, activemask);
        Submitted { wire, ticket, activemask }
    }
}

impl<W: Wire> Drop for Claimed<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.drop_unsent(&self.ticket);
    }
}

impl<W: Wire> Submitted<W> {
    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.ticket.index
    }

    /// Whether the host has answered.
    #[inline(always)]
    pub fn is_served(&self) -> bool {
        self.wire.answered(&self.ticket, self.activemask).is_some()
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
        match poll_until(|| self.wire.answered(&self.ticket, self.activemask), keep_waiting) {
            Some(answer) => {
                let (wire, ticket, activemask) = (self.wire, self.ticket, self.activemask);
                core::mem::forget(self);
                Ok(Completed { wire, ticket, activemask, answer })
            }
            None => Err(self),
        }
    }
}

impl<W: Wire> Drop for Submitted<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.drop_submitted(&self.ticket);
    }
}

impl<W: Wire> Completed<W> {
    /// The packet's index in the buffer.
    #[inline(always)]
    pub fn index(&self) -> usize {
        self.ticket.index
    }

    /// The reply words of lane `lane`.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline(always)]
    pub fn reply(&self, lane: usize) -> [u64; REPLY_WORDS] {
        self.wire.reply(&self.ticket, lane)
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
        self.wire.host_error(&self.ticket, self.activemask, self.answer)
    }

    /// Releases the packet (dropping does the same).
    #[inline(always)]
    pub fn release(self) {}

    /// The handle's parts without its `Drop` (for a protocol that keeps the packet).
    #[inline(always)]
    pub(crate) fn into_parts(self) -> (W, Ticket<W::State>) {
        let (wire, ticket) = (self.wire, self.ticket);
        core::mem::forget(self);
        (wire, ticket)
    }
}

impl<W: Wire> Drop for Completed<W> {
    #[inline(always)]
    fn drop(&mut self) {
        self.wire.release(&self.ticket);
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
