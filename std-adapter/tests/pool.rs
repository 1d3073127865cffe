//! Striped serving: a [`ListenerPool`] splits each phase or line buffer's packets between its
//! threads. Emulated waves hammer one buffer; every reply is checked, every packet must be served
//! by the thread whose stripe holds it, and every thread must have served.

#[macro_use]
mod common;

use hostcall::prelude::*;
use hostcall::{
    stripes, BufferRegistration, Error, HostMemory, HostcallBuffer, ListenerConfig, ListenerPool,
    ParkingDoorbell, Protocol, Wave, STRIPE_ALIGN,
};
use hostcall_core::PacketRequest;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;

/// The service id [`Recorder`] is registered under.
const ECHO: u32 = 100;

/// Answers `request[0] + lane` and records which thread served which packet index.
#[derive(Clone, Default)]
struct Recorder {
    served_by: Arc<Mutex<HashMap<u32, HashMap<String, u64>>>>,
}

impl PacketService for Recorder {
    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let name = thread::current().name().unwrap_or("?").to_owned();
        *self.served_by.lock().unwrap().entry(packet.index()).or_default().entry(name).or_default() += 1;
        let lanes: Vec<usize> = packet.lanes().collect();
        for lane in lanes {
            let r = packet.request(lane);
            packet.reply(lane, [r[0] + lane as u64, r[1]]);
        }
    }
}

/// A buffer of `packets` packets in host memory, speaking `protocol`, rung through `doorbell`.
fn buffer(doorbell: &Arc<dyn Doorbell>, packets: u64, protocol: Protocol) -> Arc<HostcallBuffer> {
    Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell.clone(), protocol).unwrap(),
    )
}

#[test]
fn stripes_are_disjoint_aligned_and_cover_the_buffer() {
    for n in [2u32, 15, 16, 17, 64, 100, 1056, 4224] {
        for threads in 1..=8 {
            let s = stripes(n, threads);
            assert_eq!(s.len(), threads);
            assert_eq!(s[0].start, 0);
            assert_eq!(s.last().unwrap().end, n);
            for pair in s.windows(2) {
                assert_eq!(pair[0].end, pair[1].start, "n={n} threads={threads}");
                assert!(pair[0].end % STRIPE_ALIGN == 0 || pair[0].end == n);
            }
        }
    }
}

fn three_threads_split_one_buffer_and_each_serves_only_its_stripe(protocol: Protocol) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let config = ListenerConfig::default().with_thread_name("striped".into());
    let pool = ListenerPool::start(3, doorbell.clone(), config).unwrap();
    let recorder = Recorder::default();
    pool.services().register_packet(ECHO, "echo", recorder.clone()).unwrap();
    let packets = 48;
    let buffer = buffer(&doorbell, packets, protocol);
    pool.add(buffer.clone()).unwrap();
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
        assert_eq!(name, &format!("striped-{owner}"), "packet {index} served outside its stripe");
        *per_thread.entry(name.clone()).or_default() += count;
    }
    assert_eq!(per_thread.len(), 3, "every thread served: {per_thread:?}");
    assert_eq!(per_thread.values().sum::<u64>(), waves * calls);
}

fn ranges_of_one_buffer_are_claimed_once(protocol: Protocol) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::default()).unwrap();
    pool.services().register_packet(ECHO, "echo", Recorder::default()).unwrap();
    let buffer = buffer(&doorbell, 32, protocol);
    let [a, b] = pool.listeners() else { panic!("two listeners") };
    a.add(BufferRegistration::new(buffer.clone()).range(0..16)).unwrap();
    // Overlapping a claimed range, or the whole buffer, is refused; a disjoint range is not.
    assert!(matches!(
        b.add(BufferRegistration::new(buffer.clone()).range(8..24)),
        Err(Error::AlreadyServed { .. })
    ));
    assert!(matches!(b.add(buffer.clone()), Err(Error::AlreadyServed { .. })));
    b.add(BufferRegistration::new(buffer.clone()).range(16..32)).unwrap();
    let wave = Wave::new(buffer.clone(), 3);
    for c in 0..40 {
        assert_eq!(wave.call(ECHO, |_| [c, 1, 0, 0, 0, 0, 0, 0]).unwrap().lane(2), [c + 2, 1]);
    }
    pool.remove_buffer(&buffer).unwrap();
    assert_eq!(pool.shutdown().total().errors, 0);
}

#[test]
fn several_buffers_and_removal() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::default()).unwrap();
    pool.services().register_packet(ECHO, "echo", Recorder::default()).unwrap();
    let a = buffer(&doorbell, 40, Protocol::Phase);
    let b = buffer(&doorbell, 5, Protocol::Phase); // one stripe only: the second thread does not get it
    let stack = buffer(&doorbell, 8, Protocol::Stack);
    for buffer in [&a, &b, &stack] {
        pool.add(buffer.clone()).unwrap();
    }
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 2 + 1 + 1);
    for buffer in [&a, &b, &stack] {
        let wave = Wave::new(buffer.clone(), 3);
        for c in 0..40 {
            assert_eq!(wave.call(ECHO, |_| [c, 1, 0, 0, 0, 0, 0, 0]).unwrap().lane(2), [c + 2, 1]);
        }
    }
    // A stack buffer cannot be split.
    assert!(matches!(
        pool.listeners()[0].add(BufferRegistration::new(stack.clone()).range(0..4)),
        Err(Error::Unsupported(_))
    ));
    pool.remove_buffer(&a).unwrap();
    pool.remove_buffer(&b).unwrap();
    pool.remove_buffer(&stack).unwrap();
    assert!(pool.remove_buffer(&a).is_err());
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 0);
    assert_eq!(pool.shutdown().total().errors, 0);
}

for_splittable_protocols!(
    three_threads_split_one_buffer_and_each_serves_only_its_stripe,
    ranges_of_one_buffer_are_claimed_once,
);

/// One registration for a pool too: memory the caller manages is striped as a buffer is, and
/// removed with `remove_raw`; a registration with a range of its own is refused (the pool splits
/// buffers itself), and nothing of it is served.
#[test]
fn a_pool_stripes_raw_memory_and_refuses_a_range() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::default()).unwrap();
    pool.services().register_packet(ECHO, "echo", Recorder::default()).unwrap();
    let buffer = buffer(&doorbell, 32, Protocol::Phase);
    let ranged = pool.add(BufferRegistration::new(buffer.clone()).range(0..16));
    assert!(matches!(ranged, Err(Error::Unsupported(_))), "{ranged:?}");
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 0);

    // SAFETY: `buffer` (initialised for the phase protocol, accessed only atomically) outlives
    // the pool's use of its memory: removed below, before it is dropped.
    let raw = unsafe { BufferRegistration::raw(Protocol::Phase, buffer.as_ptr(), buffer.len(), 32) };
    pool.add(raw).unwrap();
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).collect::<Vec<_>>(), [1, 1]);
    let wave = Wave::new(buffer.clone(), 3);
    for c in 0..40 {
        assert_eq!(wave.call(ECHO, |_| [c, 1, 0, 0, 0, 0, 0, 0]).unwrap().lane(2), [c + 2, 1]);
    }
    pool.remove_raw(buffer.as_ptr()).unwrap();
    assert!(matches!(pool.remove_raw(buffer.as_ptr()), Err(Error::Poller(_))), "removed twice");
    assert_eq!(pool.listeners().iter().map(|l| l.buffer_count()).sum::<usize>(), 0);
    assert_eq!(pool.shutdown().total().errors, 0);
}
