//! Target `rpc_exchange`: an LLVM-RPC buffer whose device writes whatever the input says
//! (mailbox flips and raw values, the host's own mailbox, headers with any mask, lanes beyond the
//! buffer's included, and any opcode, known or not, lane words with any stream length) and whose
//! client opens streams and stops, drained between writes by one of the two hosts: the std
//! crate's [`RpcHost`] (which keeps each call's state), or the core's [`Host`] as the listener's
//! poller drives it (ROCm's `'r'` and this project's `'h'` opcodes as hostcall packets, any other
//! handed back).
//!
//! Checked at every drain: no panic; one turn per pending port; the host writes nothing but the
//! host mailbox of a port it took a turn on (flipped: the mailboxes then read equal) and that
//! port's lane buffers; the device's words (its mailbox, the headers) are never written. With
//! `RpcHost`: the data it holds stays within its budget (ports x lanes x the stream limit x 4:
//! printf's format, argument block, strings and the stream in progress) and output grows by at
//! most one write or one printf message per lane per turn. With the poller's host: a port whose
//! opcode has no hostcall service is handed back untouched and counted malformed, one that has is
//! answered in its reply words only, and the lane calls counted are the lanes that exist. Either
//! way, a well-behaved client of another buffer that the same host serves gets its correct
//! reply at every drain.
//!
//! One thread plays both sides, so every shared word is loaded and stored Relaxed: there is no
//! other thread to order against (the loom models check the orderings).

use crate::input::Input;
use hostcall::{
    services::printf::{Streams, DEFAULT_MAX_OUTPUT},
    services::rpc::{RpcHost, RpcLimits, RpcPolicy},
    HostMemory, HostcallBuffer, ParkingDoorbell, Protocol,
};
use hostcall_core::rpc::opcode::{self, libc, rocm};
use hostcall_core::rpc::{fill_packet, service_of, Client, Cursor, View};
use hostcall_core::sync::Ordering;
use hostcall_core::DEVMEM;
use hostcall_core::{ClaimedPacket, CompletedPacket, Dispatch, DrainHandler, PacketRequest, ServiceTable};
use hostcall_core::{DrainScope, Host as _, Payload, SubmittedPacket};
use std::sync::Arc;

/// The opcodes a header may name; one index past the end takes a raw `u32` from the input.
const OPCODES: [u32; 16] = [
    libc::NOOP,
    libc::WRITE_TO_STDOUT,
    libc::WRITE_TO_STDERR,
    libc::WRITE_TO_STREAM,
    libc::WRITE_TO_STDOUT_NEWLINE,
    libc::PRINTF_TO_STDOUT,
    libc::PRINTF_TO_STREAM_PACKED,
    libc::MALLOC,
    libc::FREE,
    libc::SYSTEM,
    rocm::DEVMEM,
    0x6300_0fff,
    // This project's namespace: DEVMEM's id, and an id no service has.
    opcode::opcode(opcode::HOSTCALL, DEVMEM),
    opcode::opcode(opcode::HOSTCALL, 0x00ab_cdef),
    // Namespaces no host serves.
    opcode::opcode(opcode::OFFLOAD, 1),
    opcode::opcode(b'x', 0),
];

/// The operations of the input (its byte `% 8`) and its flags (the fourth byte): the seeds'
/// vocabulary.
pub(crate) mod op {
    /// Flip the device mailbox of a port.
    pub(crate) const FLIP: u8 = 0;
    /// Store a raw `u32` in the device mailbox.
    pub(crate) const RAW_DEVICE: u8 = 1;
    /// Write a header: a `u64` mask, then an opcode (see [`super::opcode_byte`]).
    pub(crate) const HEADER: u8 = 2;
    /// Write one lane word: lane, word, kind (even: one byte of value; odd: a `u64`), value.
    pub(crate) const LANE_WORD: u8 = 3;
    /// Store a raw `u32` in the host mailbox (the device writing the host's word).
    pub(crate) const RAW_HOST: u8 = 4;
    /// The client opens a stream and stops: an opcode, a `u64` mask, a `u64` declared length,
    /// a packet count (`% 4`).
    pub(crate) const STREAM_AND_STOP: u8 = 5;
    /// Drain and check.
    pub(crate) const DRAIN: u8 = 6;
    /// Flag: the policy that allows nothing (with `RpcHost`).
    pub(crate) const POLICY_NONE: u8 = 1;
    /// Flag: drained by the poller's host instead of `RpcHost`.
    pub(crate) const BY_POLLER: u8 = 2;
}

