//! The processor's optional instructions that the host's hot paths use where it has them, on
//! x86-64 builds that do not assume them: `popcnt` (the drains' and the registry's lane counts)
//! and AVX2 (the line protocol's take and answer; its scan is built for AVX2 and `popcnt` together,
//! [`has_avx2_and_popcnt`]). Asked once at run time and kept in one word. Not under Miri (which has
//! no CPUID) nor loom (whose models run the portable code).

use core::sync::atomic::{AtomicU8, Ordering};

/// Set once the processor was asked; the other bits are its answers.
const ASKED: u8 = 1;
const POPCNT: u8 = 1 << 1;
const AVX2: u8 = 1 << 2;

/// What the processor has: 0 until asked, then `ASKED` and its answers.
static FEATURES: AtomicU8 = AtomicU8::new(0);

/// The answers, asking the processor on the first call.
#[inline]
fn features() -> u8 {
    // Relaxed (here and in `ask`): the word is a function of the processor alone; threads that
    // race on the first call each find the same answer and store it.
    match FEATURES.load(Ordering::Relaxed) {
        0 => ask(),
        known => known,
    }
}

/// Whether the processor has `popcnt` (CPUID leaf 1, ECX bit 23).
#[cfg_attr(target_feature = "popcnt", allow(dead_code))] // the build assumes it
#[inline]
pub(crate) fn has_popcnt() -> bool {
    // The answer's bit first: on a processor that has it (all since about 2008) the lane count's
    // check is one test of the word, not a test that it was asked and then one of the answer.
    // Relaxed: as in `features`.
    cfg!(target_feature = "popcnt") || FEATURES.load(Ordering::Relaxed) & POPCNT != 0 || popcnt_asked()
}

/// [`has_popcnt`] past its look at the answer's bit (not set: not asked yet, or no `popcnt`).
#[cfg_attr(target_feature = "popcnt", allow(dead_code))] // the build assumes it
#[cold]
#[inline(never)]
fn popcnt_asked() -> bool {
    features() & POPCNT != 0
}

/// Whether the processor runs AVX2 and its OS saves the registers.
#[cfg_attr(not(target_feature = "sse2"), allow(dead_code))] // no vector take without SSE2
#[inline]
pub(crate) fn has_avx2() -> bool {
    cfg!(target_feature = "avx2") || features() & AVX2 != 0
}

/// Whether the processor runs AVX2 (its OS saving the registers) and has `popcnt`: the line
/// scan's copy built for both (`line/host.rs`) asks this once a scan. One load and one test of the
/// kept word once it was asked.
#[cfg_attr(not(target_feature = "sse2"), allow(dead_code))] // no vector scan without SSE2
#[inline]
pub(crate) fn has_avx2_and_popcnt() -> bool {
    const BOTH: u8 = AVX2 | POPCNT;
    cfg!(all(target_feature = "avx2", target_feature = "popcnt")) || features() & BOTH == BOTH
}

/// Asks the processor, as `std`'s feature detection does, and keeps the answers.
#[cold]
#[allow(unused_unsafe)] // `__cpuid` is safe to call in newer toolchains, `unsafe` in older ones
fn ask() -> u8 {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: CPUID exists on every x86-64 processor and only reads identification registers.
    let (max_leaf, leaf1) = unsafe { (__cpuid(0).eax, __cpuid(1)) };
    let mut found = ASKED;
    if leaf1.ecx & (1 << 23) != 0 {
        found |= POPCNT;
    }
    // AVX2: AVX and OSXSAVE (leaf 1, ECX bits 28 and 27), the OS saving the XMM and YMM state
    // (XCR0 bits 1 and 2), AVX2 itself (leaf 7, EBX bit 5).
    if max_leaf >= 7 && leaf1.ecx & (1 << 27) != 0 && leaf1.ecx & (1 << 28) != 0 {
        let (xcr0_low, _xcr0_high): (u32, u32);
        // SAFETY: XGETBV with ECX = 0 reads XCR0; it exists when OSXSAVE is set (checked
        // above), and it touches no memory.
        unsafe {
            core::arch::asm!("xgetbv", in("ecx") 0, out("eax") xcr0_low, out("edx") _xcr0_high,
                options(nomem, nostack, preserves_flags));
        }
        // SAFETY: as above; leaf 7 exists (`max_leaf`).
        if xcr0_low & 0b110 == 0b110 && unsafe { __cpuid_count(7, 0) }.ebx & (1 << 5) != 0 {
            found |= AVX2;
        }
    }
    FEATURES.store(found, Ordering::Relaxed);
    found
}

/// The number of set bits of `mask` with the `popcnt` instruction.
///
/// # Safety
/// The processor must have `popcnt` ([`has_popcnt`]).
#[cfg_attr(target_feature = "popcnt", allow(dead_code))] // the build assumes it
#[inline]
pub(crate) unsafe fn popcnt(mask: u64) -> u64 {
    let lanes: u64;
    // SAFETY: the caller's contract (the processor has `popcnt`); the instruction reads and
    // writes these two registers and the flags, and no memory.
    unsafe {
        core::arch::asm!("popcnt {lanes}, {mask}", mask = in(reg) mask, lanes = lateout(reg) lanes,
            options(pure, nomem, nostack));
    }
    lanes
}

#[cfg(test)]
mod tests {
    /// `popcnt`, where the processor has it, counts as the portable count does; asking twice
    /// gives the same answers.
    #[test]
    fn popcnt_counts_as_the_portable_count() {
        assert_eq!(super::features(), super::features());
        if !super::has_popcnt() {
            return;
        }
        for mask in [0, 1, 0b1011, 1 << 63, u64::MAX, 0x8000_0000_0000_0001, 0x5555_5555_5555_5555] {
            // SAFETY: the processor has `popcnt` (checked above).
            assert_eq!(unsafe { super::popcnt(mask) }, u64::from(mask.count_ones()), "{mask:#x}");
        }
    }

    /// Both features together exactly when each alone.
    #[test]
    fn avx2_and_popcnt_is_both_answers() {
        assert_eq!(super::has_avx2_and_popcnt(), super::has_avx2() && super::has_popcnt());
    }
}
