//! `rpc-held`: an LLVM-RPC buffer of 4,096 ports x 64 lanes (LLVM's largest port count) on
//! which every lane prints a format of `--format-bytes` (8 KiB by default) with
//! `PRINTF_TO_STDOUT`, over and over: all ports stream their formats together (most lanes past
//! the held budget, refused and followed to the end), then all send their argument blocks in
//! the same scan, so the held calls complete at once. One thread plays the device for every
//! port, a packet whenever a port is its own. The output goes to a counting sink. The note
//! says the rounds and the bytes printed; the refusals line counts the lanes refused for the
//! held budget (`held bytes`).

use crate::{Arena, Running};
use hostcall::{
    services::rpc::{RpcOptions, SharedSink},
    BufferRegistration, HostMemory, HostcallBuffer, Protocol,
};
use hostcall_core::rpc::{fill_packet, opcode::libc, Client, ClientPort, Cursor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PORTS: u64 = 4096;
const LANES: u32 = 64;

/// Where one port's call stands.
enum Stage {
    Format(Cursor, bool),
    Sizes,
    Args,
    Result,
}

pub(crate) fn start(arena: &Arena<'_>) -> Running {
    let doorbell = arena.buffer.doorbell().clone();
    let protocol = Protocol::Rpc { lanes: LANES };
    let buffer = Arc::new(
        HostcallBuffer::with_protocol(Arc::new(HostMemory), PORTS, doorbell, protocol)
            .expect("the RPC buffer"),
    );
    let printed = Arc::new(AtomicU64::new(0));
    let counted = printed.clone();
    let sink = SharedSink::from_fn(move |_, bytes| {
        counted.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    });
    arena
        .listener
        .add(BufferRegistration::new(buffer.clone()).with_rpc(RpcOptions::default().with_sink(sink)))
        .expect("the RPC buffer served");
    let mut format = vec![b'z'; arena.options.format_bytes.max(1) as usize - 1];
    format.push(0);
    let until = Instant::now() + Duration::from_secs_f64(arena.options.seconds + 1.0);
    let rounds = Arc::new(AtomicU64::new(0));
    let device_rounds = rounds.clone();
    let device = buffer.clone();
    let thread = std::thread::spawn(move || {
        let view = device.view().rpc().expect("an RPC buffer");
        let client = Client::of(view).expect("the buffer's lock bits");
        while Instant::now() < until {
            round(&client, &format, until);
            device_rounds.fetch_add(1, Ordering::Relaxed);
        }
    });
    let note = move || {
        let _keep = &buffer; // served until the listener's shutdown
        format!(
            "rpc-held: {} rounds of 4096x64 printfs, {} bytes printed",
            rounds.load(Ordering::Relaxed),
            printed.load(Ordering::Relaxed)
        )
    };
    Running { note: Box::new(note), threads: vec![thread] }
}

/// One printf on every port, stepped port by port (a packet whenever the port is the client's).
fn round(client: &Client<'_>, format: &[u8], until: Instant) {
    let mut calls: Vec<(ClientPort<'_>, Stage)> = (0..PORTS as u32)
        .filter_map(|port| client.try_open(libc::PRINTF_TO_STDOUT, u64::MAX, port))
        .map(|port| (port, Stage::Format(Cursor::start(), true)))
        .collect();
    let longest = format.len() as u64;
    while !calls.is_empty() && Instant::now() < until {
        let all_streamed = calls.iter().all(|(_, stage)| !matches!(stage, Stage::Format(..)));
        let mut i = 0;
        while i < calls.len() {
            let (port, stage) = &mut calls[i];
            if !port.poll() {
                i += 1;
                continue;
            }
            let mut finished = false;
            *stage = match std::mem::replace(stage, Stage::Result) {
                Stage::Format(mut cursor, true) => {
                    let at = cursor;
                    port.send(|_| fill_packet(&at, format), &mut |_| false).expect("owned");
                    let more = cursor.advance(longest);
                    Stage::Format(cursor, more)
                }
                Stage::Format(_, false) => {
                    port.recv(|_, _| {}, &mut |_| false).expect("owned");
                    Stage::Sizes
                }
                // Every port's argument block goes in the same pass, once all formats are in.
                Stage::Sizes if all_streamed => Stage::Args,
                Stage::Sizes => Stage::Sizes,
                Stage::Args => {
                    port.send(|_| fill_packet(&Cursor::start(), &[]), &mut |_| false).expect("owned");
                    Stage::Result
                }
                Stage::Result => {
                    port.recv(|_, _| {}, &mut |_| false).expect("owned");
                    finished = true;
                    Stage::Result
                }
            };
            if finished {
                let (port, _) = calls.swap_remove(i);
                port.close();
            } else {
                i += 1;
            }
        }
        std::hint::spin_loop();
    }
    for (port, _) in calls {
        port.close(); // the deadline passed mid-call: the ports stay the host's to finish
    }
}
