//! How much of a buffer one host drains: the whole buffer, a window of it ([`ScanWindow`]), or a
//! range of packet indices ([`DrainScope`]), for every protocol whose host scans per-packet words.
//!
//! # The scan window
//!
//! Waves claim from a start index of their choice and wrap, so any packet may be in use, and the
//! host cannot see the `occupied` bitmap that would say which. What the host can see is which
//! packets it served. [`ScanWindow`] remembers the highest index served since the last full scan
//! and narrows the scan to just above it:
//!
//! - a *narrow* scan covers `0..limit`, with `limit = highest served + 1 + SLACK` (at most
//!   `num_packets`), fixed at the last full scan;
//! - when the narrow part serves nothing, the same call goes on to scan the rest (an idle prefix
//!   costs one full scan, which is what an unnarrowed host pays every time);
//! - every [`ScanWindow::FULL_SCAN_PERIOD`]th call is full regardless.
//!
//! So a packet above the limit waits at most `FULL_SCAN_PERIOD` calls while lower packets keep the
//! host busy, and at most one call otherwise: no packet is ever missed, as long as the host keeps
//! calling (the listener also polls on doorbell timeouts). A full scan that found higher packets
//! in use widens the limit at once.

use crate::host::DrainReport;
use core::ops::Range;

/// The host's private memory of how much of a scanned buffer is in use. One per buffer; start it
/// with [`ScanWindow::new`] for the buffer's packet count (or [`AnyView::scope`](crate::AnyView::scope))
/// and pass it to every windowed drain of that buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanWindow {
    /// Narrow scans cover `0..limit`.
    limit: u32,
    /// The packets in use since the last full scan: the highest index served since then, plus
    /// one (0: none served). A count, not an `Option` of the index: no tag to keep and test.
    in_use_since_full: u32,
    /// Narrow calls left before a full one is due.
    narrow_left: u32,
}

impl ScanWindow {
    /// Every this many calls one scans the whole buffer.
    pub const FULL_SCAN_PERIOD: u32 = 16;
    /// Packets scanned above the highest one in use, for waves that start using higher indices.
    pub const SLACK: u32 = 32;

    /// A window whose first scan is full.
    pub fn new(num_packets: u32) -> Self {
        Self { limit: num_packets, in_use_since_full: 0, narrow_left: 0 }
    }

    /// The end of the narrow scan.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Whether the next call must scan the whole buffer.
    #[inline]
    pub fn full_scan_due(&self) -> bool {
        self.narrow_left == 0
    }

    /// One windowed drain of a buffer of `num_packets` packets: the narrow part, then the rest if
    /// the narrow part served nothing, then the record of what was served. `scan(range, report)`
    /// serves the pending packets of `range` and returns the highest index it served. Every
    /// protocol that scans drives its scans through this, so the narrowing rule is written once.
    #[inline]
    pub(crate) fn drain(
        &mut self,
        num_packets: usize,
        mut scan: impl FnMut(Range<usize>, &mut DrainReport) -> Option<u32>,
    ) -> DrainReport {
        let n = num_packets;
        let mut report = DrainReport::default();
        // Clamped: the window may come from a view of another size; never trust it for bounds.
        let narrow = if self.full_scan_due() { n } else { (self.limit as usize).min(n) };
        let mut highest = scan(0..narrow, &mut report);
        let full = narrow == n || report.packets == 0;
        if narrow < n && report.packets == 0 {
            highest = scan(narrow..n, &mut report).or(highest);
        }
        self.record(full, highest, n as u32);
        report
    }

    /// Records one call: whether it scanned all `num_packets`, and the highest index it served.
    #[inline]
    fn record(&mut self, full: bool, highest: Option<u32>, num_packets: u32) {
        let in_use = self.in_use_since_full.max(highest.map_or(0, |h| h.saturating_add(1)));
        if full {
            self.limit = in_use.saturating_add(Self::SLACK).min(num_packets);
            self.in_use_since_full = 0;
            self.narrow_left = Self::FULL_SCAN_PERIOD - 1;
        } else {
            self.in_use_since_full = in_use;
            self.narrow_left = self.narrow_left.saturating_sub(1);
        }
    }
}

/// How much of a buffer one host drains, with the host-private state that needs. Start with
/// [`AnyView::scope`](crate::AnyView::scope) (or [`DrainScope::range`]) and pass it to every
/// [`AnyView::drain_scope`](crate::AnyView::drain_scope) of that buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainScope {
    /// The whole buffer. A buffer whose host takes every submitted packet in one swap (the stack
    /// protocol) is always drained whole.
    Whole,
    /// The whole buffer, scanned through this window (see [`ScanWindow`]).
    Window(ScanWindow),
    /// Only packets `start..end`, scanned whole on every drain, for hosts that split one buffer
    /// between threads (only [`Protocol::range_capable`](crate::Protocol::range_capable) ones).
    Range {
        /// The first packet served.
        start: u32,
        /// One past the last packet served.
        end: u32,
    },
}

impl DrainScope {
    /// The scope of packets `range` (an inverted range is empty).
    pub fn range(range: Range<u32>) -> Self {
        Self::Range { start: range.start, end: range.end.max(range.start) }
    }

    /// One drain of a scanned buffer of `num_packets` packets through this scope: `scan(range,
    /// report)` serves the pending packets of `range` (clamped) and returns the highest index it
    /// served. [`DrainScope::Whole`] scans every packet.
    pub(crate) fn drain(
        &mut self,
        num_packets: usize,
        mut scan: impl FnMut(Range<usize>, &mut DrainReport) -> Option<u32>,
    ) -> DrainReport {
        let range = match self {
            Self::Whole => 0..num_packets,
            // The window's report is the drain's, returned as it is (not copied into another).
            Self::Window(window) => return window.drain(num_packets, scan),
            Self::Range { start, end } => clamped(*start as usize..*end as usize, num_packets),
        };
        let mut report = DrainReport::default();
        scan(range, &mut report);
        report
    }
}

/// `range` clamped to a buffer of `num_packets` packets: a range comes from the caller, never
/// trusted for bounds (an empty or out-of-bounds range scans nothing).
#[inline]
pub(crate) fn clamped(range: Range<usize>, num_packets: usize) -> Range<usize> {
    range.start.min(num_packets)..range.end.min(num_packets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a narrow scan served is remembered until the next full scan, which sets the limit
    /// from it.
    #[test]
    fn a_narrow_scan_remembers_what_it_served_until_the_full_scan() {
        let (n, slack) = (128usize, ScanWindow::SLACK);
        let mut window = ScanWindow::new(n as u32);
        window.drain(n, |_, _| None); // full, nothing served: the limit is the slack
        assert_eq!(window.limit(), slack);
        window.drain(n, |range, report| {
            assert_eq!(range, 0..slack as usize, "a narrow scan");
            report.packets += 1;
            Some(5)
        });
        assert_eq!(window.limit(), slack, "a narrow scan does not move the limit");
        window.drain(n, |_, _| None); // narrow and empty: the rest too, a full scan
        assert_eq!(window.limit(), 6 + slack, "index 5 was in use since the last full scan");
        window.drain(n, |_, _| None);
        assert_eq!(window.limit(), slack, "and not since this one");
    }

    #[test]
    fn an_inverted_range_scope_is_empty() {
        assert_eq!(DrainScope::range(Range { start: 4, end: 2 }), DrainScope::Range { start: 4, end: 4 });
    }
}
