//! Every refusal counted by its reason: one test per [`Reason`] provokes it through a listener and
//! reads its counter, for the registry and for the buffer; the listener's events, the histograms,
//! the suppressed log lines, and the table `Stats` prints.

use hostcall::prelude::*;
use hostcall::{
    observe::{Reason, Stats},
    services::devmem::DevMemLimits,
    services::message::{MessageLimits, OPEN_MESSAGE_OVERHEAD},
    services::printf::{PrintfMessage, Streams},
    HostMemory, HostcallBuffer, Listener, ListenerConfig, MemoryError, ParkingDoorbell, Wave,
};
use hostcall_core::{ErrorCode, DEVMEM, PRINTF};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const ECHO: u32 = 100;
const SLOW: u32 = 101;

/// A listener with PRINTF (output dropped) within `limits`, DEVMEM over `memory` within
/// `devmem`, an echo service, and one stack buffer of 4 packets.
fn listener_with(
    limits: MessageLimits,
    memory: Arc<dyn DeviceMemory>,
    devmem: DevMemLimits,
) -> (Listener, Arc<HostcallBuffer>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let services = listener.services();
    services.enable_printf(Streams { stdout: std::io::sink(), stderr: std::io::sink() }, limits).unwrap();
    services.enable_devmem(memory, devmem).unwrap();
    services.register_lane(ECHO, "echo", |r| Ok([r[0], 0])).unwrap();
    let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 4, doorbell).unwrap());
    listener.add(buffer.clone()).unwrap();
    (listener, buffer)
}

fn default_listener() -> (Listener, Arc<HostcallBuffer>) {
    listener_with(MessageLimits::default(), Arc::new(HostMemory), DevMemLimits::default())
}

/// `reason`'s count for the registry and for `buffer` (which must still be served).
fn counted(stats: &Stats, buffer: &HostcallBuffer, reason: Reason) -> (u64, u64) {
    let of_buffer = stats.buffers[&(buffer.as_ptr() as usize)].refusals.get(reason);
    (stats.refusals.get(reason), of_buffer)
}

/// Asserts `reason` was counted `n` times, for the registry and the buffer, and nothing else.
fn assert_only(listener: &Listener, buffer: &HostcallBuffer, reason: Reason, n: u64) {
    let stats = listener.stats();
    assert_eq!(counted(&stats, buffer, reason), (n, n), "{reason}:\n{stats}");
    assert_eq!(stats.refusals.total(), n, "only {reason} counted:\n{stats}");
}

fn allocate(buffer: &Arc<HostcallBuffer>, lanes: usize, size: u64) -> Vec<[u64; 2]> {
    let reply =
        Wave::new(buffer.clone(), lanes as u32).call(DEVMEM, |_| [0, size, 0, 0, 0, 0, 0, 0]).unwrap();
    (0..lanes).map(|lane| reply.lane(lane)).collect()
}

fn print(buffer: &Arc<HostcallBuffer>, lanes: usize, message: Vec<u64>) -> Vec<[u64; 2]> {
    let reply = Wave::new(buffer.clone(), lanes as u32).send_messages(PRINTF, |_| message.clone()).unwrap();
    (0..lanes).map(|lane| reply.lane(lane)).collect()
}

#[test]
fn unknown_service() {
    let (listener, buffer) = default_listener();
    let reply = Wave::new(buffer.clone(), 3).call(77, |_| [0; 8]).unwrap();
    assert_eq!(reply.lane(0), ErrorCode::UnknownService.reply());
    assert_only(&listener, &buffer, Reason::UnknownService, 3);
}