#[cfg(test)]
/// The byte naming `opcode` in an input: its index in [`OPCODES`], or the raw marker (the
/// opcode's four bytes follow).
pub(crate) fn opcode_byte(opcode: u32) -> (u8, Option<u32>) {
    match OPCODES.iter().position(|&known| known == opcode) {
        Some(index) => (index as u8, None),
        None => (OPCODES.len() as u8, Some(opcode)),
    }
}

/// The opcode the input names (see [`OPCODES`]).
fn opcode_from(input: &mut Input<'_>) -> u32 {
    match OPCODES.get(usize::from(input.u8()) % (OPCODES.len() + 1)) {
        Some(&opcode) => opcode,
        None => input.u32(),
    }
}

/// An RPC buffer of `ports` ports of `lanes` lanes in host memory, with its client's lock bits
/// (the view of [`HostcallBuffer::view`] has them).
fn rpc_buffer(ports: usize, lanes: u32) -> HostcallBuffer {
    let doorbell = Arc::new(ParkingDoorbell::new());
    let protocol = Protocol::Rpc { lanes };
    HostcallBuffer::with_protocol(Arc::new(HostMemory), ports as u64, doorbell, protocol)
        .expect("a valid geometry")
}

/// Every word of a view, in order: host mailboxes, device mailboxes, headers, lane buffers.
fn words(view: &View<'_>) -> Vec<u64> {
    let ports = 0..view.ports();
    let mut words: Vec<u64> =
        ports.clone().map(|p| u64::from(view.host_mailbox(p).load(Ordering::Relaxed))).collect();
    words.extend(ports.clone().map(|p| u64::from(view.device_mailbox(p).load(Ordering::Relaxed))));
    for p in ports.clone() {
        words.push(view.header(p).mask.load(Ordering::Relaxed));
        words.push(u64::from(view.header(p).opcode.load(Ordering::Relaxed)));
    }
    for p in ports {
        words.extend((0..view.lanes()).flat_map(|lane| view.lane_buffer(p, lane).read()));
    }
    words
}

/// Which host drains the buffers.
enum Served {
    /// The std crate's `RpcHost` of each buffer (the hostile one's, the bystander's).
    ByRpcHost { hostile: Box<RpcHost>, bystander: Box<RpcHost>, sink: Streams<Vec<u8>, Vec<u8>> },
    /// The core's host as the listener's poller drives it, one scratch payload for both buffers.
    ByPoller { scratch: Box<Option<Payload>> },
}

