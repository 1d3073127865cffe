//! LLVM-RPC buffers served by the same `Listener` as the other protocols, beside a phase buffer:
//! ROCm's `'r'` opcodes and this project's `'h'` reach the listener's hostcall services through
//! the core's producer path; an opcode the listener has no handler for is handed back untouched
//! (the client reads its own packet, so it does not hang), counted as malformed.

use hostcall::buffer::Protocol;
use hostcall::core::rpc::{opcode, Client, View};
use hostcall::core::sync::AtomicU32;
use hostcall::core::{ClaimedPacket, CompletedPacket, SubmittedPacket};
use hostcall::prelude::*;
use hostcall::{DeviceAllocation, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell};
use std::sync::Arc;
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
    let len = protocol.buffer_size(PORTS as usize).unwrap();
    let memory = DeviceAllocation::new(Arc::new(HostMemory), len, protocol.buffer_align()).unwrap();
    // SAFETY: `memory` stays allocated until after `remove_raw`, touched only atomically.
    unsafe { listener.add_raw_protocol(protocol, memory.as_ptr(), len, PORTS, 0) }.unwrap();
    let phase = Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell.clone(), Protocol::Phase).unwrap(),
    );
    listener.add_buffer(phase.clone()).unwrap();

    // SAFETY: as above; the view is used only while the listener serves the memory.
    let view = unsafe { View::from_raw(memory.as_ptr(), len, PORTS, u64::from(LANES)) }.unwrap();
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
        // The phase buffer is served at the same time.
        let wave = hostcall::Wave::new(phase.clone(), 1);
        assert_eq!(wave.call(ADD, |_| [40, 2, 0, 0, 0, 0, 0, 0]).unwrap().lane(0), [42, 7]);
    });

    // An unhandled opcode: the port comes back untouched.
    let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT, 1, 0).unwrap();
    port.send(|_| [5, 0x6f6c6c6568, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
    let mut echoed = [0; 2];
    port.recv(|_, w| echoed = [w[0], w[1]], &mut patience()).unwrap();
    port.close();
    assert_eq!(echoed, [5, 0x6f6c6c6568]);
    let stats = listener.services().stats();
    assert!(stats.total().lane_calls >= 200 * 3);
    assert_eq!(stats.malformed, 1, "the unhandled opcode, counted");
    listener.remove_raw(memory.as_ptr()).unwrap();
    drop(memory);
}

/// A port is as wide as its client's warp: a wave with lanes outside it is refused with an error
/// that says so (never a panic, never a reply missing lanes), and a wave that fits is served.
#[test]
fn a_wave_wider_than_the_ports_is_refused() {
    let (listener, doorbell) = listener_with_add(ListenerConfig::default());
    let protocol = Protocol::Rpc { lanes: LANES };
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), PORTS, doorbell, protocol).unwrap());
    listener.add_buffer(buffer.clone()).unwrap();
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
