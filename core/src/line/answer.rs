//! The host's answer to a line packet it served: each active lane's reply, read from the scratch
//! the service wrote it into, stored as [`REPLY_LANE_WORDS`](super::REPLY_LANE_WORDS) line words
//! of the call's sequence ([`encode_reply`]) in the packet's reply block.
//!
//! Two implementations of the same words. On the x86-64 CPUs with AVX2 (checked once at run time)
//! four, then two, adjacent lanes at a time: two lanes' reply words loaded from the scratch into
//! one register (the host's own memory, read whole), their data bits tagged with the sequence,
//! their top bits gathered into each lane's packed word by one variable shift, and every line word
//! stored with one aligned 8-byte access (inline assembly, as the take's loads: each a Release
//! store of its word, see below); a lane left over at the end of a run of adjacent lanes, and a
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
mod avx2 {
    use super::{store_lane, PlainSlots, Reply};
    use crate::lane::{runs, SLOT_WORDS};
    use crate::line::layout::REPLY_LANE_WORDS;
    use crate::line::word::{DATA_BITS, DATA_MASK, SEQ_BITS};
    use crate::sync::AtomicU64;
    use core::arch::x86_64::{
        __m128i, __m256i, _mm256_and_si256, _mm256_castsi256_si128, _mm256_extracti128_si256,
        _mm256_loadu2_m128i, _mm256_or_si256, _mm256_set1_epi64x, _mm256_set_epi64x, _mm256_shuffle_epi32,
        _mm256_srlv_epi64, _mm256_unpackhi_epi64, _mm256_unpacklo_epi64,
    };

    const _: () = assert!(REPLY_LANE_WORDS == 3 && DATA_BITS == 57 && SEQ_BITS == 7);
    // Even lanes' reply words are 16-aligned: the block is, and a lane's words are 24 bytes.
    const _: () = assert!(core::mem::align_of::<Reply>() % 16 == 0 && core::mem::offset_of!(Reply, lanes) == 0);