/// The fuzz target: see the module docs.
pub fn rpc_exchange(data: &[u8]) {
    let mut input = Input::new(data);
    let ports = 1 + usize::from(input.u8() % 4);
    let lanes = 1 + u32::from(input.u8() % 4);
    let limit = 1 + u64::from(input.u8()) * 4;
    let flags = input.u8();
    let policy = if flags & op::POLICY_NONE == 0 { RpcPolicy::default() } else { RpcPolicy::none() };
    let (buffer, bystander) = (rpc_buffer(ports, lanes), rpc_buffer(1, lanes));
    let view = buffer.view().rpc().expect("an RPC buffer");
    let limits = RpcLimits::default().with_stream_bytes(limit);
    let bystander_view = bystander.view().rpc().expect("an RPC buffer");
    let mut served = if flags & op::BY_POLLER == 0 {
        Served::ByRpcHost {
            hostile: Box::new(RpcHost::new(ports as u32, policy, limits)),
            bystander: Box::new(RpcHost::new(1, RpcPolicy::default(), limits)),
            sink: Streams { stdout: Vec::new(), stderr: Vec::new() },
        }
    } else {
        Served::ByPoller { scratch: Box::new(None) }
    };
    let devmem = |r: &[u64; 8]| Ok([if r[0] == 0 { 0x1000 } else { 0 }, 0]);
    let mut services = ServiceTable::<1>::new();
    services.register(DEVMEM, &devmem).expect("one service");
    let budget = ports * lanes as usize * limit as usize * 4;
    let client = Client::of(view).expect("the view has its lock bits");

    for _ in 0..256 {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        let port = u32::from(input.u8()) % ports as u32;
        match op % 8 {
            op::FLIP => {
                let b = view.device_mailbox(port);
                b.store(u32::from(b.load(Ordering::Relaxed) == 0), Ordering::Relaxed);
            }
            op::RAW_DEVICE => view.device_mailbox(port).store(input.u32(), Ordering::Relaxed),
            op::HEADER => {
                let mask = input.u64();
                let opcode = opcode_from(&mut input);
                view.header(port).mask.store(mask, Ordering::Relaxed);
                view.header(port).opcode.store(opcode, Ordering::Relaxed);
            }
            op::LANE_WORD => {
                let lane = u32::from(input.u8()) % lanes;
                let word = usize::from(input.u8() % 8);
                // Small stream lengths and strings often, anything sometimes.
                let value = if input.u8() & 1 == 0 { u64::from(input.u8()) } else { input.u64() };
                view.lane_buffer(port, lane).words[word].write(value);
            }
            // The device writes the host's own word.
            op::RAW_HOST => view.host_mailbox(port).store(input.u32(), Ordering::Relaxed),
            op::STREAM_AND_STOP => {
                let (opcode, mask, declared, packets) =
                    (opcode_from(&mut input), input.u64(), input.u64(), input.u8());
                stream_and_stop(&client, port, opcode, mask, declared, packets);
            }
            op::DRAIN..=7 => drain_and_check(view, bystander_view, &mut served, &services, budget, limit),
            _ => unreachable!("an operation is its byte % 8"),
        }
    }
    drain_and_check(view, bystander_view, &mut served, &services, budget, limit);
}

/// The client opens port `port` (if its lock and the mailboxes let it) for `opcode` by the lanes
/// of `mask`, sends up to `packets % 4` packets of a stream whose lanes declare `declared` bytes
/// each without waiting for the host, and stops: the port is never closed (its lock stays taken).
fn stream_and_stop(client: &Client<'_>, port: u32, opcode: u32, mask: u64, declared: u64, packets: u8) {
    let Some(mut open) = client.try_open(opcode, mask, port) else {
        return;
    };
    let mut cursor = Cursor::start();
    for _ in 0..packets % 4 {
        let fill = |_| {
            let mut words = fill_packet(&cursor, &[]);
            if cursor.is_first() {
                words[0] = declared;
            }
            words
        };
        if open.send(fill, &mut |_| false).is_err() {
            break; // the host has not taken its turn: a client that stops here
        }
        cursor.advance(declared);
    }
    // Not closed: a client that stopped mid-stream keeps its port locked.
    drop(open);
}

/// A `Dispatch` as the poller's drain handler, counting what it was told was malformed.
struct PollerHandler<'a, D: Dispatch + ?Sized> {
    services: &'a D,
    malformed: u32,
}

impl<D: Dispatch + ?Sized> DrainHandler for PollerHandler<'_, D> {
    fn serve(&mut self, packet: &mut PacketRequest<'_>) {
        self.services.dispatch(packet);
    }
    fn malformed(&mut self, _: hostcall_core::DrainError) {
        self.malformed += 1;
    }
}

