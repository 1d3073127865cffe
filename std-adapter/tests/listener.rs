//! The listener under the ways it gets broken: many waves on few packets, several buffers,
//! buffers coming and going, shutdown mid-flight, panicking handlers, unknown services, a
//! producer that never rings.

#[macro_use]
mod common;

use common::waves::{register_add, run_waves, ADD};

use hostcall::prelude::*;
use hostcall::{
    Error, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Wave,
};
use hostcall_core::{ErrorCode, ERROR_REPLY};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const PANICS: u32 = 101;

fn listener(config: ListenerConfig) -> (Listener, Arc<dyn Doorbell>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).unwrap();
    register_add(listener.services());
    listener
        .services()
        .register_lane(PANICS, "panics", |r| if r[0] == 13 { panic!("unlucky lane") } else { Ok([r[0], 0]) })
        .unwrap();
    (listener, doorbell)
}

fn buffer(doorbell: &Arc<dyn Doorbell>, packets: u64, protocol: Protocol) -> Arc<HostcallBuffer> {
    Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell.clone(), protocol).unwrap(),
    )
}

fn sixty_four_waves_on_sixty_four_packets(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffer = buffer(&doorbell, 64, protocol);
    listener.add(buffer.clone()).unwrap();
    run_waves(&buffer, 64, 64, 20, None);
    let stats = listener.shutdown();
    assert_eq!(stats.services[&ADD].1.packets, 64 * 20);
    assert_eq!(stats.services[&ADD].1.lane_calls, 64 * 20 * 64);
    assert_eq!(stats.total().errors, 0);
}

fn sixty_four_waves_on_two_packets(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffer = buffer(&doorbell, 2, protocol);
    listener.add(buffer.clone()).unwrap();
    run_waves(&buffer, 64, 3, 10, None);
    assert_eq!(listener.shutdown().services[&ADD].1.packets, 64 * 10);
}

