//! The budgets of the calls in progress (`budget.rs`), against a hostile device stepped on the
//! test's own thread: each port's client sends a packet only when the port is its own, the host
//! drains in between, so every count is exact and nothing can hang (every loop is bounded).

use super::*;
use hostcall_core::rpc::{fill_packet, Cursor};

/// 64 lanes on every port.
const ALL_LANES: u64 = u64::MAX;

/// One port's client sending one stream, packet by packet.
struct Sending<'a> {
    port: ClientPort<'a>,
    cursor: Cursor,
    more: bool,
}

impl<'a> Sending<'a> {
    /// Opens port `port` for `opcode` from every lane.
    fn open(client: &Client<'a>, opcode: u32, port: u32) -> Self {
        let opened = client.try_open(opcode, ALL_LANES, port).expect("a free port");
        assert_eq!(opened.port(), port);
        Self { port: opened, cursor: Cursor::start(), more: true }
    }

    /// Sends the next packet of `data` (the same bytes from every lane), if the stream has one;
    /// the port must be the client's.
    fn send_next(&mut self, data: &[u8]) {
        if self.more {
            let cursor = self.cursor;
            self.port.send(|_| fill_packet(&cursor, data), &mut |_| false).expect("the port is the client's");
            self.more = self.cursor.advance(data.len() as u64);
        }
    }

    /// A new stream on the same call.
    fn restart(&mut self) {
        (self.cursor, self.more) = (Cursor::start(), true);
    }
}

