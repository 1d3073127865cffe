//! The stack protocol end to end: producer waves and one host thread over a small buffer.
//!
//! Each wave runs the core's real producer path (`claim`, `write_lane`, `submit`, `wait_until`,
//! `reply`, `release`); the host (the model's main thread) loops the real `drain` until it has
//! served every request. Over every interleaving loom explores (preemptions bounded by
//! `LOOM_MAX_PREEMPTIONS`, default 3, capped lower for the larger models) the models prove:
//!
//! - every request is answered exactly once, and no `DrainError` is ever reported;
//! - each wave reads back its own reply (replies are derived from ids unique per wave, call and
//!   lane), so a packet is never answered to the wrong wave;
//! - payload accesses never race: payload words are loom cells, so a request write not ordered
//!   before the host's read (Release push / Acquire `take_all`), a reply not ordered before the
//!   wave's read (Release clear of READY / Acquire wait), or a previous owner's read not ordered
//!   before the next owner's write (Release push / Acquire pop on the free-list) fails the model;
//! - tags advance on every return: each reuse of a packet is claimed with the next tag, and the
//!   final free-list holds every packet once, its tag advanced once per claim.
//!
//! Where the threads park instead of spinning, and why that hides no ordering: see the crate docs.
//! The bounds: 2 waves x 1 call explores the CI bound (3); 2 waves x (2, 1) calls is capped at 2
//! preemptions, 2 waves x 2 calls at 1 and 3 waves x 1 call at 0 (at one preemption more each
//! takes well over a million executions). The free-list with more waves than packets is also
//! explored at the full bound, without a host, in `free_list_aba.rs`.
#![cfg(loom)]
// The model's payload words are loom cells (`loom::cell::UnsafeCell`), which are not `Sync`:
// loom runs the model's threads itself and checks every access to them.
#![allow(clippy::arc_with_non_send_sync)]

use loom::thread;
use loom_tests::{assert_free_list_advanced, check_bounded, wave, Host, Shared, LANES};
use std::sync::Arc;

/// One producer wave per entry of `calls`, wave `w` doing `calls[w]` hostcalls, over `packets`
/// packets, served by the model's main thread.
fn producers_and_host(calls: &'static [usize], packets: usize) {
    let shared = Arc::new(Shared::new(packets));
    let calls_max = calls.iter().copied().max().unwrap_or(0);
    let handles: Vec<_> = (0..calls.len())
        .map(|w| {
            let shared = shared.clone();
            thread::spawn(move || wave(&shared, w, calls[w], calls_max))
        })
        .collect();
    let ids = calls.len() * calls_max * LANES;
    let mut host = Host::new(ids, handles.iter().map(|h| h.thread().clone()).collect());
    host.serve(&shared, calls.iter().sum());
    let claims: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    host.assert_each_served_once(calls);
    assert_free_list_advanced(&shared.view(), &claims);
}

#[test]
fn two_waves_one_call_two_packets() {
    check_bounded("two_waves_one_call_two_packets", usize::MAX, || producers_and_host(&[1, 1], 2));
}

#[test]
fn two_waves_two_and_one_calls_two_packets() {
    check_bounded("two_waves_two_and_one_calls_two_packets", 2, || producers_and_host(&[2, 1], 2));
}

#[test]
fn two_waves_two_calls_two_packets() {
    check_bounded("two_waves_two_calls_two_packets", 1, || producers_and_host(&[2, 2], 2));
}

#[test]
fn three_waves_one_call_two_packets() {
    check_bounded("three_waves_one_call_two_packets", 0, || producers_and_host(&[1, 1, 1], 2));
}

/// Any shape, for measuring: `LOOM_SHAPE=packets,calls0,calls1,...` with `--ignored`.
#[test]
#[ignore = "a measuring aid: set LOOM_SHAPE=packets,calls0,calls1,... and run with --ignored"]
fn shape_from_env() {
    let spec = std::env::var("LOOM_SHAPE").expect("LOOM_SHAPE=packets,calls0,calls1,... (see the docs)");
    let numbers: Vec<usize> =
        spec.split(',').map(|n| n.trim().parse().expect("LOOM_SHAPE: numbers")).collect();
    let (&packets, calls) = numbers.split_first().expect("LOOM_SHAPE: packets first");
    let calls: &'static [usize] = calls.to_vec().leak();
    check_bounded("shape_from_env", usize::MAX, move || producers_and_host(calls, packets));
}
