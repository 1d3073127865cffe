//! `rpc_puts_<C>c` / `llvm_puts_<C>c`: many clients writing lines to stdout over LLVM libc's GPU
//! RPC, as `puts` from every lane of many warps does (a CPU model of the H200's puts row). C
//! client threads, each a 32-lane warp on a port of its own of one buffer of C ports, call
//! `WRITE_TO_STDOUT_NEWLINE` with a line of [`LINE_BYTES`] a lane (two packets: the stream's
//! first 56 bytes, then the rest) as fast as they can, every reply checked; the output goes to
//! `/dev/null` (a system call a write, as a redirected stdout costs).
//!
//! - `rpc_puts_<C>c`: served by the full listener (spinning), the buffer's RPC host writing to a
//!   sink that writes and flushes each write, as `StdStreams` does.
//! - `llvm_puts_<C>c`: served by a model of LLVM's server loop (llvm-gpu-loader's): open the first
//!   pending port from the one after the last served (wrapping to 0 when none), serve its whole
//!   call while waiting on that port for each packet (`recv_n`, then `send`), `fwrite` each
//!   lane's bytes and the newline into a 4 KiB buffered stdout. The model's code is ours (the
//!   core's `View::turn`), its shape LLVM's.

use crate::measure::Sample;
use crate::options::Options;
use crate::throughput::count_calls;
use hostcall::{
    services::printf::Streams,
    services::rpc::{RpcOptions, SharedSink},
    BufferRegistration, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol,
};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, ClientPort, View};
use hostcall_core::sync::AtomicU32;
use std::fs::File;
use std::hint::spin_loop;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// Bytes a lane writes (the newline aside): two packets of the stream.
pub(crate) const LINE_BYTES: usize = 80;

/// Lanes a client's port has: a CUDA warp.
pub(crate) const WARP: u32 = 32;

/// Lane `lane`'s line: [`LINE_BYTES`] bytes naming the lane.
pub(crate) fn line(lane: u32) -> Vec<u8> {
    let mut line = format!("lane {lane:2} ").into_bytes();
    line.resize(LINE_BYTES, b'.');
    line
}

/// A buffer of `ports` ports of a warp each.
fn rpc_buffer(ports: u64) -> Arc<HostcallBuffer> {
    let doorbell = Arc::new(ParkingDoorbell::new());
    let protocol = Protocol::Rpc { lanes: WARP };
    Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), ports, doorbell, protocol).expect("buffer"))
}

/// `/dev/null` as stdout and stderr, each write one system call (and a flush).
pub(crate) fn dev_null_sink() -> SharedSink {
    let null = || File::create("/dev/null").expect("/dev/null");
    SharedSink::new(Streams { stdout: null(), stderr: null() })
}

/// One `puts` from every lane of a warp on a port found from `start`; checks every lane's reply.
fn warp_puts(client: &Client<'_>, start: u32, lines: &[Vec<u8>], wait: &mut impl FnMut(u32) -> bool) {
    warp_puts_from(client, start, WARP, lines, wait);
}

/// [`warp_puts`] from a warp of `lanes` lanes on port 0 (the callgrind mode's call).
pub(crate) fn warp_puts_lanes(
    client: &Client<'_>,
    lanes: u32,
    lines: &[Vec<u8>],
    wait: &mut impl FnMut(u32) -> bool,
) {
    warp_puts_from(client, 0, lanes, lines, wait);
}

fn warp_puts_from(
    client: &Client<'_>,
    start: u32,
    lanes: u32,
    lines: &[Vec<u8>],
    wait: &mut impl FnMut(u32) -> bool,
) {
    let mask = if lanes >= 64 { u64::MAX } else { (1u64 << lanes) - 1 };
    let mut port: ClientPort<'_> = loop {
        if let Some(port) = client.try_open(libc::WRITE_TO_STDOUT_NEWLINE, mask, start) {
            break port;
        }
        spin_loop();
    };
    port.send_n(|lane| &lines[lane as usize], wait).expect("no give-up");
    let mut written = [0u64; 64];
    port.recv_first(|lane, [n]: [u64; 1]| written[lane as usize] = n, wait).expect("no give-up");
    port.close();
    assert!(
        written[..lanes as usize].iter().all(|&n| n == LINE_BYTES as u64 + 1),
        "every lane written: {written:?}"
    );
}

