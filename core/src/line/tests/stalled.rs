//! A request that never completes (`line/incomplete.rs`): remembered, one word a look, reported
//! stalled once per sequence, and still served when its word lands; a new head starts over.
//!
//! Every atomic access here is Relaxed: each test runs on one thread, playing a device that
//! writes words between the host's drains, and a line word's data travels in the word itself, so
//! nothing needs ordering.

use super::*;
use crate::host::DrainError;
use crate::scan::DrainScope;
use crate::test_support::Collect;

/// The host of a buffer, keeping its scratch, scope and memory of incomplete requests.
struct Kept<'a> {
    view: View<'a>,
    scope: DrainScope,
    scratch: ScratchPayload,
    incomplete: Vec<Incomplete>,
}

impl<'a> Kept<'a> {
    fn new(view: View<'a>, scope: DrainScope, entries: usize) -> Self {
        Self {
            view,
            scope,
            scratch: ScratchPayload::new(),
            incomplete: std::vec![Incomplete::default(); entries],
        }
    }

    /// `looks` drains; what they served and reported.
    fn drain(&mut self, looks: u32) -> Collect {
        let mut collect = Collect::default();
        for _ in 0..looks {
            let (scope, scratch) = (&mut self.scope, &mut self.scratch);
            self.view.host().drain_scope(scope, Some(scratch), Some(&mut self.incomplete[..]), &mut collect);
        }
        collect
    }
}

/// Submits a call of every lane on packet `index` and makes word `k` of lane `lane` stale (it
/// carries the sequence before); returns the call and the word's value as the wave stored it.
fn submit_with_a_stale_word<'a>(
    view: &View<'a>,
    index: usize,
    lane: usize,
    k: usize,
) -> (Submitted<'a>, u64) {
    let mut packet = view.claim(index).expect("a free packet");
    assert_eq!(packet.index(), index);
    let seq = packet.seq();
    for l in 0..LANES {
        packet.write_lane(l, &request(u64::from(seq), l));
    }
    let submitted = packet.submit(9, u64::MAX);
    let word = &view.request(index).lanes[lane][k];
    let stored = word.load(Ordering::Relaxed);
    word.store(super::word(stored, seq - 1), Ordering::Relaxed);
    (submitted, stored)
}

fn stalled(index: u32, seq: u32) -> DrainError {
    DrainError::Stalled { index, seq, looks: u32::from(STALL_LOOKS) }
}

#[test]
fn a_stale_request_is_reported_stalled_once_and_served_when_its_word_lands() {
    super::in_both_scans(|| {
        let b = Buffer::new(3);
        let view = b.view();
        let mut host = Kept::new(view, DrainScope::Window(view.scan_window()), 3);
        let (submitted, stored) = submit_with_a_stale_word(&view, 2, 63, 8);
        let early = host.drain(u32::from(STALL_LOOKS) - 1);
        assert!(early.served.is_empty() && early.errors.is_empty(), "not yet stalled");
        // Remembered at its last word (position 1 + 63 * 9 + 8): a look loads that word alone.
        assert!(
            std::format!("{:?}", host.incomplete[2]).contains("position: 576"),
            "{:?}",
            host.incomplete[2]
        );
        let report = host.drain(1);
        assert_eq!(report.errors, [stalled(2, 1)]);
        assert!(report.served.is_empty());
        let later = host.drain(2 * u32::from(STALL_LOOKS));
        assert!(later.served.is_empty() && later.errors.is_empty(), "reported once per sequence");
        // Between looks a stalled packet is passed by: a scan loads nothing of it (a stale head
        // written over it now is not even seen until the next look).
        let looks = std::format!("looks: {STALL_LOOKS}");
        assert!(std::format!("{:?}", host.incomplete[2]).contains(&looks), "{:?}", host.incomplete[2]);
        // The word lands late, after the report: served, with the request the wave wrote.
        view.request(2).lanes[63][8].store(stored, Ordering::Relaxed);
        assert_eq!(host.drain(u32::from(STALLED_LOOK_PERIOD)).served, [2], "within a look period");
        let done = submitted.wait(|| panic!("served"));
        assert_eq!(done.reply(63), [request(1, 63)[0] + 1, 9]);
        assert_eq!(host.incomplete[2], Incomplete::default(), "forgotten once served");
    });
}