fn several_buffers_on_one_listener(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffers: Vec<_> = (0..4).map(|i| buffer(&doorbell, 2 + i, protocol)).collect();
    for b in &buffers {
        listener.add(b.clone()).unwrap();
    }
    assert_eq!(listener.buffer_count(), 4);
    let threads: Vec<_> = buffers
        .iter()
        .map(|b| {
            let b = b.clone();
            thread::spawn(move || run_waves(&b, 4, 8, 20, None))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(listener.shutdown().services[&ADD].1.packets, 4 * 4 * 20);
}

fn buffers_added_and_removed_mid_run(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let steady = buffer(&doorbell, 4, protocol);
    listener.add(steady.clone()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let (steady, stop) = (steady.clone(), stop.clone());
        thread::spawn(move || {
            let mut calls = 0;
            while !stop.load(Ordering::Relaxed) {
                run_waves(&steady, 2, 4, 5, None);
                calls += 10;
            }
            calls
        })
    };
    for round in 0..20 {
        let extra = buffer(&doorbell, 2 + round % 3, protocol);
        listener.add(extra.clone()).unwrap();
        assert!(matches!(listener.add(extra.clone()), Err(Error::Poller(_))), "added twice");
        run_waves(&extra, 2, 2, 3, None);
        let removed = listener.remove_buffer(&extra).unwrap();
        assert!(Arc::ptr_eq(&removed, &extra));
        assert!(listener.remove_buffer(&extra).is_err(), "removed twice");
        // The listener no longer touches it: a call now is not answered.
        let orphan = Wave::new(extra.clone(), 1).with_timeout(Duration::from_millis(30));
        assert_eq!(orphan.call(ADD, |_| [0; 8]).unwrap_err(), Error::TimedOut);
    }
    stop.store(true, Ordering::Relaxed);
    assert!(background.join().unwrap() > 0);
    assert_eq!(listener.shutdown().total().errors, 0);
}

fn shutdown_with_waves_mid_call_answers_them_and_joins(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    listener
        .services()
        .register_lane(7, "slow", |r| {
            thread::sleep(Duration::from_millis(2));
            Ok([r[0], 1])
        })
        .unwrap();
    let buffer = buffer(&doorbell, 8, protocol);
    listener.add(buffer.clone()).unwrap();
    let start = Arc::new(Barrier::new(9));
    let answered = Arc::new(AtomicU64::new(0));
    let waves: Vec<_> = (0..8)
        .map(|w| {
            let (wave, start, answered) = (Wave::new(buffer.clone(), 2), start.clone(), answered.clone());
            thread::spawn(move || {
                start.wait();
                let reply = wave.call(7, |_| [w, 0, 0, 0, 0, 0, 0, 0]).unwrap();
                // Served within the grace, or answered with the shutdown error after it.
                if !reply.host_error() {
                    assert_eq!(reply.lane(1), [w, 1]);
                } else {
                    assert_eq!(reply.lane(1), ErrorCode::ShuttingDown.reply());
                }
                answered.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    start.wait();
    thread::sleep(Duration::from_millis(1)); // let some submit; the rest submit during shutdown
    let (listener, _) = common::watchdog::returns_within("shutdown", Duration::from_secs(10), move || {
        listener.shutdown();
        listener
    });
    waves.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(answered.load(Ordering::Relaxed), 8);
    common::watchdog::returns_within("a second shutdown", Duration::from_secs(10), move || {
        listener.shutdown()
    });
}

fn a_panicking_handler_gets_an_error_reply_and_the_listener_goes_on(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffer = buffer(&doorbell, 2, protocol);
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer.clone(), 6);
    let reply = wave.call(PANICS, |lane| [10 + lane as u64, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert!(reply.host_error());
    assert_eq!(reply.lane(3), ErrorCode::ServicePanicked.reply());
    assert_eq!(reply.lane(2), [12, 0], "the lanes before it are served");
    assert_eq!(reply.lane(4), [14, 0], "and the lanes after it");
    assert_eq!(reply.lane(5), [15, 0]);
    run_waves(&buffer, 2, 4, 10, None);
    let stats = listener.shutdown();
    assert_eq!(stats.services[&PANICS].1.errors, 1);
}

fn an_unknown_service_is_answered_with_an_error(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffer = buffer(&doorbell, 2, protocol);
    listener.add(buffer.clone()).unwrap();
    for id in [0, 9999, u32::MAX] {
        let reply = Wave::new(buffer.clone(), 64).call(id, |_| [1; 8]).unwrap();
        assert!(reply.host_error());
        assert_eq!(reply.lane(63), [ERROR_REPLY, ErrorCode::UnknownService as u64]);
    }
    run_waves(&buffer, 1, 1, 1, None);
    assert_eq!(listener.shutdown().unknown.packets, 3);
}

fn a_producer_that_never_rings_is_served_within_the_poll_timeout(protocol: Protocol) {
    let config = ListenerConfig::default().with_spin_polls(0).with_max_wait(Duration::from_millis(20));
    let (listener, doorbell) = listener(config);
    // The buffer rings a doorbell nobody listens to.
    let silent: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let buffer = buffer(&silent, 2, protocol);
    listener.add(buffer.clone()).unwrap();
    thread::sleep(Duration::from_millis(100)); // the listener is idle, at its longest timeout
    let begun = Instant::now();
    let reply = Wave::new(buffer, 1).call(ADD, |_| [40, 2, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(reply.lane(0), [42, 0]);
    assert!(begun.elapsed() < Duration::from_secs(1), "served by a timeout poll, {:?}", begun.elapsed());
    drop(doorbell);
}

fn a_spinning_listener_serves_too(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::spinning());
    let buffer = buffer(&doorbell, 4, protocol);
    listener.add(buffer.clone()).unwrap();
    run_waves(&buffer, 2, 64, 50, None);
}

fn a_dropped_listener_joins_its_thread(protocol: Protocol) {
    let (listener, doorbell) = listener(ListenerConfig::default());
    let buffer = buffer(&doorbell, 2, protocol);
    listener.add(buffer.clone()).unwrap();
    run_waves(&buffer, 1, 1, 3, None);
    drop(listener);
    assert_eq!(Arc::strong_count(&buffer), 1, "the listener let go of the buffer");
}

// Every test above, once per wire protocol.
for_every_protocol!(
    sixty_four_waves_on_sixty_four_packets,
    sixty_four_waves_on_two_packets,
    several_buffers_on_one_listener,
    buffers_added_and_removed_mid_run,
    shutdown_with_waves_mid_call_answers_them_and_joins,
    a_panicking_handler_gets_an_error_reply_and_the_listener_goes_on,
    an_unknown_service_is_answered_with_an_error,
    a_producer_that_never_rings_is_served_within_the_poll_timeout,
    a_spinning_listener_serves_too,
    a_dropped_listener_joins_its_thread
);
