//! What every protocol does alike, lane by lane: the payload and its slots, the walk over an
//! activemask, the packet's life, and the producer's side of it (the handles' common traits and
//! the one wait loop).
//!
//! A wave has up to [`LANES`] lanes; bit `i` of a packet's activemask says lane `i` takes part in
//! the call. Lane `i` owns slot `i` of the packet's [`Payload`]: [`SLOT_WORDS`] request words, the
//! first [`REPLY_WORDS`] of which the host overwrites with the reply. Who may touch a payload when
//! is each protocol's business (the ownership table in each protocol's module docs); the
//! words themselves are [`PayloadWord`]s, so a racing access is never undefined behaviour.

use crate::sync::{spin_hint, PayloadWord};
use core::fmt;

/// Lanes in a wave, and so slots in a payload: 64, shrunk to 2 under loom to keep the models
/// small (the facade's table of model sizes, [`crate::sync`]).
pub const LANES: usize = crate::sync::LANES;

/// The activemask bits that name a lane that exists ([`LANES`] low bits).
pub const LANE_MASK: u64 = if LANES == 64 { u64::MAX } else { (1u64 << LANES) - 1 };

/// Request words per lane.
pub const SLOT_WORDS: usize = 8;
/// Reply words per lane (the first words of the lane's slot).
pub const REPLY_WORDS: usize = 2;

const _: () = assert!(LANES <= 64 && REPLY_WORDS <= SLOT_WORDS);

/// Per-packet payload, the same in every protocol that carries lanes in place: one slot of [`SLOT_WORDS`] words for each
/// lane (PROTOCOL.md sections 1 and 2).
#[repr(C)]
pub struct Payload {
    /// `slots[lane][word]`.
    pub slots: [[PayloadWord; SLOT_WORDS]; LANES],
}

/// The payload's size only: its 512 words are the owner's to read, and no one wants them printed.
impl core::fmt::Debug for Payload {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Payload").field("lanes", &LANES).field("words_per_lane", &SLOT_WORDS).finish()
    }
}

impl Default for Payload {
    fn default() -> Self {
        Self { slots: core::array::from_fn(|_| core::array::from_fn(|_| PayloadWord::default())) }
    }
}

impl Payload {
    /// Writes `words` into the first `K` words of lane `lane`'s slot (a request: `K = SLOT_WORDS`;
    /// a reply: `K = REPLY_WORDS`). Ordering is the caller's protocol's job (see [`PayloadWord`]):
    /// the producer handles and the host's [`PacketRequest`](crate::PacketRequest)
    /// access the lanes through these two methods.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn write_lane<const K: usize>(&self, lane: usize, words: &[u64; K]) {
        const { assert!(K <= SLOT_WORDS) };
        for (cell, &word) in self.slots[lane].iter().zip(words) {
            cell.write(word);
        }
    }

    /// Reads the first `K` words of lane `lane`'s slot (same rules as [`Payload::write_lane`]).
    ///
    /// # Panics
    /// If `lane >= LANES`.
    #[inline]
    pub fn read_lane<const K: usize>(&self, lane: usize) -> [u64; K] {
        const { assert!(K <= SLOT_WORDS) };
        let slot = &self.slots[lane];
        core::array::from_fn(|word| slot[word].read())
    }
}

crate::sync::abi_checks! {
    use super::*;
    use core::mem::{align_of, size_of};

    const _: () = assert!(size_of::<Payload>() == 4096);
    const _: () = assert!(align_of::<Payload>() == 8);
    const _: () = assert!(size_of::<PayloadWord>() == 8);
}

/// The lanes of an activemask, lowest first: the one walk over a lane mask, used by every host
/// and producer loop. Only lanes that exist ([`LANE_MASK`]) are yielded, one step per set bit.
///
/// ```
/// use hostcall_core::lanes;
/// assert!(lanes(0b1010_0001).eq([0, 5, 7]));
/// assert_eq!(lanes(u64::MAX).len(), hostcall_core::LANES);
/// ```
pub fn lanes(activemask: u64) -> Lanes {
    Lanes { mask: activemask & LANE_MASK }
}

