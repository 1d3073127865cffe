//! `hostcall-core`: the hostcall protocol of AMD ROCm, without `std` or `alloc`.
//!
//! A GPU wave (up to 64 lanes) claims a packet from a lock-free free-list in memory both sides
//! reach, writes its request, pushes the packet on a lock-free ready-stack and spins until the
//! host clears READY; the host takes the whole ready-stack, serves every active lane and clears
//! READY. This crate is that protocol over raw memory, byte-compatible with ROCm's device code:
//!
//! - [`layout`]: the `repr(C)` ABI, every offset pinned by a `const` assert;
//! - [`tagged`]: ABA-tagged packet pointers; [`stack`]: the Treiber stack for both lists;
//! - [`packet`]: the state machine and the producer's typestate handles;
//! - [`buffer`]: a checked view of a buffer: `init`, `claim`, `drain`;
//! - [`phase`]: the phase protocol (ROCm's current ABI) over the same packets, requests and drain
//!   handlers;
//! - [`poller`]: the listener's logic without a thread (fixed capacity, a spin lock), serving
//!   buffers of either protocol side by side;
//! - [`service`]: service ids and error replies;
//! - [`message`]: message streams (descriptor codec, chunking) for services longer than a slot.
//!
//! ```
//! use hostcall_core::{buffer::BufferView, layout::*};
//! # #[cfg(not(loom))] {
//! // Two packets, viewed from normally allocated parts (raw memory works the same: `from_raw`).
//! let prefix = BufferPrefix::default();
//! let headers = [PacketHeader::default(), PacketHeader::default()];
//! let payloads = [Payload::default(), Payload::default()];
//! let buffer = BufferView::from_parts(&prefix, &headers, &payloads).unwrap();
//! buffer.init(0, 0);
//!
//! // Device side: claim, fill lane 3, submit.
//! let mut packet = buffer.claim().unwrap().expect("a free packet");
//! packet.write_lane(3, &[20, 22, 0, 0, 0, 0, 0, 0]);
//! let submitted = packet.submit(7, 1 << 3);
//!
//! // Host side: add the two words of each lane.
//! let report = buffer.drain(&mut |p: &mut hostcall_core::buffer::PacketRequest<'_>| {
//!     for lane in p.lanes() {
//!         let r = p.request(lane);
//!         p.reply(lane, [r[0] + r[1], 0]);
//!     }
//! });
//! assert_eq!(report.packets, 1);
//! let done = submitted.wait(|| {});
//! assert_eq!(done.reply(3), [42, 0]);
//! # }
//! ```
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod buffer;
pub mod layout;
pub mod message;
pub mod packet;
pub mod phase;
#[cfg(not(loom))]
pub mod poller;
pub mod service;
pub mod stack;
pub mod sync;
pub mod tagged;
