//! loom models of the [`Poller`] itself (the listener without a thread, `core/src/poller/`): its
//! registration table, its pins and the removal protocol that lets a caller free a buffer once
//! `remove` returns (the table in `poller/table.rs`).
//!
//! Three threads: a wave calls on a phase buffer (claim, write, submit, one bounded wait), a host
//! thread polls twice, and the main thread adds the buffer, removes it and then frees it (writes
//! its payload words, as a runtime reusing the memory would). Over every interleaving loom
//! explores the model proves:
//!
//! - the packet is served at most once, its service reads the wave's request, and a wave that
//!   sees its answer reads the service's reply;
//! - no poll touches the buffer after `remove` returns: payload words are loom cells, so a read or
//!   write of the poll not ordered before the main thread's "free" fails the model.
//!
//! Its broken twin removes without waiting for the poll's pin (`__internal::remove_without_waiting`)
//! and must fail, with loom's report of the poll's payload access racing the free.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release --test poller`
#![cfg(loom)]

use hostcall_core::__internal::remove_without_waiting;
use hostcall_core::phase::View;
use hostcall_core::{AnyView, ErrorCode, Poller, PollerError, Registration, ServiceTable, SLOT_WORDS};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{check, PhaseBuffer};
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

/// Executions (across the whole exploration) in which a poll served the packet, and in which the
/// wave saw its answer: the model must reach both, or it proves nothing about a poll in progress.
static SERVED: AtomicUsize = AtomicUsize::new(0);
static ANSWERED: AtomicUsize = AtomicUsize::new(0);

const SERVICE: u32 = 7;
/// The request the wave sends in lane 0; the service answers `[REQUEST[0] + 1, 0]`.
const REQUEST: [u64; SLOT_WORDS] = [41, 1, 2, 3, 4, 5, 6, 7];

/// A phase buffer of 2 packets, and the poller that serves it.
struct Model {
    buffer: PhaseBuffer,
    poller: Poller<1>,
}

impl Model {
    fn new() -> Arc<Self> {
        Arc::new(Self { buffer: PhaseBuffer::new(2), poller: Poller::new() })
    }

    fn view(&self) -> View<'_> {
        self.buffer.view()
    }

    fn base(&self) -> *mut u8 {
        self.buffer.base()
    }
}

/// The wave: one call on lane 0, waiting for the answer one poll at most (the buffer may be
/// removed before any poll serves it). Returns whether it saw the answer.
fn wave(model: &Model) -> bool {
    let view = model.view();
    let mut packet = view.claim(0).expect("2 packets, 1 wave");
    packet.write_lane(0, &REQUEST);
    match packet.submit(SERVICE, 1).wait_until(|polls| polls < 1) {
        Ok(done) => {
            assert_eq!(done.reply(0), [REQUEST[0] + 1, 0], "the service's reply");
            true
        }
        Err(_abandoned) => false, // dropped: the bit is cleared, the packet still pending
    }
}

/// The host thread: two polls; returns the packets they served.
fn host(model: &Model) -> u32 {
    let serve = |r: &[u64; SLOT_WORDS]| {
        assert_eq!(*r, REQUEST, "the service reads the wave's request");
        Ok::<_, ErrorCode>([r[0] + 1, 0])
    };
    let mut services = ServiceTable::<1>::new();
    services.register(SERVICE, &serve).expect("room for one service");
    (0..2).map(|_| model.poller.poll_once(&services).packets).sum()
}

/// The model: add, poll (another thread), a wave's call, remove, free. `remove` is the poller's
/// own (counted in [`SERVED`] and [`ANSWERED`]) or its broken twin (not counted: the two tests run
/// at once).
fn add_poll_remove_free(remove: fn(&Poller<1>, *mut u8) -> Result<(), PollerError>, counted: bool) {
    let model = Model::new();
    let poll = {
        let model = model.clone();
        thread::spawn(move || host(&model))
    };
    let wave = {
        let model = model.clone();
        thread::spawn(move || wave(&model))
    };
    // SAFETY: the model's buffer outlives the registration: `remove` returns before the model
    // is dropped (the threads hold it until they are joined).
    let registration = unsafe { Registration::of_view(model.base(), AnyView::Phase(model.view())) };
    model.poller.add(registration).expect("registered");
    remove(&model.poller, model.base()).expect("registered");
    let answered = wave.join().unwrap();
    // The buffer is the runtime's again: reuse its words. A poll still reading or writing them
    // races with these writes.
    for slot in &model.buffer.payload(0).slots[0] {
        slot.write(0);
    }
    let served = poll.join().unwrap();
    assert!(served <= 1, "a packet served at most once");
    assert!(!answered || served == 1, "an answer the wave saw came from a poll");
    if counted {
        SERVED.fetch_add(served as usize, StdOrdering::Relaxed);
        ANSWERED.fetch_add(usize::from(answered), StdOrdering::Relaxed);
    }
}

#[test]
fn a_removed_buffer_is_not_touched_by_a_poll() {
    check("poller: add, poll, a wave, remove, free", || add_poll_remove_free(Poller::remove, true));
    let (served, answered) = (SERVED.load(StdOrdering::Relaxed), ANSWERED.load(StdOrdering::Relaxed));
    println!("poller model: served in {served} executions, answered in {answered}");
    assert!(served > 0 && answered > 0, "some execution serves the packet and the wave sees it");
}

/// The models can fail: a `remove` that does not wait for the poll's pin returns while the poll
/// may still read the request or write the reply, and loom reports that access racing the free.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_remove_that_does_not_wait_for_the_poll_is_caught() {
    check("poller: remove without waiting (must fail)", || {
        add_poll_remove_free(remove_without_waiting, false)
    });
}