/// The iterator [`lanes`] returns.
#[derive(Clone, Copy, Debug)]
pub struct Lanes {
    mask: u64,
}

impl Iterator for Lanes {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        (self.mask != 0).then(|| {
            let lane = self.mask.trailing_zeros() as usize;
            self.mask &= self.mask - 1;
            lane
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.mask.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Lanes {}

/// The runs of adjacent lanes of an activemask, lowest first, each as the range of its lanes
/// (only lanes that exist): the walk of the host loops whose lanes' words lie one after the other
/// in memory, so that a run's are walked by pointer steps.
#[inline]
pub(crate) fn runs(activemask: u64) -> Runs {
    Runs { mask: activemask & LANE_MASK }
}

/// The iterator [`runs`] returns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Runs {
    mask: u64,
}

impl Iterator for Runs {
    type Item = core::ops::Range<usize>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        (self.mask != 0).then(|| {
            let first = self.mask.trailing_zeros();
            // Adding the lowest lane carries through its run: the sum has the lanes above the run
            // and the first bit after it (none when the run ends at bit 63: the sum wraps to 0).
            let above = self.mask.wrapping_add(self.mask & self.mask.wrapping_neg());
            self.mask &= above;
            first as usize..above.trailing_zeros() as usize
        })
    }
}

/// Where a packet is in its life. Every protocol takes a packet around this cycle; only the words
/// that record it differ (each protocol's module docs draw or tabulate them). The phase tests check its words against this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketState {
    /// On the free-list.
    Free,
    /// Popped by a producer, being filled.
    Claimed,
    /// On the ready-stack or being served; READY is set.
    Ready,
    /// READY cleared by the host; the reply is in the payload.
    Served,
}

/// Something that happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketEvent {
    /// A producer pops it from the free-list.
    Claim,
    /// The producer sets READY and pushes it on the ready-stack.
    Submit,
    /// The host serves it and clears READY.
    Serve,
    /// The producer pushes it back on the free-list.
    Release,
}

/// An event that is not allowed in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTransition {
    /// The state the packet was in.
    pub from: PacketState,
    /// The event that was refused.
    pub event: PacketEvent,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not allowed for a packet in state {:?}", self.event, self.from)
    }
}

impl core::error::Error for InvalidTransition {}

impl PacketState {
    /// The state after `event`, or why it is refused.
    ///
    /// ```
    /// use hostcall_core::{PacketEvent::*, PacketState::*};
    /// assert_eq!(Free.apply(Claim), Ok(Claimed));
    /// assert!(Ready.apply(Submit).is_err(), "a packet cannot be submitted twice");
    /// ```
    pub fn apply(self, event: PacketEvent) -> Result<Self, InvalidTransition> {
        use PacketEvent::*;
        use PacketState::*;
        match (self, event) {
            (Free, Claim) => Ok(Claimed),
            (Claimed, Submit) => Ok(Ready),
            (Ready, Serve) => Ok(Served),
            (Claimed | Served, Release) => Ok(Free),
            (from, event) => Err(InvalidTransition { from, event }),
        }
    }
}

