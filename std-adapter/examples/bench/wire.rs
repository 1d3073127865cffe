//! Wire-shape rows: the shared-memory traffic of one lane's round trip, with none of this
//! project's code (but the line protocol's word encodings), to tell what a protocol's layout
//! costs from what its instructions cost.
//!
//! - `wire_1l_line`: the line protocol's words for one lane of one packet, where its layout puts
//!   them (PROTOCOL.md section 9): the wave stores the lane's 9 request words (bytes 16..88),
//!   then the mask word and the head (bytes 0..16: head, mask and lane 0 share the block's first
//!   two lines, one 128-byte pair); the host polls the head, loads the mask and the 9 words,
//!   checking each sequence, and stores 3 reply words (one line), which the wave polls. Two
//!   lines to the host, one back.
//! - `llvm_rpc_1l`: LLVM libc's GPU RPC (`rpc.h`) for one port, as its allocation lays it out
//!   when there is one port: the two `u32` mailboxes at offsets 0 and 4, the packet header
//!   (`mask: u64`, `opcode: u32`) at 8 and the lane's 64-byte buffer at 24, so the mailboxes, the
//!   header and 40 bytes of the request share the first line. The client fills, then flips its
//!   outbox (Release); the server polls it (Acquire), reads, writes 2 reply words into the buffer
//!   and flips its own; the client polls that and reads the reply. Our model of the shape, not
//!   LLVM's code (its port lock and lane-mask handling are left out: neither crosses cores here).

use crate::measure::{pinned_pair, round_trips, Sample};
use crate::options::Options;
use crate::{echo, request};
use hostcall_core::line::{
    carries, decode_activemask, decode_reply, decode_request, encode_head, encode_mask, encode_reply,
    encode_request, seq_of, REPLY_LANE_WORDS, REQUEST_LANE_WORDS,
};
use hostcall_core::SLOT_WORDS;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

/// The line protocol's request block for one packet, cut to one lane: the head, the mask word
/// and the lane's 9 line words right after them, as in `line::Request`.
#[repr(C, align(128))]
struct LineRequest {
    head: AtomicU64,
    mask: AtomicU64,
    lane: [AtomicU64; REQUEST_LANE_WORDS],
}

/// One lane's reply: 3 line words, in a line of its own.
#[repr(C, align(128))]
struct LineReply {
    words: [AtomicU64; REPLY_LANE_WORDS],
}

fn zeroed<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

pub(crate) fn wire_line(o: &Options) -> Sample {
    let request_block =
        Arc::new(LineRequest { head: AtomicU64::new(0), mask: AtomicU64::new(0), lane: zeroed() });
    let reply_block = Arc::new(LineReply { words: zeroed() });
    let stop = Arc::new(AtomicBool::new(false));
    let host = pinned_pair(o, || {
        let (rq, rp, stop) = (request_block.clone(), reply_block.clone(), stop.clone());
        thread::spawn(move || {
            let mut served = 0u32;
            // Relaxed: the flag carries no data.
            while !stop.load(Ordering::Relaxed) {
                // Relaxed everywhere: each word carries its own sequence (on x86 every load is
                // an acquire anyway, as in the real host's scan).
                let head = rq.head.load(Ordering::Relaxed);
                let seq = seq_of(head);
                if seq == 0 || seq == served {
                    spin_loop();
                    continue;
                }
                let mask = rq.mask.load(Ordering::Relaxed);
                let lane: [u64; REQUEST_LANE_WORDS] =
                    std::array::from_fn(|k| rq.lane[k].load(Ordering::Relaxed));
                let whole = carries(mask, seq) && lane.iter().all(|&w| carries(w, seq));
                if !whole || decode_activemask(head, mask) != 1 {
                    continue;
                }
                let words: [u64; SLOT_WORDS] = decode_request(&lane);
                for (word, value) in rp.words.iter().zip(encode_reply(echo(&words), seq)) {
                    word.store(value, Ordering::Relaxed);
                }
                served = seq;
            }
        })
    });
    // The sequences 1..=127 over and over (the real protocol's wrap refresh is left out: the
    // host here serves every call before the next, so no stale word can match).
    let (mut seq, mut calls) = (0u32, 0u64);
    let sample = round_trips(o, || {
        seq = seq % hostcall_core::line::SEQ_MAX + 1;
        calls += 1;
        let words = request(calls, 0);
        // Relaxed, as the host's loads: each word carries its own sequence.
        for (word, value) in request_block.lane.iter().zip(encode_request(&words, seq)) {
            word.store(value, Ordering::Relaxed);
        }
        request_block.mask.store(encode_mask(1, seq), Ordering::Relaxed);
        request_block.head.store(encode_head(crate::ECHO, 1, seq), Ordering::Relaxed);
        let reply = loop {
            let w: [u64; REPLY_LANE_WORDS] =
                std::array::from_fn(|i| reply_block.words[i].load(Ordering::Relaxed));
            if w.iter().all(|&w| carries(w, seq)) {
                break decode_reply(&w);
            }
            spin_loop();
        };
        assert_eq!(reply, echo(&words));
    });
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    host.join().unwrap();
    sample
}

