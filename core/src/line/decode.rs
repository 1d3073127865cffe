//! The take's lane decode: a lane's [`REQUEST_LANE_WORDS`] line words, loaded once each, turned
//! into its request words, with the sequence check of every word folded into one test a take.
//!
//! A decode is made for one take (one sequence). Its [`Lane::lane`] loads every line word of a
//! lane, XORs each with the sequence's tag (its sequence bits are then 0 exactly when the word
//! carries the sequence, and what is left is its data), ORs the results into the take's *stray*
//! accumulator, and rebuilds each request word from its data and its 7 top bits out of the lane's
//! packed word (`joined` in `word.rs`). [`Lane::all_carry`], once the take has decoded every
//! active lane, says whether every word it loaded carried the sequence: the same answer as a test
//! per word, or per lane, for every word of every lane (a word that did not carry it leaves
//! sequence bits in the accumulator, and nothing clears them). What a lane decoded is only a
//! service's to see after that test passed (the take records the slots as written only then).
//!
//! Three implementations of the same arithmetic. On x86-64 the request words are rebuilt two at
//! a time in SSE2 registers (part of the baseline of every x86-64 target with an OS; a build
//! without SSE, `x86_64-unknown-none`, runs the scalar decode): each line word is loaded with one
//! aligned 8-byte access straight into a vector register (inline assembly: a Relaxed load
//! compiles to the same access into a general register, from which LLVM would move each word),
//! and one XOR, one OR, a shift, a mask and one OR decode a pair. On the x86-64 CPUs with AVX2
//! (checked once at run time) four at a time, with one variable shift for the four words' top
//! bits (`decode/avx2.rs`). Elsewhere, under loom (whose atomics are not the words' memory) and
//! under Miri (which runs no inline assembly), one word at a time. The tests check that all give
//! the same verdict, and the same words when it passes, for any bytes.

use super::layout::{Request, CARRIED_REQUEST_WORDS, REQUEST_LANE_WORDS};
use super::scratch::Scratch;
use super::word::{data_of, joined, DATA_BITS};
use crate::lane::{lanes, SLOT_WORDS};
use crate::sync::{AtomicU64, Ordering};

#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
mod avx2;

/// The decode of one take, lane by lane: the sequence's tag and the stray accumulator.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
type Decoder = sse2::Decoder;
/// The decode of one take, lane by lane: the sequence's tag and the stray accumulator.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))))]
type Decoder = Scalar;

/// Decodes every lane of `activemask` (lanes that exist) of `request` into `scratch`, slot by
/// slot, and says whether every word it loaded carried `seq`; what it wrote is a service's to see
/// only if so.
#[inline]
pub(super) fn decode_lanes(request: &Request, activemask: u64, seq: u32, scratch: &mut Scratch<'_>) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    if avx2::available() {
        // SAFETY: this CPU runs AVX2 and its OS keeps the registers (`available`).
        return unsafe { avx2::decode_lanes(request, activemask, seq, scratch) };
    }
    decode_lanes_with::<Decoder>(request, activemask, seq, scratch)
}

/// [`decode_lanes`] where the caller knows that the CPU runs AVX2: the AVX2 decode, no check.
///
/// # Safety
/// The CPU runs AVX2 and its OS keeps the registers (`crate::cpu::has_avx2`).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
#[inline]
pub(super) unsafe fn decode_lanes_avx2(
    request: &Request,
    activemask: u64,
    seq: u32,
    scratch: &mut Scratch<'_>,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe { avx2::decode_lanes(request, activemask, seq, scratch) }
}

/// [`decode_lanes`] with the lane decode `D`. Where an AVX2 decode is built in, this one (for a
/// CPU without AVX2) is a function of its own: inlined into the take, its lane loop's registers
/// would be saved and restored at every take, the AVX2 one's included.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)), inline(never))]
#[cfg_attr(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))), inline)]
fn decode_lanes_with<D: Lane>(
    request: &Request,
    activemask: u64,
    seq: u32,
    scratch: &mut Scratch<'_>,
) -> bool {
    let mut decoder = D::new(seq);
    for lane in lanes(activemask) {
        scratch.write_slot(lane, decoder.lane(&request.lanes[lane]));
    }
    decoder.all_carry()
}

