//! The take's decode four words at a time in AVX2 registers, on the x86-64 CPUs that have AVX2
//! (checked once at run time, [`available`]): the same loads (one aligned 8-byte access a word,
//! straight into a vector register), XORs and accumulator as the SSE2 decode, and one variable
//! shift (`vpsllvq`) for four words' top bits.

use super::super::layout::{Request, REQUEST_LANE_WORDS};
use super::super::scratch::Scratch;
use super::super::word::{DATA_BITS, DATA_MASK};
use crate::lane::{lanes, SLOT_WORDS};
use crate::sync::AtomicU64;
use core::arch::x86_64::{
    __m128i, __m256i, _mm256_and_si256, _mm256_broadcastq_epi64, _mm256_or_si256, _mm256_set1_epi64x,
    _mm256_set_epi64x, _mm256_set_m128i, _mm256_setzero_si256, _mm256_sllv_epi64, _mm256_srli_epi64,
    _mm256_storeu_si256, _mm256_testz_si256, _mm256_xor_si256,
};

/// Whether [`decode_lanes`] may run here: the processor runs AVX2 (asked once, `crate::cpu`).
#[inline]
pub(in crate::line) fn available() -> bool {
    crate::cpu::has_avx2()
}

/// A lane's line words: words 0..4 in the first register, 4..8 in the second, the packed word in
/// every quarter of the third; each loaded with one aligned 8-byte access.
#[inline(always)]
fn load(words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [__m128i; 5] {
    let (first, second, third, fourth, top): (__m128i, __m128i, __m128i, __m128i, __m128i);
    // SAFETY: as in the SSE2 decode's loads (`decode.rs`), in their VEX forms: nine aligned 8-byte
    // loads from `words`, each a Relaxed atomic load of its word; no store, no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "vmovq {first}, qword ptr [{words}]",
            "vmovhps {first}, {first}, qword ptr [{words} + 8]",
            "vmovq {second}, qword ptr [{words} + 16]",
            "vmovhps {second}, {second}, qword ptr [{words} + 24]",
            "vmovq {third}, qword ptr [{words} + 32]",
            "vmovhps {third}, {third}, qword ptr [{words} + 40]",
            "vmovq {fourth}, qword ptr [{words} + 48]",
            "vmovhps {fourth}, {fourth}, qword ptr [{words} + 56]",
            "vmovq {top}, qword ptr [{words} + 64]",
            words = in(reg) words.as_ptr(),
            first = out(xmm_reg) first,
            second = out(xmm_reg) second,
            third = out(xmm_reg) third,
            fourth = out(xmm_reg) fourth,
            top = out(xmm_reg) top,
            options(nostack, preserves_flags, readonly),
        );
    }
    [first, second, third, fourth, top]
}

/// Decodes every lane of `activemask` of `request` into `scratch` and says whether every word
/// carried `seq` (the same contract as `decode::decode_lanes`).
///
/// # Safety
/// The CPU runs AVX2 ([`available`]).
#[target_feature(enable = "avx2")]
#[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
pub(in crate::line) unsafe fn decode_lanes(
    request: &Request,
    activemask: u64,
    seq: u32,
    scratch: &mut Scratch<'_>,
) -> bool {
    const _: () = assert!(REQUEST_LANE_WORDS == 9 && SLOT_WORDS == 8 && DATA_BITS == 57);
    // SAFETY (every block below): register arithmetic on AVX2, which the caller checked, and two
    // unaligned 32-byte stores into `out`, 64 bytes: store `h` writes its bytes `32 h .. 32 h + 32`.
    let (tag, high, mut stray) = unsafe {
        (
            _mm256_set1_epi64x((u64::from(seq) << DATA_BITS) as i64),
            _mm256_set1_epi64x(!DATA_MASK as i64),
            _mm256_setzero_si256(),
        )
    };
    // Word k's top bits are bits 7 k .. 7 k + 7 of the packed word: shifted left by 57 - 7 k and
    // masked, they are the word's bits 57..64.
    let (shifts_low, shifts_high) =
        unsafe { (_mm256_set_epi64x(36, 43, 50, 57), _mm256_set_epi64x(8, 15, 22, 29)) };
    for lane in lanes(activemask) {
        let [first, second, third, fourth, top] = load(&request.lanes[lane]);
        let mut out = [0u64; SLOT_WORDS];
        unsafe {
            let low = _mm256_xor_si256(_mm256_set_m128i(second, first), tag);
            let high_words = _mm256_xor_si256(_mm256_set_m128i(fourth, third), tag);
            let top = _mm256_xor_si256(_mm256_broadcastq_epi64(top), tag);
            stray = _mm256_or_si256(stray, _mm256_or_si256(top, _mm256_or_si256(low, high_words)));
            let field = |shifts| _mm256_and_si256(_mm256_sllv_epi64(top, shifts), high);
            let dest = out.as_mut_ptr().cast::<__m256i>();
            _mm256_storeu_si256(dest, _mm256_or_si256(low, field(shifts_low)));
            _mm256_storeu_si256(dest.add(1), _mm256_or_si256(high_words, field(shifts_high)));
        }
        scratch.write_slot(lane, out);
    }
    // Every word XOR the tag has no sequence bit set: the accumulator's bits 57..64 are zero.
    unsafe {
        let sequences = _mm256_srli_epi64::<57>(stray);
        _mm256_testz_si256(sequences, sequences) == 1
    }
}
