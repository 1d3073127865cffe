//! Striped serving of a line-protocol buffer: a [`ListenerPool`] splits its packets between its
//! threads as it does a phase buffer's. Emulated waves hammer one buffer; every reply is checked,
//! every packet must be served by the thread whose stripe holds it, and every thread must have
//! served.

use hostcall::buffer::Protocol;
use hostcall::prelude::*;
use hostcall::threads::pool::{stripes, ListenerPool};
use hostcall::{Error, ListenerConfig, ParkingDoorbell, Wave};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread;

#[path = "common/pool.rs"]
mod pool_common;
use pool_common::{buffer, Recorder, ECHO};

#[test]
fn three_threads_split_one_line_buffer_and_each_serves_only_its_stripe() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let config = ListenerConfig::default().with_thread_name("line-striped".into());
    let pool = ListenerPool::start(3, doorbell.clone(), config).unwrap();
    let recorder = Recorder::default();
    pool.services().register_packet(ECHO, "echo", recorder.clone()).unwrap();
    let packets = 48;
    let buffer = buffer(&doorbell, packets, Protocol::Line);
    pool.add_buffer(buffer.clone()).unwrap();
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 3, "one stripe per thread");

    // As many waves as packets: consecutive waves start their claims at consecutive indices, so
    // they cover every stripe.
    let (waves, calls, lanes) = (packets, 40u64, 8u32);
    let threads: Vec<_> = (0..waves)
        .map(|w| {
            let wave = Wave::new(buffer.clone(), lanes);
            thread::spawn(move || {
                for c in 0..calls {
                    let tag = w << 32 | c << 8;
                    let reply = wave.call(ECHO, |_| [tag, w, 0, 0, 0, 0, 0, 0]).unwrap();
                    for lane in 0..lanes as usize {
                        assert_eq!(reply.lane(lane), [tag + lane as u64, w], "wave {w} call {c} lane {lane}");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }

    pool.remove_buffer(&buffer).unwrap();
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 0);
    let stats = pool.shutdown();
    assert_eq!(stats.total().packets, waves * calls);
    assert_eq!(stats.total().lane_calls, waves * calls * u64::from(lanes));
    assert_eq!(stats.total().errors, 0);

    let ranges = stripes(packets as u32, 3);
    let served_by = recorder.served_by.lock().unwrap();
    let mut per_thread: HashMap<String, u64> = HashMap::new();
    for (index, threads) in served_by.iter() {
        let owner = ranges.iter().position(|r| r.contains(index)).unwrap();
        assert_eq!(threads.len(), 1, "packet {index} served by {threads:?}");
        let (name, count) = threads.iter().next().unwrap();
        assert_eq!(name, &format!("line-striped-{owner}"), "packet {index} served outside its stripe");
        *per_thread.entry(name.clone()).or_default() += count;
    }
    assert_eq!(per_thread.len(), 3, "every thread served: {per_thread:?}");
    assert_eq!(per_thread.values().sum::<u64>(), waves * calls);
}

#[test]
fn line_ranges_are_claimed_like_phase_ones() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::default()).unwrap();
    pool.services().register_packet(ECHO, "echo", Recorder::default()).unwrap();
    let buffer = buffer(&doorbell, 32, Protocol::Line);
    let [a, b] = pool.listeners() else { panic!("two listeners") };
    a.add_buffer_range(buffer.clone(), 0..16).unwrap();
    // Overlapping a claimed range, or the whole buffer, is refused; a disjoint range is not.
    assert!(matches!(b.add_buffer_range(buffer.clone(), 8..24), Err(Error::AlreadyServed { .. })));
    assert!(matches!(b.add_buffer(buffer.clone()), Err(Error::AlreadyServed { .. })));
    b.add_buffer_range(buffer.clone(), 16..32).unwrap();
    let wave = Wave::new(buffer.clone(), 3);
    for c in 0..40 {
        assert_eq!(wave.call(ECHO, |_| [c, 1, 0, 0, 0, 0, 0, 0]).unwrap().lane(2), [c + 2, 1]);
    }
    pool.remove_buffer(&buffer).unwrap();
    assert_eq!(pool.shutdown().total().errors, 0);
}
