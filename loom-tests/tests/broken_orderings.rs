//! Deliberately broken variants: proof that the models can fail.
//!
//! A model that never fails proves nothing about its power. Each broken variant here takes one
//! ordering or rule the core relies on, breaks it in test-only code written over the core's
//! public atomics (production code is untouched), and shows that loom reports it. Each has a
//! twin with the correct ordering that passes, so the failure is the broken ordering's alone.
//!
//! - `relaxed_ready_push_*`: a producer pushes its packet on the ready-stack with a Relaxed CAS
//!   instead of the Release of `TaggedStack::push`. Nothing then orders the producer's payload
//!   writes before the host's reads in `drain`, and loom reports the race on the payload cell.
//!
//! The free-list's tag rule has its broken twin in `free_list_aba.rs`.
#![cfg(loom)]
// The model's payload words are loom cells (`loom::cell::UnsafeCell`), which are not `Sync`:
// loom runs the model's threads itself and checks every access to them.
#![allow(clippy::arc_with_non_send_sync)]

use hostcall_core::__internal::free_list;
use hostcall_core::stack::{TaggedPtr, View, CONTROL_READY};
use hostcall_core::sync::Ordering;
use hostcall_core::{Host as _, PacketRequest, LANES, SLOT_WORDS};
use loom::thread;
use loom_tests::{check, Shared};
use std::sync::Arc;

/// A test-only copy of `TaggedStack::push` onto the ready-stack whose successful CAS uses
/// `success` (the core uses Release).
fn push_ready_with(buffer: &View<'_>, ptr: TaggedPtr, success: Ordering) {
    let top = &buffer.prefix().ready_stack;
    let header = buffer.header(ptr.index());
    let mut current = top.load(Ordering::Relaxed);
    loop {
        header.next.store(current, Ordering::Relaxed);
        match top.compare_exchange(current, ptr.raw(), success, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

/// One producer (the real `pop`, payload writes, header stores, then `push_ready_with`) and the
/// host (the real `drain`) reading every request word.
fn producer_and_host(success: Ordering) {
    let shared = Arc::new(Shared::new(2));
    let producer = {
        let shared = shared.clone();
        thread::spawn(move || {
            let buffer = shared.view();
            let ptr = free_list(&buffer).pop().unwrap().expect("a free packet");
            for (lane, slot) in buffer.payload(ptr.index()).slots.iter().enumerate() {
                for (word, cell) in slot.iter().enumerate() {
                    cell.write((lane * SLOT_WORDS + word) as u64);
                }
            }
            let header = buffer.header(ptr.index());
            header.activemask.store((1 << LANES) - 1, Ordering::Relaxed);
            header.service.store(0, Ordering::Relaxed);
            header.control.store(CONTROL_READY, Ordering::Relaxed);
            push_ready_with(&buffer, ptr, success);
        })
    };
    let buffer = shared.view();
    let mut served = 0;
    while served == 0 {
        served = buffer
            .host()
            .drain(&mut |p: &mut PacketRequest<'_>| {
                for lane in 0..LANES {
                    let words = p.request(lane);
                    assert_eq!(words[1], (lane * SLOT_WORDS + 1) as u64);
                }
            })
            .packets;
        if served == 0 {
            thread::yield_now();
        }
    }
    producer.join().unwrap();
}

#[test]
fn relaxed_ready_push_release_twin_passes() {
    check("relaxed_ready_push_release_twin_passes", || producer_and_host(Ordering::Release));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn relaxed_ready_push_is_caught() {
    check("relaxed_ready_push_is_caught", || producer_and_host(Ordering::Relaxed));
}
