use super::*;
use crate::dispatch::{Dispatch, ServiceTable};
use crate::host::{DrainReport, PacketRequest};
use crate::host::{ErrorCode, ERROR_REPLY};
use crate::lane::SLOT_WORDS;
use crate::view::LayoutError;
use crate::{phase, stack, Registration};

extern crate std;
use std::vec::Vec;

mod repin;

/// Raw, line-aligned memory for `bytes` bytes.
#[repr(C, align(64))]
struct Line([u64; 8]);
fn raw(bytes: usize) -> Vec<Line> {
    (0..bytes.div_ceil(64)).map(|_| Line([0; 8])).collect()
}

fn add_one(request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    Ok([request[0] + 1, 0])
}

/// A stack buffer of `n_stack` packets and a phase buffer of `n_phase`, initialised, in raw
/// memory: (memory, base, length) of each, and their views. The views' lifetime is the caller's
/// to keep: the memory must outlive them and every registration of it.
struct TwoBuffers {
    _memory: (Vec<Line>, Vec<Line>),
    stack: (*mut u8, usize, stack::View<'static>),
    phase: (*mut u8, usize, phase::View<'static>),
}

fn two_buffers(n_stack: usize, n_phase: usize) -> TwoBuffers {
    let stack_len = stack::buffer_size(n_stack as u32).unwrap();
    let phase_len = phase::buffer_size(n_phase as u32).unwrap();
    let (mut stack_mem, mut phase_mem) = (raw(stack_len), raw(phase_len));
    let (stack_base, phase_base) = (stack_mem.as_mut_ptr() as *mut u8, phase_mem.as_mut_ptr() as *mut u8);
    // SAFETY: both allocations live in the returned struct, whose users keep it beyond the views
    // (see above); they are only accessed through atomics.
    let (stack, phase) = unsafe {
        (
            stack::View::from_raw(stack_base, stack_len, n_stack as u32).unwrap(),
            phase::View::from_raw(phase_base, phase_len, n_phase as u32).unwrap(),
        )
    };
    stack.init(stack_base as u64, 0);
    phase.init(phase_base as u64, 0);
    TwoBuffers {
        _memory: (stack_mem, phase_mem),
        stack: (stack_base, stack_len, stack),
        phase: (phase_base, phase_len, phase),
    }
}

#[test]
fn one_poll_serves_both_protocols_side_by_side() {
    let (n_stack, n_phase) = (3usize, 5usize);
    let buffers = two_buffers(n_stack, n_phase);
    let ((stack_base, stack_len, stack), (phase_base, phase_len, phase)) = (buffers.stack, buffers.phase);

    let poller = Poller::<4>::new();
    let mut services = ServiceTable::<2>::new();
    services.register(1, &add_one).unwrap();
    // SAFETY: as above.
    unsafe {
        poller
            .add(Registration::new(Protocol::Stack, stack_base, stack_len, n_stack as u32).unwrap())
            .unwrap();
        poller
            .add(Registration::new(Protocol::Phase, phase_base, phase_len, n_phase as u32).unwrap())
            .unwrap();
        assert_eq!(
            poller.add(Registration::new(Protocol::Phase, phase_base, phase_len, n_phase as u32).unwrap()),
            Err(PollerError::AlreadyRegistered { base: phase_base as usize })
        );
        assert!(matches!(
            Registration::new(Protocol::Phase, stack_base, stack_len, n_phase as u32),
            Err(PollerError::Layout(LayoutError::TooSmall { .. }))
        ));
    }
    assert_eq!(poller.protocol(stack_base), Some(Protocol::Stack));
    assert_eq!(poller.protocol(phase_base), Some(Protocol::Phase));
    assert_eq!(poller.len(), 2);

    for round in 0..40u64 {
        let mut s = stack.claim().unwrap().unwrap();
        s.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
        let s = s.submit(1, 1);
        let mut p = phase.claim(round as usize).unwrap();
        p.write_lane(1, &[round + 100, 0, 0, 0, 0, 0, 0, 0]);
        let p = p.submit(1, 0b10);
        let mut q = phase.claim(round as usize).unwrap();
        q.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
        let q = q.submit(77, 1); // no such service
        assert_eq!(poller.poll_once(&services), DrainReport { packets: 3, lane_calls: 3, malformed: 0 });
        assert_eq!(s.wait(|| {}).reply(0), [round + 1, 0]);
        assert_eq!(p.wait(|| {}).reply(1), [round + 101, 0]);
        assert_eq!(q.wait(|| {}).reply(0), [ERROR_REPLY, ErrorCode::UnknownService as u64]);
    }
    poller.remove(phase_base).unwrap();
    assert_eq!(poller.protocol(phase_base), None);

    // Two pollers split the phase buffer: each serves its own range and nothing else.
    let low = Poller::<4>::new();
    // SAFETY: as above; the ranges are disjoint.
    unsafe {
        low.add(
            Registration::new(Protocol::Phase, phase_base, phase_len, n_phase as u32).unwrap().range(0..2),
        )
        .unwrap();
        poller
            .add(
                Registration::new(Protocol::Phase, phase_base, phase_len, n_phase as u32)
                    .unwrap()
                    .range(2..99),
            )
            .unwrap();
    }
    assert_eq!(low.protocol(phase_base), Some(Protocol::Phase));
    for index in 0..n_phase {
        let mut p = phase.claim(index).unwrap();
        assert_eq!(p.index(), index);
        p.write_lane(0, &[index as u64, 0, 0, 0, 0, 0, 0, 0]);
        let p = p.submit(1, 1);
        let (mine, other) = if index < 2 { (&low, &poller) } else { (&poller, &low) };
        assert_eq!(other.poll_once(&services).packets, 0, "packet {index} served by the wrong poller");
        assert_eq!(mine.poll_once(&services), DrainReport { packets: 1, lane_calls: 1, malformed: 0 });
        assert_eq!(p.wait(|| {}).reply(0), [index as u64 + 1, 0]);
    }
    low.remove(phase_base).unwrap();
    poller.remove(phase_base).unwrap();
    poller.remove(stack_base).unwrap();
    assert!(poller.is_empty());
}

/// Runs `f` on a thread and fails if it does not return within 10 s (a deadlock fails the
/// test instead of hanging it).
fn within_10s(what: &str, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    let limit = std::time::Duration::from_secs(10);
    assert!(finished.recv_timeout(limit).is_ok(), "{what} did not return within {limit:?}: a deadlock");
}

/// A service that asks the poller about itself from inside a poll, then a removal that waits
/// for a poll in progress (and only for it).
#[test]
fn a_service_may_ask_its_poller_and_removal_waits_for_the_poll() {
    use std::sync::atomic::{AtomicBool, Ordering as StdOrdering};
    use std::sync::Arc;
    use std::time::Duration;

    struct Holder {
        poller: Poller<4>,
        memory: Vec<Line>,
        base: Base,
        len: usize,
        in_service: AtomicBool,
        release: AtomicBool,
    }
    /// The buffer's address, kept as a pointer (not an integer cast back) so that Miri checks
    /// its provenance under `-Zmiri-strict-provenance`.
    struct Base(*mut u8);
    // SAFETY: only an address is shared: every access to the memory goes through the view and
    // the poller, whose atomics order them.
    unsafe impl Send for Base {}
    // SAFETY: as for `Send`.
    unsafe impl Sync for Base {}
    struct Asks(Arc<Holder>);
    impl Dispatch for Asks {
        fn dispatch(&self, packet: &mut PacketRequest<'_>) {
            let h = &self.0;
            // The old poller held its lock here: each of these deadlocked.
            let base = h.base.0;
            let answer = h.poller.len() as u64
                + u64::from(h.poller.contains(base))
                + u64::from(h.poller.protocol(base) == Some(Protocol::Stack))
                + u64::from(h.poller.poll_once(&ServiceTable::<1>::new()).packets); // nested: nothing
            h.in_service.store(true, StdOrdering::SeqCst);
            while !h.release.load(StdOrdering::SeqCst) {
                std::thread::yield_now();
            }
            for lane in packet.lanes() {
                packet.reply(lane, [answer, 0]);
            }
        }
    }

    let n = 2usize;
    let len = stack::buffer_size(n as u32).unwrap();
    let mut memory = raw(len);
    let base = memory.as_mut_ptr() as *mut u8;
    let holder = Arc::new(Holder {
        poller: Poller::new(),
        memory: core::mem::take(&mut memory),
        base: Base(base),
        len,
        in_service: AtomicBool::new(false),
        release: AtomicBool::new(false),
    });
    assert_eq!(holder.memory.as_ptr() as *const u8, base.cast_const());
    // SAFETY: `holder` owns the memory for as long as the poller (also in it) lives.
    let view = unsafe { stack::View::from_raw(base, len, n as u32) }.unwrap();
    view.init(base as u64, 0);
    // SAFETY: as above.
    unsafe { holder.poller.add(Registration::new(Protocol::Stack, base, holder.len, n as u32).unwrap()) }
        .unwrap();

    let mut claimed = view.claim().unwrap().unwrap();
    claimed.write_lane(0, &[0; 8]);
    let submitted = claimed.submit(1, 1);
    let polling = holder.clone();
    let poll = std::thread::spawn(move || polling.poller.poll_once(&Asks(polling.clone())).packets);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !holder.in_service.load(StdOrdering::SeqCst) {
        assert!(std::time::Instant::now() < deadline, "the service deadlocked asking its poller");
        std::thread::yield_now();
    }
    // The service is running: the read-only methods answer at once from here too.
    let asking = holder.clone();
    within_10s("len/contains from another thread during a poll", move || {
        assert_eq!(asking.poller.len(), 1);
        assert!(asking.poller.contains(asking.base.0));
    });
    // A removal waits for the poll that is draining the buffer.
    let removing = holder.clone();
    let (removed_tx, removed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        removing.poller.remove(removing.base.0).unwrap();
        let _ = removed_tx.send(());
    });
    assert!(removed.recv_timeout(Duration::from_millis(100)).is_err(), "remove returned during the poll");
    holder.release.store(true, StdOrdering::SeqCst);
    assert!(removed.recv_timeout(Duration::from_secs(10)).is_ok(), "remove did not return after the poll");
    assert_eq!(poll.join().unwrap(), 1);
    assert_eq!(submitted.wait(|| {}).reply(0), [1 + 1 + 1, 0], "len 1, contains, stack; nested poll 0");
    assert!(holder.poller.is_empty());
}

#[test]
fn packets_report_the_device_of_their_buffer() {
    let n = 2usize;
    let len = stack::buffer_size(n as u32).unwrap();
    let (mut a_mem, mut b_mem) = (raw(len), raw(len));
    let (a_base, b_base) = (a_mem.as_mut_ptr() as *mut u8, b_mem.as_mut_ptr() as *mut u8);
    // SAFETY: both allocations outlive the views and the poller and are only accessed through
    // atomics.
    let (a, b) = unsafe {
        (
            stack::View::from_raw(a_base, len, n as u32).unwrap(),
            stack::View::from_raw(b_base, len, n as u32).unwrap(),
        )
    };
    a.init(a_base as u64, 0);
    b.init(b_base as u64, 0);
    let poller = Poller::<2>::new();
    // SAFETY: as above.
    unsafe {
        poller.add(Registration::new(Protocol::Stack, a_base, len, n as u32).unwrap()).unwrap();
        poller.add(Registration::new(Protocol::Stack, b_base, len, n as u32).unwrap().on_device(7)).unwrap();
    }
    assert_eq!((poller.device(a_base), poller.device(b_base)), (Some(0), Some(7)));
    let (x, y) = (a.claim().unwrap().unwrap().submit(9, 1), b.claim().unwrap().unwrap().submit(9, 1));
    let mut devices = Vec::new();
    let mut record = |packet: &mut PacketRequest<'_>| {
        devices.push((packet.device(), packet.buffer()));
        packet.reply(0, [u64::from(packet.device()), 0]);
    };
    struct Record<'a, F>(&'a core::cell::RefCell<F>);
    impl<F: FnMut(&mut PacketRequest<'_>)> Dispatch for Record<'_, F> {
        fn dispatch(&self, packet: &mut PacketRequest<'_>) {
            (self.0.borrow_mut())(packet)
        }
    }
    let cell = core::cell::RefCell::new(&mut record);
    assert_eq!(poller.poll_once(&Record(&cell)).packets, 2);
    devices.sort();
    assert_eq!(
        devices,
        [(0, a_base as usize), (7, b_base as usize)],
        "each packet names its device and buffer"
    );
    assert_eq!((x.wait(|| {}).reply(0)[0], y.wait(|| {}).reply(0)[0]), (0, 7));
    poller.remove(a_base).unwrap();
    poller.remove(b_base).unwrap();
}

