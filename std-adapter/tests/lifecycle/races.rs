//! Enable and disable racing with live waves, and the listener restarting under them.

use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Barrier};

/// 1,000 enable / call / disable cycles on 4 threads, each with freshly allocated memory that is
/// scribbled over and freed right after its disable, while two other buffers stay enabled with
/// waves hammering them. Any access of the listener to a disabled buffer would find the scribble
/// and count it as malformed.
#[test]
fn a_thousand_enable_disable_cycles_race_with_live_waves() {
    const CYCLERS: u64 = 4;
    const CYCLES: u64 = 250;
    let runtime = Arc::new(runtime());
    let stop = Arc::new(AtomicBool::new(false));
    let residents: Vec<Arc<RawMemory>> =
        (0..2).map(|_| Arc::new(RawMemory::buffer(Protocol::Stack, PACKETS))).collect();
    for (i, memory) in residents.iter().enumerate() {
        // SAFETY: the residents outlive their enablement (disabled at the end).
        unsafe { runtime.enable(memory.at(0), PACKETS, QueueId(0x0500_0000 + i as u64)) }.unwrap();
    }
    let started = Instant::now();
    let hammers: Vec<_> = residents
        .iter()
        .enumerate()
        .flat_map(|(i, memory)| (0..2).map(move |w| (i, w, memory.clone())))
        .map(|(i, w, memory)| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mask = if calls % 2 == 0 { u64::MAX } else { 0x8000_0000_0000_0001 | calls << 4 };
                    add_call(memory.at(0), PACKETS, mask, (i as u64) << 40 | (w as u64) << 32 | calls << 8);
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let barrier = Arc::new(Barrier::new(CYCLERS as usize));
    let cyclers: Vec<_> = (0..CYCLERS)
        .map(|t| {
            let (runtime, barrier) = (runtime.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for cycle in 0..CYCLES {
                    let mut memory = RawMemory::buffer(Protocol::Stack, PACKETS);
                    let queue = QueueId(0x0600_0000 + t);
                    // SAFETY: `memory` is freed only after `disable` returns.
                    unsafe { runtime.enable(memory.at(0), PACKETS, queue) }.unwrap();
                    for call in 0..3 {
                        add_call(
                            memory.at(0),
                            PACKETS,
                            1 << (cycle % 64) | 1 << call,
                            t << 40 | cycle << 16 | call << 8,
                        );
                    }
                    runtime.disable(memory.at(0), queue).unwrap();
                    memory.scribble();
                }
            })
        })
        .collect();
    for cycler in cyclers {
        cycler.join().unwrap();
    }
    let cycling = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let resident_calls: u64 = hammers.into_iter().map(|h| h.join().unwrap()).sum();
    for (i, memory) in residents.iter().enumerate() {
        runtime.disable(memory.at(0), QueueId(0x0500_0000 + i as u64)).unwrap();
    }
    assert!(!runtime.is_running());
    let stats = runtime.services().stats();
    eprintln!(
        "{} cycles in {cycling:?} alongside {resident_calls} resident calls; {:?}",
        CYCLERS * CYCLES,
        stats.total()
    );
    assert_eq!(stats.malformed, 0, "the listener touched a disabled buffer");
    assert_eq!(stats.services[&ADD].1.packets, CYCLERS * CYCLES * 3 + resident_calls);
    assert!(resident_calls > 0);
}

/// Buffers enabled and disabled on threads of their own, none resident: the listener stops and
/// starts again over and over while other threads enable.
#[test]
fn the_listener_restarts_under_racing_enables_and_disables() {
    let runtime = Arc::new(runtime());
    let threads: Vec<_> = (0..3u64)
        .map(|t| {
            let runtime = runtime.clone();
            thread::spawn(move || {
                let memory = RawMemory::buffer(Protocol::Stack, 2);
                for cycle in 0..100u64 {
                    let queue = QueueId(0x0700_0000 + t);
                    // SAFETY: `memory` outlives every enablement.
                    unsafe { runtime.enable(memory.at(0), 2, queue) }.unwrap();
                    add_call(memory.at(0), 2, 1 << t, cycle << 8);
                    runtime.disable(memory.at(0), queue).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(!runtime.is_running());
    assert_eq!(runtime.services().stats().services[&ADD].1.packets, 300);
}
