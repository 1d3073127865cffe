//! LLVM-RPC buffers served by the same `Listener` (and `ListenerPool`) as the other protocols,
//! beside a phase buffer: ROCm's `'r'` opcodes and this project's `'h'` reach the listener's
//! hostcall services through the core's producer path; LLVM libc's `'c'` opcodes are followed
//! turn by turn by the listener's host of the buffer, with the policy, budgets and output sink
//! the buffer was added with; an opcode the listener has no handler for is handed back untouched
//! (the client reads its own packet, so it does not hang), counted as malformed.

use hostcall::prelude::*;
use hostcall::{
    observe::Reason,
    services::printf::Stream,
    services::rpc::client::one_lane::{fopen, one_packet},
    services::rpc::client::{printf, printf_opcode, CArg},
    services::rpc::{RpcLimits, RpcOptions, RpcPolicy, SharedSink},
    BufferRegistration, DeviceAllocation, HostMemory, HostcallBuffer, Listener, ListenerConfig, ListenerPool,
    ParkingDoorbell, Protocol,
};
use hostcall_core::rpc::{opcode, Client, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::{ClaimedPacket, CompletedPacket, SubmittedPacket};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ADD: u32 = 100;
const PORTS: u64 = 8;
const LANES: u32 = 4;

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(10)
}

/// A listener on a doorbell of its own, serving ADD (`[r[0] + r[1], 7]`).
fn listener_with_add(config: ListenerConfig) -> (Listener, Arc<dyn Doorbell>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).unwrap();
    listener.services().register_lane(ADD, "add", |r| Ok([r[0] + r[1], 7])).unwrap();
    (listener, doorbell)
}