/// The clients' side of both rows: `clients` threads, each its warp's `puts` on the port from
/// its own index.
fn client_puts(o: &Options, clients: usize, buffer: Arc<HostcallBuffer>) -> Sample {
    let locks: Arc<Vec<AtomicU32>> = Arc::new((0..clients.div_ceil(32)).map(|_| AtomicU32::new(0)).collect());
    let lines: Arc<Vec<Vec<u8>>> = Arc::new((0..WARP).map(line).collect());
    let (calls, cpu_ns) = count_calls(o, clients, move |t, _| {
        let client = Client::new(buffer.view().rpc().expect("an RPC buffer"), &locks).expect("lock words");
        warp_puts(&client, t as u32, &lines, &mut |_| true);
    });
    Sample::Throughput { calls, lanes: calls * f64::from(WARP), cpu_ns }
}

/// `rpc_puts_<C>c`.
pub(crate) fn rpc_puts(o: &Options, clients: usize) -> Sample {
    let buffer = rpc_buffer(clients as u64);
    let listener =
        Listener::start(buffer.doorbell().clone(), ListenerConfig::spinning()).expect("a listener");
    listener
        .add(
            BufferRegistration::new(buffer.clone())
                .with_rpc(RpcOptions::default().with_sink(dev_null_sink())),
        )
        .expect("add the buffer");
    let sample = client_puts(o, clients, buffer);
    listener.shutdown();
    sample
}

/// `llvm_puts_<C>c`.
pub(crate) fn llvm_puts(o: &Options, clients: usize) -> Sample {
    let buffer = rpc_buffer(clients as u64);
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (buffer, stop) = (buffer.clone(), stop.clone());
        thread::spawn(move || llvm_server_loop(&buffer.view().rpc().expect("an RPC buffer"), &stop))
    };
    let sample = client_puts(o, clients, buffer);
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    sample
}

/// LLVM's server loop, for `WRITE_TO_STDOUT_NEWLINE` only, until `stop`.
fn llvm_server_loop(view: &View<'_>, stop: &AtomicBool) {
    let null = File::create("/dev/null").expect("/dev/null");
    let mut stdout = BufWriter::with_capacity(4096, null);
    let ports = view.ports();
    let mut index = 0;
    // Relaxed: the flag carries no data.
    while !stop.load(Ordering::Relaxed) {
        match (index..ports).find(|&port| view.pending(port)) {
            Some(port) => {
                serve_puts(view, port, stop, &mut stdout);
                index = port + 1;
            }
            None => {
                index = 0;
                spin_loop();
            }
        }
    }
}

/// One whole `WRITE_TO_STDOUT_NEWLINE` call on `port`, waiting on the port for each packet (the
/// stream's bytes into a buffer a lane, as `recv_n` allocates one), then each lane's `fwrite`s and
/// its reply.
fn serve_puts(view: &View<'_>, port: u32, stop: &AtomicBool, stdout: &mut impl Write) {
    let mut turn = loop {
        if let Some(turn) = view.turn(port) {
            break turn;
        }
        // Relaxed: the flag carries no data.
        if stop.load(Ordering::Relaxed) {
            return;
        }
        spin_loop();
    };
    let (mask, _) = turn.header();
    let lanes: Vec<u32> = turn.lanes(mask).map(|lane| lane as u32).collect();
    let mut bytes: Vec<Vec<u8>> = vec![Vec::new(); WARP as usize];
    let mut sizes = [0usize; WARP as usize];
    let mut offset = 0usize;
    loop {
        for &lane in &lanes {
            let words = turn.read(lane);
            let packet: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let from = if offset == 0 { 8 } else { 0 };
            let out = &mut bytes[lane as usize];
            if offset == 0 {
                sizes[lane as usize] = words[0] as usize;
                out.reserve_exact(words[0] as usize);
            }
            let take = sizes[lane as usize].saturating_sub(out.len()).min(64 - from);
            out.extend_from_slice(&packet[from..from + take]);
        }
        let longest = sizes.iter().copied().max().unwrap_or(0);
        offset = if offset == 0 { 56 } else { offset + 64 };
        if offset >= longest {
            break;
        }
        turn.finish();
        turn = loop {
            if let Some(turn) = view.turn(port) {
                break turn;
            }
            // Relaxed: the flag carries no data.
            if stop.load(Ordering::Relaxed) {
                return;
            }
            spin_loop();
        };
    }
    for &lane in &lanes {
        let out = &bytes[lane as usize];
        stdout.write_all(out).expect("/dev/null");
        stdout.write_all(b"\n").expect("/dev/null");
        turn.write_first(lane, &[out.len() as u64 + 1]);
    }
    turn.finish();
}
