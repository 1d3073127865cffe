//! LLVM libc's GPU RPC (`libc/shared/rpc.h` in llvm-project; the version in [`UPSTREAM`]), served
//! natively: the wire format of the device code that LLVM libc, OpenMP offload and ROCm clr's
//! `devrpc` build, with the host as its server.
//!
//! # Layout
//!
//! One buffer per device, for `P` ports of `L` lanes each ([`Layout`]; `L` is the client's warp
//! or wave width: 32 on NVPTX, 64 or 32 on AMDGPU, 1 on a CPU):
//!
//! | offset | what | size |
//! | ---: | --- | --- |
//! | 0 | host mailbox: `u32[P]` (the client's inbox) | 4P |
//! | 4P | device mailbox: `u32[P]` (the client's outbox) | 4P |
//! | 8P | [`Header`]`[P]`: lanes mask `u64`, opcode `u32`, padding | 16P |
//! | 24P | [`LaneBuffer`]`[P][L]`: 64 bytes a lane | 64PL |
//!
//! The lock bits that keep two warps off one port are not in the buffer: they are in the client
//! object in device memory ([`client_object`], 552 bytes), which the host builds over the buffer's
//! device address and copies into the device's `__llvm_rpc_client`.
//!
//! # The ownership rule
//!
//! Each side writes only its own mailbox word of a port, flipping it between 0 and 1. **The
//! client owns port `p` when the two mailboxes are equal; the host owns it when they differ.**
//! Whoever owns a port may read and write its lane buffers; the header is written by the client
//! when it opens the port (it owns it then) and read by the host. Ownership passes at each flip:
//!
//! | word | written by | when |
//! | --- | --- | --- |
//! | host mailbox `[p]` | the host | at the end of each of its turns on `p` ([`Turn::finish`]) |
//! | device mailbox `[p]` | the client | at each send, and before a receive that follows a receive (the acknowledgement) |
//! | header `[p]` | the client | at open, before its first flip |
//! | lane buffers of `p` | the owner | between gaining the port and flipping |
//! | lock bit `p` (device memory) | client warps | `fetch_or` at open, `fetch_and` at close |
//!
//! There is no framing, length or sequence number: every send of one side is mirrored by a
//! receive of the other, so the host must follow each opcode's sequence exactly. The host here
//! does so turn by turn ([`Turn`]), keeping each call's state itself and never waiting on the
//! device: a client that stops mid-call leaves its port pending, and nothing else.
//!
//! # Orderings
//!
//! | Release | by | pairs with the Acquire | by | makes visible |
//! | --- | --- | --- | --- | --- |
//! | fence before flipping the device mailbox | client (`send`, the acknowledgement) | fence after seeing the mailboxes differ ([`View::turn`]) | host | the client's lane buffer and header stores; its reads of the host's last packet are done |
//! | fence before flipping the host mailbox ([`Turn::finish`]) | host | fence after seeing them equal (`wait_for_ownership`) | client | the host's lane buffer stores; its reads of the request are done |
//! | `fetch_and` of the lock bit at close | client warp | `fetch_or` at open | next warp | the previous holder's accesses |
//!
//! The mailboxes themselves are Relaxed loads and stores: the fences order the data around them.
//! No read-modify-write crosses host and device (the lock bits are device memory only), so the
//! protocol works without platform atomics. The loom models in `loom-tests` check the handshake,
//! with a twin that flips before its fence and must fail.
//!
//! # Whatever the device writes
//!
//! The host keeps its own port and lane counts, reads a mailbox value other than 0 and 1 as 1,
//! masks the header's lanes to the lanes that exist, takes at most one turn per port per scan,
//! and bounds every stream it keeps by a limit ([`StreamIn`]): a device can confuse only its own
//! calls.
//!
//! # Example
//!
//! ```
//! use hostcall_core::rpc::{opcode, Client, Header, LaneBuffer, Parts, View};
//! use hostcall_core::sync::AtomicU32;
//!
//! let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
//! let (host_mailbox, device_mailbox, locks) = (words(2), words(2), words(1));
//! let headers: Vec<Header> = (0..2).map(|_| Header::default()).collect();
//! let buffers: Vec<LaneBuffer> = (0..2).map(|_| LaneBuffer::default()).collect();
//! let parts = Parts { lanes: 1, host_mailbox: &host_mailbox, device_mailbox: &device_mailbox,
//!                     headers: &headers, buffers: &buffers };
//! let view = View::from_parts(parts).unwrap();
//! view.init();
//!
//! // The client (one lane) sends a packet; the host takes one turn: reads, answers, flips.
//! let client = Client::new(view, &locks).unwrap();
//! let mut port = client.try_open(opcode::rocm::DEVMEM, 1, 0).expect("a free port");
//! port.send(|_| [0, 4096, 0, 0, 0, 0, 0, 0], &mut |_| true).unwrap();
//! let mut turn = view.turn(port.port()).expect("the host's turn");
//! assert_eq!(turn.header(), (1, opcode::rocm::DEVMEM));
//! let request = turn.read(0);
//! turn.write(0, &[0xdead_0000 + request[1], 0, 0, 0, 0, 0, 0, 0]);
//! turn.finish();
//! let mut reply = 0;
//! port.recv(|_, words| reply = words[0], &mut |_| true).unwrap();
//! port.close();
//! assert_eq!(reply, 0xdead_1000);
//! assert!(!view.pending(0) && !view.pending(1));
//! ```

mod client;
mod client_object;
mod host;
mod lane_copy;
mod layout;
pub mod opcode;
mod packet;
mod producer;
mod stream;
mod version;
mod view;

pub use client::{Client, ClientPort, Stalled};
pub use client_object::{check_client_symbol, client_object, offsets, ClientSymbolMismatch};
pub use host::{Calls, Host, Turn};
pub use layout::{
    buffer_align, buffer_size, check_geometry, Header, LaneBuffer, Layout, HEADER_SIZE, LANE_BUFFER_SIZE,
    MIN_ALIGN,
};
pub use packet::{opcode_of, serve_as_packet, service_of};
pub use producer::{Claimed, Completed, Submitted};
pub use stream::{
    fill_packet, packet_bytes, stream_packets, write_chunk, Cursor, StreamIn, StreamOut, FIRST_PACKET_BYTES,
    PACKET_BYTES,
};
pub use version::{CLIENT_OBJECT_SIZE, CLIENT_SYMBOL, LOCK_WORDS, MAX_PORT_COUNT, UPSTREAM};
pub use view::{Parts, View};

#[cfg(test)]
mod tests;
