//! A buffer's host state moves with its registration when a stuck call hands the listener's
//! other buffers to another thread (issue 36): an LLVM-RPC buffer's call in progress goes on
//! where it was on the new thread, and a line buffer's memory of a stalled request still knows it
//! reported it (a fresh memory would report it again). And an RPC turn's own work (its console
//! write, not a packet) is watched as one stuck call. Every wait is bounded: a stall fails the
//! test, never hangs it.

#[macro_use]
mod common;

use common::watchdog::returns_within;
use hostcall::observe::Reason;
use hostcall::prelude::*;
use hostcall::services::printf::Stream;
use hostcall::services::rpc::{RpcOptions, SharedSink};
use hostcall::{
    BufferOptions, BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell,
    Protocol, Wave,
};
use hostcall_core::rpc::{fill_packet, opcode, Client, Cursor};
use hostcall_core::sync::{AtomicU32, AtomicU64};
use hostcall_core::{line, AnyClaimed, AnySubmitted, CompletedPacket, SubmittedPacket};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ECHO: u32 = 100;
const BLOCK: u32 = 300;
/// How long a test waits for anything before failing.
const PATIENCE: Duration = Duration::from_secs(30);

fn buffer(doorbell: &Arc<dyn Doorbell>, protocol: Protocol, packets: u64) -> Arc<HostcallBuffer> {
    Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell.clone(), protocol).unwrap(),
    )
}

/// Waits until `done()`, failing with `what` after [`PATIENCE`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A line call on packet `start` of `buffer` whose last word is held back (it carries sequence
/// 0): the call and the word's value as the wave stored it.
fn stalled_call(buffer: &HostcallBuffer, start: usize) -> (AnySubmitted<'_>, &AtomicU64, u64) {
    let view = buffer.view();
    let Ok(Some(AnyClaimed::Line(mut packet))) = view.claim(start) else { panic!("a free line packet") };
    let index = packet.index();
    packet.write_lane(0, &[start as u64, 2, 3, 4, 5, 6, 7, 8]);
    let word = &view.line().unwrap().request(index).lanes[0][line::REQUEST_LANE_WORDS - 1];
    // Taken away before the head is written: a spinning listener may take the packet the moment
    // the head lands. Relaxed, as the wave's own stores of its words: every word carries its
    // sequence, so the line protocol orders nothing by it.
    let landed = word.swap(0, Ordering::Relaxed);
    let call = AnySubmitted::Line(packet.submit(ECHO, 1));
    (call, word, landed)
}

#[test]
fn host_state_moves_with_its_buffer_to_another_thread() {
    returns_within("host state across a relief", PATIENCE * 2, || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        // Spinning: a stalled line request's looks (`line::STALL_LOOKS`) come within milliseconds.
        let config = ListenerConfig::spinning().with_stuck_after(Duration::from_millis(20));
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        listener.services().register_lane(ECHO, "echo", |r| Ok([r[0], r[7]])).unwrap();
        let opener = common::gate::register_blocking(listener.services(), BLOCK, PATIENCE);
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let written = written.clone();
            SharedSink::from_fn(move |stream, bytes| {
                assert_eq!(stream, Stream::Stdout);
                written.lock().unwrap().extend_from_slice(bytes);
            })
        };
        let (stuck, lines, rpc) = (
            buffer(&doorbell, Protocol::Phase, 4),
            buffer(&doorbell, Protocol::Line, 4),
            buffer(&doorbell, Protocol::Rpc { lanes: 1 }, 1),
        );
        listener.add(stuck.clone()).unwrap();
        listener.add(lines.clone()).unwrap();
        let options = BufferOptions::default().with_rpc(RpcOptions::default().with_sink(sink));
        listener.add(BufferRegistration::new(rpc.clone()).with_options(options.clone())).unwrap();

        // An RPC write of several packets: its first packet taken by the first thread.
        let message: Vec<u8> = (0..200u8).map(|i| b'a' + i % 26).collect();
        let locks = [AtomicU32::new(0)];
        let client = Client::new(rpc.view().rpc().unwrap(), &locks).unwrap();
        let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT, 1, 0).unwrap();
        let mut keep_waiting = {
            let started = Instant::now();
            move |_| started.elapsed() < PATIENCE
        };
        let mut cursor = Cursor::start();
        port.send(|_| fill_packet(&cursor, &message), &mut keep_waiting).unwrap();
        wait_until("the first packet's turn", || port.poll());
        assert!(cursor.advance(message.len() as u64), "the write takes more packets");
        assert_eq!(listener.rpc_counters(rpc.as_ptr()).unwrap().calls_done, 0, "the call is in progress");

        // A line request stalled and reported by the first thread.
        let (first, first_word, first_landed) = stalled_call(&lines, 0);
        let stalled = || listener.stats().refusals.get(Reason::StalledRequest);
        wait_until("the first stalled request's report", || stalled() == 1);

        // A call that blocks: the listener hands the other buffers, their state with them, to a
        // new thread; the first thread serves nothing else until the call returns.
        let wave = Wave::new(stuck.clone(), 1).with_timeout(PATIENCE);
        let blocked =
            std::thread::spawn(move || wave.call(BLOCK, |_| [0; 8]).expect("the blocked call").lane(0)[0]);
        opener.wait_arrived("the blocking service runs");
        wait_until("the stuck call's count", || listener.stats().refusals.get(Reason::StuckService) == 1);

        // The write goes on where it was, on the new thread.
        loop {
            port.send(|_| fill_packet(&cursor, &message), &mut keep_waiting).unwrap();
            if !cursor.advance(message.len() as u64) {
                break;
            }
        }
        let mut count = 0;
        port.recv(|_, words| count = words[0], &mut keep_waiting).unwrap();
        port.close();
        assert_eq!(count, message.len() as u64, "the whole write was taken as one call");
        assert_eq!(*written.lock().unwrap(), message);
        let counters = listener.rpc_counters(rpc.as_ptr()).unwrap();
        assert_eq!((counters.calls, counters.calls_done, counters.unhandled), (1, 1, 0), "{counters:?}");

        // The line memory came along: a second stalled request is reported (the new thread looks
        // with the memory), the first is not reported again (a fresh memory would).
        let (second, second_word, second_landed) = stalled_call(&lines, 1);
        wait_until("the second stalled request's report", || stalled() >= 2);
        std::thread::sleep(Duration::from_millis(20)); // more looks
        assert_eq!(stalled(), 2, "each stalled request reported once, across the move");
        for (call, word, landed, lane0) in
            [(first, first_word, first_landed, 0), (second, second_word, second_landed, 1)]
        {
            word.store(landed, Ordering::Relaxed); // Relaxed: as the swap in `stalled_call`
            let deadline = Instant::now() + PATIENCE;
            let Ok(done) = call.wait_until(|_| Instant::now() < deadline) else {
                panic!("the late call was not served")
            };
            assert_eq!(done.reply(0), [lane0, 8]);
        }

        opener.open();
        assert_eq!(blocked.join().unwrap(), 7);
        listener.shutdown();
    });
}

