//! `hostcall-core`: the hostcall protocols of AMD ROCm, without `std` or `alloc`.
//!
//! A GPU wave (up to 64 lanes) claims a packet in memory both sides reach, writes its request and
//! hands the packet to the host; the host serves every active lane and hands the packet back with
//! the replies. ROCm speaks this in two wire protocols, both implemented here over raw memory,
//! byte-compatible with ROCm's device code, with nothing but atomics:
//!
//! - [`stack`]: ROCm's default ABI: a lock-free free-list and ready-stack of packets (needs
//!   platform atomics between CPU and GPU);
//! - [`phase`]: ROCm's opt-in ABI: per-packet phase words, no shared read-modify-write.
//!
//! a third, this project's own, for runtimes that build both sides:
//!
//! - [`line`](mod@line): every 8-byte store carries data and the call's sequence together, so each side
//!   polls the data itself (no fence before a flag, no second read after it);
//!
//! and LLVM libc's GPU RPC, the wire of the device code LLVM libc and OpenMP offload build:
//!
//! - [`rpc`]: ports of a 32-bit inbox and outbox, each written by one side; ROCm's `'r'` and this
//!   project's `'h'` opcodes reach the host as packets, any other is handed back to the caller
//!   (the std crate's RPC host serves LLVM libc's own).
//!
//! All four have the same shape (`layout`, `View`, `Claimed`/`Submitted`/`Completed`, `Host`,
//! `buffer_size`) and give the host the same things: every submitted packet reaches a [`DrainHandler`] as a
//! [`PacketRequest`], answered lane by lane ([`serve_lanes`], [`ServiceTable`]). [`AnyView`] is the one switch over
//! the four; [`Poller`] is the listener without a thread, serving buffers of all four side by side.
//!
//! ```
//! use hostcall_core::{AnyView, ClaimedPacket, CompletedPacket, ErrorCode, Protocol};
//! use hostcall_core::{Poller, Registration, ServiceTable, SubmittedPacket};
//! // A buffer of 4 packets in raw memory (a GPU runtime allocates fine-grained memory instead).
//! #[repr(C, align(64))]
//! struct Line([u64; 8]);
//! let protocol = Protocol::Phase; // or Protocol::Stack: the rest is the same
//! let len = protocol.buffer_size(4).unwrap();
//! let mut memory: Vec<Line> = (0..len.div_ceil(64)).map(|_| Line([0; 8])).collect();
//! let base = memory.as_mut_ptr().cast::<u8>();
//! // SAFETY: `memory` outlives the view and the poller's registration, and is only accessed
//! // through them.
//! let buffer = unsafe { AnyView::from_raw(protocol, base, len, 4) }.unwrap();
//! buffer.init(base as u64, 0);
//!
//! // Host side: service 7 adds the two words of each lane.
//! let add = |r: &[u64; 8]| r[0].checked_add(r[1]).map(|sum| [sum, 0]).ok_or(ErrorCode::BadRequest);
//! let mut services = ServiceTable::<4>::new();
//! services.register(7, &add).unwrap();
//! let poller = Poller::<2>::new();
//! // SAFETY: as above; removed before `memory` is freed.
//! poller.add(unsafe { Registration::new(protocol, base, len, 4) }.unwrap()).unwrap();
//!
//! // Device side (an emulated wave): claim, fill lane 3, submit, and wait for the poller.
//! let mut packet = buffer.claim(0).unwrap().expect("a free packet");
//! packet.write_lane(3, &[20, 22, 0, 0, 0, 0, 0, 0]);
//! let submitted = packet.submit(7, 1 << 3);
//! assert_eq!(poller.poll_once(&services).packets, 1);
//! let done = submitted.wait(|| {});
//! assert_eq!(done.reply(3), [42, 0]);
//! assert!(!done.host_error());
//! poller.remove(base).unwrap();
//! ```
//!
//! # Adding a protocol
//!
//! A protocol is one folder plus one arm of the one switch. The folder provides `layout.rs` (the
//! `repr(C)` types, `Layout`, `buffer_size`, `buffer_align`, the ABI asserts), `view.rs` (`View`:
//! `from_parts`, `from_raw`, `init`, `claim`, `host`), `producer.rs` (its [`producer::Wire`]: what
//! each step of a call does to its words; the handles are [`producer`]'s), `host.rs` (its `Host`,
//! implementing the sealed [`Host`] trait: its per-buffer [`Host::State`] and the one required
//! [`drain_scope`](Host::drain_scope); the other drains are the trait's defaults), `mod.rs` (the
//! docs: who writes which word, the orderings, an example) and `tests.rs`, built on the shared
//! mechanisms, which name no protocol: the scan window and drain scope ([`ScanWindow`],
//! [`DrainScope`]), the checks and slicing of raw memory and parts (`view/`), the layout
//! arithmetic and ABI asserts (`layout.rs`), the claim bitmap (`occupied.rs`), the producer traits
//! and wait (`lane.rs`: [`ClaimedPacket`] and its siblings), and what the host is given and reports ([`PacketRequest`], [`ErrorCode`],
//! [`DrainError`], the [`Host`] trait). The switch is `any/`: a [`Protocol`] variant and one arm
//! in each `match` there ([`AnyView`], [`AnyClaimed`] and its siblings, [`HostScratch`], and a
//! variant of [`AnyState`] for a host with per-buffer state); the [`Poller`] then serves it.
//! PROTOCOL.md's "Adding a protocol" has the full list.
//!
//! # Features
//!
//! None: the crate is `no_std`, allocates nothing, and has no optional parts. Its one atomics
//! dependency, [`portable_atomic`](https://docs.rs/portable-atomic), is used for its `repr`-exact `AtomicU64`/`AtomicU32` only.
//!
//! # Target requirements
//!
//! The host and the device share the buffer's words, so the host's atomics must be atomic against
//! the device: lock-free CPU instructions on memory both reach (fine-grained or pinned, mapped
//! memory), never a lock the GPU does not know about. The crate therefore refuses to build where
//! that cannot hold:
//!
//! - on a target without native 64-bit atomics (`cfg(not(target_has_atomic = "64"))`): a
//!   `compile_error!`;
//! - where [`sync::AtomicU64`] or [`sync::AtomicU32`] is not lock-free, e.g. when some crate in the
//!   build turns on portable-atomic's `fallback` feature on such a target: a `const` assertion on
//!   `is_always_lock_free()` fails the build, instead of a lock-based atomic with the same layout
//!   silently not being atomic against the GPU.
//!
//! x86_64 and aarch64 (where GPU hosts are) meet both. The stack protocol additionally needs the
//! platform to make CPU read-modify-writes atomic against the device's (PCIe atomics, or
//! `hostNativeAtomicSupported`): a property of the machine, checked at run time by the backends
//! of the `hostcall` crate, not of the target. Rust 1.81 or newer (`core::error::Error`).
//!
//! # Modules and what is public
//!
//! Every public item has one path (the rule the std crate `hostcall` follows too, checked by its
//! `tests/one_path.rs` for both crates). The protocols are namespaces, because their types share
//! names (`View`, `Host`, `Header`, `Prefix`, `Claimed`, ...); what all four share is at the root,
//! once.
//!
//! | path | what |
//! | --- | --- |
//! | [`stack`], [`phase`], [`line`](mod@line), [`rpc`] | one folder per protocol, the same files in each |
//! | [`producer`] | the producer's handles written once, generic over each protocol's [`producer::Wire`] |
//! | [`message`] | message streams: descriptors and chunking |
//! | [`sync`] | the atomics the `repr(C)` layouts are made of ([`sync::AtomicU64`], [`sync::AtomicU32`], [`sync::Ordering`], [`sync::fence`]) and the payload's [`sync::PayloadWord`] |
//! | the root | the rest: the switch ([`Protocol`], [`AnyView`] and its handles, [`HostScratch`]); the [`Poller`]; the host's side ([`PacketRequest`], [`ErrorCode`], [`ERROR_REPLY`], [`DrainHandler`] and the drain types, [`Host`]); dispatch ([`Dispatch`], [`LaneService`], [`ServiceTable`], [`serve_lanes`], the service ids [`PRINTF`], [`DEVMEM`], ...); lanes ([`Payload`], [`LANES`], [`lanes`], [`lane_count`] and [`Popcnt`], the producer traits [`ClaimedPacket`], ...); geometry ([`packet_count`], [`MAX_PACKETS`], [`LayoutError`], [`CACHE_LINE`]); the scan ([`ScanWindow`], [`DrainScope`]) |
//!
//! The modules behind the root (`any`, `dispatch`, `host`, `lane`, `layout`, `poller`, `scan`,
//! `view`) are private, and the machinery underneath (the Treiber stack and its chain walk, the
//! spin hints and the lock, the layout and view helpers) is `pub(crate)`. The loom models in the
//! workspace's `loom-tests` crate drive the free-list and the poller's registrations directly, so
//! under `--cfg loom` only, a `#[doc(hidden)]` module `__internal` exposes them: the models live
//! in another crate (loom needs its own build of everything), and these are the internals they
//! must reach; it is not part of the API, carries no stability promise, does not exist in normal
//! builds, and is the one exception the one-path check leaves out.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

