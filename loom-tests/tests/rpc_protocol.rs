//! loom models of LLVM libc's RPC handshake (`hostcall_core::rpc`): the client is a thread on the
//! real client path (`Client::try_open`, `ClientPort::send`, `recv`, `close`), the host the main
//! thread on the real turn (`View::turn`, `Turn::read`, `write`, `finish`). Lane buffer words are
//! loom cells, so a packet read that no Release/Acquire pair orders after its write is reported
//! as a race.
//!
//! Only one side spins at a time (two spinners blow loom's budget, as in the other models): the
//! host waits on a `Notify` that the client signals right after opening the port, *before* it
//! writes its request, so the edge covers none of the packet; the client waits on one that the
//! host signals as soon as it has the turn, *before* it writes the reply. The packet must still
//! reach each side through the handshake's fences.
//!
//! The models prove that the host reads the request as the client wrote it, the client reads the
//! host's reply, and two calls in a row on one port (the second opened only after the host's flip)
//! see their own packets. Each has a broken twin whose flip comes before its Release fence, which
//! must fail with loom's race report. The producer path's claim (`AnyView::claim` over the
//! client's lock bits, what emulated waves use) is checked too: two waves on one port, the
//! second's lane write ordered after the first's by the lock bit, with a twin whose unlock is
//! Relaxed. Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 cargo test -p loom-tests --release --test rpc_protocol`
#![cfg(loom)]

use hostcall_core::rpc::{opcode, Client, Header, LaneBuffer, Parts, View};
use hostcall_core::sync::{fence, AtomicU32, Ordering};
use loom::sync::{Arc, Notify};
use loom::thread;
use loom_tests::check;

const OPCODE: u32 = opcode::rocm::DEVMEM;

/// A one-port, one-lane buffer allocated in parts, the client's lock word and the two wake-ups.
struct Model {
    host_mailbox: Vec<AtomicU32>,
    device_mailbox: Vec<AtomicU32>,
    locks: Vec<AtomicU32>,
    headers: Vec<Header>,
    buffers: Vec<LaneBuffer>,
    to_host: Notify,
    to_client: Notify,
}

impl Model {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            host_mailbox: vec![AtomicU32::new(0)],
            device_mailbox: vec![AtomicU32::new(0)],
            locks: vec![AtomicU32::new(0)],
            headers: vec![Header::default()],
            buffers: vec![LaneBuffer::default()],
            to_host: Notify::new(),
            to_client: Notify::new(),
        })
    }

    fn view(&self) -> View<'_> {
        View::from_parts(Parts {
            lanes: 1,
            host_mailbox: &self.host_mailbox,
            device_mailbox: &self.device_mailbox,
            headers: &self.headers,
            buffers: &self.buffers,
        })
        .unwrap()
    }
}

fn request(call: u64) -> [u64; 8] {
    [10 * call + 1, 10 * call + 2, 0, 0, 0, 0, 0, 0]
}

fn reply(call: u64) -> [u64; 8] {
    [100 * call + 3, 0, 0, 0, 0, 0, 0, 0]
}

/// The client's side of `calls` calls on port 0, each announced to the host before its request.
fn client_calls(model: &Model, calls: u64) {
    let view = model.view();
    let client = Client::new(view, &model.locks).unwrap();
    for call in 0..calls {
        let mut port = loop {
            match client.try_open(OPCODE, 1, 0) {
                Some(port) => break port,
                None => thread::yield_now(),
            }
        };
        model.to_host.notify();
        port.send(|_| request(call), &mut |_| true).unwrap();
        model.to_client.wait();
        let mut got = [0; 8];
        port.recv(|_, words| got = words, &mut |_| true).unwrap();
        assert_eq!(got, reply(call), "the client read another reply");
        port.close();
    }
}

