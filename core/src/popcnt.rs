//! [`Popcnt`]: the processor's `popcnt` found once, for a host that counts every packet's lanes
//! and keeps the answer where it tests its own flags.

/// The processor's `popcnt`, found once: a value exists only where the processor has it (or the
/// build assumes it), so [`Popcnt::lane_count`] is [`lane_count`](crate::lane_count) without its
/// check of the kept answer. A host that counts every packet's lanes asks once, keeps the
/// `Option`, and tests its own flag (one compare with what else it tests there), not the shared
/// feature word.
///
/// ```
/// if let Some(popcnt) = hostcall_core::Popcnt::get() {
///     assert_eq!(popcnt.lane_count(0b1011), 3);
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Popcnt(());

impl Popcnt {
    /// `Some` where the processor has `popcnt`: where [`lane_count`](crate::lane_count) uses it
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
    /// Where there is one, it counts as the portable count does.
    #[test]
    fn counts_as_the_portable_count() {
        let Some(popcnt) = super::Popcnt::get() else { return };
        for mask in [0, 1, 0b1011, 1 << 63, u64::MAX, 0x5555_5555_5555_5555] {
            assert_eq!(popcnt.lane_count(mask), u64::from(mask.count_ones()), "{mask:#x}");
        }
    }
}
