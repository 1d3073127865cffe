//! The phase protocol (PROTOCOL.md section 2): ROCm's opt-in hostcall ABI (builds with
//! `USE_NEW_HOSTCALL_IMPL`; the stack protocol is the default in every release), in which host and
//! device never read-modify-write the same word, so it works without platform atomics.
//!
//! Each packet has two phase words. The device flips its `device_phase[i]` to submit; the host
//! serves every packet whose phases differ and copies `device_phase[i]` into `host_phase[i]` to
//! answer. Waves find a packet through an `occupied` bitmap only the device touches.
//!
//! The packet goes around the same [`PacketState`](crate::lane::PacketState) cycle as in the
//! stack protocol; only the words that record it differ:
//!
//! | state | recorded as |
//! | --- | --- |
//! | `Free` | `occupied` bit clear, `device_phase[i] == host_phase[i]` (bit 0) |
//! | `Claimed` | `occupied` bit set by this wave, phases equal ([`Claimed`]) |
//! | `Ready` | phases differ: `device_phase[i]` flipped (Release) ([`Submitted`]) |
//! | `Served` | `host_phase[i]` stored equal (Release), bit still set ([`Completed`]) |
//!
//! and `Release` clears the `occupied` bit (Release). A dropped [`Submitted`] clears the bit
//! early: the packet stays `Ready` for the host (phases differ) and claims refuse it until the
//! host has answered, after which it is `Free`.
//!
//! # Layout in memory
//!
//! ```text
//! offset 0            64 (line)             line-aligned          line-aligned
//! | Prefix (56) | device_phase u32[n] | occupied u32[⌈n/32⌉] | host_phase u32[n] |
//!                      line-aligned           line-aligned
//!                    | Header[n] (16) | Payload[n] (4096 each) |
//! ```
//!
//! Device code finds every array through the prefix, so their order and padding are this
//! project's choice, not ABI. Each array starts on its own 64-byte line (relative to the base), so
//! words with different writers never share a cache line: the host's stores to `host_phase` do
//! not invalidate the `device_phase` line a wave is writing (or the host is scanning), and the
//! waves' `fetch_or`s on `occupied` do not invalidate the `device_phase` lines the host scans.
//! The separation holds in memory when the base is 64-byte aligned ([`buffer_align`]); any
//! 8-aligned base ([`MIN_ALIGN`]) is still correct.
//!
//! On ROCm `occupied` lives in device-local memory that only the device touches. This emulation
//! keeps it in the same allocation; the host writes it only in [`View::init`] and never
//! reads it.
//!
//! # Who writes what
//!
//! | word | written by | when |
//! | --- | --- | --- |
//! | [`Prefix`] fields | the host | once, in [`View::init`], before the hand-off |
//! | `occupied` bitmap | device waves (`fetch_or` to claim, `fetch_and` to release) | the host only zeroes it in `init` and never reads it (on ROCm it is device-local memory) |
//! | `device_phase[i]` | the wave holding packet `i`'s `occupied` bit | once per submit (a plain Release store of the flipped value) |
//! | `host_phase[i]` | the host | once per answer (a plain Release store of the `device_phase[i]` it read) |
//! | [`Header`] `i` | the wave holding packet `i` | before it flips `device_phase[i]` |
//! | request words of payload `i` | the wave holding packet `i` | before it flips `device_phase[i]` |
//! | reply words of payload `i` | the host | between seeing the flip and storing `host_phase[i]` |
//!
//! Ownership of a packet's header and payload passes to the host with the device's Release store
//! of `device_phase[i]` (acquired by the host's fence after it sees the flip), back to the wave
//! with the host's Release store of `host_phase[i]` (acquired by the wave's wait), and from wave
//! to wave with the Release `fetch_and` on `occupied` (acquired by the next claim's `fetch_or`).
//!
//! # Validation on the host side
//!
//! The host uses its own packet count and its own references to the arrays, never the prefix.
//! Phases are compared on bit 0 only: any difference there means "pending". Other bits are
//! ignored for the decision; when a pending packet has any of them set the host reports
//! [`DrainError::StrayBits`](crate::DrainError::StrayBits), still serves it, and stores
//! the device's value as read (so upper-bit garbage is echoed, never amplified). The activemask is
//! cut to the lanes that exist and the service id is passed on unchecked. A device writing garbage
//! gets garbage answers; the host never panics, never loops (one pass per scan, each packet served
//! at most once per pass) and does no undefined behaviour (every shared access is atomic).
//!
//! # Errors
//!
//! The phase header has no control word, so there is no
//! [`CONTROL_HOST_ERROR`](crate::stack::CONTROL_HOST_ERROR) bit: a host error reaches the wave
//! only as the lane's reply words `[ERROR_REPLY, code]`
//! ([`ErrorCode::reply`](crate::ErrorCode::reply)), which [`Completed::error`] decodes and
//! [`Completed::host_error`] looks for in every active lane.
//!
//! # Example
//!
//! ```
//! use hostcall_core::phase::{Header, Parts, Prefix, View};
//! use hostcall_core::{sync::AtomicU32, Host as _, PacketRequest, Payload};
//!
//! let prefix = Prefix::default();
//! let phases = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
//! let (device_phase, host_phase, occupied) = (phases(2), phases(2), phases(1));
//! let headers = [Header::default(), Header::default()];
//! let payloads = [Payload::default(), Payload::default()];
//! let parts = Parts {
//!     prefix: &prefix,
//!     device_phase: &device_phase,
//!     host_phase: &host_phase,
//!     occupied: &occupied,
//!     headers: &headers,
//!     payloads: &payloads,
//! };
//! let buffer = View::from_parts(parts).unwrap();
//! buffer.init(0, 0);
//!
//! // Device side: claim, fill lane 3, submit.
//! let mut packet = buffer.claim(0).expect("a free packet");
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
#[cfg(any(test, loom))]
pub(crate) mod in_parts;
mod layout;
mod producer;
mod view;

pub use host::Host;
pub use layout::{buffer_align, buffer_size, occupied_words, Header, Layout, Prefix, MIN_ALIGN};
pub use producer::{Claimed, Completed, PacketWords, Submitted};
pub use view::{Parts, View};

#[cfg(test)]
mod tests;