/// LLVM libc's one-port RPC memory: mailboxes, header and buffer from offset 0.
#[repr(C, align(128))]
struct RpcPort {
    /// The client's inbox, the server's outbox.
    client_inbox: AtomicU32,
    /// The client's outbox, the server's inbox.
    client_outbox: AtomicU32,
    mask: AtomicU64,
    opcode: AtomicU32,
    _pad: u32,
    buffer: [AtomicU64; SLOT_WORDS],
}

/// The port's memory, zeroed.
fn rpc_port() -> Arc<RpcPort> {
    Arc::new(RpcPort {
        client_inbox: AtomicU32::new(0),
        client_outbox: AtomicU32::new(0),
        mask: AtomicU64::new(0),
        opcode: AtomicU32::new(0),
        _pad: 0,
        buffer: zeroed(),
    })
}

/// The server's side: polls the client's outbox, reads, writes 2 reply words, flips; until `stop`.
fn llvm_rpc_server(port: Arc<RpcPort>, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut out = 0u32;
        // Relaxed: the flag carries no data.
        while !stop.load(Ordering::Relaxed) {
            // Acquire: pairs with the client's Release flip; the buffer it filled is visible.
            if port.client_outbox.load(Ordering::Acquire) == out {
                spin_loop();
                continue;
            }
            let _ = (port.mask.load(Ordering::Relaxed), port.opcode.load(Ordering::Relaxed));
            let words: [u64; SLOT_WORDS] = std::array::from_fn(|i| port.buffer[i].load(Ordering::Relaxed));
            let reply = echo(&words);
            port.buffer[0].store(reply[0], Ordering::Relaxed);
            port.buffer[1].store(reply[1], Ordering::Relaxed);
            out ^= 1;
            // Release: pairs with the client's Acquire poll; the reply words are visible.
            port.client_inbox.store(out, Ordering::Release);
        }
    })
}

/// The client's side of call `i`: fill, flip (its outbox's new value `out`), wait for the
/// server's flip, read and check the reply.
fn llvm_rpc_call(port: &RpcPort, i: u64, out: u32) {
    let words = request(i, 0);
    port.mask.store(1, Ordering::Relaxed);
    port.opcode.store(crate::ECHO, Ordering::Relaxed);
    for (slot, w) in port.buffer.iter().zip(words) {
        slot.store(w, Ordering::Relaxed);
    }
    // Release: pairs with the server's Acquire poll.
    port.client_outbox.store(out, Ordering::Release);
    // Acquire: pairs with the server's Release flip.
    while port.client_inbox.load(Ordering::Acquire) != out {
        spin_loop();
    }
    let reply = [port.buffer[0].load(Ordering::Relaxed), port.buffer[1].load(Ordering::Relaxed)];
    assert_eq!(reply, echo(&words));
}

pub(crate) fn llvm_rpc(o: &Options) -> Sample {
    let port = rpc_port();
    let stop = Arc::new(AtomicBool::new(false));
    let server = pinned_pair(o, || llvm_rpc_server(port.clone(), stop.clone()));
    let mut out = 0u32;
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        out ^= 1;
        llvm_rpc_call(&port, i, out);
    });
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    sample
}

/// `llvm_rpc_tput_1c`: `llvm_rpc_1l`'s client calling as fast as it can (its throughput
/// twin), pinned as it.
pub(crate) fn llvm_rpc_throughput(o: &Options) -> Sample {
    let port = rpc_port();
    let stop = Arc::new(AtomicBool::new(false));
    // Pinned as the latency rows (the client thread inherits this thread's CPU).
    let server = pinned_pair(o, || llvm_rpc_server(port.clone(), stop.clone()));
    let client_port = port.clone();
    let (calls, cpu_ns) = crate::throughput::count_calls(o, 1, move |_, i| {
        // Relaxed: the client's own word (one client), read for its last value.
        let out = client_port.client_outbox.load(Ordering::Relaxed) ^ 1;
        llvm_rpc_call(&client_port, i + 1, out);
    });
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    Sample::Throughput { calls, lanes: calls, cpu_ns }
}

// Where the words sit: as `line::Request` (lane 0 right after the head and mask words) and as
// LLVM libc's one-port allocation (header at 8, buffer at 24).
const _: () = assert!(std::mem::offset_of!(LineRequest, lane) == 16);
const _: () =
    assert!(std::mem::offset_of!(RpcPort, mask) == 8 && std::mem::offset_of!(RpcPort, buffer) == 24);