/// A claimed packet of any protocol (`stack::Claimed`, `phase::Claimed`, `line::Claimed`, [`AnyClaimed`]):
/// fill its lanes, then submit it. Dropping it returns the packet unsent.
///
/// With [`SubmittedPacket`] and [`CompletedPacket`] this is the producer's path written once for
/// every protocol:
///
/// ```
/// use hostcall_core::{AnyView, ClaimedPacket, CompletedPacket, SubmittedPacket};
///
/// /// One lane's call on any claimed packet, the host answering through `serve`.
/// fn call<C: ClaimedPacket>(mut packet: C, lane: usize, words: [u64; 8], serve: impl FnOnce()) -> [u64; 2] {
///     packet.write_lane(lane, &words);
///     let submitted = packet.submit(7, 1 << lane);
///     serve();
///     submitted.wait(|| {}).reply(lane)
/// }
/// # let prefix = hostcall_core::stack::Prefix::default();
/// # let headers = [hostcall_core::stack::Header::default(), hostcall_core::stack::Header::default()];
/// # let payloads = [hostcall_core::Payload::default(), hostcall_core::Payload::default()];
/// # let view = AnyView::Stack(hostcall_core::stack::View::from_parts(&prefix, &headers, &payloads).unwrap());
/// # view.init(0, 0);
/// let packet = view.claim(0).unwrap().expect("a free packet");
/// let reply = call(packet, 3, [40, 2, 0, 0, 0, 0, 0, 0], || {
///     view.drain(&mut |p: &mut hostcall_core::PacketRequest<'_>| {
///         let r = p.request(3);
///         p.reply(3, [r[0] + r[1], 0]);
///     });
/// });
/// assert_eq!(reply, [42, 0]);
/// ```
///
/// [`AnyClaimed`]: crate::AnyClaimed
pub trait ClaimedPacket: Sized {
    /// The handle [`ClaimedPacket::submit`] returns.
    type Submitted: SubmittedPacket;

    /// Writes lane `lane`'s request words.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    fn write_lane(&mut self, lane: usize, words: &[u64; SLOT_WORDS]);

    /// Sets the service id and the activemask and hands the packet to the host. The caller rings
    /// the doorbell afterwards.
    fn submit(self, service: u32, activemask: u64) -> Self::Submitted;
}

/// A submitted packet of any protocol: wait for the host's answer.
pub trait SubmittedPacket: Sized {
    /// The handle once the host has answered.
    type Completed: CompletedPacket;

    /// Waits until the host answers, or until `keep_waiting(polls so far)` returns false, in
    /// which case the packet is handed back still submitted. `keep_waiting` is the backoff: it
    /// may spin, yield or sleep.
    fn wait_until(self, keep_waiting: impl FnMut(u32) -> bool) -> Result<Self::Completed, Self>;

    /// Waits until the host answers, calling `backoff` between polls.
    fn wait(self, mut backoff: impl FnMut()) -> Self::Completed {
        match self.wait_until(|_| {
            backoff();
            true
        }) {
            Ok(done) => done,
            Err(_) => unreachable!("the predicate never gives up"),
        }
    }
}

/// An answered packet of any protocol: read the replies; dropping it releases the packet.
pub trait CompletedPacket {
    /// The reply words of lane `lane`.
    ///
    /// # Panics
    /// If `lane >= LANES`.
    fn reply(&self, lane: usize) -> [u64; REPLY_WORDS];

    /// Whether the host answered at least one lane with an error reply
    /// (see [`ErrorCode`](crate::ErrorCode)).
    fn host_error(&self) -> bool;
}

/// The producer's wait loop, shared by every protocol: calls `answered` until it returns
/// `Some`, or until `keep_waiting(polls so far)` returns false (then `None`). `answered` does the
/// protocol's Acquire load; `keep_waiting` is the backoff.
#[inline(always)]
pub(crate) fn poll_until<T>(
    mut answered: impl FnMut() -> Option<T>,
    mut keep_waiting: impl FnMut(u32) -> bool,
) -> Option<T> {
    let mut polls = 0u32;
    loop {
        if let Some(done) = answered() {
            return Some(done);
        }
        if !keep_waiting(polls) {
            return None;
        }
        polls = polls.wrapping_add(1);
        spin_hint();
    }
}

/// The number of lanes in `mask`: the processor's `popcnt` instruction where it has one (detected
/// once, at run time, on x86-64 builds that do not assume it; not under Miri, which has no
/// CPUID, nor loom), else the portable count. The drains count every packet's lanes, and the portable
/// count is about twenty instructions.
///
/// ```
/// assert_eq!(hostcall_core::lane_count(0), 0);
/// assert_eq!(hostcall_core::lane_count(0b1011), 3);
/// assert_eq!(hostcall_core::lane_count(u64::MAX), 64);
/// ```
#[inline]
pub fn lane_count(mask: u64) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt"), not(miri), not(loom)))]
    if crate::cpu::has_popcnt() {
        // SAFETY: the processor has `popcnt` (just asked; the answer is kept).
        return unsafe { crate::cpu::popcnt(mask) } as u32;
    }
    mask.count_ones()
}

