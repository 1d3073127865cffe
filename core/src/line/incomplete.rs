//! What the line host remembers of the requests it found incomplete: one [`Incomplete`] per
//! packet, in memory its caller keeps (the core allocates nothing), so that a request that stays
//! incomplete costs one load a look instead of a read of every word, and is reported as stalled
//! after [`STALL_LOOKS`] looks.
//!
//! # The look
//!
//! A request is the head and, in this order, its *positions*: the mask word (position 0), then
//! each active lane's [`REQUEST_LANE_WORDS`] words (position `1 + lane * REQUEST_LANE_WORDS + k`). When the host finds a pending head of sequence `s` (neither 0 nor
//! `served[i]`):
//!
//! 1. if the packet's entry remembers `s` at position `p`, it loads the word at `p` alone; while
//!    that word does not carry `s`, the look ends there (the entry counts it);
//! 2. once it does, it checks the positions after `p` (reading the mask for the active lanes),
//!    without copying, and remembers the next one that does not carry `s`, if any (the look ends);
//! 3. otherwise (nothing remembered, or step 2 found every word carrying `s`) it takes the request
//!    in full: every word loaded and checked, copied to the scratch. If one does not
//!    carry `s`, the entry remembers `s` and the first such position; if all do, the packet is
//!    served and the entry forgotten.
//!
//! A head of another sequence (the device's next call, or a rewritten header) starts over at
//! step 3. So the words a look loads are the head and one word, until the device stores the
//! remembered word; the positions step 2 checks only move forward, so across one call each word
//! is checked once there; and the full take, step 3, runs once a call plus once per word
//! the device stores again with `s` behind the remembered position (which a correct wave never
//! does: it writes each word once a call).
//!
//! # What it changes
//!
//! Nothing about what is served: a request is served only from step 3's full take, which checks
//! every word as the take always did; the entry only decides where a look starts. Nor does any
//! content of the entry keep a complete request from being served: when every word carries `s`,
//! step 1's word does, step 2 finds no later word that does not, and step 3 serves it. An entry
//! reset or wrong (a wrapped sequence it remembers, a position past the lanes the mask names) costs
//! at most one full take. The `crate::line` docs' proof is therefore the take's, unchanged.
//!
//! # Stalled
//!
//! Each look at a remembered request counts; at the [`STALL_LOOKS`]th the host reports the packet
//! once as [`DrainError::Stalled`](crate::DrainError::Stalled) (the std crate counts it as
//! `Reason::StalledRequest` and logs a rate-limited warning). From then on the packet is looked
//! at (its head, then the remembered word) only every [`STALLED_LOOK_PERIOD`]th scan, and costs
//! nothing in between but the entry's own check; it is still served when the word arrives (a slow
//! wave is late, not lost), at most that many scans late, and a new call on the packet is seen
//! as late; it is reported again only for a later sequence.
//!
//! The drains that keep no memory ([`Host::drain`](crate::Host::drain),
//! [`Host::drain_range`](crate::Host::drain_range), [`Host::drain_window`](crate::Host::drain_window),
//! and [`Host::drain_scope`](crate::Host::drain_scope) given an empty slice) take every pending
//! request in full on every look and report nothing stalled.

use super::layout::{Request, REQUEST_LANE_WORDS};
use super::word::{self, decode_activemask};
use crate::lane::{lanes, LANE_MASK};
use crate::sync::{AtomicU64, Ordering};

/// Looks at one incomplete request after which it is reported as stalled (once per sequence).
///
/// A look is one scan of the packet, so in time this is 4,096 polls of its buffer: 4 ms for a
/// listener that polls every microsecond, 40 s for an idle one that sleeps 10 ms between polls.
/// A GPU's stores reach the host within microseconds; a request still incomplete after that many
/// looks is one whose wave stopped (or never meant to finish). Under loom 2, so the models reach
/// the report; under Miri 8, so the tests that drain past it run in seconds there (the same code,
/// fewer rounds; the facade's table of sizes, [`crate::sync`]).
pub const STALL_LOOKS: u16 = crate::sync::LINE_STALL_LOOKS;

/// Once a request has been reported stalled, the host looks at its packet (its head, then the
/// remembered word) only every this many scans, and loads nothing of it in between: a late word,
/// or a new call on the packet, waits at most this many scans more. 64; under loom 2, under
/// Miri 4.
pub const STALLED_LOOK_PERIOD: u16 = crate::sync::LINE_STALLED_LOOK_PERIOD;

const _: () = assert!(STALLED_LOOK_PERIOD >= 1 && STALL_LOOKS.checked_add(STALLED_LOOK_PERIOD).is_some());

/// What the host remembers of one packet whose request it found incomplete: the sequence, the
/// first position found not carrying it, and how many looks it has had (see the module docs of
/// `line/incomplete.rs`, summed up at [`Host::drain_scope`](crate::Host::drain_scope)). Host-private:
/// keep one per packet served, zeroed ([`Incomplete::default`]) before the first drain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Incomplete {
    /// The sequence remembered; 0: nothing (0 is never a call's sequence).
    seq: u32,
    /// The first position found not carrying `seq`.
    position: u16,
    /// Looks at `seq` so far, up to [`STALL_LOOKS`]; past it, the scans since the last look
    /// (`looks - STALL_LOOKS`, below [`STALLED_LOOK_PERIOD`]).
    looks: u16,
}

const _: () = assert!(core::mem::size_of::<Incomplete>() == 8);