fn drain_and_check(
    view: View<'_>,
    bystander_view: View<'_>,
    served: &mut Served,
    services: &ServiceTable<'_, 1>,
    budget: usize,
    limit: u64,
) {
    let ports = view.ports() as usize;
    let lanes = view.lanes() as usize;
    let pending: Vec<bool> = (0..ports as u32).map(|p| view.pending(p)).collect();
    let before = words(&view);
    let headers = 2 * ports;
    let lane_words = |words: &[u64], port: usize| {
        let start = 2 * ports + headers + port * lanes * 8;
        words[start..start + lanes * 8].to_vec()
    };
    // The bystander's client calls DEVMEM on every lane before the drain, and checks after it.
    let all_lanes = bystander_view.lane_mask();
    let call = Client::of(bystander_view).and_then(|client| client.claim(0)).map(|mut claimed| {
        for lane in 0..lanes {
            claimed.write_lane(lane, &[0; 8]);
        }
        claimed.submit(DEVMEM, all_lanes)
    });
    let call = call.expect("the bystander's port is free between its calls");
    let turns = match served {
        Served::ByRpcHost { hostile, bystander: bystander_host, sink } => {
            let output_before = sink.stdout.len() + sink.stderr.len();
            let turns = hostile.drain(&view, sink, services) as usize;
            bystander_host.drain(&bystander_view, sink, services);
            assert!(hostile.held_bytes() <= budget, "{} bytes held, budget {budget}", hostile.held_bytes());
            let grown = sink.stdout.len() + sink.stderr.len() - output_before;
            let per_lane = (limit + 1).max(DEFAULT_MAX_OUTPUT as u64);
            assert!(grown as u64 <= (turns * lanes) as u64 * per_lane, "output grew by {grown}");
            turns
        }
        Served::ByPoller { scratch } => {
            // What each pending port's header asks for, before the host reads it.
            let asked: Vec<(u64, u32)> = (0..ports)
                .map(|p| {
                    (
                        view.header(p as u32).mask.load(Ordering::Relaxed),
                        view.header(p as u32).opcode.load(Ordering::Relaxed),
                    )
                })
                .collect();
            let mut handler = PollerHandler { services, malformed: 0 };
            let report = view.host().drain_scope(&mut DrainScope::Whole, Some(scratch), None, &mut handler);
            bystander_view.host().drain_scope(&mut DrainScope::Whole, Some(scratch), None, &mut handler);
            let after = words(&view);
            let (mut unhandled, mut lane_calls) = (0, 0);
            for port in (0..ports).filter(|&p| pending[p]) {
                let (mask, opcode) = asked[port];
                let (was, now) = (lane_words(&before, port), lane_words(&after, port));
                if service_of(opcode).is_some() {
                    lane_calls += (mask & view.lane_mask()).count_ones();
                    // Only the two reply words of each lane.
                    for lane in 0..lanes {
                        assert_eq!(
                            was[lane * 8 + 2..lane * 8 + 8],
                            now[lane * 8 + 2..lane * 8 + 8],
                            "port {port}: request words written"
                        );
                    }
                } else {
                    unhandled += 1;
                    assert_eq!(was, now, "port {port}: an unhandled opcode's lanes written");
                }
            }
            assert_eq!(
                (report.malformed, handler.malformed),
                (unhandled, unhandled),
                "each unhandled opcode counted"
            );
            assert_eq!(report.lane_calls, lane_calls, "the lanes that exist, counted");
            report.packets as usize
        }
    };
    let answered = call.wait_until(|_| false).expect("the bystander answered in the same drain");
    for lane in 0..lanes {
        assert_eq!(answered.reply(lane), [0x1000, 0], "the bystander's lane {lane}");
    }
    drop(answered);
    let after = words(&view);
    assert_eq!(turns, pending.iter().filter(|&&p| p).count(), "one turn per pending port");
    for port in 0..ports {
        if pending[port] {
            assert!(!view.pending(port as u32), "port {port}: the turn hands the port back");
        } else {
            assert_eq!(before[port], after[port], "port {port}: host mailbox written without a turn");
            assert_eq!(lane_words(&before, port), lane_words(&after, port), "port {port}: lanes written");
        }
    }
    assert_eq!(before[ports..2 * ports + headers], after[ports..2 * ports + headers], "device words written");
}
