//! Services may call the listener's and the runtime's read-only methods (issue 17, defect 5):
//! before, the poller held its lock while services ran, so a service asking its listener for
//! `buffer_count` (or formatting it with `Debug`) deadlocked its own thread, and a runtime's
//! `buffer_count` from a service deadlocked against a disable in progress. Each runs under a
//! watchdog: a deadlock fails the test.

#[macro_use]
mod common;

use common::watchdog::returns_within;
use hostcall::prelude::*;
use hostcall::{
    buffer_size, EmulatedWave, HostMemory, HostcallBuffer, HostcallRuntime, Listener, ListenerConfig,
    ParkingDoorbell, Protocol, QueueId, Wave,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread;
use std::time::Duration;

const ASK: u32 = 200;
const LIMIT: Duration = Duration::from_secs(20);

/// A service that asks its own listener everything read-only.
fn a_service_may_ask_its_listener(protocol: Protocol) {
    returns_within("a service asking its listener", LIMIT, move || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let listener = Arc::new(Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap());
        let me: Arc<OnceLock<Weak<Listener>>> = Arc::new(OnceLock::new());
        me.set(Arc::downgrade(&listener)).unwrap();
        let asked = me.clone();
        listener
            .services()
            .register_lane(ASK, "ask", move |_| {
                let listener = asked.get().and_then(Weak::upgrade).expect("the listener");
                let count = listener.buffer_count() as u64;
                let debug = format!("{listener:?}");
                let stats = listener.stats();
                let down = listener.is_shut_down();
                assert!(listener.remove_raw(std::ptr::null_mut()).is_err(), "refused, not a deadlock");
                Ok([count, u64::from(debug.contains("buffers: 2")) + u64::from(!down) + stats.malformed])
            })
            .unwrap();
        let buffers: Vec<_> = (0..2)
            .map(|_| {
                let b = HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell.clone(), protocol);
                Arc::new(b.unwrap())
            })
            .collect();
        buffers.iter().for_each(|b| listener.add(b.clone()).unwrap());
        let reply = Wave::new(buffers[0].clone(), 3).call(ASK, |_| [0; 8]).unwrap();
        assert_eq!(reply.lane(2), [2, 2]);
        listener.shutdown();
    });
}

fn runtime_memory(packets: u32) -> Vec<u64> {
    vec![0u64; buffer_size(packets).unwrap() / 8]
}

/// A service that asks its runtime everything read-only, and one that does so while a disable of
/// the buffer it serves is in progress on another thread. (The lifecycle speaks the stack
/// protocol.)
#[test]
fn a_service_may_ask_its_runtime() {
    returns_within("a service asking its runtime", LIMIT, move || {
        let runtime = Arc::new(HostcallRuntime::new());
        let weak = Arc::downgrade(&runtime);
        let serving = Arc::new(AtomicBool::new(false));
        let in_service = serving.clone();
        runtime
            .services()
            .register_lane(ASK, "ask", move |r| {
                let runtime = weak.upgrade().expect("the runtime");
                if r[0] == 1 {
                    // Let a disable of this very buffer start and wait for this poll.
                    in_service.store(true, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(50));
                }
                let count = runtime.buffer_count() as u64;
                let debug = format!("{runtime:?}");
                let running = runtime.is_running();
                let stats = runtime.services().stats();
                Ok([
                    count,
                    u64::from(debug.contains("HostcallRuntime")) + u64::from(running) + stats.malformed,
                ])
            })
            .unwrap();
        let (mut one, mut two) = (runtime_memory(4), runtime_memory(4));
        let (a, b) = (one.as_mut_ptr().cast::<u8>(), two.as_mut_ptr().cast::<u8>());
        // SAFETY: both memories outlive their enablement (disabled below).
        unsafe {
            runtime.enable(a, 4, QueueId(0x5e_0001)).unwrap();
            runtime.enable(b, 4, QueueId(0x5e_0002)).unwrap();
        }
        // SAFETY: `a` stays enabled while the wave is used.
        let wave = unsafe { EmulatedWave::new(a, 4, 1) }.unwrap();
        assert_eq!(wave.call(ASK, |_| [0; 8]).unwrap().lane(0), [2, 2]);

        // The service runs on `a` while `a` is disabled: the disable waits for that poll, and the
        // service's questions do not wait for the disable.
        let call = thread::spawn(move || wave.call(ASK, |_| [1, 0, 0, 0, 0, 0, 0, 0]).unwrap().lane(0));
        while !serving.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        runtime.disable(a, QueueId(0x5e_0001)).unwrap();
        let answer = call.join().unwrap();
        assert!(answer[0] == 1 || answer[0] == 2, "{answer:?}");
        runtime.disable(b, QueueId(0x5e_0002)).unwrap();
        assert!(!runtime.is_running());
        drop((one, two));
    });
}

for_every_protocol!(a_service_may_ask_its_listener);
