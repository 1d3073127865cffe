//! `core_1l_rpc`: the same client against the core's turn alone (read, echo, two reply words,
//! flip), what the host's call machinery and service dispatch add being the difference.
//!
//! `rpc_host_1l`: LLVM libc's GPU RPC on one port of one lane, both sides this project's: the
//! core's client (`rpc::Client`: open, send the request, receive the reply, close, as LLVM's
//! client does per call) and the std crate's RPC host (`services::rpc::RpcHost::drain` in a
//! spinning loop, the ECHO service behind it as a hostcall service in the `'h'` namespace).
//!
//! `hostcall_1l_rpc`: the same client against the full listener (spinning), which serves RPC
//! buffers through its own `RpcHost` of each buffer (the `'h'` and `'r'` opcodes as hostcall
//! packets; `threads/listener/rpc.rs`).

use crate::measure::{pinned_pair, round_trips, Sample};
use crate::options::Options;
use crate::{echo, request};
use hostcall::{
    services::printf::StdStreams,
    services::rpc::{RpcHost, RpcLimits, RpcPolicy},
};
use hostcall_core::rpc::{opcode_of, Client, Header, LaneBuffer, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::{ErrorCode, ServiceTable, SLOT_WORDS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// One port of one lane as `rpc.h` lays it out (mailboxes at 0 and 4, the header at 8, the lane
/// at 24: the first line holds the mailboxes, the header and 40 request bytes).
#[repr(C, align(128))]
struct Port {
    host_mailbox: [AtomicU32; 1],
    device_mailbox: [AtomicU32; 1],
    headers: [Header; 1],
    buffers: [LaneBuffer; 1],
}

/// The client's lock word: device memory in a real client, a line of its own here.
#[repr(C, align(128))]
struct Locks([AtomicU32; 1]);

const _: () = assert!(
    std::mem::offset_of!(Port, device_mailbox) == 4
        && std::mem::offset_of!(Port, headers) == 8
        && std::mem::offset_of!(Port, buffers) == 24
);

impl Port {
    /// The port as the raw buffer it is laid out as (`rpc::buffer_size(1, 1)` = 88 bytes).
    fn view(&self) -> View<'_> {
        let base = (self as *const Self).cast_mut().cast::<u8>();
        // SAFETY: `self` is `size_of::<Port>()` >= 88 bytes laid out as a one-port, one-lane
        // buffer (the offsets asserted above), all of it atomics, valid while borrowed.
        unsafe { View::from_raw(base, std::mem::size_of::<Self>(), 1, 1) }.expect("one port, one lane")
    }
}

/// Which host serves the port.
#[derive(Clone, Copy)]
pub(crate) enum RpcServer {
    /// `RpcHost::drain` with the ECHO service in a `ServiceTable`.
    Host,
    /// The core's turn alone: `View::turn`, read, echo, `write_first`, `finish`.
    Core,
}

/// `hostcall_1l_rpc`: the same client against the full listener (spinning), the buffer a
/// `HostcallBuffer` of `Protocol::Rpc`, the ECHO service in the listener's registry.
pub(crate) fn rpc_listener_round_trip(o: &Options) -> Sample {
    let protocol = hostcall::Protocol::Rpc { lanes: 1 };
    let (listener, buffer) = pinned_pair(o, || {
        crate::latency::start_listener_with(hostcall::ListenerConfig::spinning(), 1, protocol)
    });
    let view = buffer.view().rpc().expect("an RPC buffer");
    let locks = Locks([AtomicU32::new(0)]);
    let client = Client::new(view, &locks.0).expect("one lock word");
    let sample = client_calls(o, &client);
    listener.shutdown();
    sample
}

/// `rpc_tput_1c`: `hostcall_1l_rpc`'s client calling as fast as it can (the twin of
/// `llvm_rpc_tput_1c`).
pub(crate) fn rpc_listener_throughput(o: &Options) -> Sample {
    let protocol = hostcall::Protocol::Rpc { lanes: 1 };
    // Pinned as the latency rows (the client thread inherits this thread's CPU).
    let (listener, buffer) = pinned_pair(o, || {
        crate::latency::start_listener_with(hostcall::ListenerConfig::spinning(), 1, protocol)
    });
    let locks = Arc::new(Locks([AtomicU32::new(0)]));
    let client_buffer = buffer.clone();
    let opcode = opcode_of(crate::ECHO);
    let (calls, cpu_ns) = crate::throughput::count_calls(o, 1, move |_, i| {
        let view = client_buffer.view().rpc().expect("an RPC buffer");
        let client = Client::new(view, &locks.0).expect("one lock word");
        let words = request(i, 0);
        let mut call = client.try_open(opcode, 1, 0).expect("the port is free between calls");
        call.send(|_| words, &mut |_| true).expect("no give-up");
        let mut reply = [0; 2];
        call.recv_first(|_, w| reply = w, &mut |_| true).expect("no give-up");
        call.close();
        assert_eq!(reply, echo(&words));
    });
    listener.shutdown();
    Sample::Throughput { calls, lanes: calls, cpu_ns }
}

/// The client's side of every row: open, send the request, receive the reply (its two words:
/// `recv_first`, as upstream's client reads only what it uses), close.
fn client_calls(o: &Options, client: &Client<'_>) -> Sample {
    let opcode = opcode_of(crate::ECHO);
    let mut i = 0u64;
    round_trips(o, || {
        i += 1;
        let words = request(i, 0);
        let mut call = client.try_open(opcode, 1, 0).expect("the port is free between calls");
        call.send(|_| words, &mut |_| true).expect("no give-up");
        let mut reply = [0; 2];
        call.recv_first(|_, w| reply = w, &mut |_| true).expect("no give-up");
        call.close();
        assert_eq!(reply, echo(&words));
    })
}

pub(crate) fn rpc_round_trip(o: &Options, server: RpcServer) -> Sample {
    let port = Arc::new(Port {
        host_mailbox: [AtomicU32::new(0)],
        device_mailbox: [AtomicU32::new(0)],
        headers: [Header::default()],
        buffers: [LaneBuffer::default()],
    });
    let stop = Arc::new(AtomicBool::new(false));
    let host = pinned_pair(o, || {
        let (port, stop) = (port.clone(), stop.clone());
        thread::spawn(move || {
            let echo_service = |r: &[u64; SLOT_WORDS]| Ok::<_, ErrorCode>(echo(r));
            let mut services = ServiceTable::<1>::new();
            services.register(crate::ECHO, &echo_service).expect("one service");
            let mut rpc = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
            let view = port.view();
            // Relaxed: the flag carries no data.
            while !stop.load(Ordering::Relaxed) {
                let served = match server {
                    RpcServer::Host => rpc.drain(&view, &mut StdStreams, &services),
                    RpcServer::Core => match view.turn(0) {
                        Some(mut turn) => {
                            turn.write_first(0, &echo(&turn.read(0)));
                            turn.finish();
                            1
                        }
                        None => 0,
                    },
                };
                if served == 0 {
                    std::hint::spin_loop();
                }
            }
        })
    });
    let view = port.view();
    let locks = Locks([AtomicU32::new(0)]);
    let client = Client::new(view, &locks.0).expect("one lock word");
    let sample = client_calls(o, &client);
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    host.join().unwrap();
    sample
}