/// The host's side of one call: waits for the announcement, polls for the turn, checks the
/// request, wakes the client, then answers with `finish` (or `flip`, the broken twin's).
fn host_call(model: &Model, call: u64, flip: impl Fn(&Model, hostcall_core::rpc::Turn<'_>)) {
    let view = model.view();
    model.to_host.wait();
    let mut turn = loop {
        match view.turn(0) {
            Some(turn) => break turn,
            None => thread::yield_now(),
        }
    };
    assert_eq!(turn.header(), (1, OPCODE));
    assert_eq!(turn.read(0), request(call), "the host read another request");
    model.to_client.notify();
    turn.write(0, &reply(call));
    flip(model, turn);
}

fn finish(_: &Model, turn: hostcall_core::rpc::Turn<'_>) {
    turn.finish();
}

/// A test-only host flip: the store of the host mailbox before the Release fence.
fn flip_before_fence(model: &Model, turn: hostcall_core::rpc::Turn<'_>) {
    drop(turn);
    let host = &model.host_mailbox[0];
    host.store(1 - host.load(Ordering::Relaxed), Ordering::Relaxed);
    fence(Ordering::Release);
}

fn calls(n: u64, flip: fn(&Model, hostcall_core::rpc::Turn<'_>)) {
    let model = Model::new();
    let client = {
        let model = model.clone();
        thread::spawn(move || client_calls(&model, n))
    };
    for call in 0..n {
        host_call(&model, call, flip);
    }
    client.join().unwrap();
    assert!(!model.view().pending(0), "the port is the client's again");
}

#[test]
fn one_call() {
    check("rpc one_call", || calls(1, finish));
}

#[test]
fn two_calls_on_one_port() {
    check("rpc two_calls_on_one_port", || calls(2, finish));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn host_flip_before_its_fence_races() {
    check("rpc host_flip_before_its_fence_races", || calls(1, flip_before_fence));
}

/// A test-only client send: the request, then the store of the device mailbox before the
/// Release fence. The host's read of the request must race with its write.
#[test]
#[should_panic(expected = "Causality violation")]
fn client_flip_before_its_fence_races() {
    check("rpc client_flip_before_its_fence_races", || {
        let model = Model::new();
        let client = {
            let model = model.clone();
            thread::spawn(move || {
                model.to_host.notify();
                model.buffers[0].write(&request(0));
                model.headers[0].mask.store(1, Ordering::Relaxed);
                model.headers[0].opcode.store(OPCODE, Ordering::Relaxed);
                model.device_mailbox[0].store(1, Ordering::Relaxed);
                fence(Ordering::Release);
            })
        };
        let view = model.view();
        model.to_host.wait();
        let turn = loop {
            match view.turn(0) {
                Some(turn) => break turn,
                None => thread::yield_now(),
            }
        };
        let _ = turn.read(0);
        turn.finish();
        client.join().unwrap();
    });
}

/// The producer path's claim (`AnyView::claim` on an RPC view with its client's lock bits), by two
/// waves on one port: wave A claims, writes its lane and lets go (`unlock`); wave B claims once A
/// has let go and writes the same lane. The lock bit's Release (at close) and Acquire (at open)
/// must order A's write before B's; a broken twin that unlocks with a Relaxed `fetch_and` must
/// fail with loom's race report.
fn two_waves_claim_one_port(unlock: fn(&Model, hostcall_core::AnyClaimed<'_>)) {
    use hostcall_core::{AnyView, ClaimedPacket};
    let model = Model::new();
    // Wave A (this thread) holds the port before wave B starts; its write comes after.
    let view = AnyView::Rpc(model.view().with_locks(&model.locks).unwrap());
    let mut claimed = view.claim(0).unwrap().expect("the port is free at first");
    let wave_b = {
        let model = model.clone();
        thread::spawn(move || {
            let view = AnyView::Rpc(model.view().with_locks(&model.locks).unwrap());
            let mut claimed = loop {
                match view.claim(0).unwrap() {
                    Some(claimed) => break claimed,
                    None => thread::yield_now(),
                }
            };
            claimed.write_lane(0, &request(2));
        })
    };
    claimed.write_lane(0, &request(1));
    unlock(&model, claimed);
    wave_b.join().unwrap();
    // Relaxed: after the join, which orders wave B's unlock before this load.
    assert_eq!(model.locks[0].load(Ordering::Relaxed), 0, "both waves let go");
}

/// Dropping a claimed port unsent closes it: the lock bit's Release `fetch_and`.
fn close(_: &Model, claimed: hostcall_core::AnyClaimed<'_>) {
    drop(claimed);
}

/// A test-only close: the handle forgotten and the lock bit cleared with a Relaxed `fetch_and`.
fn close_relaxed(model: &Model, claimed: hostcall_core::AnyClaimed<'_>) {
    std::mem::forget(claimed);
    model.locks[0].fetch_and(!1, Ordering::Relaxed);
}

#[test]
fn two_waves_claim_one_port_in_turn() {
    check("rpc two_waves_claim_one_port_in_turn", || two_waves_claim_one_port(close));
}

#[test]
#[should_panic(expected = "Causality violation")]
fn a_relaxed_unlock_races_with_the_next_claim() {
    check("rpc a_relaxed_unlock_races_with_the_next_claim", || two_waves_claim_one_port(close_relaxed));
}
