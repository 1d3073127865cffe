//! The line protocol (PROTOCOL.md section 9): this project's own, for memory that both sides reach
//! without cross-device read-modify-write, in which every 8-byte store carries data and the
//! sequence of the call together, so each side polls the data itself.
//!
//! ROCm's phase protocol needs, per call, a release store of the phase word after the request
//! (on a GPU a system-scope fence that waits for the request to reach the host) and, after the
//! wave's poll sees the answer, a second read for the replies (another round trip over the link).
//! Here, as in NCCL's LL protocol, every word is a *tagged word* (a *line word*, [`word`]): 57
//! data bits and the call's 7-bit sequence in the top bits of one `u64`, stored and loaded as one
//! 8-byte atomic access, so a reader that sees the sequence it expects has the data stored with
//! it: the device needs no fence before its flag, the host no fence after it, and the wave's poll
//! returns its reply.
//!
//! # Words
//!
//! Per packet `i` (see [`Request`] and [`Reply`]; the encodings are in `word.rs`):
//!
//! - request block: `head` ([`encode_head`]: the service and the activemask's top 7 bits) and
//!   `mask` ([`encode_mask`]: its low 57 bits); then per lane 9 line words ([`encode_request`]:
//!   the low 57 bits of each of its 8 request words, then one word packing their top 7 bits), 72
//!   bytes, contiguous after the header: a one-lane call's words are bytes 0..88, two lines;
//! - reply block: per lane 3 line words ([`encode_reply`]: its 2 reply words' low bits, then
//!   their top bits), 24 bytes;
//! - `device_seq[i]`: the sequence of the packet's last call (device only);
//! - `served[i]`: the sequence of the last call the host answered (host only);
//! - `occupied`: the phase protocol's claim bitmap (device only).
//!
//! A call's sequence is the packet's previous one plus 1, wrapping from [`SEQ_MAX`] to 1: 0 is never
//! a sequence, so the zeroed buffer of [`View::init`] holds no call.
//!
//! Under loom the geometry shrinks so that the models finish, and nothing else changes (the same
//! code runs, each loop to these constants): [`SEQ_MAX`] is 2, a wave has 2 lanes
//! ([`LANES`](crate::LANES)), and a lane's request carries only its first word
//! ([`CARRIED_REQUEST_WORDS`]: 2 line words instead of 9; the others must be zero). The
//! production layout above is pinned by `const` asserts that hold outside loom only. Two steps
//! have several implementations of the same arithmetic: the host's decode of a lane's words, four
//! words at a time in AVX2 registers on the x86-64 CPUs that have it (checked at run time), two
//! at a time in SSE2 registers on the others, and one at a time elsewhere, under loom and under
//! Miri (`line/decode.rs`; its tests check that all give the same verdict and words); and its
//! answer, two adjacent lanes' replies at a time in AVX2 registers where the CPU has it, one lane
//! at a time elsewhere (`line/answer.rs`; its tests check that both store the same words). The
//! service reads each lane's decoded request in the host's scratch itself, with no copy
//! ([`serve_lanes_from`](crate::serve_lanes_from)).
//!
//! # Who writes what
//!
//! | word | written by | when |
//! | --- | --- | --- |
//! | [`Prefix`] | the host | once, in [`View::init`], before the hand-off |
//! | `occupied` | device waves (`fetch_or` to claim, `fetch_and` to release) | the host only zeroes it in `init` |
//! | `device_seq[i]` | the wave holding packet `i` | at submit (or when it drops an unsent claim) |
//! | head, mask, lane request words of packet `i` | the wave holding packet `i` | between its claim and its submit (zeroes at a refresh claim) |
//! | reply words of packet `i` | the host | between taking a complete request and storing `served[i]`; and zeroed by the wave at a refresh claim |
//! | `served[i]` | the host | after answering packet `i` |
//!
//! Ownership is told by sequences, not by flags: the host owns the reply words of a packet from
//! the moment it takes a complete request of a sequence it has not served to its last reply store;
//! the wave owns everything else of the packet from its claim until it has seen every active
//! lane's reply carry its sequence. Waves hand a packet on through `occupied` (Release `fetch_and`,
//! Acquire `fetch_or`), which also carries `device_seq`; a wave may instead keep it for its next
//! call ([`Completed::keep`]: no read-modify-write at all, the owner stays the same).
//!
//! # Why a torn or stale view is never taken for a call
//!
//! The host serves packet `i` when its head's sequence `s` is neither 0 nor `served[i]`, and only
//! if the mask word and all 9 words of every active lane carry `s` (read in one full take);
//! otherwise it leaves the packet for a later scan. A host that keeps memory of the requests it
//! found incomplete ([`Incomplete`], see [`Host::drain_scope`](crate::Host::drain_scope)) starts later looks at the first
//! word that did not carry `s` and serves only after a full take as above, so what it serves is
//! the same: the memory decides where a look starts, never what is taken. The wave takes its
//! reply only when all 3 words of every active lane carry `s`. Each word is one atomic access, so
//! a word carrying `s` holds data stored with `s`:
//!
//! - *torn*: a view mixing calls has some word with another sequence: refused;
//! - *in flight*: words not yet stored still hold an older sequence: refused;
//! - *stale*: a word can carry `s` from an older call only if `s` came round again, that is
//!   [`SEQ_MAX`] calls later. The wrap rule excludes it: at the claims of the calls with sequence
//!   `SEQ_MAX` and 1 (after a wrap) the wave zeroes every request and reply word of the packet and
//!   then issues a Release fence, which the host pairs with an Acquire fence after reading a pending
//!   head. After the refresh of the call with sequence 1, every word holds 0 or a value of the
//!   current cycle, which carries `s` only if the call with sequence `s` wrote it; the refresh of
//!   `SEQ_MAX` clears the values of the cycle's call 1 before the next cycle's call 1. The wave
//!   reads its own zeroes or newer values (coherence), so its replies need no fence at all. Two
//!   refreshes per 127 calls is the whole cost (each 769 zeroed words, 6 KB, and a fence: about
//!   12 stores a call, spread);
//! - *abandoned*: a dropped [`Claimed`] uses its sequence up, so words it wrote never match a
//!   later call; a dropped [`Submitted`] leaks the packet (the host still answers it).
//!
//! Whatever a hostile device writes, the host reads each word at most twice per look (the
//! remembered part, then the full take), bounded by its own packet count and
//! [`LANES`](crate::LANES), serves a packet at most once per scan, and writes only that packet's
//! reply words and `served[i]` (and its own memory). With that memory a request that never
//! completes costs its head and one word a look, is reported once as
//! [`DrainError::Stalled`](crate::DrainError::Stalled) after [`STALL_LOOKS`] looks, and from
//! then on is looked at only every [`STALLED_LOOK_PERIOD`]th scan.
//!
//! # Orderings
//!
//! | Release | by | pairs with the Acquire | by | makes visible |
//! | --- | --- | --- | --- | --- |
//! | fence after the refresh zeroes | wave, refresh claim | fence after reading a pending head | host | the zeroes (no stale word) |
//! | stores of the reply words | host | loads of the reply words in the wait | wave | the host's reads of the request are done before the wave's next call writes it |
//! | `fetch_and` on `occupied` | wave, release | `fetch_or` on `occupied` | next claimer | `device_seq` and the previous owner's accesses |
//!
//! Data needs none of them: it is in the word. A GPU's device side uses relaxed system-scope
//! accesses for every line word (on x86 hosts the Release and Acquire above are free). The host
//! does no read-modify-write on shared memory.
//!
//! # Example
//!
//! ```
//! use hostcall_core::line::{Parts, Prefix, Reply, Request, View};
//! use hostcall_core::{sync::AtomicU32, Host as _, PacketRequest};
//!
//! let prefix = Prefix::default();
//! let words = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
//! let (device_seq, occupied, served) = (words(2), words(1), words(2));
//! let requests: Vec<Request> = (0..2).map(|_| Request::default()).collect();
//! let replies: Vec<Reply> = (0..2).map(|_| Reply::default()).collect();
//! let parts = Parts {
//!     prefix: &prefix,
//!     device_seq: &device_seq,
//!     occupied: &occupied,
//!     served: &served,
//!     requests: &requests,
//!     replies: &replies,
//! };
//! let buffer = View::from_parts(parts).unwrap();
//! buffer.init(0, 0);
//!
//! let mut packet = buffer.claim(0).expect("a free packet");
//! packet.write_lane(3, &[20, 22, 0, 0, 0, 0, 0, 0]);
//! let submitted = packet.submit(7, 1 << 3);
//! let report = buffer.host().drain(&mut |p: &mut PacketRequest<'_>| {
//!     for lane in p.lanes() {
//!         let r = p.request(lane);
//!         p.reply(lane, [r[0] + r[1], u64::MAX - 1]);
//!     }
//! });
//! assert_eq!(report.packets, 1);
//! assert_eq!(submitted.wait(|| {}).reply(3), [42, u64::MAX - 1]);
//! ```

mod answer;
mod decode;
mod host;
mod incomplete;
mod layout;
mod producer;
mod scratch;
mod view;
mod word;

pub use host::Host;
pub use incomplete::{Incomplete, STALLED_LOOK_PERIOD, STALL_LOOKS};
pub use layout::{
    buffer_align, buffer_size, next_seq, refreshes, Layout, Prefix, Reply, Request, CARRIED_REQUEST_WORDS,
    MIN_ALIGN, REPLY_LANE_WORDS, REPLY_SIZE, REQUEST_LANE_WORDS, REQUEST_SIZE, SEQ_MAX,
};
pub use producer::{Claimed, Completed, PacketWords, Submitted};
pub use scratch::ScratchPayload;
pub use view::{Parts, View};
pub use word::{
    carries, data_of, decode_activemask, decode_reply, decode_request, decode_service, encode_head,
    encode_mask, encode_reply, encode_request, seq_of, word, DATA_BITS, DATA_MASK, SEQ_BITS,
};

#[cfg(test)]
mod tests;
