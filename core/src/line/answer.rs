//! The host's answer to a line packet it served: each active lane's reply, read from the scratch
//! the service wrote it into, stored as [`REPLY_LANE_WORDS`](super::REPLY_LANE_WORDS) line words
//! of the call's sequence ([`encode_reply`]) in the packet's reply block.
//!
//! Two implementations of the same words. On the x86-64 CPUs with AVX2 (checked once at run time)
//! four, then two, adjacent lanes at a time: two lanes' reply words loaded from the scratch into
//! one register (the host's own memory, read whole), their data bits tagged with the sequence,
//! their top bits gathered into each lane's packed word by one variable shift, and every line word
//! stored with one aligned 8-byte access (inline assembly, as the take's loads: each a Release
//! store of its word, as `answer/avx2.rs` says), or, four lanes from an even lane, two words with
//! one aligned 16-byte access; a lane left over at the end of a run of adjacent lanes, and a
//! packet's only lane, is answered alone. Elsewhere (no AVX2, no SSE, under loom and under Miri,
//! and when the payload lends no plain slots) one lane at a time with atomic stores. The tests
//! check that both store the same words for any replies and masks.

use super::layout::Reply;
use super::word::encode_reply;
use crate::lane::{lanes, Payload};
use crate::sync::{Ordering, PlainSlots};

/// Writes the reply of every lane of `activemask` (lanes that exist) from `payload`, whose slots
/// as plain words are `slots` if it lends them, into `reply` as line words of sequence `seq`.
#[inline(always)]
pub(super) fn answer_lanes(
    reply: &Reply,
    seq: u32,
    activemask: u64,
    payload: &Payload,
    slots: Option<PlainSlots<'_>>,
) {
    // A packet of one lane is answered here, with no call.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    if let Some(slots) = slots.filter(|_| activemask & activemask.wrapping_sub(1) != 0) {
        if crate::cpu::has_avx2() {
            // SAFETY: this CPU runs AVX2 and its OS keeps the registers (`has_avx2`); no
            // reference to the slots is alive (the service has returned).
            unsafe { avx2::answer_lanes(reply, seq, activemask, slots) };
            return;
        }
    }
    let _ = slots;
    answer_each_lane(reply, seq, activemask, payload);
}

/// [`answer_lanes`] where the caller knows that the CPU runs AVX2: no check (the line scan's copy
/// built for AVX2, `line/host.rs`).
///
/// # Safety
/// The CPU runs AVX2 and its OS keeps the registers (`crate::cpu::has_avx2`), and no reference to
/// the slots is alive.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
#[inline(always)]
pub(super) unsafe fn answer_lanes_avx2(
    reply: &Reply,
    seq: u32,
    activemask: u64,
    payload: &Payload,
    slots: Option<PlainSlots<'_>>,
) {
    if let Some(slots) = slots.filter(|_| activemask & activemask.wrapping_sub(1) != 0) {
        // SAFETY: the caller's contract.
        unsafe { avx2::answer_lanes(reply, seq, activemask, slots) };
        return;
    }
    answer_each_lane(reply, seq, activemask, payload);
}

/// The answer one lane at a time, with atomic stores.
#[inline(always)]
fn answer_each_lane(reply: &Reply, seq: u32, activemask: u64, payload: &Payload) {
    for lane in lanes(activemask) {
        store_lane(reply, lane, payload.read_lane(lane), seq);
    }
}

/// Stores lane `lane`'s reply `words` as line words of sequence `seq`.
#[inline(always)]
fn store_lane(reply: &Reply, lane: usize, words: [u64; 2], seq: u32) {
    for (word, value) in reply.lanes[lane].iter().zip(encode_reply(words, seq)) {
        // Release: orders our reads of the request before the wave's next call (with the
        // wave's Acquire poll in `Submitted::wait_until`); the reply data needs no ordering, it
        // is in the word.
        word.store(value, Ordering::Release);
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
mod avx2;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{LANES, LANE_MASK};
    use crate::line::layout::REPLY_LANE_WORDS;
    use crate::line::scratch::{Place, ScratchPayload};
    use crate::line::word::decode_reply;
    use proptest::prelude::*;

    extern crate std;
    use std::boxed::Box;

    /// The reply block's words after answering `mask` with `replies` (lane `k`'s reply at `k`),
    /// through the native answer (`plain`) or the one-lane-at-a-time one.
    fn answer(replies: &[[u64; 2]], mask: u64, seq: u32, plain: bool) -> Box<Reply> {
        let block = Box::new(Reply::default());
        let mut kept = ScratchPayload::new();
        let mut scratch = Place::kept(&mut kept).scratch();
        for lane in 0..LANES {
            let [a, b] = replies[lane % replies.len()];
            scratch.write_slot(lane, [a, b, !a, !b, 1, 2, 3, 4]);
        }
        scratch.written_whole(LANE_MASK);
        let (payload, slots) = scratch.payload();
        answer_lanes(&block, seq, mask, payload, if plain { slots } else { None });
        block
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]

        /// For any replies, mask and sequence, the native answer stores the words the
        /// one-lane-at-a-time one does, and only in the active lanes.
        #[test]
        fn the_native_answer_is_the_scalar_one(replies in proptest::collection::vec(any::<[u64; 2]>(), 1..70),
                mask in any::<u64>(), seq in 1u32..128) {
            let (native, scalar) = (answer(&replies, mask, seq, true), answer(&replies, mask, seq, false));
            for lane in 0..LANES {
                let words = native.lanes[lane].each_ref().map(|w| w.load(Ordering::Relaxed));
                let expected = scalar.lanes[lane].each_ref().map(|w| w.load(Ordering::Relaxed));
                prop_assert_eq!(words, expected, "lane {}", lane);
                if mask & 1 << lane == 0 {
                    prop_assert_eq!(words, [0; REPLY_LANE_WORDS], "lane {} is not active", lane);
                } else {
                    prop_assert_eq!(decode_reply(&words), replies[lane % replies.len()]);
                    prop_assert!(words.iter().all(|&w| crate::line::carries(w, seq)));
                }
            }
        }
    }

    /// Every count of lanes, odd and even, contiguous or spread.
    #[test]
    fn every_lane_count_is_answered() {
        let replies: std::vec::Vec<[u64; 2]> =
            (0..LANES as u64).map(|k| [u64::MAX - k, k << 57 | k]).collect();
        for count in 0..=LANES {
            let contiguous = if count == 64 { u64::MAX } else { (1u64 << count) - 1 };
            let spread = (0..count).fold(0u64, |m, k| m | 1 << (k * 7 % LANES));
            for mask in [contiguous, spread, contiguous.reverse_bits()] {
                let block = answer(&replies, mask, 127, true);
                for lane in crate::lane::lanes(mask) {
                    let words = block.lanes[lane].each_ref().map(|w| w.load(Ordering::Relaxed));
                    assert_eq!(decode_reply(&words), replies[lane], "{count} lanes, {mask:#x}, lane {lane}");
                }
            }
        }
    }
}
