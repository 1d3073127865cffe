//! The take's decode four words at a time in AVX2 registers, on the x86-64 CPUs that have AVX2
//! (checked once at run time, [`available`]): the same XORs and accumulator as the SSE2 decode,
//! and one variable shift (`vpsllvq`) for four words' top bits; the lanes walked in runs of
//! adjacent ones, two lanes a step, each pair's words and slots one step along.
//!
//! **The loads.** A lane's words are 72 bytes, so lanes alternate between starting on a 16-byte
//! boundary (even lanes: the request block is 64-aligned and its lanes start at byte 16) and 8
//! bytes past one (odd lanes). A pair of lanes from an even one is 144 bytes, nine aligned 16-byte
//! chunks: the pair loop loads each chunk with one `vmovdqa` (VEX.128), two words a load. A lane
//! decoded alone (a packet of one lane, a run's odd first lane, its last one left over) takes its
//! words with one aligned 8-byte access each. Every word is loaded once.
//!
//! A 16-byte load is as good as two 8-byte ones, each word a Relaxed atomic load of its own, under
//! three conditions, which hold here:
//!
//! - The processor has AVX. Intel's SDM (vol. 3A, section 9.1.1) guarantees that a processor that
//!   enumerates AVX performs 16-byte aligned loads and stores of `movdqa`, `movaps`, `movapd` and
//!   their VEX.128 forms atomically; AMD's APM (vol. 2, section 7.3.2, "Access Atomicity") says the
//!   same of processors that report AVX, for cacheable, naturally aligned single loads and
//!   stores, extending the quadword guarantee to a double quadword (Zhaoxin has confirmed it for
//!   write-back memory). This path runs only where AVX2 is, and AVX2 is reported only with AVX
//!   (`crate::cpu` asks for both, and for the OS saving the YMM state).
//! - The 16 bytes are 16-aligned: only even lanes' chunks, and the pairs that start at one (a run
//!   that starts at an odd lane decodes that lane alone first), are loaded so; the assertion below
//!   `decode_runs` ties it to the layout.
//! - The memory is cacheable. Every buffer this project makes is: ordinary host memory, HSA
//!   fine-grained system memory, CUDA pinned host memory (`cuMemHostAlloc` without
//!   write-combining); a buffer from elsewhere must be too ([`View::from_raw`]'s safety contract).
//!   On uncacheable or write-combined memory only the 8-byte guarantee holds on every vendor.
//!
//! LLVM compiles a 128-bit atomic load to `vmovdqa` on AVX processors since 2023 (llvm-project
//! pull request 74275), as GCC's libatomic does (GCC bug 104688) and the portable-atomic crate
//! (its pull requests 16 and 49), on the same vendor guarantees. And the decode needs less than
//! those: each word keeps its own sequence, checked word by word, so even a load that did tear
//! between its two words would be caught as a word of another call, not served.
//!
//! [`View::from_raw`]: crate::line::View::from_raw

use super::super::layout::{Request, REQUEST_LANE_WORDS};
use super::super::scratch::Scratch;
use super::super::word::{DATA_BITS, DATA_MASK};
use crate::lane::{lanes, runs, SLOT_WORDS};
use crate::sync::AtomicU64;
use core::arch::x86_64::{
    __m128i, __m256i, _mm256_and_si256, _mm256_broadcastq_epi64, _mm256_castsi256_si128,
    _mm256_inserti128_si256, _mm256_or_si256, _mm256_permute4x64_epi64, _mm256_set1_epi64x,
    _mm256_set_epi64x, _mm256_set_m128i, _mm256_setzero_si256, _mm256_sllv_epi64, _mm256_srli_epi64,
    _mm256_storeu_si256, _mm256_testz_si256, _mm256_xor_si256, _mm_storel_epi64,
};

/// Whether [`decode_lanes`] may run here: the processor runs AVX2 (asked once, `crate::cpu`).
#[inline]
pub(in crate::line) fn available() -> bool {
    crate::cpu::has_avx2()
}

/// A lane's line words with one aligned 8-byte access each: words 0..4 in the first register,
/// 4..8 in the second, the packed word in every quarter of the third (a lane decoded alone, even
/// or odd).
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
#[inline]
#[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
unsafe fn load(words: &[AtomicU64; REQUEST_LANE_WORDS]) -> [__m256i; 3] {
    let (first, second, third, fourth): (__m128i, __m128i, __m128i, __m128i);
    let top: __m256i;
    // SAFETY: as in the SSE2 decode's loads (`decode.rs`), in their VEX forms: nine aligned
    // 8-byte loads from `words`, each a Relaxed atomic load of its word (the packed word's
    // broadcast too: one 8-byte access, its value in every quarter); no store, no stack, flags
    // kept.
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
            "vpbroadcastq {top}, qword ptr [{words} + 64]",
            words = in(reg) words.as_ptr(),
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
}

