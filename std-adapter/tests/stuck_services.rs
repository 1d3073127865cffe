//! A service that blocks does not stall the other buffers of its listener (issue 26, defect 6):
//! while one call blocks (on a channel the test holds), another buffer of the same listener (or
//! of the same pool thread) keeps being served; the stuck call is counted
//! ([`Reason::StuckService`]) and its buffer served again once it returns; shutdown returns
//! while the call still blocks, and the stuck buffer's claim is released when the call returns.
//! Every wait runs under a watchdog or a wave timeout: a stall fails the test, never hangs it.

#[macro_use]
mod common;

use common::watchdog::returns_within;
use hostcall::prelude::*;
use hostcall::{
    observe::Reason, HostMemory, HostcallBuffer, Listener, ListenerConfig, ListenerPool, ParkingDoorbell,
    Protocol, Wave,
};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ECHO: u32 = 100;
const BLOCK: u32 = 300;
/// How long a test waits for anything before failing.
const PATIENCE: Duration = Duration::from_secs(30);

fn config() -> ListenerConfig {
    ListenerConfig::default().with_stuck_after(Duration::from_millis(20))
}

/// Registers ECHO and BLOCK (which tells `entered` it runs, then waits for `release`) on
/// `services`.
fn register(services: &hostcall::Services) -> (Receiver<()>, Sender<()>) {
    let (entered_tx, entered) = channel();
    let (release, release_rx) = channel::<()>();
    let (entered_tx, release_rx) = (Mutex::new(entered_tx), Mutex::new(release_rx));
    services.register_lane(ECHO, "echo", |r| Ok([r[0], 1])).unwrap();
    services
        .register_lane(BLOCK, "block", move |_| {
            entered_tx.lock().unwrap().send(()).unwrap();
            release_rx.lock().unwrap().recv_timeout(PATIENCE).expect("released by the test");
            Ok([7, 0])
        })
        .unwrap();
    (entered, release)
}

fn buffer(doorbell: &Arc<dyn Doorbell>, protocol: Protocol) -> Arc<HostcallBuffer> {
    Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 8, doorbell.clone(), protocol).unwrap())
}

/// A wave on `buffer` calling BLOCK, once it is inside the service; joins to the reply's word 0.
fn block(buffer: &Arc<HostcallBuffer>, entered: &Receiver<()>) -> JoinHandle<u64> {
    let wave = Wave::new(buffer.clone(), 1).with_timeout(PATIENCE);
    let call = std::thread::spawn(move || {
        wave.call(BLOCK, |_| [0; 8]).expect("the blocked call's reply").lane(0)[0]
    });
    entered.recv_timeout(PATIENCE).expect("the blocking service runs");
    call
}

/// `calls` ECHO calls on `buffer`, each within a generous timeout (a stalled buffer fails here).
fn served(buffer: &Arc<HostcallBuffer>, calls: u64) {
    let wave = Wave::new(buffer.clone(), 1).with_timeout(PATIENCE);
    for k in 0..calls {
        let reply =
            wave.call(ECHO, |_| [k, 0, 0, 0, 0, 0, 0, 0]).expect("served while the other call blocks");
        assert_eq!(reply.lane(0), [k, 1]);
    }
}

