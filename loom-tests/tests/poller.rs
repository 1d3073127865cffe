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
//! The same model with the host's two polls in one poll session (`Poller::session`, whose pins
//! stay set between its polls, so a poll in steady state takes no lock): `remove` then waits for
//! the session's next poll or its end. Its broken twin lets go of the pins after the first poll
//! but keeps the copy as pinned (`__internal::poll_then_unpin`), and must fail the same way.
//!
//! The re-pin model: a new session's first poll, its copy kept from an earlier session (unpinned,
//! as the std listener leaves it before each nap) and the table unchanged, re-pins the copy
//! without the table lock (pins, a SeqCst fence, the version read again) while the main thread
//! removes the buffer (`remove`: publish, a SeqCst fence, the read of the pin) and frees it; no
//! poll touches the buffer after `remove` returns, and some executions serve the packet through
//! the re-pin. Its two broken twins drop one fence each: the remover's
//! (`__internal::remove_without_fence`) or the re-pin's (`__internal::repin_without_fence`); each
//! must fail with loom's report of the poll's access racing the free (store buffering: each side
//! reads the other's old value). The first model's second `poll_once` takes the same re-pin.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release --test poller`
#![cfg(loom)]

use hostcall_core::__internal::{
    poll_then_unpin, remove_without_fence, remove_without_waiting, repin_without_fence,
};
use hostcall_core::phase::View;
use hostcall_core::{AnyView, ErrorCode, Poller, PollerError, Registration, ServiceTable, SLOT_WORDS};
use loom::sync::Arc;
use loom::thread;
use loom_tests::{check, PhaseBuffer};
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};

/// Executions (across the whole exploration of one model) in which a poll served the packet, and
/// in which the wave saw its answer: the model must reach both, or it proves nothing about a poll
/// in progress.
struct Reached {
    served: AtomicUsize,
    answered: AtomicUsize,
}

impl Reached {
    const fn new() -> Self {
        Self { served: AtomicUsize::new(0), answered: AtomicUsize::new(0) }
    }

    /// Asserts that some execution served the packet and some saw the answer.
    fn assert_both(&self, model: &str) {
        let (served, answered) =
            (self.served.load(StdOrdering::Relaxed), self.answered.load(StdOrdering::Relaxed));
        println!("{model}: served in {served} executions, answered in {answered}");
        assert!(served > 0 && answered > 0, "some execution serves the packet and the wave sees it");
    }
}

/// What the model with two `poll_once` reached, and the model with one session.
static ALONE: Reached = Reached::new();
static IN_SESSION: Reached = Reached::new();

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

/// How the host thread polls twice.
#[derive(Clone, Copy)]
enum Polls {
    /// Two `Poller::poll_once`, each a session of its own.
    Alone,
    /// Two polls of one session.
    InSession,
    /// Two polls of one session that lets go of its pins after the first (the broken twin).
    InSessionUnpinned,
}

/// The host thread: two polls; returns the packets they served.
fn host(model: &Model, polls: Polls) -> u32 {
    let serve = |r: &[u64; SLOT_WORDS]| {
        assert_eq!(*r, REQUEST, "the service reads the wave's request");
        Ok::<_, ErrorCode>([r[0] + 1, 0])
    };
    let mut services = ServiceTable::<1>::new();
    services.register(SERVICE, &serve).expect("room for one service");
    match polls {
        Polls::Alone => (0..2).map(|_| model.poller.poll_once(&services).packets).sum(),
        Polls::InSession | Polls::InSessionUnpinned => {
            let mut session = model.poller.session().expect("the only poller");
            let first = match polls {
                Polls::InSessionUnpinned => poll_then_unpin(&mut session, &services),
                _ => session.poll_once(&services),
            };
            first.packets + session.poll_once(&services).packets
        }
    }
}

/// The model: add, poll (another thread), a wave's call, remove, free. `remove` is the poller's
/// own or its broken twin; what the execution reached goes to `reached` (none for the broken
/// twins).
fn add_poll_remove_free(
    remove: fn(&Poller<1>, *mut u8) -> Result<(), PollerError>,
    polls: Polls,
    reached: Option<&'static Reached>,
) {
    let model = Model::new();
    let poll = {
        let model = model.clone();
        thread::spawn(move || host(&model, polls))
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
    if let Some(reached) = reached {
        reached.served.fetch_add(served as usize, StdOrdering::Relaxed);
        reached.answered.fetch_add(usize::from(answered), StdOrdering::Relaxed);
    }
}

#[test]
fn a_removed_buffer_is_not_touched_by_a_poll() {
    check("poller: add, poll, a wave, remove, free", || {
        add_poll_remove_free(Poller::remove, Polls::Alone, Some(&ALONE))
    });
    ALONE.assert_both("poller model");
}

/// The models can fail: a `remove` that does not wait for the poll's pin returns while the poll
/// may still read the request or write the reply, and loom reports that access racing the free.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_remove_that_does_not_wait_for_the_poll_is_caught() {
    check("poller: remove without waiting (must fail)", || {
        add_poll_remove_free(remove_without_waiting, Polls::Alone, None)
    });
}

/// The host's two polls in one session: `remove` waits for the session's pins, which stay set
/// between its polls, and no poll touches the buffer after `remove` returns.
#[test]
fn a_removed_buffer_is_not_touched_by_a_poll_session() {
    check("poller: add, a poll session, a wave, remove, free", || {
        add_poll_remove_free(Poller::remove, Polls::InSession, Some(&IN_SESSION))
    });
    IN_SESSION.assert_both("poller session model");
}

