//! The take's decode four words at a time in AVX2 registers, on the x86-64 CPUs that have AVX2
//! (checked once at run time, [`available`]): the same loads (one aligned 8-byte access a word,
//! straight into a vector register; the packed word's into all four quarters of one), XORs and
//! accumulator as the SSE2 decode, and one variable shift (`vpsllvq`) for four words' top bits;
//! the lanes walked in runs of adjacent ones, each lane's words and slot one step along.

use super::super::layout::{Request, REQUEST_LANE_WORDS};
use super::super::scratch::Scratch;
use super::super::word::{DATA_BITS, DATA_MASK};
use crate::lane::{lanes, runs, SLOT_WORDS};
use crate::sync::AtomicU64;
use core::arch::x86_64::{
    __m128i, __m256i, _mm256_and_si256, _mm256_or_si256, _mm256_set1_epi64x, _mm256_set_epi64x,
    _mm256_set_m128i, _mm256_setzero_si256, _mm256_sllv_epi64, _mm256_srli_epi64, _mm256_storeu_si256,
    _mm256_testz_si256, _mm256_xor_si256,
};

/// Whether [`decode_lanes`] may run here: the processor runs AVX2 (asked once, `crate::cpu`).
#[inline]
pub(in crate::line) fn available() -> bool {
    crate::cpu::has_avx2()
}

/// The asm of [`load`] and [`load_second`]: a lane's nine words from `{words}` plus `$at` bytes.
macro_rules! load_lane {
    ($words:expr, $at:literal) => {{
        let (first, second, third, fourth): (__m128i, __m128i, __m128i, __m128i);
        let top: __m256i;
        // SAFETY: as in the SSE2 decode's loads (`decode.rs`), in their VEX forms: nine aligned
        // 8-byte loads from the lane's words (the caller's), each a Relaxed atomic load of its
        // word (the packed word's broadcast too: one 8-byte access, its value in every quarter);
        // no store, no stack, flags kept.
        unsafe {
            core::arch::asm!(
                concat!("vmovq {first}, qword ptr [{words} + ", $at, "]"),
                concat!("vmovhps {first}, {first}, qword ptr [{words} + ", $at, " + 8]"),
                concat!("vmovq {second}, qword ptr [{words} + ", $at, " + 16]"),
                concat!("vmovhps {second}, {second}, qword ptr [{words} + ", $at, " + 24]"),
                concat!("vmovq {third}, qword ptr [{words} + ", $at, " + 32]"),
                concat!("vmovhps {third}, {third}, qword ptr [{words} + ", $at, " + 40]"),
                concat!("vmovq {fourth}, qword ptr [{words} + ", $at, " + 48]"),
                concat!("vmovhps {fourth}, {fourth}, qword ptr [{words} + ", $at, " + 56]"),
                concat!("vpbroadcastq {top}, qword ptr [{words} + ", $at, " + 64]"),
                words = in(reg) $words,
                first = out(xmm_reg) first,
                second = out(xmm_reg) second,
                third = out(xmm_reg) third,
                fourth = out(xmm_reg) fourth,
                top = out(ymm_reg) top,
                options(nostack, preserves_flags, readonly),
            );
        }
        // SAFETY: register moves on AVX2 (the caller's contract).
        unsafe { [_mm256_set_m128i(second, first), _mm256_set_m128i(fourth, third), top] }
    }};
}