#[test]
fn the_memory_never_lets_an_incomplete_request_through() {
    super::in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        let mut host = Kept::new(view, DrainScope::Whole, 2);
        let (submitted, stored) = submit_with_a_stale_word(&view, 0, 40, 3);
        assert!(host.drain(3).served.is_empty());
        // A word before the remembered one goes stale (a hostile device): looks do not see it...
        let early = &view.request(0).lanes[0][0];
        let early_value = early.load(Ordering::Relaxed);
        early.store(word(early_value, 7), Ordering::Relaxed);
        assert!(host.drain(3).served.is_empty());
        // ...and once the remembered word lands, the full take refuses the request for it.
        view.request(0).lanes[40][3].store(stored, Ordering::Relaxed);
        assert!(host.drain(3).served.is_empty());
        assert!(
            std::format!("{:?}", host.incomplete[0]).contains("position: 1,"),
            "{:?}",
            host.incomplete[0]
        );
        early.store(early_value, Ordering::Relaxed);
        // Within a look period (where STALL_LOOKS is small, as under Miri, the packet is stalled by now).
        assert_eq!(host.drain(u32::from(STALLED_LOOK_PERIOD)).served, [0]);
        assert_eq!(submitted.wait(|| {}).reply(0), [request(1, 0)[0] + 1, 9]);
    });
}

#[test]
fn a_new_head_starts_over() {
    super::in_both_scans(|| {
        let b = Buffer::new(2);
        let view = b.view();
        let mut host = Kept::new(view, DrainScope::Whole, 2);
        let (submitted, _) = submit_with_a_stale_word(&view, 1, 0, 0);
        assert_eq!(host.drain(u32::from(STALL_LOOKS)).errors, [stalled(1, 1)]);
        // The device writes the header again for its next sequence (the abandoned call's words
        // stay as they were: every one now stale): the count starts over, and it is reported again.
        drop(submitted);
        let request = view.request(1);
        let head = request.head.load(Ordering::Relaxed);
        request.head.store(word(head, 2), Ordering::Relaxed);
        // Seen at the stalled packet's next look (every STALLED_LOOK_PERIOD scans), counted from there.
        let first_look = host.drain(u32::from(STALLED_LOOK_PERIOD));
        assert!(first_look.errors.is_empty() && first_look.served.is_empty());
        assert!(host.drain(u32::from(STALL_LOOKS) - 2).errors.is_empty(), "looks counted from the new head");
        assert_eq!(host.drain(1).errors, [stalled(1, 2)]);
        // A complete request of a newer head is served at the packet's next look.
        request.mask.store(encode_mask(1, 3), Ordering::Relaxed);
        for line_word in request.lanes.iter().flatten() {
            line_word.store(word(line_word.load(Ordering::Relaxed), 3), Ordering::Relaxed);
        }
        request.head.store(encode_head(decode_service(head), 1, 3), Ordering::Relaxed);
        assert_eq!(host.drain(u32::from(STALLED_LOOK_PERIOD)).served, [1]);
    });
}

#[test]
fn a_range_has_entries_from_its_start_and_a_drain_without_memory_reports_nothing() {
    super::in_both_scans(|| {
        let b = Buffer::new(4);
        let view = b.view();
        let mut host = Kept::new(view, DrainScope::range(2..4), 2);
        let (_submitted, _) = submit_with_a_stale_word(&view, 3, 5, 7);
        assert_eq!(host.drain(u32::from(STALL_LOOKS)).errors, [stalled(3, 1)]);
        assert_ne!(host.incomplete[1], Incomplete::default());
        let mut without = Kept::new(view, DrainScope::Whole, 0);
        let report = without.drain(u32::from(STALL_LOOKS) + 1);
        assert!(report.errors.is_empty() && report.served.is_empty(), "the old behaviour, documented");
    });
}