mod any;
#[cfg(all(target_arch = "x86_64", not(miri), not(loom)))]
mod cpu;
mod dispatch;
mod host;
mod lane;
mod layout;
pub mod line;
pub mod message;
mod occupied;
pub mod phase;
mod poller;
pub mod producer;
pub mod rpc;
mod scan;
pub mod stack;
pub mod sync;
#[cfg(test)]
mod test_support;
mod view;

pub use any::{
    AnyClaimed, AnyCompleted, AnyState, AnyStateMut, AnySubmitted, AnyView, HostScratch, Protocol,
};
pub use dispatch::{serve_lanes, serve_lanes_from, Dispatch, LaneService, ServiceTable, TableFull};
pub use host::{
    ChainError, DrainError, DrainHandler, DrainReport, ErrorCode, Host, OwnWork, PacketRequest, ServePacket,
    DEVMEM, ERROR_REPLY, FUNCTION_CALL, PRINTF, RESERVED, SANITIZER,
};
pub use lane::{
    lane_count, lanes, ClaimedPacket, CompletedPacket, InvalidTransition, Lanes, PacketEvent, PacketState,
    Payload, Popcnt, SubmittedPacket, LANES, LANE_MASK, REPLY_WORDS, SLOT_WORDS,
};
pub use layout::CACHE_LINE;
pub use poller::{PollSession, Poller, PollerError, Registration};
pub use scan::{DrainScope, ScanWindow};
pub use view::{packet_count, GeometryError, LayoutError, MAX_PACKETS};

/// Unstable internals for the workspace's loom models; not API (see the crate docs).
#[cfg(loom)]
#[doc(hidden)]
pub mod __internal {
    pub use crate::stack::treiber::{ChainWalk, TaggedStack};

    /// The free-list of a stack buffer.
    pub fn free_list<'a>(view: &crate::stack::View<'a>) -> TaggedStack<'a> {
        view.free_list()
    }

    /// The ready-stack of a stack buffer.
    pub fn ready_stack<'a>(view: &crate::stack::View<'a>) -> TaggedStack<'a> {
        view.ready_stack()
    }

    pub use crate::phase::in_parts::PhaseBuffer;
    pub use crate::poller::model::{
        poll_then_unpin, remove_without_fence, remove_without_waiting, repin_without_fence,
    };
}

/// The crate's README, so that `cargo test --doc` runs its example (only under rustdoc's test mode).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}