/// A lane's line words: words 0..4 in the first register, 4..8 in the second, the packed word in
/// every quarter of the third; each loaded with one aligned 8-byte access.
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
#[inline]
#[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
unsafe fn load(words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [__m256i; 3] {
    load_lane!(words.as_ptr(), 0)
}

/// [`load`] of the second lane of `pair`, addressed from the first's words (one base register a
/// pair: no second address to compute).
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
#[inline]
#[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
unsafe fn load_second(pair: &[[AtomicU64; REQUEST_LANE_WORDS]; 2]) -> [__m256i; 3] {
    const _: () = assert!(core::mem::size_of::<[AtomicU64; REQUEST_LANE_WORDS]>() == 72);
    // The second lane's words are the 72 bytes after the first's (an array's elements).
    load_lane!(pair.as_ptr(), 72)
}

/// Decodes every lane of `activemask` of `request` into `scratch` and says whether every word
/// carried `seq` (the same contract as `decode::decode_lanes`). A packet of one lane is decoded
/// by a function of its own, the others by one that walks the lanes in runs of adjacent ones (a
/// run's line words, and its slots, are each one stretch of memory), two lanes a step: each
/// function saves only the registers its own loop needs.
///
/// # Safety
/// The CPU runs AVX2 ([`available`]).
#[inline]
pub(in crate::line) unsafe fn decode_lanes(
    request: &Request,
    activemask: u64,
    seq: u32,
    scratch: &mut Scratch<'_>,
) -> bool {
    // SAFETY: AVX2 (the caller's contract).
    unsafe {
        if activemask & activemask.wrapping_sub(1) == 0 {
            decode_one(request, activemask, seq, scratch)
        } else {
            decode_runs(request, activemask, seq, scratch)
        }
    }
}

/// [`decode_lanes`] of a packet of one lane (or none).
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
unsafe fn decode_one(request: &Request, activemask: u64, seq: u32, scratch: &mut Scratch<'_>) -> bool {
    // SAFETY: AVX2 (the caller's contract).
    let (decode, mut stray) = unsafe { Decode::new(seq) };
    for lane in lanes(activemask) {
        // SAFETY: AVX2 (the caller's contract); the lane exists (`lanes`), and so its slot.
        stray = unsafe { decode.lane(&request.lanes[lane], scratch.slot_mut(lane), stray) };
    }
    // SAFETY: AVX2 (the caller's contract).
    unsafe { all_carry(stray) }
}

/// [`decode_lanes`] of a packet of several lanes: a run of adjacent lanes at a time, two lanes a
/// step, then the run's last if it is odd.
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
unsafe fn decode_runs(request: &Request, activemask: u64, seq: u32, scratch: &mut Scratch<'_>) -> bool {
    // SAFETY: AVX2 (the caller's contract).
    let (decode, mut stray) = unsafe { Decode::new(seq) };
    for run in runs(activemask) {
        let mut slot = scratch.slot_mut(run.start);
        let lanes = &request.lanes[run];
        let pairs = lanes.len() / 2;
        // The run's lanes two at a time, each pair's words and slots one step along.
        let mut pair = lanes.as_ptr().cast::<[[AtomicU64; REQUEST_LANE_WORDS]; 2]>();
        // SAFETY: `pairs` pairs of lanes are within `lanes` (an array's elements, so a pair of
        // them is one `[_; 2]` in memory), and the pointer one past them is within or one past it.
        let end = unsafe { pair.add(pairs) };
        while pair != end {
            // SAFETY: AVX2 (the caller's contract); `pair` is one of the run's pairs (before
            // `end`); the slots of the run's lanes follow the first's, so the pair's are `slot`
            // and the next, and both steps stay within (or one past) the run's words and slots.
            unsafe {
                let words = &*pair;
                stray = decode.lane_loaded(load(&words[0]), slot, stray);
                stray = decode.lane_loaded(load_second(words), slot.add(1), stray);
                pair = pair.add(1);
                slot = slot.add(2);
            }
        }
        if lanes.len() % 2 == 1 {
            // SAFETY: as above, for the run's last lane, whose slot `slot` is now.
            stray = unsafe { decode.lane(&lanes[lanes.len() - 1], slot, stray) };
        }
    }
    // SAFETY: AVX2 (the caller's contract).
    unsafe { all_carry(stray) }
}

/// Whether every word ORed into `stray` (XOR the tag) had no sequence bit set: the accumulator's
/// bits 57..64 are zero.
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
#[inline]
#[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
unsafe fn all_carry(stray: __m256i) -> bool {
    // SAFETY: register arithmetic on AVX2 (the caller's contract).
    unsafe {
        let sequences = _mm256_srli_epi64::<57>(stray);
        _mm256_testz_si256(sequences, sequences) == 1
    }
}

/// The registers every lane's decode uses.
#[derive(Clone, Copy)]
struct Decode {
    /// The sequence in every quarter's sequence bits.
    tag: __m256i,
    /// The sequence bits of every quarter.
    high: __m256i,
    /// The shifts that bring words 0..4's, and 4..8's, top bits from the packed word.
    shifts_low: __m256i,
    shifts_high: __m256i,
}

impl Decode {
    /// The registers of a take of sequence `seq`, and an empty accumulator.
    ///
    /// # Safety
    /// The CPU runs AVX2.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn new(seq: u32) -> (Self, __m256i) {
        const _: () = assert!(REQUEST_LANE_WORDS == 9 && SLOT_WORDS == 8 && DATA_BITS == 57);
        // SAFETY: register arithmetic on AVX2 (the caller's contract).
        unsafe {
            let decode = Self {
                tag: _mm256_set1_epi64x((u64::from(seq) << DATA_BITS) as i64),
                high: _mm256_set1_epi64x(!DATA_MASK as i64),
                // Word k's top bits are bits 7 k .. 7 k + 7 of the packed word: shifted left by
                // 57 - 7 k and masked, they are the word's bits 57..64 (the packed word's own
                // sequence bits shift out).
                shifts_low: _mm256_set_epi64x(36, 43, 50, 57),
                shifts_high: _mm256_set_epi64x(8, 15, 22, 29),
            };
            (decode, _mm256_setzero_si256())
        }
    }

    /// Decodes the lane whose line words are `words` into `slot` and returns `stray` ORed with
    /// each of them XOR the tag.
    ///
    /// # Safety
    /// The CPU runs AVX2, and `slot` is a slot of the scratch (64 bytes it may write).
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn lane(
        self,
        words: &[AtomicU64; REQUEST_LANE_WORDS],
        slot: *mut [u64; SLOT_WORDS],
        stray: __m256i,
    ) -> __m256i {
        // SAFETY: AVX2 and `slot` (the caller's contract).
        unsafe { self.lane_loaded(load(words), slot, stray) }
    }

    /// [`lane`](Self::lane) of a lane whose words [`load`] or [`load_second`] loaded.
    ///
    /// # Safety
    /// As [`lane`](Self::lane)'s.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn lane_loaded(
        self,
        loaded: [__m256i; 3],
        slot: *mut [u64; SLOT_WORDS],
        stray: __m256i,
    ) -> __m256i {
        let Self { tag, high, shifts_low, shifts_high } = self;
        // SAFETY: AVX2 (the caller's contract): register arithmetic, and two unaligned 32-byte
        // stores into `slot`, 64 bytes.
        unsafe {
            let [low, high_words, top] = loaded;
            let (low, high_words) = (_mm256_xor_si256(low, tag), _mm256_xor_si256(high_words, tag));
            let checked = _mm256_or_si256(_mm256_xor_si256(top, tag), _mm256_or_si256(low, high_words));
            let field = |shifts| _mm256_and_si256(_mm256_sllv_epi64(top, shifts), high);
            let dest = slot.cast::<__m256i>();
            _mm256_storeu_si256(dest, _mm256_or_si256(low, field(shifts_low)));
            _mm256_storeu_si256(dest.add(1), _mm256_or_si256(high_words, field(shifts_high)));
            _mm256_or_si256(stray, checked)
        }
    }
}
