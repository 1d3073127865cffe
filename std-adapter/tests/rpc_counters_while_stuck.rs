//! An LLVM-RPC buffer's counters ([`Listener::rpc_counters`]) are read while one of its turns is
//! stuck in the buffer's output sink: the reader reads what the listener thread published after
//! its last finished turn, and does not wait for the stuck one (the listener takes its turns
//! without a lock; with the per-turn lock it had, the reader waited for the turn to end). Every
//! wait runs under a watchdog: a stall fails the test, never hangs it.

#[macro_use]
mod common;

use common::watchdog::returns_within;
use hostcall::prelude::*;
use hostcall::{
    services::rpc::{RpcOptions, SharedSink},
    BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol,
};
use hostcall_core::rpc::{opcode, Client};
use hostcall_core::sync::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(30);

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < PATIENCE
}

#[test]
fn rpc_counters_are_read_while_a_turn_is_stuck_in_the_sink() {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Arc::new(Listener::start(doorbell.clone(), ListenerConfig::spinning()).unwrap());
    // A sink that blocks on its first write until the test releases it.
    let (gate, opener) = common::gate::gate(PATIENCE);
    let sink = SharedSink::from_fn(move |_, _| {
        gate.pass();
    });
    let protocol = Protocol::Rpc { lanes: 1 };
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 1, doorbell, protocol).unwrap());
    listener
        .add(BufferRegistration::new(buffer.clone()).with_rpc(RpcOptions::default().with_sink(sink)))
        .unwrap();
    let base = buffer.as_ptr() as usize;
    let before = listener.rpc_counters(buffer.as_ptr()).unwrap();

    let device = buffer.clone();
    let writer = std::thread::spawn(move || {
        let locks = [AtomicU32::new(0)];
        let client = Client::new(device.view().rpc().unwrap(), &locks).unwrap();
        let mut port = client.try_open(opcode::libc::WRITE_TO_STDOUT_NEWLINE, 1, 0).unwrap();
        port.send_n(|_| b"stuck", &mut patience()).unwrap();
        let mut written = 0;
        port.recv(|_, w| written = w[0], &mut patience()).unwrap();
        port.close();
        written
    });
    opener.wait_arrived("the write reached the sink");

    let reader = listener.clone();
    let (during, _) =
        returns_within("rpc_counters while a turn is stuck", Duration::from_secs(5), move || {
            reader.rpc_counters(base as *const u8).unwrap()
        });
    assert_eq!(during.calls_done, before.calls_done, "the stuck call has not finished: {during:?}");
    opener.open();
    assert_eq!(writer.join().unwrap(), 6, "\"stuck\" and its newline");
    let after = listener.rpc_counters(buffer.as_ptr()).unwrap();
    assert_eq!((after.calls, after.calls_done), (before.calls + 1, before.calls_done + 1), "{after:?}");
    assert!(after.turns > during.turns, "the stuck turn is counted once it ends: {during:?} {after:?}");
    Arc::into_inner(listener).expect("the reader is done").shutdown();
}
