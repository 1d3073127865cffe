//! The device-only claim bitmap of the phase and line protocols: one bit per packet in `u32`
//! words, set by the wave that owns the packet. Only waves touch it (ROCm keeps it in the GPU's
//! own memory), so claiming needs no read-modify-write across devices.
//!
//! Ownership hand-off: a wave clears its bit with a Release `fetch_and` ([`release`]) and the next
//! claimer sets it with an Acquire `fetch_or` ([`try_take`]), so everything the previous owner did
//! with the packet happens before everything the next one does. What each protocol publishes
//! through that hand-off (a phase word, a sequence) its own view says.

use crate::sync::{AtomicU32, Ordering};

/// Packet `index`'s bit in its `occupied` word (word `index / 32`).
#[inline(always)]
pub(crate) fn bit(index: usize) -> u32 {
    1 << (index % 32)
}

/// Sets packet `index`'s bit in `word`; true if it was clear, i.e. the packet is now ours.
#[inline(always)]
pub(crate) fn try_take(word: &AtomicU32, index: usize) -> bool {
    let bit = bit(index);
    // Acquire: pairs with the Release `fetch_and` in `release` of the packet's previous owner.
    word.fetch_or(bit, Ordering::Acquire) & bit == 0
}

/// Clears packet `index`'s bit in `word`, handing the packet to the next claimer.
#[inline(always)]
pub(crate) fn release(word: &AtomicU32, index: usize) {
    // Release: pairs with the Acquire `fetch_or` in `try_take` of the next claimer.
    word.fetch_and(!bit(index), Ordering::Release);
}

/// Tries each of `num_packets` indices once, from `start % num_packets` upwards and wrapping, and
/// returns the first claim `try_claim` makes. Waves that start at different indices (their wave
/// id, say) collide less on the bitmap.
///
/// The walk wraps by a compare, not a remainder: a division is one of the slowest instructions a
/// claim could run, and a wave's `start` is usually below `num_packets` already (std's emulated
/// waves keep theirs so), which needs none.
#[inline(always)]
pub(crate) fn claim_from<T>(
    num_packets: usize,
    start: usize,
    mut try_claim: impl FnMut(usize) -> Option<T>,
) -> Option<T> {
    let mut index = if start < num_packets { start } else { start % num_packets };
    for _ in 0..num_packets {
        if let Some(claim) = try_claim(index) {
            return Some(claim);
        }
        index += 1;
        if index == num_packets {
            index = 0;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::claim_from;
    use std::vec::Vec;

    /// The indices `claim_from` tries when no claim succeeds, in order.
    fn tried(num_packets: usize, start: usize) -> Vec<usize> {
        let mut seen = Vec::new();
        let none: Option<()> = claim_from(num_packets, start, |index| {
            seen.push(index);
            None
        });
        assert!(none.is_none());
        seen
    }

    #[test]
    fn each_index_once_from_start_wrapping() {
        assert_eq!(tried(4, 0), [0, 1, 2, 3]);
        assert_eq!(tried(4, 3), [3, 0, 1, 2]);
        assert_eq!(tried(4, 6), [2, 3, 0, 1], "a start past the count wraps as start % n");
        assert_eq!(tried(1, 5), [0]);
    }

    #[test]
    fn the_first_claim_ends_the_walk() {
        let mut calls = 0;
        assert_eq!(
            claim_from(5, 3, |index| {
                calls += 1;
                (index == 0).then_some(index)
            }),
            Some(0)
        );
        assert_eq!(calls, 3, "3, 4, then 0");
    }
}
