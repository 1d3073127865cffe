//! The whole hostcall packet's turn (`packet_turn.rs`) keeps what every turn keeps: the poll's
//! work budget, and a call in progress whatever its header says later. Stepped on the test's own
//! thread (each client sends only when its port is its own, the host drains in between), so
//! every count is exact and nothing can hang.

use super::*;
use hostcall_core::rpc::opcode::HOSTCALL;
use hostcall_core::rpc::{fill_packet, Cursor};
use std::sync::atomic::{AtomicU64, Ordering};

/// A hostcall service id of the `'h'` namespace.
const ECHO: u32 = 100;

/// One lane's packet of the hostcall service ECHO on port `port`, sent (the port is the client's).
fn echo_call<'a>(client: &Client<'a>, port: u32, word: u64) -> ClientPort<'a> {
    let mut opened = client.try_open(opcode(HOSTCALL, ECHO), 1, port).expect("a free port");
    assert_eq!(opened.port(), port);
    opened.send(|_| [word, 0, 0, 0, 0, 0, 0, 0], &mut |_| false).expect("the port is the client's");
    opened
}

/// With work for one packet a poll, three pending packet calls are served one a drain, the
/// others deferred (the port stays the host's), each next drain beginning where the last ran out.
#[test]
fn packet_turns_wait_for_the_next_poll_once_its_work_is_spent() {
    let buffer = Buffer::new(3, 1);
    let client = buffer.client();
    let limits = RpcLimits::default().with_poll_work_bytes(64);
    let mut host = RpcHost::new(3, RpcPolicy::default(), limits);
    let mut out = sink();
    let served = AtomicU64::new(0);
    let echo = |r: &[u64; 8]| {
        served.fetch_add(1, Ordering::Relaxed);
        Ok([r[0] + 1, 0])
    };
    let mut services = ServiceTable::<1>::new();
    services.register(ECHO, &echo).unwrap();
    let mut ports: Vec<_> = (0..3).map(|port| echo_call(&client, port, 10 * u64::from(port))).collect();
    for drain in 1..=3 {
        host.drain(&buffer.view(), &mut out, &services);
        let c = host.counters();
        assert_eq!(served.load(Ordering::Relaxed), drain, "one packet a drain");
        assert_eq!((c.turns, c.calls, c.calls_done), (drain, drain, drain));
        assert_eq!(c.deferred_turns, (1..=drain).map(|d| 3 - d).sum::<u64>(), "the others deferred");
        let answered = ports.iter_mut().filter_map(|port| port.poll().then_some(port.port())).count();
        assert_eq!(answered as u64, drain, "the deferred ports stay the host's");
    }
    for (port, mut opened) in ports.into_iter().enumerate() {
        let mut reply = 0;
        opened.recv(|_, words| reply = words[0], &mut |_| false).unwrap();
        opened.close();
        assert_eq!(reply, 10 * port as u64 + 1);
    }
}

/// A call in progress whose header a device rewrites to a hostcall opcode goes on as the call it
/// is: the packet is its stream's next, not a packet for the service.
#[test]
fn a_call_in_progress_is_continued_whatever_its_header_says_later() {
    let buffer = Buffer::new(1, 1);
    let client = buffer.client();
    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let echo = |_: &[u64; 8]| -> Result<[u64; 2], ErrorCode> { panic!("a call's packet served as ECHO") };
    let mut services = ServiceTable::<1>::new();
    services.register(ECHO, &echo).unwrap();
    let data = [b'x'; 100]; // two packets: 56 bytes, then 44
    let mut port = client.try_open(libc::WRITE_TO_STDOUT, 1, 0).expect("a free port");
    let mut cursor = Cursor::start();
    for packet in 0..2 {
        if packet == 1 {
            let view = buffer.view();
            // Relaxed, as the client's own header stores (the send's fence publishes it).
            view.header(0).opcode.store(opcode(HOSTCALL, ECHO), Ordering::Relaxed);
        }
        let at = cursor;
        port.send(|_| fill_packet(&at, &data), &mut |_| false).expect("the port is the client's");
        cursor.advance(data.len() as u64);
        host.drain(&buffer.view(), &mut out, &services);
    }
    let mut written = 0;
    port.recv(|_, words| written = words[0], &mut |_| false).expect("answered");
    port.close();
    assert_eq!((written, out.stdout.as_slice()), (100, &data[..]));
    let c = host.counters();
    assert_eq!((c.turns, c.calls, c.calls_done, c.unhandled), (2, 1, 1, 0));
}