/// A dispatch that stops the poll after its first packet ([`Dispatch::proceed`]).
struct StopAfterOne<'t> {
    services: &'t ServiceTable<'t, 2>,
    served: core::cell::Cell<u32>,
}

impl Dispatch for StopAfterOne<'_> {
    fn dispatch(&self, packet: &mut PacketRequest<'_>) {
        self.services.dispatch(packet);
        self.served.set(self.served.get() + 1);
    }
    fn proceed(&self) -> bool {
        self.served.get() == 0
    }
}

#[test]
fn a_dispatch_that_says_no_ends_the_poll_before_the_next_buffer() {
    let buffers = two_buffers(2, 2);
    let ((a_base, a_len, a), (b_base, b_len, b)) = (buffers.stack, buffers.phase);
    let poller = Poller::<2>::new();
    let mut services = ServiceTable::<2>::new();
    services.register(1, &add_one).unwrap();
    // SAFETY: `buffers` outlives the registrations (removed below).
    unsafe {
        poller.add(Registration::new(Protocol::Stack, a_base, a_len, 2).unwrap()).unwrap();
        poller.add(Registration::new(Protocol::Phase, b_base, b_len, 2).unwrap()).unwrap();
    }
    let mut first = a.claim().unwrap().unwrap();
    first.write_lane(0, &[41, 0, 0, 0, 0, 0, 0, 0]);
    let first = first.submit(1, 1);
    let mut second = b.claim(0).unwrap();
    second.write_lane(0, &[41, 0, 0, 0, 0, 0, 0, 0]);
    let second = second.submit(1, 1);
    let stopping = StopAfterOne { services: &services, served: core::cell::Cell::new(0) };
    assert_eq!(poller.poll_once(&stopping).packets, 1, "the poll ends after the first buffer");
    assert_eq!(stopping.served.get(), 1);
    assert_eq!(poller.poll_once(&services).packets, 1, "the other buffer's packet waited for the next poll");
    assert_eq!(first.wait(|| {}).reply(0), [42, 0]);
    assert_eq!(second.wait(|| {}).reply(0), [42, 0]);
    // Nothing is left pinned: both removals return at once.
    poller.remove(a_base).unwrap();
    poller.remove(b_base).unwrap();
}