#[test]
fn rpc_ports_are_served_beside_a_phase_buffer() {
    let (listener, doorbell) = listener_with_add(ListenerConfig::spinning());
    let protocol = Protocol::Rpc { lanes: LANES };
    let len = protocol.buffer_size(PORTS as u32).unwrap();
    let memory = DeviceAllocation::new(Arc::new(HostMemory), len, protocol.buffer_align()).unwrap();
    let (sink, output) = capture();
    // SAFETY: `memory` stays allocated until after `remove_raw`, touched only atomically.
    let registration = unsafe { BufferRegistration::raw(protocol, memory.as_ptr(), len, PORTS) };
    listener.add(registration.with_rpc(RpcOptions::default().with_sink(sink))).unwrap();
    let phase = Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell.clone(), Protocol::Phase).unwrap(),
    );
    listener.add(phase.clone()).unwrap();

    // SAFETY: as above; the view is used only while the listener serves the memory.
    let view = unsafe { View::from_raw(memory.as_ptr(), len, PORTS as u32, LANES) }.unwrap();
    let locks = [AtomicU32::new(0)];
    let client = Client::new(view, &locks).unwrap();
    std::thread::scope(|s| {
        for wave in 0..4u64 {
            let client = &client;
            s.spawn(move || {
                for call in 0..50u64 {
                    let mut claimed = loop {
                        if let Some(claimed) = client.claim(wave as u32) {
                            break claimed;
                        }
                        std::hint::spin_loop();
                    };
                    for lane in 0..LANES as usize {
                        claimed.write_lane(lane, &[wave * 1000 + call, lane as u64, 0, 0, 0, 0, 0, 0]);
                    }
                    let done = claimed.submit(ADD, 0b1011).wait(std::hint::spin_loop);
                    for lane in [0usize, 1, 3] {
                        assert_eq!(done.reply(lane), [wave * 1000 + call + lane as u64, 7]);
                    }
                }
            });
        }
        // libc's printf, many turns a call, on the other ports at the same time.
        for wave in 4..8u32 {
            let client = &client;
            s.spawn(move || {
                for call in 0..20i32 {
                    let op = printf_opcode(wave % 2, wave >= 6);
                    let args = [CArg::Int(call), CArg::Str(Some(b"lanes")), CArg::Double(0.5)];
                    let (format, args) = (&b"%d %s %.2f\n"[..], &args[..]);
                    let printed =
                        printf(client, 0, op, 0b101, None, &|_| (format, args), &mut patience()).unwrap();
                    let expected = format!("{call} lanes 0.50\n").len() as i32;
                    assert_eq!((printed[0], printed[2]), (expected, expected));
                }
            });
        }
        // The phase buffer is served at the same time.
        let wave = hostcall::Wave::new(phase.clone(), 1);
        assert_eq!(wave.call(ADD, |_| [40, 2, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [42, 7]);
    });
    let output = output.lock().unwrap();
    for call in 0..20 {
        let line = format!("{call} lanes 0.50\n").into_bytes();
        let count = |stream| output.iter().filter(|(s, bytes)| *s == stream && *bytes == line).count();
        assert_eq!(
            (count(Stream::Stdout), count(Stream::Stderr)),
            (4, 4),
            "call {call}: 2 lanes x 2 waves each"
        );
    }
    drop(output);

    // A console write: the bytes written come back, the output is the sink's.
    let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT_NEWLINE, 1, 0).unwrap();
    port.send_n(|_| b"through the listener", &mut patience()).unwrap();
    let mut written = 0;
    port.recv(|_, w| written = w[0], &mut patience()).unwrap();
    port.close();
    assert_eq!(written, 21);

    // An unhandled opcode: the port comes back untouched.
    let mut port = client.try_open(opcode::opcode(opcode::OFFLOAD, 5), 1, 0).unwrap();
    port.send(|_| [5, 0x6f6c6c6568, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
    let mut echoed = [0; 2];
    port.recv(|_, w| echoed = [w[0], w[1]], &mut patience()).unwrap();
    port.close();
    assert_eq!(echoed, [5, 0x6f6c6c6568]);
    let stats = listener.services().stats();
    assert!(stats.total().lane_calls >= 200 * 3);
    assert_eq!(stats.malformed, 1, "the unhandled opcode, counted");
    let counters = listener.rpc_counters(memory.as_ptr()).unwrap();
    assert_eq!((counters.calls, counters.calls_done, counters.unhandled), (282, 282, 1));
    assert_eq!(counters.refused_lanes + counters.over_limit_lanes, 0);
    listener.remove_raw(memory.as_ptr()).unwrap();
    assert!(listener.rpc_counters(memory.as_ptr()).is_none(), "forgotten with the buffer");
    drop(memory);
}

type Captured = Arc<Mutex<Vec<(Stream, Vec<u8>)>>>;

/// A sink that records each write, and what it recorded.
fn capture() -> (SharedSink, Captured) {
    let output = Captured::default();
    let into = output.clone();
    (SharedSink::from_fn(move |stream, bytes| into.lock().unwrap().push((stream, bytes.to_vec()))), output)
}

/// A pool's threads serve stripes of one RPC buffer's ports: a call on any port is followed by
/// the thread whose stripe holds it; refusals of the buffer's policy and budgets are counted by
/// reason, for the buffer and the registry, and each refused call is answered as failed.
#[test]
fn a_pool_stripes_rpc_ports_and_counts_refusals() {
    const PORTS: u64 = 64; // two stripes of 32 over two threads
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let pool = ListenerPool::start(2, doorbell.clone(), ListenerConfig::spinning()).unwrap();
    let protocol = Protocol::Rpc { lanes: 1 };
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), PORTS, doorbell, protocol).unwrap());
    let (sink, output) = capture();
    let rpc = RpcOptions::default()
        .with_policy(RpcPolicy::default().without_console().with_files(std::env::temp_dir()))
        .with_limits(RpcLimits::default().with_stream_bytes(100))
        .with_sink(sink);
    pool.add(BufferRegistration::new(buffer.clone()).with_rpc(rpc)).unwrap();
    assert!(pool.listeners().iter().all(|l| l.rpc_counters(buffer.as_ptr()).is_some()));

    // SAFETY: the buffer outlives the view (it is used below only while the pool serves it).
    let view = unsafe { View::from_raw(buffer.as_ptr(), buffer.len(), PORTS as u32, 1) }.unwrap();
    let locks: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
    let client = Client::new(view, &locks).unwrap();
    let long = [b'x'; 200];
    // One lane's printf of `format` and `args` from port `start` (0: to stdout, 1: to stderr).
    let print = |start: u32, stream: u32, format: &[u8], args: &[CArg<'_>]| {
        let opcode = printf_opcode(stream, false);
        printf(&client, start, opcode, 1, None, &|_| (format, args), &mut patience()).unwrap()[0]
    };
    for start in [0u32, 40] {
        // printf is on: served, on a port of either stripe.
        assert_eq!(print(start, 0, b"port %d\n", &[CArg::Int(start as i32)]), 7 + (start >= 10) as i32);
        // The console is off: followed, answered 0 bytes.
        let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT, 1, start).unwrap();
        port.send_n(|_| b"refused", &mut patience()).unwrap();
        let mut written = u64::MAX;
        port.recv(|_, w| written = w[0], &mut patience()).unwrap();
        port.close();
        assert_eq!(written, 0);
        // A format past the stream budget: read to its end, answered -1.
        assert_eq!(print(start, 1, &long, &[]), -1);
    }
    let counters = pool.rpc_counters(buffer.as_ptr()).unwrap();
    assert_eq!((counters.calls_done, counters.refused_lanes), (6, 2), "the console writes");
    assert_eq!(counters.over_limit_lanes, 2, "the long formats");
    let stats = pool.stats();
    assert_eq!(stats.refusals.get(Reason::RpcRefused), 2);
    assert_eq!(stats.refusals.get(Reason::RpcStreamLength), 2);
    let of_buffer = stats.buffers[&(buffer.as_ptr() as usize)].refusals;
    assert_eq!((of_buffer.get(Reason::RpcRefused), of_buffer.get(Reason::RpcStreamLength)), (2, 2));
    let output = output.lock().unwrap();
    assert_eq!(*output, [(Stream::Stdout, b"port 0\n".to_vec()), (Stream::Stdout, b"port 40\n".to_vec())]);
    drop(output);

    // One FILE table for the buffer: a file opened on a port of one thread's stripe is closed on
    // a port of the other's; one left open is closed when the buffer is removed.
    let path = std::env::temp_dir().join(format!("hostcall-rpc-pool-{}.txt", std::process::id()));
    let name = path.file_name().unwrap().to_str().unwrap().as_bytes().to_vec(); // beneath temp_dir
    let w = &mut patience();
    let file = fopen(&client, 0, &name, b"w", w).unwrap();
    assert_ne!(file, 0);
    assert_eq!(one_packet(&client, 40, opcode::libc::CLOSE_FILE, [file, 0, 0, 0, 0, 0, 0, 0], w).unwrap(), 0);
    let kept = fopen(&client, 40, &name, b"r", w).unwrap();
    assert_ne!(kept, 0);
    assert!(open_fds_on(&path) > 0, "the file is open while the buffer is served");
    pool.remove_buffer(&buffer).unwrap();
    assert_eq!(open_fds_on(&path), 0, "closed with the buffer");
    std::fs::remove_file(&path).unwrap();
}

