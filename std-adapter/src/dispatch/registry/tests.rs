//! The registry's per-packet path: what a listener thread's dispatcher counts.

use super::Services;
use hostcall_core::stack::{Header, Prefix, View};
use hostcall_core::{Dispatch, Host as _, PacketRequest, Payload, Protocol, LANES};

/// Serves `packets` packets of `lanes` lanes of service `service` through `dispatch`, on a
/// stack buffer of two packets (its host's `buffer()` is 0).
fn serve(dispatch: &dyn Dispatch, service: u32, packets: u64, lanes: usize) {
    let prefix = Prefix::default();
    let headers = [Header::default(), Header::default()];
    let payloads = [Payload::default(), Payload::default()];
    let view = View::from_parts(&prefix, &headers, &payloads).unwrap();
    view.init(0, 0);
    let activemask = if lanes == LANES { u64::MAX } else { (1 << lanes) - 1 };
    for i in 0..packets {
        let mut claimed = view.claim().unwrap().unwrap();
        for lane in 0..lanes {
            claimed.write_lane(lane, &[i, 0, 0, 0, 0, 0, 0, 0]);
        }
        let submitted = claimed.submit(service, activemask);
        view.host().drain(&mut |p: &mut PacketRequest<'_>| dispatch.dispatch(p));
        drop(submitted.wait(|| {}));
    }
}

/// More listener threads than exclusive shards, each with its dispatcher, serving at once: no
/// packet, lane, error or timing is lost, for the service or for the buffer (two dispatchers
/// adding with plain stores to one shard would lose some).
#[test]
fn dispatchers_beyond_the_exclusive_shards_lose_no_count() {
    let services = Services::new();
    services
        .register_lane(7, "odd", |r| {
            if r[0] % 2 == 1 {
                Ok([r[0], 0])
            } else {
                Err(hostcall_core::ErrorCode::BadRequest)
            }
        })
        .unwrap();
    let _counted = services.count_buffer(0, Protocol::Stack, 2);
    let per_thread = if cfg!(miri) { 20 } else { 4_000u64 };
    let threads = 2 * crate::observe::counters::EXCLUSIVE_SHARDS as u64 + 3;
    let barrier = std::sync::Barrier::new(threads as usize);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let dispatch = services.dispatcher();
                barrier.wait();
                serve(&dispatch, 7, per_thread, 2);
                dispatch.empty_scan();
            });
        }
    });
    let stats = services.stats();
    let odd = &stats.services[&7].1;
    let packets = threads * per_thread;
    assert_eq!((odd.packets, odd.lane_calls, odd.errors), (packets, 2 * packets, packets));
    assert_eq!(
        (odd.service_time.count(), odd.queue_wait.count()),
        (packets, 0),
        "no poll start: no queue wait"
    );
    let buffer = &stats.buffers[&0];
    assert_eq!((buffer.packets, buffer.lane_calls, buffer.errors), (packets, 2 * packets, packets));
    assert_eq!(stats.events.empty_scans, threads);
}

/// A dispatcher's copies follow the registry: a service registered or removed, and a buffer
/// counted, after its last packet are seen at its next one (one generation covers both).
#[test]
fn a_dispatcher_sees_registrations_and_counted_buffers_at_its_next_packet() {
    let services = Services::new();
    let dispatch = services.dispatcher();
    serve(&dispatch, 7, 1, 1);
    assert_eq!(services.stats().unknown.packets, 1, "nothing registered yet");
    services.register_lane(7, "echo", |r| Ok([r[0], 0])).unwrap();
    serve(&dispatch, 7, 1, 1);
    assert_eq!(services.stats().services[&7].1.packets, 1, "seen once registered");
    let _counted = services.count_buffer(0, Protocol::Stack, 2);
    serve(&dispatch, 7, 1, 1);
    let stats = services.stats();
    assert_eq!(
        (stats.services[&7].1.packets, stats.buffers[&0].packets),
        (2, 1),
        "the buffer counted from now on"
    );
    assert!(services.unregister(7));
    serve(&dispatch, 7, 1, 1);
    let stats = services.stats();
    assert_eq!((stats.unknown.packets, stats.buffers[&0].packets), (2, 2), "unknown again once removed");
}

thread_local! {
    /// The dispatcher the test below serves through, for its service to dispatch through again.
    static OUTER: std::cell::Cell<*const super::ThreadDispatch<'static>> = const { std::cell::Cell::new(std::ptr::null()) };
}

/// A service that registers another and dispatches a packet to it through its own dispatcher:
/// the copies the outer packet is served from stay (the inner packet needs a new look-up, and is
/// served by the registry itself: no queue wait, which only the dispatcher knows), and both
/// packets are served and counted.
#[test]
fn a_dispatch_reentered_from_a_service_leaves_the_outer_packets_copies() {
    let services: &'static Services = Box::leak(Box::new(Services::new()));
    services
        .register_lane(7, "outer", move |r| {
            services.register_lane(8, "inner", |r| Ok([r[0] + 1, 0])).unwrap();
            let outer = OUTER.with(|o| o.get());
            // SAFETY: set below to the dispatcher serving this packet, on this thread, which
            // outlives the call.
            serve(unsafe { &*outer }, 8, 1, 1);
            Ok([r[0], 0])
        })
        .unwrap();
    let dispatch: super::ThreadDispatch<'static> = services.dispatcher();
    OUTER.with(|o| o.set(&dispatch));
    dispatch.poll_started();
    serve(&dispatch, 7, 1, 1);
    OUTER.with(|o| o.set(std::ptr::null()));
    let stats = services.stats();
    let (outer, inner) = (&stats.services[&7].1, &stats.services[&8].1);
    assert_eq!((outer.packets, outer.errors, inner.packets, inner.errors), (1, 0, 1, 0), "{stats}");
    assert_eq!(
        (outer.queue_wait.count(), inner.queue_wait.count()),
        (1, 0),
        "the inner one through the registry"
    );
}

/// A packet service that answers lanes 0 and 2 with errors and the others with their word.
struct EvenLanesRefused;

impl super::PacketService for EvenLanesRefused {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        for lane in packet.lanes() {
            if lane % 2 == 0 && lane < 4 {
                packet.reply_error(lane, hostcall_core::ErrorCode::BadRequest);
            } else {
                let word = packet.request(lane)[0];
                packet.reply(lane, [word, 0]);
            }
        }
    }
}

/// A packet service's error count is the lanes it answered with an error (what the dispatcher
/// reads from the packet, `PacketRequest::error_lanes`), through a dispatcher and the registry.
#[test]
fn a_packet_services_errors_are_its_error_lanes() {
    let services = Services::new();
    services.register_packet(9, "even-refused", EvenLanesRefused).unwrap();
    let dispatch = services.dispatcher();
    serve(&dispatch, 9, 3, 5);
    serve(&services, 9, 2, LANES);
    let counted = &services.stats().services[&9].1;
    assert_eq!((counted.packets, counted.lane_calls, counted.errors), (5, 3 * 5 + 2 * 64, 5 * 2));
}