#[test]
fn a_dispatch_that_says_no_before_the_only_buffer_serves_nothing() {
    let buffers = two_buffers(2, 2);
    let (a_base, a_len, a) = buffers.stack;
    let poller = Poller::<2>::new();
    let mut services = ServiceTable::<2>::new();
    services.register(1, &add_one).unwrap();
    // SAFETY: `buffers` outlives the registration (removed below).
    unsafe { poller.add(Registration::new(Protocol::Stack, a_base, a_len, 2).unwrap()).unwrap() };
    let mut packet = a.claim().unwrap().unwrap();
    packet.write_lane(0, &[41, 0, 0, 0, 0, 0, 0, 0]);
    let packet = packet.submit(1, 1);
    let refusing = StopAfterOne { services: &services, served: core::cell::Cell::new(1) };
    assert_eq!(poller.poll_once(&refusing).packets, 0, "one registration asks `proceed` too");
    assert_eq!(poller.poll_once(&services).packets, 1);
    assert_eq!(packet.wait(|| {}).reply(0), [42, 0]);
    poller.remove(a_base).unwrap();
}

/// The scan window of the phase registration at `base` in `session`'s copy, as of its last poll.
fn window_limit(session: &PollSession<'_, 4>, base: *mut u8) -> u32 {
    let (_, r) = session.state.serving.iter().find(|(_, r)| r.base == base).expect("registered");
    match r.scope {
        crate::DrainScope::Window(window) => window.limit(),
        other => panic!("a phase registration's scope is a window, not {other:?}"),
    }
}