    /// [`super::answer_lanes`] two lanes at a time.
    ///
    /// # Safety
    /// The CPU runs AVX2, and no reference to the slots is alive while it runs.
    #[target_feature(enable = "avx2")]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    pub(super) unsafe fn answer_lanes(reply: &Reply, seq: u32, activemask: u64, slots: PlainSlots<'_>) {
        // SAFETY (the register blocks): register arithmetic on AVX2, which the caller checked.
        let consts = unsafe {
            Consts {
                tag: _mm256_set1_epi64x((u64::from(seq) << DATA_BITS) as i64),
                data: _mm256_set1_epi64x(DATA_MASK as i64),
                // Each lane's two words, in a register's halves: word 0's top bits to bits 0..7,
                // word 1's to bits 7..14 (and what is above them masked off).
                shifts: _mm256_set_epi64x(50, 57, 50, 57),
                tops: _mm256_set_epi64x(0x7f << 7, 0x7f, 0x7f << 7, 0x7f),
            }
        };
        for run in runs(activemask) {
            // The run's slots and its reply words are each one stretch of memory, walked four
            // lanes a step, then two.
            let (slot, words) = (slots.slot(run.start), reply.lanes[run.start].as_ptr());
            let quads = run.len() / 4;
            // A lane's reply words are 24 bytes: a run from an even lane (16-aligned) is answered
            // with 16-byte stores, from an odd one with 8-byte ones.
            let aligned = run.start % 2 == 0;
            for quad in 0..quads {
                // SAFETY: the run's lanes `4 quad .. 4 quad + 4` exist: their slots (`SLOT_WORDS`
                // words apart) and their reply words (3 apart) are in the payload and in `reply`;
                // with `aligned` the first lane is even, its reply words 16-aligned (`Reply` is
                // 64-aligned, and a lane's words are 24 bytes).
                unsafe {
                    let (slot, words) =
                        (slot.add(4 * quad * SLOT_WORDS), words.add(4 * quad * REPLY_LANE_WORDS));
                    if aligned {
                        answer_quad_aligned(slot, words, consts)
                    } else {
                        answer_quad(slot, words, consts)
                    }
                };
            }
            if run.len() % 4 >= 2 {
                // SAFETY: as above, for the two lanes after the last four.
                unsafe {
                    answer_pair(
                        slot.add(4 * quads * SLOT_WORDS),
                        words.add(4 * quads * REPLY_LANE_WORDS),
                        consts,
                    )
                };
            }
            if run.len() % 2 == 1 {
                let lane = run.end - 1;
                // SAFETY: lane `lane` exists (`runs`); its two reply words are initialised
                // memory of the host's own, which no reference borrows now (the caller's
                // contract).
                let words = unsafe { slots.slot(lane).cast::<[u64; 2]>().read() };
                store_lane(reply, lane, words, seq);
            }
        }
    }

    /// The registers every pair uses: the tag, the data mask, the shifts and masks of the top bits.
    #[derive(Clone, Copy)]
    struct Consts {
        tag: __m256i,
        data: __m256i,
        shifts: __m256i,
        tops: __m256i,
    }

    /// Answers four adjacent lanes, as [`answer_pair`] does two: the first two lanes' reply words
    /// in one register, the last two's in another, and the four packed words in a third.
    ///
    /// # Safety
    /// As [`answer_pair`], for four lanes.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn answer_quad(slot: *const u64, words: *const AtomicU64, consts: Consts) {
        let Consts { tag, data, shifts, tops } = consts;
        let (first, second, third, fourth, packed_low, packed_high): (
            __m128i,
            __m128i,
            __m128i,
            __m128i,
            __m128i,
            __m128i,
        );
        // SAFETY: four 16-byte loads of the first two words of the four slots (the caller's
        // contract), then register arithmetic.
        unsafe {
            let front = _mm256_loadu2_m128i(slot.add(SLOT_WORDS).cast(), slot.cast());
            let back = _mm256_loadu2_m128i(slot.add(3 * SLOT_WORDS).cast(), slot.add(2 * SLOT_WORDS).cast());
            let (front_tagged, back_tagged) = (
                _mm256_or_si256(_mm256_and_si256(front, data), tag),
                _mm256_or_si256(_mm256_and_si256(back, data), tag),
            );
            let front_tops = _mm256_and_si256(_mm256_srlv_epi64(front, shifts), tops);
            let back_tops = _mm256_and_si256(_mm256_srlv_epi64(back, shifts), tops);
            // Word 0's and word 1's top bits of lanes 0, 2 | 1, 3, ORed: the packed words in the
            // order lane 0, lane 2 | lane 1, lane 3.
            let packed = _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_unpacklo_epi64(front_tops, back_tops),
                    _mm256_unpackhi_epi64(front_tops, back_tops),
                ),
                tag,
            );
            (first, second) =
                (_mm256_castsi256_si128(front_tagged), _mm256_extracti128_si256::<1>(front_tagged));
            (third, fourth) =
                (_mm256_castsi256_si128(back_tagged), _mm256_extracti128_si256::<1>(back_tagged));
            (packed_low, packed_high) =
                (_mm256_castsi256_si128(packed), _mm256_extracti128_si256::<1>(packed));
        }
        // SAFETY: twelve 8-byte stores into the four lanes' reply words (twelve 8-byte aligned
        // atomics, the caller's contract), each a Release store of its word, as in `answer_pair`.
        unsafe {
            core::arch::asm!(
                "vmovq qword ptr [{words}], {first}",
                "vmovhps qword ptr [{words} + 8], {first}",
                "vmovq qword ptr [{words} + 16], {packed_low}",
                "vmovq qword ptr [{words} + 24], {second}",
                "vmovhps qword ptr [{words} + 32], {second}",
                "vmovq qword ptr [{words} + 40], {packed_high}",
                "vmovq qword ptr [{words} + 48], {third}",
                "vmovhps qword ptr [{words} + 56], {third}",
                "vmovhps qword ptr [{words} + 64], {packed_low}",
                "vmovq qword ptr [{words} + 72], {fourth}",
                "vmovhps qword ptr [{words} + 80], {fourth}",
                "vmovhps qword ptr [{words} + 88], {packed_high}",
                words = in(reg) words,
                first = in(xmm_reg) first,
                second = in(xmm_reg) second,
                third = in(xmm_reg) third,
                fourth = in(xmm_reg) fourth,
                packed_low = in(xmm_reg) packed_low,
                packed_high = in(xmm_reg) packed_high,
                options(nostack, preserves_flags),
            );
        }
    }

    /// [`answer_quad`] of four lanes from an even one, whose 96 bytes of reply words are six
    /// 16-aligned chunks, each stored with one 16-byte access: lanes 0 and 2's reply words in one
    /// register, 1 and 3's in another, so that the four packed words come out in lane order and
    /// each chunk is one unpack of them with the second lane's words.
    ///
    /// # Safety
    /// As [`answer_quad`], and `words` is 16-aligned.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn answer_quad_aligned(slot: *const u64, words: *const AtomicU64, consts: Consts) {
        let Consts { tag, data, shifts, tops } = consts;
        let (first, second, third, fourth, fifth, sixth): (__m128i, __m128i, __m128i, __m128i, __m128i, __m128i);
        // SAFETY: four 16-byte loads of the first two words of the four slots (the caller's
        // contract), then register arithmetic.
        unsafe {
            let even = _mm256_loadu2_m128i(slot.add(2 * SLOT_WORDS).cast(), slot.cast());
            let odd = _mm256_loadu2_m128i(slot.add(3 * SLOT_WORDS).cast(), slot.add(SLOT_WORDS).cast());
            let (even_tagged, odd_tagged) = (
                _mm256_or_si256(_mm256_and_si256(even, data), tag),
                _mm256_or_si256(_mm256_and_si256(odd, data), tag),
            );
            let even_tops = _mm256_and_si256(_mm256_srlv_epi64(even, shifts), tops);
            let odd_tops = _mm256_and_si256(_mm256_srlv_epi64(odd, shifts), tops);
            // The packed words of lanes 0, 1 | 2, 3, tagged.
            let packed = _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_unpacklo_epi64(even_tops, odd_tops),
                    _mm256_unpackhi_epi64(even_tops, odd_tops),
                ),
                tag,
            );
            // Lane 0's packed word and lane 1's word 0 | the same of lanes 2 and 3; lane 1's
            // word 1 and packed word | the same of lane 3.
            let (across, after) =
                (_mm256_unpacklo_epi64(packed, odd_tagged), _mm256_unpackhi_epi64(odd_tagged, packed));
            (first, fourth) =
                (_mm256_castsi256_si128(even_tagged), _mm256_extracti128_si256::<1>(even_tagged));
            (second, fifth) = (_mm256_castsi256_si128(across), _mm256_extracti128_si256::<1>(across));
            (third, sixth) = (_mm256_castsi256_si128(after), _mm256_extracti128_si256::<1>(after));
        }
        // SAFETY: six aligned 16-byte stores into the four lanes' reply words (twelve 8-byte
        // aligned atomics from a 16-aligned `words`, the caller's contract), and nothing else: no
        // load, no stack, flags kept. Each is one access to two whole words that the CPU performs
        // atomically (AVX, which AVX2 implies, a 16-aligned `vmovdqa` and cacheable memory, as the
        // take's loads in `decode/avx2.rs`), so each word in it is as an atomic store of that
        // word; each a Release store as in `answer_pair`. Each word also carries its own
        // sequence, which the wave checks word by word.
        unsafe {
            core::arch::asm!(
                "vmovdqa xmmword ptr [{words}], {first}",
                "vmovdqa xmmword ptr [{words} + 16], {second}",
                "vmovdqa xmmword ptr [{words} + 32], {third}",
                "vmovdqa xmmword ptr [{words} + 48], {fourth}",
                "vmovdqa xmmword ptr [{words} + 64], {fifth}",
                "vmovdqa xmmword ptr [{words} + 80], {sixth}",
                words = in(reg) words,
                first = in(xmm_reg) first,
                second = in(xmm_reg) second,
                third = in(xmm_reg) third,
                fourth = in(xmm_reg) fourth,
                fifth = in(xmm_reg) fifth,
                sixth = in(xmm_reg) sixth,
                options(nostack, preserves_flags),
            );
        }
    }

    /// Answers two adjacent lanes: their reply words from `slot` (the first lane's slot; the second
    /// one's follows it) into their line words at `words` (the first lane's; the second one's
    /// follow).
    ///
    /// # Safety
    /// The CPU runs AVX2; `slot` points to two initialised slots of the host's own memory that no
    /// reference borrows, and `words` to two lanes' reply words of a [`Reply`].
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn answer_pair(slot: *const u64, words: *const AtomicU64, consts: Consts) {
        let Consts { tag, data, shifts, tops } = consts;
        let (low, high, first_top, second_top): (__m128i, __m128i, __m128i, __m128i);
        // SAFETY: two 16-byte loads of the first two words of the two slots (the caller's
        // contract), then register arithmetic.
        unsafe {
            let reply = _mm256_loadu2_m128i(slot.add(SLOT_WORDS).cast(), slot.cast());
            let tagged = _mm256_or_si256(_mm256_and_si256(reply, data), tag);
            let halves = _mm256_and_si256(_mm256_srlv_epi64(reply, shifts), tops);
            // Each half ORed with the other (the 64-bit halves swapped) and tagged: the packed
            // word of its lane in both halves.
            let packed = _mm256_or_si256(_mm256_or_si256(halves, _mm256_shuffle_epi32::<0x4e>(halves)), tag);
            (low, high) = (_mm256_castsi256_si128(tagged), _mm256_extracti128_si256::<1>(tagged));
            (first_top, second_top) = (_mm256_castsi256_si128(packed), _mm256_extracti128_si256::<1>(packed));
        }
        // SAFETY: six 8-byte stores into the two lanes' reply words (six 8-byte aligned atomics,
        // the caller's contract), and nothing else: no load, no stack, flags kept. Each is one
        // aligned quadword access, which x86-64 performs atomically (Intel SDM vol. 3A, 9.1.1;
        // AMD APM vol. 2, 7.3.2), as the `mov` of an `AtomicU64::store` does. Each is a Release
        // store, as that `mov` is: the block may touch memory, so the compiler keeps every access
        // before it before it, and x86-64 does not reorder a store with earlier loads or stores
        // (Intel SDM vol. 3A, 9.2.2).
        unsafe {
            core::arch::asm!(
                "vmovq qword ptr [{words}], {low}",
                "vmovhps qword ptr [{words} + 8], {low}",
                "vmovq qword ptr [{words} + 16], {first_top}",
                "vmovq qword ptr [{words} + 24], {high}",
                "vmovhps qword ptr [{words} + 32], {high}",
                "vmovq qword ptr [{words} + 40], {second_top}",
                words = in(reg) words,
                low = in(xmm_reg) low,
                high = in(xmm_reg) high,
                first_top = in(xmm_reg) first_top,
                second_top = in(xmm_reg) second_top,
                options(nostack, preserves_flags),
            );
        }
    }
}

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