/// A lane-by-lane decode of one take ([`Scalar`], and the SSE2 one on x86-64).
trait Lane {
    /// The decode of a take of sequence `seq`.
    fn new(seq: u32) -> Self;
    /// Loads lane `words` and returns its request words (the words not carried are zero).
    fn lane(&mut self, words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [u64; SLOT_WORDS];
    /// Whether every word [`Lane::lane`] loaded carried the sequence.
    fn all_carry(&self) -> bool;
}

/// The one-word-at-a-time decode (off x86-64, under loom and Miri, and the tests' reference).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri), not(test)),
    allow(dead_code)
)]
pub(super) struct Scalar {
    /// The sequence in a line word's sequence bits.
    tagged: u64,
    /// Every loaded word XOR `tagged`, ORed together.
    stray: u64,
}

#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri), not(test)),
    allow(dead_code)
)]
impl Lane for Scalar {
    #[inline]
    fn new(seq: u32) -> Self {
        Self { tagged: u64::from(seq) << DATA_BITS, stray: 0 }
    }

    #[inline]
    fn lane(&mut self, words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [u64; SLOT_WORDS] {
        // Relaxed (every load of this module): a line word is read in one access, so its data is
        // the data its sequence was stored with; nothing else needs ordering.
        let line: [u64; REQUEST_LANE_WORDS] =
            core::array::from_fn(|k| words[k].load(Ordering::Relaxed) ^ self.tagged);
        self.stray |= line.iter().fold(0, |acc, &w| acc | w);
        let top = line[CARRIED_REQUEST_WORDS];
        core::array::from_fn(|k| if k < CARRIED_REQUEST_WORDS { joined(data_of(line[k]), top, k) } else { 0 })
    }

    #[inline]
    fn all_carry(&self) -> bool {
        self.stray >> DATA_BITS == 0
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
mod sse2 {
    use super::{AtomicU64, Lane, DATA_BITS, REQUEST_LANE_WORDS, SLOT_WORDS};
    use crate::line::word::DATA_MASK;
    use core::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cvtsi128_si64, _mm_cvtsi32_si128, _mm_or_si128, _mm_set1_epi64x,
        _mm_setzero_si128, _mm_sll_epi64, _mm_srli_epi64, _mm_storeu_si128, _mm_unpackhi_epi64,
        _mm_unpacklo_epi64, _mm_xor_si128,
    };

    const _: () = assert!(REQUEST_LANE_WORDS == 9 && SLOT_WORDS == 8 && DATA_BITS == 57);

    /// A lane's nine line words, in pairs (words 0 and 1 in the first register's low and high
    /// halves, ...) and the packed word (in the last one's low half), each loaded with one
    /// 8-byte access.
    #[inline(always)]
    fn load(words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [__m128i; 5] {
        let (first, second, third, fourth, top): (__m128i, __m128i, __m128i, __m128i, __m128i);
        // SAFETY: nine 8-byte loads from `words`, a live array of nine 8-byte aligned atomics
        // (offsets 0..72), and nothing else: no store, no stack, flags kept. Each is one aligned
        // quadword access, which x86-64 performs atomically (Intel SDM vol. 3A, 9.1.1; AMD APM
        // vol. 2, 7.3.2), as the `mov` of a Relaxed `AtomicU64::load` does: each load is a
        // Relaxed atomic load of its word, straight into a vector register.
        unsafe {
            core::arch::asm!(
                "movq {first}, qword ptr [{words}]",
                "movhps {first}, qword ptr [{words} + 8]",
                "movq {second}, qword ptr [{words} + 16]",
                "movhps {second}, qword ptr [{words} + 24]",
                "movq {third}, qword ptr [{words} + 32]",
                "movhps {third}, qword ptr [{words} + 40]",
                "movq {fourth}, qword ptr [{words} + 48]",
                "movhps {fourth}, qword ptr [{words} + 56]",
                "movq {top}, qword ptr [{words} + 64]",
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

    /// The two-words-at-a-time decode.
    pub(in crate::line) struct Decoder {
        /// The sequence in a line word's sequence bits, in both halves.
        tagged: __m128i,
        /// Every loaded word XOR the tag, ORed together (in either half).
        stray: __m128i,
    }

    // The SSE2 intrinsics below are safe to call in newer toolchains (the target enables SSE2)
    // and `unsafe` in the older ones the library supports, hence the blocks and `unused_unsafe`;
    // none of them touches memory but `_mm_storeu_si128`, whose target is a local array.
    #[allow(unused_unsafe)]
    impl Lane for Decoder {
        #[inline]
        fn new(seq: u32) -> Self {
            let tagged = (u64::from(seq) << DATA_BITS) as i64;
            // SAFETY: register arithmetic; SSE2 is part of the x86-64 baseline.
            unsafe { Self { tagged: _mm_set1_epi64x(tagged), stray: _mm_setzero_si128() } }
        }

        #[inline]
        fn lane(&mut self, words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [u64; SLOT_WORDS] {
            let [first, second, third, fourth, top] = load(words);
            let mut out = [0u64; SLOT_WORDS];
            // SAFETY: register arithmetic on SSE2 (x86-64 baseline), and four unaligned 16-byte
            // stores into `out`, 64 bytes: store `j` writes its bytes `16 j .. 16 j + 16`.
            unsafe {
                // The packed word XOR the tag in the low half (checked there), the same shifted
                // right by 7 in the high half: word 2j's top bits are bits 14 j .. 14 j + 7 of the
                // low half, word 2j + 1's the same bits of the high half.
                let top = _mm_xor_si128(top, self.tagged);
                let tops = _mm_unpacklo_epi64(top, _mm_srli_epi64::<7>(top));
                self.stray = _mm_or_si128(self.stray, tops);
                let dest = out.as_mut_ptr().cast::<__m128i>();
                let high = _mm_set1_epi64x(!DATA_MASK as i64);
                let field = |shift| _mm_and_si128(_mm_sll_epi64(tops, _mm_cvtsi32_si128(shift)), high);
                for (j, pair) in [first, second, third, fourth].into_iter().enumerate() {
                    let pair = _mm_xor_si128(pair, self.tagged);
                    self.stray = _mm_or_si128(self.stray, pair);
                    _mm_storeu_si128(dest.add(j), _mm_or_si128(pair, field(57 - 14 * j as i32)));
                }
            }
            out
        }

        #[inline]
        fn all_carry(&self) -> bool {
            // SAFETY: register arithmetic; SSE2 is part of the x86-64 baseline.
            let (low, high) = unsafe {
                (_mm_cvtsi128_si64(self.stray), _mm_cvtsi128_si64(_mm_unpackhi_epi64(self.stray, self.stray)))
            };
            (low | high) as u64 >> DATA_BITS == 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::scratch::{Place, ScratchPayload};
    use crate::line::word::{decode_request, encode_request, word};
    use proptest::prelude::*;

    extern crate std;
    use std::{boxed::Box, vec, vec::Vec};

    fn atomics(words: [u64; REQUEST_LANE_WORDS]) -> [AtomicU64; REQUEST_LANE_WORDS] {
        words.map(AtomicU64::new)
    }

    /// A whole take's decode: `decode_lanes` with one implementation.
    type Take = fn(&Request, u64, u32, &mut Scratch<'_>) -> bool;

    /// Every implementation this machine runs.
    fn takes() -> Vec<(&'static str, Take)> {
        let mut takes: Vec<(&'static str, Take)> =
            vec![("scalar", decode_lanes_with::<Scalar>), ("native", decode_lanes_with::<Decoder>)];
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
        if avx2::available() {
            // SAFETY: AVX2 is available (checked just above).
            takes.push(("avx2", |request, mask, seq, scratch| unsafe {
                avx2::decode_lanes(request, mask, seq, scratch)
            }));
        }
        takes
    }

    /// The take's verdict and, when it passes, every active lane's decoded slot.
    fn run(take: Take, request: &Request, mask: u64, seq: u32) -> (bool, Vec<[u64; SLOT_WORDS]>) {
        let mut kept = ScratchPayload::new();
        let mut scratch = Place::kept(&mut kept).scratch();
        if !take(request, mask, seq, &mut scratch) {
            return (false, Vec::new());
        }
        scratch.written_whole(mask);
        let (payload, _) = scratch.payload();
        (true, lanes(mask).map(|lane| payload.read_lane(lane)).collect())
    }

    /// A request block whose lane words are `fill`, each tagged with `seq` if `tagged`.
    fn request_of(fill: &[u64], seq: u32, tagged: bool) -> Box<Request> {
        let request = Box::new(Request::default());
        for (w, line_word) in request.lanes.iter().flatten().enumerate() {
            let v = fill[w % fill.len()];
            line_word.store(if tagged { word(v, seq) } else { v }, Ordering::Relaxed);
        }
        request
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]

        /// For any bytes and mask, every implementation gives the scalar one's verdict (and its
        /// words when it passes), and words that all carry the sequence decode as `word.rs` says.
        #[test]
        fn every_decode_is_the_scalar_one(fill in proptest::collection::vec(any::<u64>(), 1..80),
                mask in any::<u64>(), seq in 1u32..128, tagged in any::<bool>(), stray in any::<u16>()) {
            let request = request_of(&fill, seq, tagged);
            let active: Vec<usize> = lanes(mask).collect();
            if tagged && !active.is_empty() && stray % 2 == 1 {
                // One word of one active lane of another sequence.
                let (lane, k) = (active[stray as usize / 2 % active.len()], stray as usize % REQUEST_LANE_WORDS);
                let w = request.lanes[lane][k].load(Ordering::Relaxed);
                request.lanes[lane][k].store(word(w, seq % 127 + 1), Ordering::Relaxed);
            }
            let expected = run(decode_lanes_with::<Scalar>, &request, mask, seq);
            for (name, take) in takes() {
                prop_assert_eq!(&run(take, &request, mask, seq), &expected, "{}", name);
            }
            let clean = tagged && (active.is_empty() || stray % 2 == 0);
            if tagged {
                prop_assert_eq!(expected.0, clean);
            }
            if clean {
                let decoded: Vec<[u64; SLOT_WORDS]> = active.iter().map(|&lane| {
                    let words = core::array::from_fn(|k| request.lanes[lane][k].load(Ordering::Relaxed));
                    decode_request(&words)
                }).collect();
                prop_assert_eq!(expected.1, decoded);
            }
        }

        /// Lane by lane, the native decode gives the scalar one's verdict (and its words when
        /// they pass), and a well-formed lane decodes to its request.
        #[test]
        fn the_native_decode_is_the_scalar_one(lanes in proptest::collection::vec(any::<[u64; REQUEST_LANE_WORDS]>(), 1..4),
                request in any::<[u64; SLOT_WORDS]>(), seq in 1u32..128, tagged in any::<bool>()) {
            let (mut native, mut scalar) = (Decoder::new(seq), Scalar::new(seq));
            for words in &lanes {
                let words = if tagged { words.map(|w| word(w, seq)) } else { *words };
                let words = atomics(words);
                let (decoded, expected) = (native.lane(&words), scalar.lane(&words));
                prop_assert_eq!(native.all_carry(), scalar.all_carry());
                // What a failing take decoded is never served: only the words of one that passes
                // must agree.
                if scalar.all_carry() {
                    prop_assert_eq!(decoded, expected);
                }
            }
            let words = atomics(encode_request(&request, seq));
            let expected = core::array::from_fn(|k| if k < CARRIED_REQUEST_WORDS { request[k] } else { 0 });
            let mut fresh = Decoder::new(seq);
            prop_assert_eq!(fresh.lane(&words), expected);
            prop_assert!(fresh.all_carry());
        }
    }

    /// A single word of another sequence, anywhere in any active lane of a take, fails it, in
    /// every implementation.
    #[test]
    fn one_stray_word_fails_the_take() {
        let seq = 5;
        let request = request_of(&[u64::MAX], seq, true);
        for (name, take) in takes() {
            // Under Miri one mask (every take there runs each word through the interpreter). The
            // others: one lane; a pair and an odd lane alone; two pairs; runs that start at an
            // odd lane and end at an even one alone (the AVX2 decode's lanes alone and its pairs).
            let masks: &[u64] =
                if cfg!(miri) { &[0b101] } else { &[0b1, 0b1011, 0b1111_0000, 0b111_0110, u64::MAX] };
            for &mask in masks {
                assert!(run(take, &request, mask, seq).0, "{name}: mask {mask:#x} all carry {seq}");
                for lane in lanes(mask) {
                    for k in 0..REQUEST_LANE_WORDS {
                        for other in [0, seq - 1, seq + 1, 127] {
                            let line_word = &request.lanes[lane][k];
                            let good = line_word.load(Ordering::Relaxed);
                            line_word.store(word(good, other), Ordering::Relaxed);
                            let (passed, _) = run(take, &request, mask, seq);
                            line_word.store(good, Ordering::Relaxed);
                            assert!(
                                !passed,
                                "{name}: word {k} of lane {lane} of {mask:#x}, sequence {other}"
                            );
                        }
                    }
                }
            }
        }
    }
}