#[test]
fn a_scan_window_lives_across_a_refresh_and_a_new_registration_starts_fresh() {
    let n = 64usize;
    let buffers = two_buffers(2, n);
    let ((s_base, s_len, _), (p_base, p_len, phase)) = (buffers.stack, buffers.phase);
    let slack = crate::ScanWindow::SLACK;
    let poller = Poller::<4>::new();
    let mut services = ServiceTable::<2>::new();
    services.register(1, &add_one).unwrap();
    let serve_at = |session: &mut PollSession<'_, 4>, index: usize| {
        let mut claimed = phase.claim(index).unwrap();
        assert_eq!(claimed.index(), index);
        claimed.write_lane(0, &[1, 0, 0, 0, 0, 0, 0, 0]);
        let submitted = claimed.submit(1, 1);
        assert_eq!(session.poll_once(&services).packets, 1);
        assert_eq!(submitted.wait(|| {}).reply(0), [2, 0]);
    };
    // SAFETY: `buffers` outlives the registrations (removed below).
    unsafe { poller.add(Registration::new(Protocol::Phase, p_base, p_len, n as u32).unwrap()).unwrap() };
    let mut session = poller.session().unwrap();
    session.poll_once(&services); // an empty full scan: the window narrows to its slack
    assert_eq!(window_limit(&session, p_base), slack);
    serve_at(&mut session, 2); // a narrow scan: index 2 in use since the last full scan

    // Another buffer's add: the next poll refreshes its copy, and the phase window goes on (its
    // empty narrow scan then scans the rest, a full scan that keeps index 2 in use).
    // SAFETY: as above.
    unsafe { poller.add(Registration::new(Protocol::Stack, s_base, s_len, 2).unwrap()).unwrap() };
    assert_eq!(session.poll_once(&services).packets, 0);
    assert_eq!(window_limit(&session, p_base), 3 + slack, "the window lived across the refresh");

    // The same buffer registered again (the slot reused, a new generation) starts fresh.
    serve_at(&mut session, 2);
    drop(session); // a remover waits for the session
    poller.remove(p_base).unwrap();
    // SAFETY: as above.
    unsafe { poller.add(Registration::new(Protocol::Phase, p_base, p_len, n as u32).unwrap()).unwrap() };
    let mut session = poller.session().unwrap();
    assert_eq!(session.poll_once(&services).packets, 0);
    assert_eq!(window_limit(&session, p_base), slack, "a new registration's window starts fresh");
    drop(session);
    poller.remove(p_base).unwrap();
    poller.remove(s_base).unwrap();
}
