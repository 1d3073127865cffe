//! A new session's first poll re-pins the copy its poller kept without the table lock while the
//! table is unchanged, and refreshes it under the lock once it changed.

use super::*;

/// Serves one packet of `stack` through `poll`, which must serve exactly it.
fn serve_one(stack: &stack::View<'_>, poll: impl FnOnce() -> u32) {
    let mut claimed = stack.claim().unwrap().unwrap();
    claimed.write_lane(0, &[5, 0, 0, 0, 0, 0, 0, 0]);
    let submitted = claimed.submit(1, 1);
    assert_eq!(poll(), 1);
    assert_eq!(submitted.wait_until(|_| false).expect("served by the poll").reply(0), [6, 0]);
}

#[test]
fn a_new_sessions_first_poll_repins_without_the_table_lock_until_the_table_changes() {
    let buffers = two_buffers(2, 2);
    let ((s_base, s_len, stack), (p_base, p_len, phase)) = (buffers.stack, buffers.phase);
    let poller = Poller::<4>::new();
    let mut services = ServiceTable::<1>::new();
    services.register(1, &add_one).unwrap();
    // SAFETY: `buffers` outlives the registrations (removed below).
    unsafe { poller.add(Registration::new(Protocol::Stack, s_base, s_len, 2).unwrap()).unwrap() };
    let slot = poller.table.lock().serving[0].0;

    // The first poll copies the table under the lock; the session's drop unpins the copy.
    assert_eq!(poller.poll_once(&services).packets, 0);
    assert!(!poller.pins.is_pinned(slot), "a dropped session leaves nothing pinned");

    // The table unchanged, a new session's first poll takes no table lock: it serves while
    // another holder keeps the lock (a locked refresh would wait for it).
    std::thread::scope(|scope| {
        let table = poller.table.lock();
        let (done, served) = std::sync::mpsc::channel();
        let (poller, services, stack) = (&poller, &services, &stack);
        scope.spawn(move || {
            let mut session = poller.session().unwrap();
            serve_one(stack, || session.poll_once(services).packets);
            assert!(poller.pins.is_pinned(slot), "the re-pinned copy stays pinned in the session");
            drop(session);
            let _ = done.send(());
        });
        let in_time = served.recv_timeout(std::time::Duration::from_secs(10)).is_ok();
        drop(table); // lets a poll that waits for the lock end, so the scope does
        assert!(in_time, "the re-pin waited for the table lock");
    });
    assert!(!poller.pins.is_pinned(slot));

    // Changed (another buffer added): the first poll refreshes under the lock and serves both.
    // SAFETY: as above.
    unsafe { poller.add(Registration::new(Protocol::Phase, p_base, p_len, 2).unwrap()).unwrap() };
    let mut claimed = phase.claim(0).unwrap();
    claimed.write_lane(0, &[7, 0, 0, 0, 0, 0, 0, 0]);
    let submitted = claimed.submit(1, 1);
    let mut session = poller.session().unwrap();
    serve_one(&stack, || session.poll_once(&services).packets - 1);
    assert_eq!(submitted.wait_until(|_| false).expect("served by the refresh's poll").reply(0), [8, 0]);
    drop(session);
    // Nothing is left pinned: both removals return at once.
    poller.remove(p_base).unwrap();
    poller.remove(s_base).unwrap();
}