/// Waits until `stats` counts a stuck service.
fn counted_stuck(stats: impl Fn() -> hostcall::observe::Stats) -> u64 {
    let started = Instant::now();
    loop {
        let n = stats().refusals.get(Reason::StuckService);
        if n > 0 || started.elapsed() > PATIENCE {
            return n;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A listener serving two buffers of `protocol`, one of them inside a BLOCK call.
struct Blocked {
    doorbell: Arc<dyn Doorbell>,
    listener: Listener,
    stuck: Arc<HostcallBuffer>,
    other: Arc<HostcallBuffer>,
    /// The blocked call (see [`block`]).
    call: JoinHandle<u64>,
    /// Lets BLOCK return.
    release: Sender<()>,
}

fn blocked(protocol: Protocol) -> Blocked {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config()).unwrap();
    let (entered, release) = register(listener.services());
    let (stuck, other) = (buffer(&doorbell, protocol), buffer(&doorbell, protocol));
    listener.add(stuck.clone()).unwrap();
    listener.add(other.clone()).unwrap();
    let call = block(&stuck, &entered);
    Blocked { doorbell, listener, stuck, other, call, release }
}

fn another_buffer_is_served_while_a_service_blocks(protocol: Protocol) {
    returns_within("a listener with a blocked service", PATIENCE * 2, move || {
        let Blocked { doorbell: _, listener, stuck, other: victim, call, release } = blocked(protocol);
        served(&victim, 200);
        assert_eq!(counted_stuck(|| listener.stats()), 1, "the stuck call is counted once");
        let of_buffer = listener.stats().buffers[&(stuck.as_ptr() as usize)].refusals;
        assert_eq!(of_buffer.get(Reason::StuckService), 1, "and for its buffer");
        assert_eq!(listener.buffer_count(), 2);

        release.send(()).unwrap();
        assert_eq!(call.join().unwrap(), 7, "the stuck call is answered when it returns");
        served(&stuck, 20); // handed back: served again
        served(&victim, 20);
        listener.shutdown();
    });
}

fn shutdown_returns_while_a_service_blocks(protocol: Protocol) {
    returns_within("shutdown with a blocked service", PATIENCE * 2, move || {
        let Blocked { doorbell, listener, stuck, other, call, release } = blocked(protocol);

        let grace = Duration::from_millis(20);
        let (listener, took) = returns_within("shutdown", PATIENCE, move || {
            listener.shutdown_timeout(grace);
            listener
        });
        assert!(!call.is_finished(), "shutdown returned while the service still blocks (after {took:?})");
        // The other buffer's claim was released by the shutdown; the stuck one's is held.
        let next = Listener::start(doorbell.clone(), config()).unwrap();
        next.add(other.clone()).expect("the other buffer is free once shutdown returned");
        assert!(next.add(stuck.clone()).is_err(), "the stuck buffer stays claimed while its call runs");

        release.send(()).unwrap();
        assert_eq!(call.join().unwrap(), 7, "the stuck call's reply is still written");
        drop(listener);
        let started = Instant::now();
        while next.add(stuck.clone()).is_err() {
            assert!(started.elapsed() < PATIENCE, "the stuck buffer's claim is released after its call");
            std::thread::sleep(Duration::from_millis(2));
        }
        next.shutdown();
    });
}

/// Shutdown asked while a call is stuck but not yet relieved (issue 37): it waits on the thread
/// that takes over, not the stuck one, so it returns (while the call still blocks) with no "left
/// running" error.
fn shutdown_before_the_relief_waits_on_the_successor(protocol: Protocol) {
    common::logs::install();
    returns_within("shutdown before the relief", PATIENCE * 2, move || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        // Long enough that the shutdown below is asked before the watchdog relieves the thread.
        let config = ListenerConfig::default().with_stuck_after(Duration::from_millis(300));
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        let (entered, release) = register(listener.services());
        let (stuck, other) = (buffer(&doorbell, protocol), buffer(&doorbell, protocol));
        listener.add(stuck.clone()).unwrap();
        listener.add(other.clone()).unwrap();
        let call = block(&stuck, &entered);
        let (listener, _) = returns_within("shutdown", PATIENCE, move || {
            listener.shutdown_timeout(Duration::ZERO);
            listener
        });
        assert!(!call.is_finished(), "the service still blocks");
        let left_running: Vec<String> =
            common::logs::lines().iter().filter(|l| l.contains("left running")).cloned().collect();
        assert!(left_running.is_empty(), "shutdown waited on the stuck thread: {left_running:?}");
        release.send(()).unwrap();
        assert_eq!(call.join().unwrap(), 7);
        drop(listener);
    });
}

fn a_pool_thread_keeps_serving_while_a_service_blocks(protocol: Protocol) {
    returns_within("a pool with a blocked service", PATIENCE * 2, move || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let pool = ListenerPool::start(2, doorbell.clone(), config()).unwrap();
        let (entered, release) = register(pool.services());
        // Small buffers: a phase, line or rpc buffer of 8 packets is one stripe, on thread 0; stack
        // buffers go round robin, so the first and third share thread 0 (either way the stuck and
        // the victim buffer share a thread).
        let (stuck, elsewhere, victim) =
            (buffer(&doorbell, protocol), buffer(&doorbell, protocol), buffer(&doorbell, protocol));
        for b in [&stuck, &elsewhere, &victim] {
            pool.add(b.clone()).unwrap();
        }
        let call = block(&stuck, &entered);
        served(&victim, 200);
        served(&elsewhere, 20);
        assert_eq!(counted_stuck(|| pool.stats()), 1);
        release.send(()).unwrap();
        assert_eq!(call.join().unwrap(), 7);
        served(&stuck, 20);
        let (_, took) = returns_within("pool shutdown", PATIENCE, move || pool.shutdown());
        assert!(took < PATIENCE);
    });
}

for_every_protocol!(
    another_buffer_is_served_while_a_service_blocks,
    shutdown_returns_while_a_service_blocks,
    shutdown_before_the_relief_waits_on_the_successor,
    a_pool_thread_keeps_serving_while_a_service_blocks,
);
