//! LLVM-RPC clients that misbehave on purpose, each on ports of its own of a buffer that a
//! listener serves, while well-behaved waves call on the buffer's other ports and on a phase
//! buffer of the same listener: a client that opens a stream and stops, one that declares a huge
//! length, one that flips its ports' mailboxes (and scribbles their headers and lane buffers) at
//! random, one whose header names lanes the buffer does not have, one that sends unknown opcodes.
//!
//! Each attack must cost bounded time (every wait of the attacker and of the waves has a
//! deadline, the whole test a watchdog) and bounded host memory (a counting allocator: what the
//! host keeps for streams is bounded by the RPC budget, whatever the device declares), the other
//! waves must keep getting correct replies throughout (progress asserted, every reply checked),
//! and what the host refuses is counted.
//!
//! The stream attacks use LLVM libc's `WRITE_TO_STDOUT`, which the listener's RPC host serves
//! (its output counted, not printed): a stream in progress keeps at most the RPC budget
//! ([`DEFAULT_STREAM_BYTES`] a lane), which is the bound asserted, and the host's counters
//! ([`Listener::rpc_counters`]) say which calls are still in progress and what was refused. The
//! heap count is process-wide, so the tests of this file take turns (`serial`).

use hostcall::prelude::*;
use hostcall::{
    observe::Reason,
    observe::Stats,
    services::rpc::{RpcCounters, RpcOptions, SharedSink, DEFAULT_STREAM_BYTES},
    BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol,
    Wave,
};
use hostcall_core::rpc::{self, fill_packet, opcode, Client, ClientPort, Cursor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

mod common;

use common::rng::Rng;

#[global_allocator]
static GLOBAL: common::counting::Counting = common::counting::Counting;

const ADD: u32 = 100;
/// Ports of the RPC buffer, and lanes of each.
const PORTS: u64 = 8;
const LANES: u32 = 4;
/// Ports an attacker holds at most (the waves share the others).
const ATTACKER_PORTS: usize = 3;
/// Correct calls each wave makes at least, during the attack.
const MIN_CALLS: u64 = 50;
/// The longest any one wait may take (a hang check, not a speed check).
const PATIENCE: Duration = Duration::from_secs(10);

/// Takes this file's turn (the heap count is process-wide).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A client's `keep_waiting`: gives up after [`PATIENCE`].
fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < PATIENCE
}

/// What an attack left behind, taken once it and the waves are done, before shutdown (while the
/// host still holds whatever it keeps for the attacker's ports): the listener's counters, the RPC
/// buffer's host's, the hostcall packets served from the RPC buffer, the heap's growth over the
/// attack, the bytes of console output, and the ADD lane calls the waves made (warm-up included).
struct Aftermath {
    stats: Stats,
    rpc: RpcCounters,
    rpc_packets: u64,
    heap_growth: isize,
    output_bytes: u64,
    wave_lane_calls: u64,
}

impl Aftermath {
    /// Calls the RPC host has begun and not finished (the streams left open).
    fn calls_in_progress(&self) -> u64 {
        self.rpc.calls - self.rpc.calls_done
    }
}

/// The attacker: a client of the RPC buffer, its view (for what no client should write), and
/// the doorbell it rings after each packet, as the waves do.
struct Attacker<'a> {
    client: Client<'a>,
    view: rpc::View<'a>,
    doorbell: Arc<dyn Doorbell>,
}

impl<'a> Attacker<'a> {
    /// Opens a port for `opcode` by every lane, from port `start`, retrying while the waves hold
    /// the free ones.
    fn open(&self, opcode: u32, start: u32) -> ClientPort<'a> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(port) = self.client.try_open(opcode, (1 << LANES) - 1, start) {
                return port;
            }
            assert!(Instant::now() < deadline, "no port came free");
            thread::yield_now();
        }
    }

    /// Sends one packet on `port` and rings.
    fn send(&self, port: &mut ClientPort<'a>, fill: impl FnMut(u32) -> [u64; 8]) {
        port.send(fill, &mut patience()).expect("the host hands the port back in time");
        self.doorbell.ring();
    }
}

