//! The layout arithmetic every protocol's `layout.rs` uses: arrays placed one after another, each
//! on its own cache line ([`line_aligned`]), and the `const` assertions that pin a `repr(C)` type
//! to its ABI ([`assert_abi!`](crate::layout::assert_abi)).
//!
//! A protocol's `Layout::new` lists its arrays (element count, element size) after its prefix and
//! gets their offsets back; the order, the sizes and the ABI asserts stay in the protocol's folder.

/// Bytes of the cache line each line-aligned array starts on.
pub const CACHE_LINE: usize = 64;

/// Where `K` arrays laid out one after another go: the first on the first cache line at or after
/// `start`, each next one on the first line after the end of the one before, array `k` holding
/// `arrays[k].0` elements of `arrays[k].1` bytes. Returns the offsets and the end of the last
/// array (not rounded up: nothing follows it), or `None` when any of it overflows `usize`.
///
/// Words of different arrays never share a cache line (relative to a line-aligned base), so
/// arrays with different writers do not invalidate each other's lines.
pub(crate) const fn line_aligned<const K: usize>(
    start: usize,
    arrays: [(usize, usize); K],
) -> Option<([usize; K], usize)> {
    let mut offsets = [0; K];
    let mut end = start;
    let mut k = 0;
    while k < K {
        let Some(offset) = next_line(end) else { return None };
        let Some(bytes) = arrays[k].0.checked_mul(arrays[k].1) else { return None };
        let Some(array_end) = offset.checked_add(bytes) else { return None };
        offsets[k] = offset;
        end = array_end;
        k += 1;
    }
    Some((offsets, end))
}

/// The total size of arrays placed by [`line_aligned`] (`None` where they overflow): what a
/// protocol's `buffer_size` returns.
pub(crate) const fn total<const K: usize>(placed: Option<([usize; K], usize)>) -> Option<usize> {
    match placed {
        Some((_, size)) => Some(size),
        None => None,
    }
}

/// The first line-aligned offset at or after `offset`.
const fn next_line(offset: usize) -> Option<usize> {
    match offset.checked_add(CACHE_LINE - 1) {
        Some(end) => Some(end & !(CACHE_LINE - 1)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_start_on_lines_and_the_last_ends_unrounded() {
        assert_eq!(line_aligned(56, [(3, 4), (1, 4), (3, 16)]), Some(([64, 128, 192], 240)));
        assert_eq!(line_aligned(0, [(2, 8)]), Some(([0], 16)));
        assert_eq!(line_aligned(0, [(usize::MAX, 2)]), None);
        assert_eq!(line_aligned(usize::MAX - 8, [(1, 1)]), None);
    }
}