/// This process's descriptors open on `path` (Linux's `/proc/self/fd`).
fn open_fds_on(path: &std::path::Path) -> usize {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap();
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok()).filter(|target| target == path).count()
}

/// A port is as wide as its client's warp: a wave with lanes outside it is refused with an error
/// that says so (never a panic, never a reply missing lanes), and a wave that fits is served.
#[test]
fn a_wave_wider_than_the_ports_is_refused() {
    let (listener, doorbell) = listener_with_add(ListenerConfig::default());
    let protocol = Protocol::Rpc { lanes: LANES };
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), PORTS, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wide = hostcall::Wave::new(buffer.clone(), LANES + 1).with_timeout(Duration::from_secs(10));
    match wide.call(ADD, |_| [0; 8]) {
        Err(hostcall::Error::Unsupported(why)) => assert!(why.contains("outside"), "{why}"),
        other => panic!("a {}-lane wave on {LANES}-lane ports: {other:?}", LANES + 1),
    }
    let fits = hostcall::Wave::new(buffer.clone(), LANES).with_timeout(Duration::from_secs(10));
    let reply = fits.call(ADD, |lane| [lane as u64, 1, 0, 0, 0, 0, 0, 0]).unwrap();
    assert!((0..LANES as usize).all(|lane| reply.lane(lane) == [lane as u64 + 1, 7]));
    assert_eq!(listener.shutdown().total().lane_calls, u64::from(LANES));
}

/// Hostcall packets on an RPC buffer (each a whole call of one turn) are counted by the
/// listener's host as any turn, and the counts are published before each reply: a wave that got
/// its reply reads its call counted.
#[test]
fn hostcall_packets_on_an_rpc_buffer_are_counted_before_their_replies() {
    let (listener, doorbell) = listener_with_add(ListenerConfig::spinning());
    let protocol = Protocol::Rpc { lanes: 1 };
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 2, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = hostcall::Wave::new(buffer.clone(), 1).with_timeout(Duration::from_secs(10));
    for call in 1..=20u64 {
        assert_eq!(wave.call(ADD, |_| [call, 1, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [call + 1, 7]);
        let counters = listener.rpc_counters(buffer.as_ptr()).unwrap();
        assert_eq!((counters.turns, counters.calls, counters.calls_done), (call, call, call), "{counters:?}");
        assert_eq!(counters.unhandled + counters.deferred_turns + counters.held_bytes, 0, "{counters:?}");
    }
    listener.shutdown();
}