/// Runs `attack` with a client of an RPC buffer (`PORTS` ports of `LANES` lanes) that a listener
/// serves beside a phase buffer, while two waves on the RPC buffer and one on the phase buffer
/// call ADD until the attack has finished and each has made [`MIN_CALLS`] calls; every reply is
/// checked.
fn under_attack(attack: impl FnOnce(&Attacker<'_>) + Send + 'static) -> Aftermath {
    let (aftermath, took) =
        common::watchdog::returns_within("the attack", Duration::from_secs(120), move || {
            let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
            let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
            listener.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
            let buffer = |protocol, packets| {
                let buffer =
                    HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell.clone(), protocol);
                Arc::new(buffer.unwrap())
            };
            let (rpc_buffer, phase_buffer) =
                (buffer(Protocol::Rpc { lanes: LANES }, PORTS), buffer(Protocol::Phase, 4));
            let output = Arc::new(AtomicU64::new(0));
            let counted = output.clone();
            // Relaxed: a count, read after the attack and the waves are done.
            let sink = SharedSink::from_fn(move |_, bytes| {
                counted.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            });
            listener
                .add(
                    BufferRegistration::new(rpc_buffer.clone())
                        .with_rpc(RpcOptions::default().with_sink(sink)),
                )
                .unwrap();
            listener.add(phase_buffer.clone()).unwrap();
            let waves = [(&rpc_buffer, 1), (&rpc_buffer, 2), (&phase_buffer, 3)];
            for (buffer, id) in waves {
                correct_calls(&Wave::new(buffer.clone(), LANES).with_timeout(PATIENCE), id, 0..1);
            }

            let before = common::counting::live_bytes();
            // Relaxed, both: `attacking` only tells the waves when to stop (nothing is published
            // with it), and `wave_lane_calls` is read after every wave is joined (the join orders
            // their adds before the load).
            let attacking = Arc::new(AtomicBool::new(true));
            let wave_lane_calls = Arc::new(AtomicU64::new(0));
            let wave_threads: Vec<_> = waves
                .map(|(buffer, id)| {
                    let wave = Wave::new(buffer.clone(), LANES).with_timeout(PATIENCE);
                    let (attacking, counted) = (attacking.clone(), wave_lane_calls.clone());
                    thread::spawn(move || {
                        let mut calls = 1;
                        while calls < MIN_CALLS || attacking.load(Ordering::Relaxed) {
                            correct_calls(&wave, id, calls..calls + 1);
                            calls += 1;
                        }
                        counted.fetch_add(calls * u64::from(LANES), Ordering::Relaxed);
                    })
                })
                .into_iter()
                .collect();
            {
                let view = rpc_buffer.view().rpc().expect("an RPC buffer");
                let client = Client::of(view).expect("the buffer's view has its client's lock bits");
                attack(&Attacker { client, view, doorbell: doorbell.clone() });
            }
            attacking.store(false, Ordering::Relaxed);
            for wave in wave_threads {
                wave.join().expect("a wave got a wrong reply or none");
            }
            let heap_growth = common::counting::live_bytes() - before;
            let stats = listener.stats();
            let rpc = listener.rpc_counters(rpc_buffer.as_ptr()).expect("an RPC buffer the listener serves");
            let rpc_packets = stats.buffers[&(rpc_buffer.as_ptr() as usize)].packets;
            listener.shutdown();
            Aftermath {
                stats,
                rpc,
                rpc_packets,
                heap_growth,
                output_bytes: output.load(Ordering::Relaxed),
                wave_lane_calls: wave_lane_calls.load(Ordering::Relaxed),
            }
        });
    let Aftermath { stats, rpc, heap_growth, output_bytes, .. } = &aftermath;
    println!(
        "attack and waves: {took:?}; heap {heap_growth:+} bytes; output {output_bytes} bytes; malformed {}; \
         the RPC host: {rpc:?}",
        stats.malformed
    );
    aftermath
}

/// Calls `calls` of a wave numbered `id`, every reply checked.
fn correct_calls(wave: &Wave, id: u64, calls: std::ops::Range<u64>) {
    for call in calls {
        let tag = id << 32 | call;
        let reply = wave.call(ADD, |lane| [tag, lane as u64, id, 0, 0, 0, 0, 0]).expect("served in time");
        assert!(!reply.host_error(), "wave {id} call {call}");
        for lane in 0..LANES as usize {
            assert_eq!(reply.lane(lane), [tag + lane as u64, id], "wave {id} call {call} lane {lane}");
        }
    }
}

