//! A firmware-like runtime: no threads, no allocator in the loop. Its main loop submits work from
//! its "device" side and serves it with a poll session's `poll_once` (its polls take no lock), with
//! a fixed-capacity service table; the session ends before the buffer is removed.

use hostcall_core::stack::{buffer_size, View};
use hostcall_core::{ErrorCode, Poller, Protocol, Registration, ServiceTable, SLOT_WORDS};

fn double(request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    request[0].checked_mul(2).map(|d| [d, 0]).ok_or(ErrorCode::Refused)
}

#[test]
fn a_main_loop_serves_its_own_hostcalls() {
    const PACKETS: u32 = 3;
    // Static-like storage: a word array big enough for the buffer, 8-aligned.
    let mut memory = vec![0u64; buffer_size(PACKETS).unwrap() / 8];
    let base = memory.as_mut_ptr() as *mut u8;
    let len = memory.len() * 8;
    // SAFETY: `memory` outlives the view and the poller's use of it (removed below), and is only
    // accessed through them.
    let buffer = unsafe { View::from_raw(base, len, PACKETS) }.unwrap();
    buffer.init(base as u64, 0);

    let mut services: ServiceTable<'_, 4> = ServiceTable::new();
    services.register(42, &double).unwrap();
    let poller: Poller<2> = Poller::new();
    // SAFETY: as above.
    unsafe { poller.add(Registration::new(Protocol::Stack, base, len, PACKETS).unwrap()) }.unwrap();

    let rounds = if cfg!(miri) { 10 } else { 100 };
    let mut polls = poller.session().expect("the only poller");
    for round in 0..rounds {
        // Device side: two packets in flight, one with an unknown service.
        let mut a = buffer.claim().unwrap().unwrap();
        a.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
        a.write_lane(1, &[u64::MAX, 0, 0, 0, 0, 0, 0, 0]);
        let a = a.submit(42, 0b11);
        let b = buffer.claim().unwrap().unwrap().submit(7, 1);
        // Main loop: serve.
        let report = polls.poll_once(&services);
        assert_eq!((report.packets, report.lane_calls), (2, 3));
        let a = a.wait_until(|_| false).expect("served in this loop turn");
        assert_eq!(a.reply(0), [round * 2, 0]);
        assert_eq!(a.reply(1), ErrorCode::Refused.reply());
        let b = b.wait_until(|_| false).expect("served");
        assert_eq!(b.reply(0), ErrorCode::UnknownService.reply());
    }
    drop(polls); // a remove waits for the session: on this thread, it would wait for itself
    poller.remove(base).unwrap();
    assert_eq!(poller.poll_once(&services).packets, 0);
}