/// The processor's `popcnt`, found once: a value exists only where the processor has it (or the
/// build assumes it), so [`Popcnt::lane_count`] is [`lane_count`] without its check of the kept
/// answer. A host that counts every packet's lanes asks once, keeps the `Option`, and tests its
/// own flag (one compare with what else it tests there), not the shared feature word. Here, not
/// in a module of its own: one more module moved the core's codegen units, and the line take
/// came out 12 instructions a packet longer (`docs/performance.md`, "The registry's dispatcher,
/// cut alone").
///
/// ```
/// if let Some(popcnt) = hostcall_core::Popcnt::get() {
///     for mask in [0, 1, 0b1011, 1 << 63, u64::MAX] {
///         assert_eq!(popcnt.lane_count(mask), u64::from(mask.count_ones()));
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Popcnt(());

impl Popcnt {
    /// `Some` where the processor has `popcnt`: where [`lane_count`] uses it
    /// (never under Miri or loom, which run the portable count).
    pub fn get() -> Option<Self> {
        #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt"), not(miri), not(loom)))]
        let has = crate::cpu::has_popcnt();
        #[cfg(not(all(target_arch = "x86_64", not(target_feature = "popcnt"), not(miri), not(loom))))]
        let has = cfg!(all(target_arch = "x86_64", target_feature = "popcnt"));
        has.then_some(Self(()))
    }

    /// The number of lanes in `mask`, with the processor's `popcnt` (a `u64`, as the
    /// instruction gives it: no zero extension of a `u32` for a caller that adds it to a
    /// 64-bit count).
    #[inline]
    pub fn lane_count(self, mask: u64) -> u64 {
        #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt"), not(miri), not(loom)))]
        // SAFETY: a `Popcnt` is made only where the processor has `popcnt` (`get`).
        return unsafe { crate::cpu::popcnt(mask) };
        #[cfg(not(all(target_arch = "x86_64", not(target_feature = "popcnt"), not(miri), not(loom))))]
        return u64::from(mask.count_ones());
    }
}

#[cfg(test)]
mod tests {
    use super::PacketEvent::*;
    use super::PacketState::*;
    use super::*;
    extern crate std;

    #[test]
    fn only_the_cycle_is_allowed() {
        let states = [Free, Claimed, Ready, Served];
        let events = [Claim, Submit, Serve, Release];
        let allowed =
            [(Free, Claim), (Claimed, Submit), (Ready, Serve), (Claimed, Release), (Served, Release)];
        for s in states {
            for e in events {
                assert_eq!(s.apply(e).is_ok(), allowed.contains(&(s, e)), "{s:?} {e:?}");
            }
        }
    }

    #[test]
    fn runs_cover_every_lane_once_in_runs_of_adjacent_lanes() {
        for mask in [0, 1, 0b1110, 0b0111_0100, 1 << 63, u64::MAX, u64::MAX - 1, 0x8000_0001_ffff_0003] {
            let runs: std::vec::Vec<_> = runs(mask).collect();
            assert!(runs.iter().flat_map(|r| r.clone()).eq(lanes(mask)), "{mask:#x}: {runs:?}");
            assert!(runs.iter().all(|r| !r.is_empty()), "{mask:#x}: {runs:?}");
            assert!(runs.windows(2).all(|w| w[0].end < w[1].start), "{mask:#x}: runs apart: {runs:?}");
        }
        assert_eq!(runs(0x8000_0001_ffff_0003).collect::<std::vec::Vec<_>>(), [0..2, 16..33, 63..64]);
    }

    #[test]
    fn lanes_walk_only_the_lanes_that_exist() {
        assert_eq!(lanes(0).next(), None);
        assert!(lanes(1 << 63 | 1).eq([0, 63]));
        assert_eq!(lanes(u64::MAX).len(), LANES);
    }
}