#[test]
fn malformed_packet() {
    let (listener, buffer) = default_listener();
    let hostcall_core::AnyView::Stack(view) = buffer.view() else { unreachable!() };
    let prefix = view.prefix();
    // The free-list's top pushed as the ready-stack: every packet visited, none READY.
    prefix.ready_stack.store(prefix.free_stack.load(Ordering::Acquire), Ordering::Release);
    buffer.doorbell().ring();
    let deadline = Instant::now() + Duration::from_secs(10);
    while listener.stats().refusals.get(Reason::MalformedPacket) == 0 {
        assert!(Instant::now() < deadline, "the listener never counted the malformed packets");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = listener.stats();
    let (registry, of_buffer) = counted(&stats, &buffer, Reason::MalformedPacket);
    assert!(registry > 0 && registry == of_buffer && registry == stats.malformed, "{stats}");
}

#[test]
fn bad_request() {
    let (listener, buffer) = default_listener();
    let bad = PrintfMessage::new(b"x").control(2).into_words();
    assert_eq!(print(&buffer, 2, bad), [ErrorCode::BadRequest.reply(); 2]);
    assert_only(&listener, &buffer, Reason::BadRequest, 2);
}

#[test]
fn open_messages() {
    let limits = MessageLimits::default().with_max_open(1);
    let (listener, buffer) = listener_with(limits, Arc::new(HostMemory), DevMemLimits::default());
    // Two lanes, each a message of several chunks: the second lane's BEGIN finds one open.
    let long = PrintfMessage::new(b"%d %d %d %d %d %d %d %d\n").int(1).int(2).int(3).int(4);
    let long = long.int(5).int(6).int(7).int(8).into_words();
    let replies = print(&buffer, 2, long);
    assert_eq!(replies.iter().filter(|r| **r == ErrorCode::Refused.reply()).count(), 1, "{replies:?}");
    assert_only(&listener, &buffer, Reason::OpenMessages, 1);
}

#[test]
fn held_bytes() {
    let limits = MessageLimits::default().with_max_held_bytes(OPEN_MESSAGE_OVERHEAD + 64);
    let (listener, buffer) = listener_with(limits, Arc::new(HostMemory), DevMemLimits::default());
    let long = PrintfMessage::new("x".repeat(400).as_bytes()).into_words();
    assert_eq!(print(&buffer, 1, long), [ErrorCode::Refused.reply()]);
    assert_only(&listener, &buffer, Reason::HeldBytes, 1);
}

/// Lane 1 names lane 0's open message (the same wave, the same buffer): refused, and lane 0's
/// message goes on (the whole story across buffers: `tests/isolation.rs`).
#[test]
fn foreign_message() {
    use hostcall_core::message::Descriptor;
    let (listener, buffer) = default_listener();
    let ok = PrintfMessage::new(b"ok\n").into_words(); // 2 words
    let begin = [Descriptor::new(true, false, 2, 0).unwrap().encode(), ok[0], ok[1], 0, 0, 0, 0, 0];
    let wave = Wave::new(buffer.clone(), 1);
    let id = Descriptor::raw_id(wave.call(PRINTF, |_| begin).unwrap().lane(0)[0]);
    let end = [Descriptor::new(false, true, 0, id).unwrap().encode(), 0, 0, 0, 0, 0, 0, 0];
    let other_lane = Wave::with_activemask(buffer.clone(), 0b10);
    assert_eq!(other_lane.call(PRINTF, |_| end).unwrap().lane(1), ErrorCode::BadRequest.reply());
    assert_only(&listener, &buffer, Reason::ForeignMessage, 1);
    assert_eq!(wave.call(PRINTF, |_| end).unwrap().lane(0), [3, 0], "lane 0 ends its own message");
}

#[test]
fn message_size() {
    let limits = MessageLimits::default().with_max_message_bytes(64);
    let (listener, buffer) = listener_with(limits, Arc::new(HostMemory), DevMemLimits::default());
    let long = PrintfMessage::new("x".repeat(400).as_bytes()).into_words();
    assert_eq!(print(&buffer, 1, long), [ErrorCode::Refused.reply()]);
    assert_only(&listener, &buffer, Reason::MessageSize, 1);
}

#[test]
fn printf_work() {
    let (listener, buffer) = default_listener();
    let mut message = PrintfMessage::new("%.4096g".repeat(40).as_bytes());
    for _ in 0..40 {
        message = message.float(1.0);
    }
    assert_eq!(print(&buffer, 1, message.into_words()), [[15, 0]], "cut after 15 conversions");
    assert_only(&listener, &buffer, Reason::PrintfWork, 1);
}

#[test]
fn printf_output() {
    let (listener, buffer) = default_listener();
    // 40,000 literal bytes and seven 4,096-wide fields: 68,672 bytes, past the 64 KiB of output.
    let mut message = PrintfMessage::new(format!("{}{}", "x".repeat(40_000), "%4096d".repeat(7)).as_bytes());
    for i in 0..7 {
        message = message.int(i);
    }
    assert_eq!(print(&buffer, 1, message.into_words()), [[64 << 10, 0]]);
    assert_only(&listener, &buffer, Reason::PrintfOutput, 1);
}

#[test]
fn devmem_size() {
    let (listener, buffer) = default_listener();
    assert_eq!(allocate(&buffer, 2, 0), [[0, ErrorCode::Refused as u64]; 2]);
    assert_only(&listener, &buffer, Reason::DevmemSize, 2);
}

#[test]
fn devmem_count() {
    let limits = DevMemLimits::default().with_max_allocations(1);
    let (listener, buffer) = listener_with(MessageLimits::default(), Arc::new(HostMemory), limits);
    let replies = allocate(&buffer, 3, 64);
    assert_ne!(replies[0][0], 0);
    assert_eq!(replies[1..], [[0, ErrorCode::Refused as u64]; 2]);
    assert_only(&listener, &buffer, Reason::DevmemCount, 2);
}

#[test]
fn devmem_bytes() {
    let limits = DevMemLimits::default().with_max_total(8 << 10);
    let (listener, buffer) = listener_with(MessageLimits::default(), Arc::new(HostMemory), limits);
    assert_eq!(allocate(&buffer, 1, 64 << 10), [[0, ErrorCode::Refused as u64]]);
    assert_only(&listener, &buffer, Reason::DevmemBytes, 1);
}

#[test]
fn bad_free() {
    let (listener, buffer) = default_listener();
    let reply = Wave::new(buffer.clone(), 4).call(DEVMEM, |_| [0x1000, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(reply.lane(3), [0, ErrorCode::BadRequest as u64]);
    assert_only(&listener, &buffer, Reason::BadFree, 4);
}

/// Memory that is always out of memory.
#[derive(Debug)]
struct Exhausted;

impl DeviceMemory for Exhausted {
    fn name(&self) -> &'static str {
        "exhausted"
    }
    fn allocate(&self, size: usize, _: usize) -> Result<NonNull<u8>, MemoryError> {
        Err(MemoryError::OutOfMemory { size })
    }
    unsafe fn free(&self, _: NonNull<u8>, _: usize, _: usize) {}
    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

#[test]
fn allocation_failure() {
    let (listener, buffer) =
        listener_with(MessageLimits::default(), Arc::new(Exhausted), DevMemLimits::default());
    assert_eq!(allocate(&buffer, 2, 64), [[0, ErrorCode::Refused as u64]; 2]);
    assert_only(&listener, &buffer, Reason::AllocationFailure, 2);
}

#[test]
fn handler_panic() {
    let (listener, buffer) = default_listener();
    listener.services().register_lane(7, "panics", |_| panic!("service bug")).unwrap();
    let reply = Wave::new(buffer.clone(), 2).call(7, |_| [0; 8]).unwrap();
    assert_eq!(reply.lane(1), ErrorCode::ServicePanicked.reply());
    assert_only(&listener, &buffer, Reason::HandlerPanic, 2);
}

/// A packet submitted while the listener is busy in a service when shutdown (grace 0) is asked is
/// answered with the shutdown error, and counted for its buffer.
#[test]
fn shutting_down() {
    let (listener, buffer) = default_listener();
    let (entered, service_entered) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = std::sync::Mutex::new(released);
    listener
        .services()
        .register_lane(SLOW, "slow", move |_| {
            entered.send(()).unwrap();
            released.lock().unwrap().recv_timeout(Duration::from_secs(30)).unwrap();
            Ok([1, 0])
        })
        .unwrap();
    let base = buffer.as_ptr() as usize;
    let stats = std::thread::scope(|s| {
        let slow = s.spawn(|| Wave::new(buffer.clone(), 1).call(SLOW, |_| [0; 8]).unwrap().lane(0));
        service_entered.recv_timeout(Duration::from_secs(30)).unwrap();
        let late = s.spawn(|| Wave::new(buffer.clone(), 2).call(ECHO, |_| [5; 8]).unwrap().lane(1));
        std::thread::sleep(Duration::from_millis(50)); // the late packet is submitted
        let shutdown = s.spawn(|| listener.shutdown_timeout(Duration::ZERO));
        std::thread::sleep(Duration::from_millis(50)); // the stop is asked
        release.send(()).unwrap();
        assert_eq!(slow.join().unwrap(), [1, 0]);
        assert_eq!(late.join().unwrap(), ErrorCode::ShuttingDown.reply());
        let _ = shutdown.join().unwrap();
        listener.stats()
    });
    assert_eq!(stats.refusals.get(Reason::ShuttingDown), 2, "{stats}");
    // The slow call may also have run past the listener's `stuck_after` (then it is counted once).
    let stuck = stats.refusals.get(Reason::StuckService);
    assert!(stuck <= 1, "{stats}");
    assert_eq!(stats.refusals.total() - stuck, 2, "{stats}");
    // The buffer is no longer served after the shutdown: its counters went with it.
    assert!(!stats.buffers.contains_key(&base));
}

#[test]
fn the_listener_counts_wakes_timeouts_empty_scans_and_times_each_packet() {
    let (listener, buffer) = default_listener();
    std::thread::sleep(Duration::from_millis(50)); // idle: spins, then doorbell timeouts
    for _ in 0..5 {
        Wave::new(buffer.clone(), 2).call(ECHO, |_| [1; 8]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = listener.stats();
    let events = stats.events;
    assert!(events.timeout_polls > 0 && events.empty_scans > 0, "{stats}");
    assert!(events.doorbell_wakes > 0, "the waves ring the doorbell:\n{stats}");
    let echo = &stats.services[&ECHO].1;
    assert_eq!((echo.packets, echo.service_time.count(), echo.queue_wait.count()), (5, 5, 5), "{stats}");
    let b = &stats.buffers[&(buffer.as_ptr() as usize)];
    assert_eq!((b.packets, b.lane_calls, b.errors, b.num_packets), (5, 10, 0, 4));
    let table = stats.to_string();
    assert!(table.contains("echo") && table.contains("p50<="), "{table}");
    assert!(table.contains("doorbell wakes"), "{table}");
}

/// Twenty bad frees in one packet: the rate limit logs ten lines a window at most, and the rest
/// are counted as suppressed for this registry.
#[test]
fn log_lines_suppressed_by_the_rate_limit_are_counted() {
    let _ = env_logger::builder().is_test(true).filter_level(log::LevelFilter::Warn).try_init();
    let (listener, buffer) = default_listener();
    Wave::new(buffer.clone(), 20).call(DEVMEM, |_| [0x2000, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let stats = listener.stats();
    assert_eq!(stats.refusals.get(Reason::BadFree), 20);
    assert!(stats.log_lines_suppressed >= 10, "{stats}");
}

/// An idle listener stops without waiting out its grace.
#[test]
fn an_idle_listener_shuts_down_without_waiting_its_grace() {
    let (listener, buffer) = default_listener();
    Wave::new(buffer, 1).call(ECHO, |_| [1; 8]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let started = Instant::now();
    listener.shutdown_timeout(Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[test]
fn stalled_request() {
    use hostcall_core::{line, AnyClaimed, AnySubmitted, CompletedPacket, Protocol, SubmittedPacket};
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    // Spinning: the looks (`line::STALL_LOOKS` of them) come within milliseconds.
    let listener = Listener::start(doorbell.clone(), ListenerConfig::spinning()).unwrap();
    listener.services().register_lane(ECHO, "echo", |r| Ok([r[0], r[7]])).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, Protocol::Line).unwrap());
    listener.add(buffer.clone()).unwrap();
    let view = buffer.view();
    let Ok(Some(AnyClaimed::Line(mut packet))) = view.claim(2) else { panic!("a free line packet") };
    let (index, seq) = (packet.index(), packet.seq());
    packet.write_lane(5, &[1, 2, 3, 4, 5, 6, 7, 8]);
    // The wave's last word is held back: it is taken away before the head is written (a spinning
    // listener may take the packet the moment the head lands), so the listener finds only the
    // head and the other words carrying this call's sequence.
    let word = &view.line().unwrap().request(index).lanes[5][line::REQUEST_LANE_WORDS - 1];
    // Relaxed, as the wave's own stores of its words: every word carries its sequence, so the
    // line protocol orders nothing by it (the listener's Acquire loads find the tag, or do not).
    let landed = word.swap(0, Ordering::Relaxed);
    assert_eq!(line::seq_of(landed), seq);
    let stored = AnySubmitted::Line(packet.submit(ECHO, 1 << 5));
    let deadline = Instant::now() + Duration::from_secs(60);
    while listener.stats().refusals.get(Reason::StalledRequest) == 0 {
        assert!(Instant::now() < deadline, "the listener never reported the stalled request");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20)); // more looks: still reported once
    assert_only(&listener, &buffer, Reason::StalledRequest, 1);
    assert_eq!(listener.stats().malformed, 0, "late is not malformed");
    // The word lands after the report: the call is served.
    word.store(landed, Ordering::Relaxed); // Relaxed: as the swap above
    let Ok(done) = stored.wait_until(|_| Instant::now() < deadline) else {
        panic!("the late call was not served")
    };
    assert_eq!(done.reply(5), [1, 8]);
}