/// The positions of a request block: the mask word, then 64 lanes of words.
const POSITIONS: usize = 1 + crate::LANES * REQUEST_LANE_WORDS;
const _: () = assert!(POSITIONS <= u16::MAX as usize);

/// The word at `position` of `request`, if the position exists.
#[inline]
fn word_at(request: &Request, position: u16) -> Option<&AtomicU64> {
    match position as usize {
        0 => Some(&request.mask),
        p => {
            let (lane, k) = ((p - 1) / REQUEST_LANE_WORDS, (p - 1) % REQUEST_LANE_WORDS);
            request.lanes.get(lane).map(|words| &words[k])
        }
    }
}

/// Whether `word` carries `seq`. Relaxed (every load of this module): a line word is read in
/// one access; what it holds is never served from here (only the full take serves).
#[inline]
fn carries(word: &AtomicU64, seq: u32) -> bool {
    word::carries(word.load(Ordering::Relaxed), seq)
}

/// The first position at or after `from` of `request`, whose head is `head` (of sequence `seq`),
/// whose word does not carry `seq` (the mask word first, then the lanes it and the head name), or
/// `None` if every one does.
pub(super) fn first_stale(request: &Request, head: u64, seq: u32, from: u16) -> Option<u16> {
    // Relaxed: a line word's data travels in the word itself, and this look decides nothing that
    // is served (only where the next look starts); the Acquire fence after the pending head, in
    // the scan, orders these loads after the refresh zeroes as it does the full take's.
    let mask = request.mask.load(Ordering::Relaxed);
    // Only from `from` on: a mask word before it was seen carrying `seq` (a hostile device's later
    // change is the full take's to refuse).
    if from == 0 && !word::carries(mask, seq) {
        return Some(0);
    }
    for lane in lanes(decode_activemask(head, mask) & LANE_MASK) {
        for k in 0..REQUEST_LANE_WORDS {
            let position = (1 + lane * REQUEST_LANE_WORDS + k) as u16;
            if position >= from && !carries(&request.lanes[lane][k], seq) {
                return Some(position);
            }
        }
    }
    None
}

/// What a look at a remembered request decided.
pub(super) enum Look {
    /// Still incomplete: the look ends (the entry updated).
    Incomplete,
    /// Take it in full: nothing remembered, or every word from the remembered one on carries the
    /// sequence.
    Take,
}

impl Incomplete {
    /// Steps 1 and 2 of a look at `request`, pending with head `head` of sequence `seq`: whether
    /// to take it.
    ///
    /// Its test for a remembered sequence inlined into the scan (in both of the scan's copies,
    /// `line/host.rs`), the rest, for a request found incomplete before, called.
    #[inline(always)]
    pub(super) fn look(&mut self, request: &Request, head: u64, seq: u32) -> Look {
        if self.seq != seq {
            return Look::Take;
        }
        self.look_again(request, head, seq)
    }

    /// [`Incomplete::look`] at a request of the sequence remembered.
    #[inline(never)]
    fn look_again(&mut self, request: &Request, head: u64, seq: u32) -> Look {
        match word_at(request, self.position) {
            Some(word) if !carries(word, seq) => Look::Incomplete,
            // Arrived (or a position the lanes do not have): on from the next one.
            _ => match first_stale(request, head, seq, self.position.saturating_add(1)) {
                Some(position) => {
                    self.position = position;
                    Look::Incomplete
                }
                None => Look::Take,
            },
        }
    }

    /// After a full take of `request` with head `head` of sequence `seq` found it incomplete:
    /// remembers the first position that did not carry `seq` (kept, for a sequence already
    /// remembered, if none now).
    #[cold]
    pub(super) fn remember(&mut self, request: &Request, head: u64, seq: u32) {
        if self.seq != seq {
            *self = Self { seq, position: 0, looks: 0 };
        }
        if let Some(position) = first_stale(request, head, seq, 0) {
            self.position = position;
        }
    }

    /// Counts one look that ended incomplete; `true` exactly at the [`STALL_LOOKS`]th.
    #[inline]
    pub(super) fn count_look(&mut self) -> bool {
        if self.looks >= STALL_LOOKS {
            return false;
        }
        self.looks += 1;
        self.looks == STALL_LOOKS
    }

    /// Whether this scan passes the packet by without loading anything: its request was reported
    /// stalled, and this is not one of the scans (every [`STALLED_LOOK_PERIOD`]th) that look.
    #[inline]
    pub(super) fn rests(&mut self) -> bool {
        if self.looks < STALL_LOOKS {
            return false;
        }
        let since = self.looks - STALL_LOOKS + 1;
        self.looks = if since >= STALLED_LOOK_PERIOD { STALL_LOOKS } else { STALL_LOOKS + since };
        self.looks != STALL_LOOKS
    }

    /// The request was served: nothing remembered.
    #[inline]
    pub(super) fn forget(&mut self) {
        *self = Self::default();
    }
}

/// A host's entries for the packets `first..first + entries.len()` (the range its scope
/// serves); a packet outside them has none (and is taken in full at every look).
pub(super) struct Entries<'m> {
    pub(super) first: usize,
    pub(super) entries: &'m mut [Incomplete],
}

impl Entries<'_> {
    /// The entry of packet `index`, if it has one.
    #[inline]
    pub(super) fn get(&mut self, index: usize) -> Option<&mut Incomplete> {
        self.entries.get_mut(index.wrapping_sub(self.first))
    }
}
