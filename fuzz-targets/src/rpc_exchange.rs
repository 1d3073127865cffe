//! Target `rpc_exchange`: an LLVM-RPC buffer whose device writes whatever the input says
//! (mailbox flips and raw values, headers with any mask and opcode, lane words with any stream
//! length), drained by the std crate's [`RpcHost`] between writes.
//!
//! Checked at every drain: no panic; at most one turn per port; the host writes nothing but the
//! host mailbox of a port it took a turn on (flipped: the mailboxes then read equal) and that
//! port's lane buffers; the device's words (its mailbox, the headers) are never written; the
//! data the host holds stays within its budget (ports x lanes x the stream limit x 4: printf's
//! format, argument block, strings and the stream in progress); output grows by at most one
//! write or one printf message per lane per turn.

use crate::input::Input;
use hostcall::services::printf::{Streams, DEFAULT_MAX_OUTPUT};
use hostcall::services::rpc::{RpcHost, RpcLimits, RpcPolicy};
use hostcall_core::rpc::opcode::{libc, rocm};
use hostcall_core::rpc::{Header, LaneBuffer, Parts, View};
use hostcall_core::sync::{AtomicU32, Ordering};
use hostcall_core::ServiceTable;

const OPCODES: [u32; 12] = [
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
];

struct Buffer {
    lanes: u32,
    host_mailbox: Vec<AtomicU32>,
    device_mailbox: Vec<AtomicU32>,
    headers: Vec<Header>,
    buffers: Vec<LaneBuffer>,
}

impl Buffer {
    fn view(&self) -> View<'_> {
        let parts = Parts {
            lanes: self.lanes,
            host_mailbox: &self.host_mailbox,
            device_mailbox: &self.device_mailbox,
            headers: &self.headers,
            buffers: &self.buffers,
        };
        View::from_parts(parts).expect("a valid geometry")
    }

    /// Every word, in order: host mailboxes, device mailboxes, headers, lane buffers.
    fn words(&self) -> Vec<u64> {
        let mut words: Vec<u64> =
            self.host_mailbox.iter().map(|w| u64::from(w.load(Ordering::Relaxed))).collect();
        words.extend(self.device_mailbox.iter().map(|w| u64::from(w.load(Ordering::Relaxed))));
        for h in &self.headers {
            words.push(h.mask.load(Ordering::Relaxed));
            words.push(u64::from(h.opcode.load(Ordering::Relaxed)));
        }
        for b in &self.buffers {
            words.extend(b.read());
        }
        words
    }
}

/// The fuzz target: see the module docs.
pub fn rpc_exchange(data: &[u8]) {
    let mut input = Input::new(data);
    let ports = 1 + usize::from(input.u8() % 4);
    let lanes = 1 + u32::from(input.u8() % 4);
    let limit = 1 + u64::from(input.u8()) * 4;
    let policy = if input.u8() & 1 == 0 { RpcPolicy::default() } else { RpcPolicy::none() };
    let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
    let buffer = Buffer {
        lanes,
        host_mailbox: words(ports),
        device_mailbox: words(ports),
        headers: (0..ports).map(|_| Header::default()).collect(),
        buffers: (0..ports * lanes as usize).map(|_| LaneBuffer::default()).collect(),
    };
    let view = buffer.view();
    let mut host = RpcHost::new(ports as u32, policy, RpcLimits::default().with_stream_bytes(limit));
    let mut sink = Streams { stdout: Vec::new(), stderr: Vec::new() };
    let devmem = |r: &[u64; 8]| Ok([if r[0] == 0 { 0x1000 } else { 0 }, 0]);
    let mut services = ServiceTable::<1>::new();
    services.register(hostcall_core::dispatch::DEVMEM, &devmem).ok().expect("one service");
    let budget = ports * lanes as usize * limit as usize * 4;

    for _ in 0..256 {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        let port = usize::from(input.u8()) % ports;
        match op % 6 {
            0 => {
                let b = &buffer.device_mailbox[port];
                b.store(u32::from(b.load(Ordering::Relaxed) == 0), Ordering::Relaxed);
            }
            1 => buffer.device_mailbox[port].store(input.u32(), Ordering::Relaxed),
            2 => {
                let mask = input.u64();
                let opcode = OPCODES[usize::from(input.u8()) % OPCODES.len()];
                buffer.headers[port].mask.store(mask, Ordering::Relaxed);
                buffer.headers[port].opcode.store(opcode, Ordering::Relaxed);
            }
            3 => {
                let lane = u32::from(input.u8()) % lanes;
                let word = usize::from(input.u8() % 8);
                // Small stream lengths and strings often, anything sometimes.
                let value = if input.u8() & 1 == 0 { u64::from(input.u8()) } else { input.u64() };
                buffer.buffers[port * lanes as usize + lane as usize].words[word].write(value);
            }
            _ => drain_and_check(&buffer, &view, &mut host, &mut sink, &services, budget, limit),
        }
    }
    drain_and_check(&buffer, &view, &mut host, &mut sink, &services, budget, limit);
}

fn drain_and_check(
    buffer: &Buffer,
    view: &View<'_>,
    host: &mut RpcHost,
    sink: &mut Streams<Vec<u8>, Vec<u8>>,
    services: &ServiceTable<'_, 1>,
    budget: usize,
    limit: u64,
) {
    let ports = buffer.host_mailbox.len();
    let lanes = buffer.lanes as usize;
    let pending: Vec<bool> = (0..ports as u32).map(|p| view.pending(p)).collect();
    let before = buffer.words();
    let output_before = sink.stdout.len() + sink.stderr.len();
    let turns = host.drain(view, sink, services) as usize;
    let after = buffer.words();
    assert_eq!(turns, pending.iter().filter(|&&p| p).count(), "one turn per pending port");
    let headers = 2 * ports;
    for port in 0..ports {
        if pending[port] {
            assert!(!view.pending(port as u32), "port {port}: the turn hands the port back");
        } else {
            assert_eq!(before[port], after[port], "port {port}: host mailbox written without a turn");
            let start = 2 * ports + headers + port * lanes * 8;
            assert_eq!(
                before[start..start + lanes * 8],
                after[start..start + lanes * 8],
                "port {port}: lanes written"
            );
        }
    }
    assert_eq!(before[ports..2 * ports + headers], after[ports..2 * ports + headers], "device words written");
    assert!(host.held_bytes() <= budget, "{} bytes held, budget {budget}", host.held_bytes());
    let grown = sink.stdout.len() + sink.stderr.len() - output_before;
    let per_lane = (limit + 1).max(DEFAULT_MAX_OUTPUT as u64);
    assert!(grown as u64 <= (turns * lanes) as u64 * per_lane, "output grew by {grown}");
}
