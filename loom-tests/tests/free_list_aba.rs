//! The free-list alone, under concurrent claim/release cycles with no host: the ABA problem stays
//! solved, and more waves than packets just wait.
//!
//! - `claim_release_cycles_never_double_hold`: two waves share two packets. Wave A claims and
//!   releases one packet twice; wave B claims both packets, then releases both: the pattern of
//!   the ABA table in the core's `tagged` module (A reads top = P and P.next = Q; B pops P, pops Q,
//!   pushes P back; A's stale CAS must then fail).
//! - `three_waves_two_packets_claim_waits`: three waves claim and release one packet each over two
//!   packets, so a claim finds the free-list empty (`Ok(None)`) and retries.
//!
//! Over every interleaving loom explores, the models prove that no packet is ever held by two
//! waves at once (a "held" flag per packet, set on claim and cleared before release; and each
//! holder's mark in the packet's payload is still its own when it lets go, loom checking that
//! the previous holder's accesses are ordered before the next holder's through the free-list's
//! Release push / Acquire pop), and that the free-list ends with every packet once, its tag
//! advanced once per claim.
//!
//! `untagged_release_is_caught` is the deliberately broken twin: it returns packets through the
//! core's `TaggedStack::push` (reached through the loom-only `__internal` path) without advancing
//! the tag, and loom finds the corruption
//! (B pops P and Q, pushes P back; A's stale CAS of P -> Q succeeds, putting Q, which B holds,
//! on top; B's push of Q then links Q to itself).
#![cfg(loom)]
// The model's payload words are loom cells (`loom::cell::UnsafeCell`), which are not `Sync`:
// loom runs the model's threads itself and checks every access to them.
#![allow(clippy::arc_with_non_send_sync)]

use hostcall_core::__internal::free_list;
use hostcall_core::stack::{Claimed, TaggedPtr, View};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{check, check_bounded, initial_ptr, Shared};
use std::sync::Arc;

/// How a wave takes and returns packets: the real producer path, or the broken one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `stack::View::claim`, and dropping the `Claimed` handle (release with the tag advanced).
    Core,
    /// `free_list(..).pop()` and `free_list(..).push(ptr)` of the same pointer: no tag advance.
    Untagged,
}

/// A packet held by one wave.
enum Hold<'a> {
    Core(Claimed<'a>),
    Untagged(TaggedPtr),
}

impl Hold<'_> {
    fn index(&self) -> usize {
        match self {
            Hold::Core(c) => c.index(),
            Hold::Untagged(p) => p.index(),
        }
    }
}

struct Model {
    shared: Shared,
    /// `held[i]`: some wave holds packet `i`. Relaxed: the swap's read of the latest value is
    /// the whole check, and Relaxed adds no happens-before edge that could hide a bug.
    held: Vec<AtomicBool>,
    path: Path,
}

impl Model {
    fn take<'a>(&self, buffer: &View<'a>, wave: u64) -> Hold<'a> {
        let hold = loop {
            let got = match self.path {
                Path::Core => buffer.claim().unwrap().map(Hold::Core),
                Path::Untagged => free_list(buffer).pop().unwrap().map(Hold::Untagged),
            };
            match got {
                Some(hold) => break hold,
                None => thread::yield_now(), // every packet is held: wait for a release
            }
        };
        let index = hold.index();
        let taken = self.held[index].swap(true, Ordering::Relaxed);
        assert!(!taken, "free-list corrupted: packet {index} held by two waves");
        buffer.payload(index).slots[0][0].write(wave);
        hold
    }

    fn give_back(&self, buffer: &View<'_>, hold: Hold<'_>, wave: u64) {
        let index = hold.index();
        let mark = buffer.payload(index).slots[0][0].read();
        assert_eq!(mark, wave, "free-list corrupted: packet {index} held by two waves");
        self.held[index].store(false, Ordering::Relaxed);
        match hold {
            Hold::Core(claimed) => drop(claimed),
            Hold::Untagged(ptr) => free_list(buffer).push(ptr),
        }
    }
}

/// One wave per entry of `waves`; wave `w` runs the cycles `waves[w]`, a cycle of `k` claiming
/// `k` packets, then releasing them in the order claimed.
fn claim_release_cycles(path: Path, packets: usize, waves: &'static [&'static [usize]]) {
    let model = Arc::new(Model {
        shared: Shared::new(packets),
        held: (0..packets).map(|_| AtomicBool::new(false)).collect(),
        path,
    });
    let handles: Vec<_> = waves
        .iter()
        .enumerate()
        .map(|(w, &cycles)| {
            let model = model.clone();
            thread::spawn(move || {
                let buffer = model.shared.view();
                let mark = w as u64 + 1;
                for &k in cycles {
                    let held: Vec<_> = (0..k).map(|_| model.take(&buffer, mark)).collect();
                    for hold in held {
                        model.give_back(&buffer, hold, mark);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }

    // Every packet is back once, and (on the core's path) each claim advanced one tag one step.
    let buffer = model.shared.view();
    let g = buffer.geometry();
    let mut steps = 0;
    let mut seen = vec![false; packets];
    for link in free_list(&buffer).take_all() {
        let ptr = link.unwrap_or_else(|e| panic!("free-list corrupted: {e}"));
        let index = ptr.index();
        assert!(!std::mem::replace(&mut seen[index], true), "free-list corrupted: packet {index} twice");
        steps += g.tag(ptr) - g.tag(initial_ptr(&buffer, index));
    }
    assert!(seen.iter().all(|&s| s), "free-list corrupted: a packet was lost");
    if path == Path::Core {
        let claims: usize = waves.iter().flat_map(|cycles| cycles.iter()).sum();
        assert_eq!(steps, claims as u64, "each release advances its packet's tag one step");
    }
}

#[test]
fn claim_release_cycles_never_double_hold() {
    check("claim_release_cycles_never_double_hold", || claim_release_cycles(Path::Core, 2, &[&[1, 1], &[2]]));
}

#[test]
fn three_waves_two_packets_claim_waits() {
    check_bounded("three_waves_two_packets_claim_waits", usize::MAX, || {
        claim_release_cycles(Path::Core, 2, &[&[1], &[1], &[1]])
    });
}

#[test]
#[should_panic(expected = "free-list corrupted")]
fn untagged_release_is_caught() {
    check("untagged_release_is_caught", || claim_release_cycles(Path::Untagged, 2, &[&[1, 1], &[2]]));
}
