//! The stack protocol (PROTOCOL.md section 1): ROCm's default hostcall ABI.
//!
//! A GPU wave (up to 64 lanes) claims a packet from a lock-free free-list in memory both sides
//! reach, writes its request, pushes the packet on a lock-free ready-stack and spins until the
//! host clears READY; the host takes the whole ready-stack, serves every active lane and clears
//! READY. This module is that protocol over raw memory, byte-compatible with ROCm's device code.
//! Device and host read-modify-write the same word (`ready_stack`), so the platform must make CPU
//! and GPU atomics mutually atomic; where it does not, use [`crate::phase`].
//!
//! The packet goes around the [`PacketState`](crate::lane::PacketState) cycle, recorded in the
//! two stacks and the READY bit:
//!
//! ```text
//!            claim (pop free-list)          submit (READY, push ready-stack)
//!   Free ─────────────────────────▶ Claimed ─────────────────────────────▶ Ready
//!    ▲                                 │ drop / release                       │ host: serve lanes,
//!    │◀────────────────────────────────┘                                      │ clear READY (Release)
//!    │          release (push free-list, tag + 1 step)                         ▼
//!    └──────────────────────────────────────────────────────────────────── Served
//! ```
//!
//! The parts, one file each: `layout.rs` (the `repr(C)` ABI, every offset pinned by a `const`
//! assert), `tagged.rs` ([`TaggedPtr`]s, with the ABA story and its interleaving table),
//! `treiber.rs` (the Treiber stack written once for both lists, with its ordering story),
//! `view.rs` ([`View`]: `init`, `claim`), `host.rs` ([`Host`]: `drain`) and `producer.rs` (the
//! typestate handles [`Claimed`], [`Submitted`], [`Completed`]).
//!
//! # Layout in memory
//!
//! ```text
//! offset 0            align8(48)                + n * 24 (aligned to 8)
//! | Prefix (48 bytes) | Header[n] (24 bytes each) | Payload[n] (4096 bytes each) |
//! ```
//!
//! # Who writes what
//!
//! Ownership of the shared words (who may write what, and when):
//!
//! | word | written by |
//! | --- | --- |
//! | `Prefix::{headers, payloads, index_mask}` | the host, once, in [`View::init`] |
//! | `Prefix::doorbell` | the host, once, before the buffer is handed to the device |
//! | `Prefix::free_stack` | producers (pop on claim, push on release) |
//! | `Prefix::ready_stack` | producers (push on submit), the host (`take_all`) |
//! | `Header::next` | the current owner of the packet, before pushing it on a stack |
//! | `Header::{activemask, service}` | the claiming producer, before submit |
//! | `Header::control` | the producer sets READY on submit; the host clears it on completion |
//! | `Payload` slots | the producer before submit; the host (reply words) before clearing READY |
//!
//! # Example
//!
//! ```
//! use hostcall_core::stack::{Header, Prefix, View};
//! use hostcall_core::{Host as _, PacketRequest, Payload};
//! // Two packets, viewed from normally allocated parts (raw memory works the same: `from_raw`).
//! let prefix = Prefix::default();
//! let headers = [Header::default(), Header::default()];
//! let payloads = [Payload::default(), Payload::default()];
//! let buffer = View::from_parts(&prefix, &headers, &payloads).unwrap();
//! buffer.init(0, 0);
//!
//! // Device side: claim, fill lane 3, submit.
//! let mut packet = buffer.claim().unwrap().expect("a free packet");
//! packet.write_lane(3, &[20, 22, 0, 0, 0, 0, 0, 0]);
//! let submitted = packet.submit(7, 1 << 3);
//!
//! // Host side: add the two words of each lane.
//! let report = buffer.host().drain(&mut |p: &mut PacketRequest<'_>| {
//!     for lane in p.lanes() {
//!         let r = p.request(lane);
//!         p.reply(lane, [r[0] + r[1], 0]);
//!     }
//! });
//! assert_eq!(report.packets, 1);
//! let done = submitted.wait(|| {});
//! assert_eq!(done.reply(3), [42, 0]);
//! ```

mod host;
mod layout;
mod producer;
mod tagged;
pub(crate) mod treiber;
mod view;

pub use host::Host;
pub use layout::{
    buffer_align, buffer_size, payloads_offset, Header, Prefix, CONTROL_HOST_ERROR, CONTROL_READY,
    HEADERS_OFFSET,
};
pub use producer::{Claimed, Completed, PacketWords, Submitted};
pub use tagged::{Geometry, TaggedPtr};
pub use view::View;

#[cfg(test)]
mod tests;