/// Sends the first `packets` packets of a stream whose lanes each declare `declared` bytes (the
/// bytes sent are zeros), then stops: the port is left as it is, locked (never closed), the
/// stream never finished.
fn stream_and_stop(attacker: &Attacker<'_>, start: u32, declared: u64, packets: u64) {
    let mut port = attacker.open(opcode::libc::WRITE_TO_STDOUT, start);
    let mut cursor = Cursor::start();
    for _ in 0..packets {
        attacker.send(&mut port, |_| {
            let mut words = fill_packet(&cursor, &[]);
            if cursor.is_first() {
                words[0] = declared;
            }
            words
        });
        cursor.advance(declared);
    }
    // Stopped mid-stream: dropped without `close`, the port stays locked, as a device that gave
    // up leaves it.
    drop(port);
}

/// The heap may grow by what the host keeps for the attacker's streams (at most its budget for
/// each lane of each port it holds) plus a little for the listener's own bookkeeping.
fn assert_heap_bounded(aftermath: &Aftermath, what: &str) {
    let budget = ATTACKER_PORTS as isize * LANES as isize * DEFAULT_STREAM_BYTES as isize;
    let slack = 256 << 10;
    assert!(
        aftermath.heap_growth < budget + slack,
        "{what}: the heap grew by {} bytes (the streams' budget is {budget})",
        aftermath.heap_growth
    );
}

#[test]
fn a_client_that_opens_a_stream_and_stops() {
    let _turn = serial();
    // Each attacker port: half a lane's budget declared, a tenth of it sent, then silence.
    let aftermath = under_attack(|attacker| {
        for port in 0..ATTACKER_PORTS as u32 {
            stream_and_stop(attacker, port, DEFAULT_STREAM_BYTES / 2, DEFAULT_STREAM_BYTES / 20 / 64);
        }
    });
    assert_heap_bounded(&aftermath, "streams that stop");
    assert_eq!(
        aftermath.calls_in_progress(),
        ATTACKER_PORTS as u64,
        "the stopped streams, kept open: {:?}",
        aftermath.rpc
    );
    assert_eq!(aftermath.output_bytes, 0, "nothing written of a stream that never ended");
}

#[test]
fn a_client_that_declares_a_huge_length() {
    let _turn = serial();
    // Lengths no budget allows, each followed by a lane's budget of packets and a little more
    // (enough to end the stream just over the budget).
    let aftermath = under_attack(|attacker| {
        for (port, declared) in [u64::MAX, 1 << 40, DEFAULT_STREAM_BYTES + 1].into_iter().enumerate() {
            stream_and_stop(attacker, port as u32, declared, DEFAULT_STREAM_BYTES / 64 + 2);
        }
    });
    assert_heap_bounded(&aftermath, "huge lengths");
    // The two lengths no stream reaches stay open; the one just over the budget ends, refused on
    // each lane, and counted.
    assert_eq!(aftermath.calls_in_progress(), 2, "{:?}", aftermath.rpc);
    assert_eq!(aftermath.rpc.over_limit_lanes, u64::from(LANES), "{:?}", aftermath.rpc);
    assert_eq!(aftermath.stats.refusals.get(Reason::RpcStreamLength), u64::from(LANES));
    assert_eq!(aftermath.output_bytes, 0, "nothing written of a refused stream");
}

/// The mailbox values a flipper writes.
trait MailboxWord {
    /// 0, 1, or anything (the mailboxes' own values and the rest).
    fn word(&mut self) -> u64;
}

impl MailboxWord for Rng {
    fn word(&mut self) -> u64 {
        match self.next() % 4 {
            0 => 0,
            1 => 1,
            _ => self.next(),
        }
    }
}

