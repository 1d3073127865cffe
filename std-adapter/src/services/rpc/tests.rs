//! The opcodes against the core's client, a thread per wave, the host draining until the waves
//! are done (a watchdog fails a hang).

use super::*;
use crate::services::printf::Streams;
use hostcall_core::rpc::opcode::{libc, opcode, rocm, LIBC};
use hostcall_core::rpc::{Client, ClientPort, Header, LaneBuffer, Parts, Stalled};
use hostcall_core::sync::AtomicU32;
use hostcall_core::{ErrorCode, ServiceTable};
use std::time::{Duration, Instant};

/// A buffer of `ports` x `lanes` in parts, and the client's locks.
pub(super) struct Buffer {
    lanes: u32,
    host_mailbox: Vec<AtomicU32>,
    device_mailbox: Vec<AtomicU32>,
    locks: Vec<AtomicU32>,
    headers: Vec<Header>,
    buffers: Vec<LaneBuffer>,
}

impl Buffer {
    pub(super) fn new(ports: usize, lanes: u32) -> Self {
        let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        Self {
            lanes,
            host_mailbox: words(ports),
            device_mailbox: words(ports),
            locks: words(ports.div_ceil(32)),
            headers: (0..ports).map(|_| Header::default()).collect(),
            buffers: (0..ports * lanes as usize).map(|_| LaneBuffer::default()).collect(),
        }
    }

    pub(super) fn view(&self) -> View<'_> {
        View::from_parts(Parts {
            lanes: self.lanes,
            host_mailbox: &self.host_mailbox,
            device_mailbox: &self.device_mailbox,
            headers: &self.headers,
            buffers: &self.buffers,
        })
        .unwrap()
    }

    pub(super) fn client(&self) -> Client<'_> {
        Client::new(self.view(), &self.locks).unwrap()
    }
}

/// A watchdog, not a timing bound: 60 s, so that a machine loaded by parallel builds (two spinning
/// threads among dozens on two cores) does not fail a test that would otherwise hang.
pub(super) fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(60)
}

/// Runs `device` on a thread while `host` drains the buffer; fails instead of hanging.
pub(super) fn run<T: Send>(
    buffer: &Buffer,
    host: &mut RpcHost,
    sink: &mut Streams<Vec<u8>, Vec<u8>>,
    services: &(impl Dispatch + Sync),
    device: impl FnOnce(Client<'_>) -> T + Send,
) -> T {
    let view = buffer.view();
    let client = buffer.client();
    std::thread::scope(|s| {
        let wave = s.spawn(move || device(client));
        let start = Instant::now();
        while !wave.is_finished() {
            host.drain(&view, sink, services);
            assert!(start.elapsed() < Duration::from_secs(120), "the wave did not finish");
        }
        wave.join().unwrap()
    })
}

/// Opens a port, waiting (with the watchdog) while the host has not closed the last call.
fn open<'a>(client: &Client<'a>, opcode: u32, mask: u64) -> ClientPort<'a> {
    let mut patience = patience();
    loop {
        if let Some(port) = client.try_open(opcode, mask, 0) {
            return port;
        }
        assert!(patience(0), "no port became free");
        std::hint::spin_loop();
    }
}