/// The session models can fail: a session that lets go of its pins between polls but drains its
/// copy again without re-pinning lets a remover return while that poll reads the buffer.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_session_that_lets_go_of_its_pins_between_polls_is_caught() {
    check("poller: session unpinned between polls (must fail)", || {
        add_poll_remove_free(Poller::remove, Polls::InSessionUnpinned, None)
    });
}

/// What the re-pin model reached, over its whole exploration: executions in which the new
/// session's poll served the packet (its lock-free re-pin read the old version, so `remove` waited
/// for it), and in which it did not (the re-pin, or the poll's first read, saw the remover's
/// version).
struct Repinned {
    served: AtomicUsize,
    not_served: AtomicUsize,
}

static REPINNED: Repinned = Repinned { served: AtomicUsize::new(0), not_served: AtomicUsize::new(0) };

/// The re-pin model: the main thread adds the buffer and polls it once (a session of its own,
/// dropped at once: the copy stays, its slot unpinned, as the std listener leaves it before a
/// nap), then submits the wave's call itself and starts the host thread, whose poll is a new
/// session's first: the version unchanged, it re-pins the copy without the table lock (`repin`:
/// pin, SeqCst fence, read the version again). Meanwhile the main thread removes the buffer, reads
/// the answer if there is one, and frees the buffer. Two threads and no park, so loom explores
/// every interleaving of the re-pin against the remover's publish, fence and read of the pin, and
/// every value their Relaxed loads may read.
fn repin_against_remove(
    remove: fn(&Poller<1>, *mut u8) -> Result<(), PollerError>,
    fenced: bool,
    reached: Option<&Repinned>,
) {
    let serve = |r: &[u64; SLOT_WORDS]| {
        assert_eq!(*r, REQUEST, "the service reads the wave's request");
        Ok::<_, ErrorCode>([r[0] + 1, 0])
    };
    let model = Model::new();
    // SAFETY: the model's buffer outlives the registration: `remove` returns before the model
    // is dropped (the host thread holds it until it is joined).
    let registration = unsafe { Registration::of_view(model.base(), AnyView::Phase(model.view())) };
    model.poller.add(registration).expect("registered");
    let mut services = ServiceTable::<1>::new();
    services.register(SERVICE, &serve).expect("room for one service");
    assert_eq!(model.poller.poll_once(&services).packets, 0, "nothing submitted yet");
    let view = model.view();
    let mut packet = view.claim(0).expect("2 packets, 1 wave");
    packet.write_lane(0, &REQUEST);
    let submitted = packet.submit(SERVICE, 1);
    let poll = {
        let model = model.clone();
        thread::spawn(move || {
            let serve = |r: &[u64; SLOT_WORDS]| {
                assert_eq!(*r, REQUEST, "the service reads the wave's request");
                Ok::<_, ErrorCode>([r[0] + 1, 0])
            };
            let mut services = ServiceTable::<1>::new();
            services.register(SERVICE, &serve).expect("room for one service");
            let mut session = model.poller.session().expect("the only poll");
            match fenced {
                true => session.poll_once(&services).packets,
                false => repin_without_fence(&mut session, &services).packets,
            }
        })
    };
    remove(&model.poller, model.base()).expect("registered");
    // Every access of the poll to the buffer happened before `remove` returned: the answer, if
    // any, is whole.
    let answered = match submitted.wait_until(|polls| polls < 1) {
        Ok(done) => {
            assert_eq!(done.reply(0), [REQUEST[0] + 1, 0], "the service's reply");
            true
        }
        Err(_abandoned) => false,
    };
    // The buffer is the runtime's again: a poll still reading the request or writing the reply
    // races with these writes.
    for slot in &model.buffer.payload(0).slots[0] {
        slot.write(0);
    }
    let served = poll.join().unwrap();
    assert_eq!(served == 1, answered, "the packet answered before `remove` returned, or not served");
    if let Some(reached) = reached {
        // Relaxed: counts read after the whole exploration, on this thread.
        let outcome = if answered { &reached.served } else { &reached.not_served };
        outcome.fetch_add(1, StdOrdering::Relaxed);
    }
}

/// A new session's lock-free re-pin against a remover: either the re-pin reads the remover's
/// version and drains nothing, or `remove` sees the pin and waits for the poll; no poll touches
/// the buffer after `remove` returns. Some executions serve the packet (through the re-pin: a
/// refresh under the lock would find the slot retired) and some do not.
#[test]
fn a_poller_session_repinned_without_the_lock_is_waited_for() {
    check("poller: a session's lock-free re-pin against remove", || {
        repin_against_remove(Poller::remove, true, Some(&REPINNED))
    });
    let (served, not_served) =
        (REPINNED.served.load(StdOrdering::Relaxed), REPINNED.not_served.load(StdOrdering::Relaxed));
    println!("poller re-pin model: served in {served} executions, not served in {not_served}");
    assert!(served > 0 && not_served > 0, "some execution serves through the re-pin, some does not");
}

/// The re-pin model can fail: without the fence between `remove`'s publish and its read of the
/// pin, the re-pin may read the old version while the remover reads the slot unpinned (store
/// buffering), and `remove` returns while the poll reads the request or writes the reply.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_poller_remove_without_its_fence_is_caught_by_the_repin_model() {
    check("poller: remove without its fence against a re-pin (must fail)", || {
        repin_against_remove(remove_without_fence, true, None)
    });
}

/// The re-pin model can fail on the session's side too: a re-pin without the fence between its
/// pins and its second read of the version (`__internal::repin_without_fence`) may read the old
/// version while `remove`, fenced, reads the slot unpinned.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_poller_repin_without_its_fence_is_caught() {
    check("poller: a re-pin without its fence against remove (must fail)", || {
        repin_against_remove(Poller::remove, false, None)
    });
}
