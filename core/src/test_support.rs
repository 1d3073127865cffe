//! What the protocols' sequential tests share: the handler that echoes requests and records what
//! a drain served and found, the `u32` words a buffer in parts is made of, and the sizes the tests
//! run at (smaller under Miri, as the loom models shrink theirs).

extern crate std;
use crate::host::{DrainError, DrainHandler, PacketRequest};
use crate::sync::AtomicU32;
use std::{boxed::Box, vec::Vec};

/// The proptest configuration of every property in the crate: proptest's defaults natively;
/// under Miri a few cases (Miri interprets every step, so each case costs many native ones) and no
/// failure file (Miri's isolation has no file system, and a failing case is printed anyway).
pub(crate) fn proptest_config() -> proptest::test_runner::Config {
    if cfg!(miri) {
        proptest::test_runner::Config { cases: 4, failure_persistence: None, ..Default::default() }
    } else {
        proptest::test_runner::Config::default()
    }
}

/// `native` natively, `miri` under Miri: the rounds or packets of a test whose full size Miri
/// would take minutes to interpret, where a smaller size still covers the same edges.
pub(crate) const fn sized(native: usize, miri: usize) -> usize {
    if cfg!(miri) {
        miri
    } else {
        native
    }
}

/// `n` zeroed words.
pub(crate) fn words(n: usize) -> Box<[AtomicU32]> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

/// `n` default-built entries (headers, payloads, blocks).
pub(crate) fn packets<T: Default>(n: usize) -> Box<[T]> {
    (0..n).map(|_| T::default()).collect()
}

/// Answers every active lane with `[word 0 + 1, the service id]`.
pub(crate) fn echo(p: &mut PacketRequest<'_>) {
    let lanes: Vec<usize> = p.lanes().collect();
    for lane in lanes {
        let r = p.request(lane);
        p.reply(lane, [r[0] + 1, u64::from(p.service())]);
    }
}

/// Serves with [`echo`], recording the packets served and the malformed state reported.
#[derive(Default)]
pub(crate) struct Collect {
    pub(crate) served: Vec<u32>,
    pub(crate) errors: Vec<DrainError>,
}

impl DrainHandler for Collect {
    fn serve(&mut self, p: &mut PacketRequest<'_>) {
        self.served.push(p.index());
        echo(p);
    }
    fn malformed(&mut self, e: DrainError) {
        self.errors.push(e);
    }
}

/// [`assert_line_aligned`] for buffers of several packet counts (the edges of the `occupied`
/// bitmap's words, and a large one): `layout(n)` gives the arrays and the size.
pub(crate) fn assert_line_aligned_for_counts<const K: usize>(
    layout: impl Fn(usize) -> ([(usize, usize); K], usize),
) {
    for n in [2usize, 3, 31, 32, 33, 100, 1 << 16] {
        let (spans, size) = layout(n);
        assert_line_aligned(n, &spans, size);
    }
}

/// Asserts that the arrays `spans` (offset, bytes) of a buffer of `n` packets, in memory order,
/// each start on a cache line past the end of the one before (disjoint, and different writers
/// never share a line), and that the last ends at `size`.
fn assert_line_aligned(n: usize, spans: &[(usize, usize)], size: usize) {
    use crate::layout::CACHE_LINE;
    for pair in spans.windows(2) {
        let ((a, a_len), (b, _)) = (pair[0], pair[1]);
        assert!(a + a_len <= b, "n = {n}: arrays overlap");
        assert_eq!(b % CACHE_LINE, 0, "n = {n}: an array off its line");
        assert!((a + a_len).div_ceil(CACHE_LINE) * CACHE_LINE <= b, "n = {n}: two arrays share a line");
    }
    let &(last, last_len) = spans.last().expect("some arrays");
    assert_eq!(size, last + last_len, "n = {n}: the size ends with the last array");
}