/// One write call from the lanes of `mask`, `data(lane)` each; the bytes written per lane.
pub(super) fn write(
    client: &Client<'_>,
    opcode: u32,
    mask: u64,
    file: Option<&dyn Fn(u32) -> u64>,
    data: &dyn Fn(u32) -> Vec<u8>,
) -> Vec<u64> {
    let mut port = open(client, opcode, mask);
    if let Some(file) = file {
        port.send(|lane| [file(lane), 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
    }
    let data: Vec<Vec<u8>> = (0..64).map(data).collect();
    port.send_n(|lane| &data[lane as usize], &mut patience()).unwrap();
    let mut written = vec![u64::MAX; 64];
    port.recv(|lane, words| written[lane as usize] = words[0], &mut patience()).unwrap();
    port.close();
    written
}

pub(super) fn sink() -> Streams<Vec<u8>, Vec<u8>> {
    Streams { stdout: Vec::new(), stderr: Vec::new() }
}

#[test]
fn console_writes_as_llvm_serves_them() {
    let buffer = Buffer::new(4, 2);
    let mut host = RpcHost::new(4, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let text = |lane: u32| format!("lane {lane} says {}|", "x".repeat(90 * lane as usize)).into_bytes();
    let results = run(&buffer, &mut host, &mut out, &services, |client| {
        let puts = write(&client, libc::WRITE_TO_STDOUT_NEWLINE, 0b01, None, &text);
        let err = write(&client, libc::WRITE_TO_STDERR, 0b11, None, &text);
        // Lane 0 names stdout, lane 1 stderr, by LLVM's low-bit tags.
        let stream = write(&client, libc::WRITE_TO_STREAM, 0b11, Some(&|lane| 2 + u64::from(lane)), &text);
        (puts, err, stream)
    });
    let (l0, l1) = (text(0), text(1));
    assert_eq!(results.0[0], l0.len() as u64 + 1);
    assert_eq!(&results.1[..2], &[l0.len() as u64, l1.len() as u64]);
    assert_eq!(&results.2[..2], &[l0.len() as u64, l1.len() as u64]);
    let mut stdout = l0.clone();
    stdout.push(b'\n');
    stdout.extend_from_slice(&l0);
    assert_eq!(out.stdout, stdout);
    assert_eq!(out.stderr, [l0.as_slice(), &l1, &l1].concat());
    let counters = host.counters();
    assert_eq!((counters.calls, counters.calls_done, counters.unhandled), (3, 3, 0));
    // 1 + 3 + (1 + 3) turns: lane 1's 104 bytes are 2 packets, lane 0's 13 one.
    assert_eq!(counters.turns, 1 + 2 + 3);
}

#[test]
fn a_refused_or_oversized_write_is_followed_and_answered_zero() {
    let buffer = Buffer::new(1, 2);
    let mut host =
        RpcHost::new(1, RpcPolicy::default().without_console(), RpcLimits::default().with_stream_bytes(100));
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let refused = run(&buffer, &mut host, &mut out, &services, |client| {
        write(&client, libc::WRITE_TO_STREAM, 0b11, Some(&|_| 2), &|_| b"no".to_vec())
    });
    assert_eq!(&refused[..2], &[0, 0]);
    assert_eq!(host.counters().refused_lanes, 2);

    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default().with_stream_bytes(100));
    let sizes = run(&buffer, &mut host, &mut out, &services, |client| {
        write(&client, libc::WRITE_TO_STDOUT, 0b11, None, &|lane| {
            vec![b'a' + lane as u8; 40 + 1000 * lane as usize]
        })
    });
    assert_eq!(&sizes[..2], &[40, 0]);
    assert_eq!(out.stdout, vec![b'a'; 40]);
    assert_eq!(
        (host.counters().over_limit_lanes, host.counters().turns),
        (1, hostcall_core::rpc::stream_packets(1040))
    );
    // A stdin or host-file target is refused too (the Files group is not served here).
    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
    let sizes = run(&buffer, &mut host, &mut out, &services, |client| {
        write(&client, libc::WRITE_TO_STREAM, 0b11, Some(&|lane| [1, 0x7f00_0000][lane as usize]), &|_| {
            b"x".to_vec()
        })
    });
    assert_eq!(&sizes[..2], &[0, 0]);
}

/// An unknown opcode gets the port back untouched (the client reads its own packet), counted;
/// NOOP is one packet; the port is free again after both.
#[test]
fn unknown_opcodes_and_noop_do_not_hang_the_client() {
    let buffer = Buffer::new(1, 1);
    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let echoed = run(&buffer, &mut host, &mut out, &services, |client| {
        let mut port = open(&client, opcode(LIBC, 999), 1);
        port.send(|_| [42, 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
        let mut echoed = 0;
        port.recv(|_, words| echoed = words[0], &mut patience()).unwrap();
        port.close();
        let port = open(&client, libc::NOOP, 1);
        let mut port = port;
        port.send(|_| [0; 8], &mut patience()).unwrap();
        port.close();
        // The NOOP's port is the client's again once the host has taken its turn.
        let start = Instant::now();
        loop {
            if let Some(port) = client.try_open(libc::NOOP, 1, 0) {
                port.close();
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60));
        }
        echoed
    });
    assert_eq!(echoed, 42);
    let c = host.counters();
    assert_eq!((c.calls, c.calls_done, c.unhandled), (2, 2, 1));
}

/// ROCm clr's DEVMEM as a hostcall packet of service 3; an unregistered FUNCTION gets the
/// services' error reply; the request words past the reply stay.
#[test]
fn rocm_opcodes_reach_the_hostcall_services() {
    let buffer = Buffer::new(2, 2);
    let mut host = RpcHost::new(2, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let devmem = |r: &[u64; 8]| Ok([0x1000 + r[1], 0]);
    let mut services = ServiceTable::<2>::new();
    services.register(3, &devmem).unwrap();
    let replies = run(&buffer, &mut host, &mut out, &services, |client| {
        let call = |opcode| -> Result<Vec<[u64; 8]>, Stalled> {
            let mut port = open(&client, opcode, 0b11);
            port.send(|lane| [0, 64 * u64::from(lane + 1), 0, 0, 0, 0, 0, 9], &mut patience())?;
            let mut got = vec![[0; 8]; 2];
            port.recv(|lane, words| got[lane as usize] = words, &mut patience())?;
            port.close();
            Ok(got)
        };
        (call(rocm::DEVMEM).unwrap(), call(rocm::FUNCTION).unwrap())
    });
    assert_eq!((replies.0[0][0], replies.0[1][0], replies.0[1][7]), (0x1040, 0x1080, 9));
    assert_eq!(ErrorCode::from_reply([replies.1[0][0], replies.1[0][1]]), Some(ErrorCode::UnknownService));
    assert_eq!(host.counters().unhandled, 0);
}

/// With the `Rocm` group off, a hostcall opcode is unhandled: counted, its service not called,
/// the lanes handed back as they were sent.
#[test]
fn rocm_opcodes_off_are_unhandled() {
    let buffer = Buffer::new(1, 1);
    let mut host = RpcHost::new(1, RpcPolicy::default().without_rocm(), RpcLimits::default());
    let mut out = sink();
    let devmem = |_: &[u64; 8]| -> Result<[u64; 2], ErrorCode> { panic!("served with the Rocm group off") };
    let mut services = ServiceTable::<2>::new();
    services.register(3, &devmem).unwrap();
    let reply = run(&buffer, &mut host, &mut out, &services, |client| {
        let mut port = open(&client, rocm::DEVMEM, 0b1);
        port.send(|_| [5, 64, 0, 0, 0, 0, 0, 9], &mut patience()).unwrap();
        let mut got = [0; 8];
        port.recv(|_, words| got = words, &mut patience()).unwrap();
        port.close();
        got
    });
    assert_eq!((reply[0], reply[1], reply[7]), (5, 64, 9));
    let c = host.counters();
    assert_eq!((c.calls, c.calls_done, c.unhandled), (1, 1, 1));
}

/// A client that opens a stream and stops holds its port's state only; other ports are served.
#[test]
fn a_client_that_stops_mid_stream_blocks_only_its_port() {
    let buffer = Buffer::new(2, 1);
    let mut host = RpcHost::new(2, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let services = ServiceTable::<1>::new();
    let written = run(&buffer, &mut host, &mut out, &services, |client| {
        let mut stuck = open(&client, libc::WRITE_TO_STDOUT, 1);
        // Claims 1 GiB, sends one packet, and never another.
        stuck.send(|_| [1 << 30, 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
        let sizes = write(&client, libc::WRITE_TO_STDERR, 1, None, &|_| b"still served".to_vec());
        let _never_closed = stuck; // stays locked: the port is this wave's until it ends
        sizes[0]
    });
    assert_eq!(written, 12);
    assert_eq!(out.stderr, b"still served");
    assert_eq!(host.counters().calls_done, 1);
    for _ in 0..100 {
        assert_eq!(host.drain(&buffer.view(), &mut out, &services), 0, "nothing pending, nothing spins");
    }
}

mod budget;
mod packet_turn;
mod printf;

/// `MALLOC` and `FREE` reach the DEVMEM service as its allocate and free requests; a null free
/// reaches nothing; with the Memory group off, `MALLOC` is answered null.
#[test]
fn malloc_and_free_go_through_devmem() {
    use std::sync::Mutex;
    let buffer = Buffer::new(1, 2);
    let mut out = sink();
    let log = Mutex::new(Vec::new());
    let devmem = |r: &[u64; 8]| {
        log.lock().unwrap().push((r[0], r[1]));
        Ok([if r[0] == 0 { 0x9000 + r[1] } else { 0 }, 0])
    };
    let mut services = ServiceTable::<1>::new();
    services.register(hostcall_core::DEVMEM, &devmem).unwrap();
    let call = |client: &Client<'_>, opcode, words: [u64; 2], reply: bool| {
        let mut port = open(client, opcode, 0b11);
        port.send(|lane| [words[lane as usize], 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
        let mut got = [u64::MAX; 2];
        if reply {
            port.recv(|lane, w| got[lane as usize] = w[0], &mut patience()).unwrap();
        }
        port.close();
        got
    };
    let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
    let addresses = run(&buffer, &mut host, &mut out, &services, |client| {
        let addresses = call(&client, libc::MALLOC, [16, 32], true);
        call(&client, libc::FREE, [addresses[0], 0], false);
        // The FREE is one packet: the next call waits until the host has taken it.
        call(&client, libc::NOOP, [0, 0], false);
        addresses
    });
    assert_eq!(addresses, [0x9010, 0x9020]);
    assert_eq!(*log.lock().unwrap(), [(0, 16), (0, 32), (0x9010, 0)]);
    let mut host = RpcHost::new(1, RpcPolicy::none(), RpcLimits::default());
    let refused =
        run(&buffer, &mut host, &mut out, &services, |client| call(&client, libc::MALLOC, [16, 32], true));
    assert_eq!((refused, host.counters().refused_lanes), ([0, 0], 2));
    assert_eq!(log.lock().unwrap().len(), 3);
}