/// An LLVM-RPC turn stuck in its host's own work (a console write whose sink blocks) is watched
/// as one call: counted stuck once, for its buffer, and the listener's other buffer is served by
/// another thread meanwhile.
#[test]
fn an_rpc_turn_stuck_in_its_own_work_is_one_stuck_call() {
    returns_within("an RPC turn stuck in the sink", PATIENCE * 2, || {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let config = ListenerConfig::default().with_stuck_after(Duration::from_millis(20));
        let listener = Listener::start(doorbell.clone(), config).unwrap();
        listener.services().register_lane(ECHO, "echo", |r| Ok([r[0], r[7]])).unwrap();
        let (gate, opener) = common::gate::gate(PATIENCE);
        let sink = SharedSink::from_fn(move |_, _| {
            gate.pass();
        });
        let (rpc, other) =
            (buffer(&doorbell, Protocol::Rpc { lanes: 1 }, 1), buffer(&doorbell, Protocol::Phase, 4));
        let options = BufferOptions::default().with_rpc(RpcOptions::default().with_sink(sink));
        listener.add(BufferRegistration::new(rpc.clone()).with_options(options.clone())).unwrap();
        listener.add(other.clone()).unwrap();

        let device = rpc.clone();
        let writer = std::thread::spawn(move || {
            let locks = [AtomicU32::new(0)];
            let client = Client::new(device.view().rpc().unwrap(), &locks).unwrap();
            let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT_NEWLINE, 1, 0).unwrap();
            let started = Instant::now();
            let mut keep_waiting = move |_| started.elapsed() < PATIENCE;
            port.send_n(|_| b"stuck", &mut keep_waiting).unwrap();
            let mut written = 0;
            port.recv(|_, w| written = w[0], &mut keep_waiting).unwrap();
            port.close();
            written
        });
        opener.wait_arrived("the write reached the sink");

        let wave = Wave::new(other.clone(), 1).with_timeout(PATIENCE);
        for k in 0..50u64 {
            let reply =
                wave.call(ECHO, |_| [k, 0, 0, 0, 0, 0, 0, 9]).expect("served while the turn is stuck");
            assert_eq!(reply.lane(0), [k, 9]);
        }
        let stuck = || listener.stats().refusals.get(Reason::StuckService);
        wait_until("the stuck turn's count", || stuck() > 0);
        assert_eq!(stuck(), 1, "one stuck call");
        let of_buffer = listener.stats().buffers[&(rpc.as_ptr() as usize)].refusals;
        assert_eq!(of_buffer.get(Reason::StuckService), 1, "counted for the RPC buffer");

        opener.open();
        assert_eq!(writer.join().unwrap(), 6, "\"stuck\" and its newline");
        assert_eq!(stuck(), 1, "still one once it returned");
        listener.shutdown();
    });
}
