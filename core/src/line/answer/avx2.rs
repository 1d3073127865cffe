//! The answer's AVX2 copy (`answer.rs`): four, then two, adjacent lanes at a time, two lanes'
//! reply words in one register, their line words stored with one aligned 8-byte access each, or,
//! for four lanes from an even lane (whose reply words are 16-aligned), two words with one aligned
//! 16-byte access (atomic on processors with AVX for cacheable memory, as the take's loads in
//! `decode/avx2.rs`).

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
                let (slot, words) = (slot.add(4 * quad * SLOT_WORDS), words.add(4 * quad * REPLY_LANE_WORDS));
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
                answer_pair(slot.add(4 * quads * SLOT_WORDS), words.add(4 * quads * REPLY_LANE_WORDS), consts)
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
        (first, second) = (_mm256_castsi256_si128(front_tagged), _mm256_extracti128_si256::<1>(front_tagged));
        (third, fourth) = (_mm256_castsi256_si128(back_tagged), _mm256_extracti128_si256::<1>(back_tagged));
        (packed_low, packed_high) = (_mm256_castsi256_si128(packed), _mm256_extracti128_si256::<1>(packed));
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
        (first, fourth) = (_mm256_castsi256_si128(even_tagged), _mm256_extracti128_si256::<1>(even_tagged));
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