#[test]
fn a_client_that_flips_its_mailboxes_at_random() {
    let _turn = serial();
    let aftermath = under_attack(|attacker| {
        let view = attacker.view;
        // Its ports, opened and kept locked (never closed) for the scribbling.
        let ports: Vec<u32> = (0..ATTACKER_PORTS as u32)
            .map(|start| {
                let port = attacker.open(opcode::opcode(b'x', 0), start);
                // Dropped without `close`: the port stays locked, the attacker's.
                port.port()
            })
            .collect();
        let mut rng = Rng(0x5eed_0000_2024_0028);
        let opcodes = [rpc::opcode_of(ADD), opcode::libc::WRITE_TO_STDOUT, opcode::libc::PRINTF_TO_STDOUT];
        let started = Instant::now();
        let mut writes = 0u64;
        while started.elapsed() < Duration::from_millis(500) {
            let port = ports[(rng.next() % ports.len() as u64) as usize];
            let v = rng.word();
            // Relaxed everywhere: a hostile device promises no ordering at all.
            match rng.next() % 8 {
                0 | 1 => view.device_mailbox(port).store(v as u32, Ordering::Relaxed),
                2 => view.host_mailbox(port).store(v as u32, Ordering::Relaxed),
                3 => view.header(port).mask.store(v, Ordering::Relaxed),
                4 => {
                    let opcode = opcodes.get((v % 4) as usize).copied().unwrap_or(v as u32);
                    view.header(port).opcode.store(opcode, Ordering::Relaxed)
                }
                _ => view.lane_buffer(port, (v % u64::from(LANES)) as u32).words[(v % 8) as usize]
                    .write(rng.next()),
            }
            writes += 1;
            if writes % 64 == 0 {
                attacker.doorbell.ring(); // wake the listener: it should look at the mess
                thread::yield_now();
            }
        }
        assert!(writes > 1000, "the flipper ran ({writes} writes)");
    });
    assert_heap_bounded(&aftermath, "random mailboxes");
    // Turns beyond the hostcall packets served: the host took turns on the attacker's ports.
    assert!(
        aftermath.rpc.turns > aftermath.rpc_packets,
        "{:?}, {} packets",
        aftermath.rpc,
        aftermath.rpc_packets
    );
}

#[test]
fn a_header_with_lanes_the_buffer_lacks_is_served_on_the_lanes_it_has() {
    let _turn = serial();
    const CALLS: u64 = 100;
    let aftermath = under_attack(|attacker| {
        for call in 0..CALLS {
            let mut port = attacker.open(rpc::opcode_of(ADD), 0);
            // Every lane of a 64-lane warp, on ports of four: the host must mask the header.
            // Relaxed, as the client's own header stores: the Release fence of the send's mailbox
            // flip publishes it.
            attacker.view.header(port.port()).mask.store(u64::MAX, Ordering::Relaxed);
            attacker.send(&mut port, |lane| [call, u64::from(lane), 9, 0, 0, 0, 0, 0]);
            let mut replies = [[0u64; 2]; LANES as usize];
            port.recv(|lane, words| replies[lane as usize] = [words[0], words[1]], &mut patience())
                .expect("answered");
            port.close();
            for (lane, reply) in replies.iter().enumerate() {
                assert_eq!(*reply, [call + lane as u64, 9], "call {call} lane {lane}");
            }
        }
    });
    let add = &aftermath.stats.services[&ADD].1;
    // The waves' calls, and the attacker's counted on the four lanes that exist only.
    assert_eq!(add.lane_calls, aftermath.wave_lane_calls + CALLS * u64::from(LANES), "{add:?}");
    assert_eq!((aftermath.stats.malformed, aftermath.rpc.unhandled), (0, 0));
    assert_heap_bounded(&aftermath, "lanes beyond the buffer's");
}

#[test]
fn unknown_opcodes_are_handed_back_and_counted() {
    let _turn = serial();
    const CALLS: u32 = 1000;
    let aftermath = under_attack(|attacker| {
        for call in 0..CALLS {
            // Namespaces no host serves, the offload runtime's, and the edges of the word.
            let unknown = match call % 4 {
                0 => opcode::opcode(b'x', call),
                1 => opcode::opcode(opcode::OFFLOAD, call),
                2 => u32::MAX - call,
                _ => call << 8 >> 8, // namespace 0
            };
            let mut port = attacker.open(unknown, call);
            let sent = [u64::from(call), 0x5eed, 0, 0, 0, 0, 0, 7];
            attacker.send(&mut port, |_| sent);
            let mut echoed = Vec::new();
            port.recv(|_, words| echoed.push(words), &mut patience()).expect("handed back, not left hanging");
            port.close();
            assert!(echoed.iter().all(|words| *words == sent), "opcode {unknown:#x}: {echoed:?}");
        }
    });
    assert_eq!(aftermath.stats.malformed, u64::from(CALLS), "each unknown opcode, counted once");
    assert_eq!(aftermath.rpc.unhandled, u64::from(CALLS), "{:?}", aftermath.rpc);
    assert_heap_bounded(&aftermath, "unknown opcodes");
}