/// The two words `$at` bytes past `$words` (16-aligned) with one aligned 16-byte access, in the
/// low half of a register (its high half zero: the VEX.128 form clears it). One block a chunk, so
/// that the compiler places each load near its use.
macro_rules! load_chunk {
    ($words:expr, $at:literal) => {{
        let words: __m256i;
        // SAFETY: one aligned 16-byte load from two words of the pair (16-aligned, the
        // caller's contract), and nothing else: no store, no stack, flags kept. It is one access
        // to two whole words that the CPU performs atomically (the module docs: AVX, which AVX2
        // implies, a 16-aligned `vmovdqa` and cacheable memory), so each word in it is as a
        // Relaxed atomic load of that word.
        unsafe {
            core::arch::asm!(
                concat!("vmovdqa {words:x}, xmmword ptr [{base} + ", $at, "]"),
                base = in(reg) $words,
                words = out(ymm_reg) words,
                options(nostack, preserves_flags, readonly),
            );
        }
        words
    }};
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

/// [`decode_lanes`] of a packet of several lanes: a run of adjacent lanes at a time, its first
/// lane alone if it is odd, then two lanes a step (each pair an even lane and the next, 16-aligned:
/// [`Decode::pair`]), then the run's last if one is left.
///
/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
unsafe fn decode_runs(request: &Request, activemask: u64, seq: u32, scratch: &mut Scratch<'_>) -> bool {
    // SAFETY: AVX2 (the caller's contract).
    let (decode, mut stray) = unsafe { Decode::new(seq) };
    for run in runs(activemask) {
        let mut slot = scratch.slot_mut(run.start);
        let mut lanes = &request.lanes[run.clone()];
        if run.start % 2 == 1 {
            // SAFETY: AVX2 (the caller's contract); `slot` is the run's first lane's.
            stray = unsafe { decode.lane(&lanes[0], slot, stray) };
            lanes = &lanes[1..];
            // SAFETY: the run's slots follow its first lane's: this one is the second lane's (or
            // one past the run's, unused).
            slot = unsafe { slot.add(1) };
        }
        let pairs = lanes.len() / 2;
        // The run's lanes two at a time from an even lane, each pair's words and slots one step
        // along.
        let mut pair = lanes.as_ptr().cast::<[[AtomicU64; REQUEST_LANE_WORDS]; 2]>();
        // SAFETY: `pairs` pairs of lanes are within `lanes` (an array's elements, so a pair of
        // them is one `[_; 2]` in memory), and the pointer one past them is within or one past it.
        let end = unsafe { pair.add(pairs) };
        while pair != end {
            // SAFETY: AVX2 (the caller's contract); `pair` is one of the run's pairs (before
            // `end`), whose first lane is even and so 16-aligned (the assertion below); the slots
            // of the run's lanes follow the first's, so the pair's are `slot` and the next, and
            // both steps stay within (or one past) the run's words and slots.
            unsafe {
                stray = decode.pair(pair, slot, stray);
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

// Even lanes are 16-aligned: lane `l`'s words start `16 + 72 l` bytes into its 64-aligned
// request block, a multiple of 16 exactly when `l` is even (and a pair of lanes is 144 bytes,
// nine 16-byte chunks).
const _: () = assert!(
    core::mem::offset_of!(Request, lanes) % 16 == 0
        && core::mem::align_of::<Request>() % 16 == 0
        && core::mem::size_of::<[AtomicU64; REQUEST_LANE_WORDS]>() % 16 == 8
);

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
    /// The sequence in the low two quarters' sequence bits, zero in the high two.
    tag_low: __m256i,
    /// The sequence bits of every quarter.
    high: __m256i,
    /// The shifts that bring words 0..4's, and 4..8's, top bits from the packed word.
    shifts_low: __m256i,
    shifts_high: __m256i,
    /// The same for the second lane of a pair, one word along ([`Decode::pair`]): words 0..3 in the
    /// upper three quarters, word 7 in the lowest (where the first lane's packed word is in the
    /// register, whose field is never kept: its store is overwritten), and words 3..7.
    shifts_first: __m256i,
    shifts_second: __m256i,
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
        let tag = (u64::from(seq) << DATA_BITS) as i64;
        // SAFETY: register arithmetic on AVX2 (the caller's contract).
        unsafe {
            let decode = Self {
                tag: _mm256_set1_epi64x(tag),
                tag_low: _mm256_set_epi64x(0, 0, tag, tag),
                high: _mm256_set1_epi64x(!DATA_MASK as i64),
                // Word k's top bits are bits 7 k .. 7 k + 7 of the packed word: shifted left by
                // 57 - 7 k and masked, they are the word's bits 57..64 (the packed word's own
                // sequence bits shift out).
                shifts_low: _mm256_set_epi64x(36, 43, 50, 57),
                shifts_high: _mm256_set_epi64x(8, 15, 22, 29),
                shifts_first: _mm256_set_epi64x(43, 50, 57, 8),
                shifts_second: _mm256_set_epi64x(15, 22, 29, 36),
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

    /// [`lane`](Self::lane) of a lane whose words [`load`] loaded.
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
        let Self { tag, high, shifts_low, shifts_high, .. } = self;
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

    /// Decodes the two lanes of `pair` (144 bytes, nine 16-byte chunks, [`load_chunk`]) into `slot` and the slot after it, and
    /// returns `stray` ORed with each of their words XOR the tag: the first lane's packed word is
    /// checked in the second lane's first register, where it was loaded.
    ///
    /// # Safety
    /// The CPU runs AVX2, `pair` is 16-aligned, and `slot` is a slot of the scratch that another
    /// follows (128 bytes it may write).
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(unused_unsafe)] // the intrinsics are safe here in newer toolchains, `unsafe` in older ones
    unsafe fn pair(
        self,
        pair: *const [[AtomicU64; REQUEST_LANE_WORDS]; 2],
        slot: *mut [u64; SLOT_WORDS],
        stray: __m256i,
    ) -> __m256i {
        let Self { tag, tag_low, high, shifts_low, shifts_high, shifts_first, shifts_second } = self;
        // SAFETY: AVX2 and `pair` (the caller's contract); register arithmetic, and stores within
        // the two slots' 128 bytes (the caller's contract): 32 bytes at the first slot's word 7
        // (its last word and the second slot's words 0..3), 32 at each of the first slot's halves,
        // 32 at the second slot's word 3 and 8 at its word 7.
        unsafe {
            // Nine 16-byte chunks: the first lane's words 0..8 in four, its packed word and the
            // second lane's words 0..3 in the fifth, then that lane's words 3..7 in three, its
            // word 7 and packed word in the last. Taken in the order that keeps the fewest
            // registers live (the second lane's packed word first, each store's words then one
            // after the other), each folded into `stray` as soon as it is tagged.
            let two = |low, high| _mm256_inserti128_si256::<1>(low, _mm256_castsi256_si128(high));
            let field = |top, shifts| _mm256_and_si256(_mm256_sllv_epi64(top, shifts), high);
            let dest = slot.cast::<u64>();
            let last = load_chunk!(pair, 128);
            let second_top = _mm256_permute4x64_epi64::<0x55>(last);
            // (its high half stays zero)
            let last = _mm256_xor_si256(last, tag_low);
            let fifth = load_chunk!(pair, 64);
            let top = _mm256_broadcastq_epi64(_mm256_castsi256_si128(fifth));
            let first = _mm256_xor_si256(two(fifth, load_chunk!(pair, 80)), tag);
            // The second lane's words 0..3 first: the store's lowest quarter (the first lane's
            // packed word, decoded as nothing) lands on the first lane's word 7, which the first
            // lane's second store then writes.
            let first_fields = field(second_top, shifts_first);
            _mm256_storeu_si256(dest.add(7).cast(), _mm256_or_si256(first, first_fields));
            // Word 7 of the second lane, whose top bits the first fields' lowest quarter holds.
            let seventh = _mm256_or_si256(last, first_fields);
            _mm_storel_epi64(dest.add(15).cast(), _mm256_castsi256_si128(seventh));
            let stray = _mm256_or_si256(stray, _mm256_or_si256(first, last));
            let low = _mm256_xor_si256(two(load_chunk!(pair, 0), load_chunk!(pair, 16)), tag);
            _mm256_storeu_si256(dest.cast(), _mm256_or_si256(low, field(top, shifts_low)));
            let high_words = _mm256_xor_si256(two(load_chunk!(pair, 32), load_chunk!(pair, 48)), tag);
            _mm256_storeu_si256(dest.add(4).cast(), _mm256_or_si256(high_words, field(top, shifts_high)));
            let stray = _mm256_or_si256(stray, _mm256_or_si256(low, high_words));
            let second = _mm256_xor_si256(two(load_chunk!(pair, 96), load_chunk!(pair, 112)), tag);
            _mm256_storeu_si256(
                dest.add(11).cast(),
                _mm256_or_si256(second, field(second_top, shifts_second)),
            );
            _mm256_or_si256(stray, second)
        }
    }
}