/// Drains until every port of `calls` is the client's again; returns the drains it took.
fn settle(
    host: &mut RpcHost,
    buffer: &Buffer,
    calls: &mut [Sending<'_>],
    out: &mut Streams<Vec<u8>, Vec<u8>>,
) -> usize {
    let services = ServiceTable::<1>::new();
    for drains in 1..=100_000 {
        host.drain(&buffer.view(), out, &services);
        if calls.iter_mut().all(|call| call.port.poll()) {
            return drains;
        }
    }
    panic!("the host did not answer every port");
}

/// 4,096 ports of 64 lanes, each lane two packets into a format at the stream limit (64 KiB):
/// 16 GiB declared. The host charges each lane's declared size at its first packet and holds
/// exactly its budget, 1,024 lanes' formats; every other lane is refused, counted, and keeps
/// nothing. Removing the buffer gives it all back.
#[test]
fn held_calls_of_4096_ports_stay_within_the_buffer_budget() {
    const PORTS: u32 = 4096;
    let buffer = Buffer::new(PORTS as usize, 64);
    let client = buffer.client();
    let limits = RpcLimits::default();
    let (all, of_buffer) = (Arc::new(HeldAccount::default()), Arc::new(HeldAccount::default()));
    let files = files::SharedFiles::new(limits.open_files, None);
    let mut host =
        RpcHost::with_shared(PORTS, RpcPolicy::default(), limits, files, of_buffer.clone(), all.clone());
    let mut out = sink();
    let format = vec![b'x'; DEFAULT_STREAM_BYTES as usize];
    let mut calls: Vec<_> =
        (0..PORTS).map(|port| Sending::open(&client, libc::PRINTF_TO_STDOUT, port)).collect();
    for _ in 0..2 {
        calls.iter_mut().for_each(|call| call.send_next(&format));
        settle(&mut host, &buffer, &mut calls, &mut out);
    }
    let budget = limits.max_held_bytes_per_buffer;
    let kept_lanes = (budget / format.len()) as u64;
    let counters = host.counters();
    assert_eq!(host.held_bytes(), budget, "held exactly to the budget");
    assert_eq!((of_buffer.held(), all.held()), (budget, budget));
    assert_eq!(counters.held_bytes, budget as u64);
    assert_eq!(counters.held_refused_lanes, u64::from(PORTS) * 64 - kept_lanes);
    assert_eq!((counters.refused_lanes, counters.over_limit_lanes), (0, 0));
    assert_eq!(host.calls_in_progress(), PORTS as usize);
    host.retire();
    assert_eq!((host.held_bytes(), of_buffer.held(), all.held()), (0, 0, 0));
}

/// Two ports' printf calls held at once on a budget of one port's: the second port's lanes are
/// refused, followed to the end of the call and answered -1; the first port's print. What was
/// charged comes back when the calls are answered.
#[test]
fn a_lane_past_the_held_budget_is_followed_and_answered_failed() {
    let buffer = Buffer::new(2, 64);
    let client = buffer.client();
    let mut format = b"held by every lane of port 0, by no lane of port 1 ".to_vec();
    format.resize(99, b'.');
    format.push(0);
    let format = &format[..];
    let limits = RpcLimits::default().with_max_held_bytes_per_buffer(64 * format.len());
    let mut host = RpcHost::new(2, RpcPolicy::default(), limits);
    let mut out = sink();
    let mut calls: Vec<_> = (0..2).map(|port| Sending::open(&client, libc::PRINTF_TO_STDOUT, port)).collect();
    while calls.iter().any(|call| call.more) {
        calls.iter_mut().for_each(|call| call.send_next(format));
        settle(&mut host, &buffer, &mut calls, &mut out);
    }
    assert_eq!(host.held_bytes(), 64 * format.len());
    assert_eq!(host.counters().held_refused_lanes, 64);
    for call in &mut calls {
        let mut sizes = [u64::MAX; 64];
        call.port.recv(|lane, words| sizes[lane as usize] = words[0], &mut |_| false).unwrap();
        assert_eq!(sizes, [0; 64], "no arguments");
        call.restart();
        call.send_next(&[]);
    }
    settle(&mut host, &buffer, &mut calls, &mut out);
    let printed: Vec<[u64; 64]> = calls
        .into_iter()
        .map(|mut call| {
            let mut printed = [0; 64];
            call.port.recv(|lane, words| printed[lane as usize] = words[0], &mut |_| false).unwrap();
            call.port.close();
            printed
        })
        .collect();
    assert_eq!(printed, [[99; 64], [u64::MAX; 64]]);
    assert_eq!(out.stdout, format[..99].repeat(64));
    let counters = host.counters();
    assert_eq!((counters.calls_done, counters.held_refused_lanes, counters.refused_lanes), (2, 64, 0));
    assert_eq!((host.held_bytes(), counters.held_bytes), (0, 0));
}

/// 64 ports of 64 lanes whose 4 KiB printf formats all complete in one scan: 16 MiB of
/// formatting. No drain does more than the poll's work budget and one lane's answer and packet;
/// the rest waits for later drains (the turns deferred, counted), and every lane is printed once.
#[test]
fn the_work_of_one_drain_is_bounded_when_many_held_calls_complete_at_once() {
    const PORTS: u32 = 64;
    let buffer = Buffer::new(PORTS as usize, 64);
    let client = buffer.client();
    let mut host = RpcHost::new(PORTS, RpcPolicy::default(), RpcLimits::default());
    let mut out = sink();
    let mut format = vec![b'y'; 4095];
    format.push(0);
    let mut calls: Vec<_> =
        (0..PORTS).map(|port| Sending::open(&client, libc::PRINTF_TO_STDOUT, port)).collect();
    while calls.iter().any(|call| call.more) {
        calls.iter_mut().for_each(|call| call.send_next(&format));
        settle(&mut host, &buffer, &mut calls, &mut out);
    }
    for call in &mut calls {
        call.port.recv(|_, _| {}, &mut |_| false).unwrap();
        call.restart();
        call.send_next(&[]); // every call's last packet: all complete in the next scan
    }
    let before = host.counters();
    let drains = settle(&mut host, &buffer, &mut calls, &mut out);
    let counters = host.counters();
    // One lane's answer: its message (the control word and the format, in words) and output.
    let lane_answer = 8 * (1 + format.len().div_ceil(8)) + format.len() - 1;
    let bound = DEFAULT_POLL_WORK_BYTES + lane_answer + 64 * 64;
    assert!(host.most_poll_work() <= bound, "{} > {bound}", host.most_poll_work());
    let formatting = (PORTS as usize) * 64 * lane_answer;
    assert!(drains >= formatting / bound, "{drains} drains for {formatting} bytes of answers");
    assert!(counters.deferred_turns > before.deferred_turns);
    assert_eq!(counters.calls_done, u64::from(PORTS));
    assert_eq!(out.stdout.len(), PORTS as usize * 64 * 4095);
    assert!(out.stdout.iter().all(|&b| b == b'y'));
    for call in calls {
        let mut printed = [0; 64];
        let mut port = call.port;
        port.recv(|lane, words| printed[lane as usize] = words[0], &mut |_| false).unwrap();
        assert_eq!(printed, [4095; 64]);
        port.close();
    }
    assert_eq!(host.held_bytes(), 0);
}
