//! The bodies of hostcall's fuzz targets, as ordinary functions.
//!
//! cargo-fuzz (the `fuzz/` folder, outside the workspace) calls each function from a one-line
//! `fuzz_target!`; `cargo test` (`tests/replay.rs`) replays every file of the checked-in seed
//! corpus `fuzz/seeds/<target>/` through the same function, so a seed or a crash found once is a
//! regression test for good. Each function panics when an invariant breaks, and only then.
//!
//! | target | input | what it checks |
//! | --- | --- | --- |
//! | [`drain_buffer_image`] | a packet count and a whole buffer image (prefix words, headers, payload bytes) | the host's drain against a reference model: no panic, each packet served at most once, at most `num_packets` served, READY cleared on each served packet, nothing written but the ready-stack top, the served packets' `control` and the active lanes' reply words; `Poller::poll_once` agrees |
//! | [`producer_consumer_ops`] | a sequence of operations: claim, write lanes, submit, drain, wait, release, drop, hostile scribbles | the producer's path and the drain against a model of the free-list, the ready-stack, the tags and every payload word, until a scribble breaks the protocol; after one, only "no panic, no hang"; `stack::View::init` resets and the model checks again |
//! | [`line_exchange`] | a line buffer and a sequence of operations: correct calls, scribbles on any word (tagged with a live sequence, torn, or raw), drains, `init` | the line protocol's host against torn, stale and hostile words: no panic, each packet served at most once per drain, a drain writes only reply words and `served`, and while nothing was scribbled every call is answered with exactly its own reply |
//! | [`message_stream`] | limits, then chunks of message streams (descriptors, data, ids made up or copied from replies) | the assembler and the printf formatter: every chunk answered, the open-message and size limits hold, printf stays within its output limit and is deterministic |
//! | [`whole_host`] | a protocol, a packet count, budgets, then device operations (valid-looking PRINTF streams, DEVMEM allocations and frees, unknown ids; writes anywhere in the buffer) and host rounds | the core poller (or a listener thread) with the std registry and its built-in services: the packets predicted are served, once each; every reply valid or an error reply as a model of each service says; DEVMEM and PRINTF within their budgets; nothing written but what a round may write, nothing outside the buffer |
//! | [`rpc_exchange`] | an LLVM-RPC geometry, a stream limit, a policy, a host (`RpcHost` or the poller's), then device writes (mailbox flips and raw values, the host's mailbox, headers with any mask and opcode, lane words with any stream length), client streams that stop, and drains | one turn per pending port, nothing written but the turned ports' host mailbox and lanes; `RpcHost`: the data held within its budget, console output within the limit; the poller's host: unknown opcodes handed back untouched and counted, served ones answered in their reply words, lane calls only of lanes that exist; a well-behaved client of another buffer of the same host answered at every drain |
//!
//! The inputs are decoded by hand ([`input`]): a short input is padded with zeros, so every byte
//! string is a valid input.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

mod drain_image;
pub mod input;
mod line_exchange;
mod memory;
mod ops;
mod services;

#[cfg(test)]
mod seeds;

pub use drain_image::drain_buffer_image;
pub use line_exchange::line_exchange;
pub use ops::producer_consumer_ops;

mod message_stream;
pub use message_stream::message_stream;

mod whole_host;
pub use whole_host::whole_host;

mod rpc_exchange;
pub use rpc_exchange::rpc_exchange;
