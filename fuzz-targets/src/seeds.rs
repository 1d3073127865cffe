//! The hand-made part of the seed corpus, written as code so that each seed says what it is.
//!
//! `seeds_on_disk_match_this_file` checks the files in `fuzz/seeds/<target>/` against this list
//! (files there that are not in it, such as crash reproducers, are left alone); after changing an
//! input format, regenerate them with
//! `cargo test -p hostcall-fuzz-targets -- --ignored write_seeds`.

use crate::drain_image::XOR_ON_INIT;
use crate::memory::{HEADER_WORDS, PAYLOAD_WORDS};
use crate::ops::*;
use crate::services::{MIX, PICKY, REFUSE};
use hostcall_core::stack::{buffer_size, payloads_offset, CONTROL_READY, HEADERS_OFFSET};
use hostcall_core::{LANES, SLOT_WORDS};
use std::path::PathBuf;

mod rpc_exchange;
mod whole_host;

fn seeds_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target)
}

/// A buffer image for `drain_buffer_image`.
struct Image {
    n: usize,
    words: Vec<u64>,
}

impl Image {
    fn new(n: usize) -> Self {
        Self { n, words: vec![0; buffer_size(n as u32).unwrap() / 8] }
    }
    fn ready(mut self, raw: u64) -> Self {
        self.words[4] = raw;
        self
    }
    fn header(mut self, index: usize, next: u64, activemask: u64, service: u32, control: u32) -> Self {
        let at = HEADERS_OFFSET / 8 + index * HEADER_WORDS;
        self.words[at] = next;
        self.words[at + 1] = activemask;
        self.words[at + 2] = u64::from(service) | u64::from(control) << 32;
        self
    }
    fn lane(mut self, index: usize, lane: usize, request: [u64; SLOT_WORDS]) -> Self {
        let at = payloads_offset(self.n) / 8 + index * PAYLOAD_WORDS + lane * SLOT_WORDS;
        self.words[at..at + SLOT_WORDS].copy_from_slice(&request);
        self
    }
    /// Byte 0, the prefix and header words, then a record for each payload slot that is not all
    /// zeros. Without records, trailing zero bytes are left out (the target reads them as zeros).
    fn encode(&self, flags: u8) -> Vec<u8> {
        let mut bytes = vec![(self.n - 2) as u8 | flags];
        let payloads = payloads_offset(self.n) / 8;
        bytes.extend(self.words[..payloads].iter().flat_map(|w| w.to_le_bytes()));
        let slots = self.words[payloads..].chunks(SLOT_WORDS).enumerate();
        let mut records = slots.filter(|(_, slot)| slot.iter().any(|&w| w != 0)).peekable();
        if records.peek().is_none() {
            while bytes.len() > 1 && bytes.last() == Some(&0) {
                bytes.pop();
            }
        }
        for (slot, words) in records {
            bytes.extend([(slot / LANES) as u8, (slot % LANES) as u8]);
            bytes.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        }
        bytes
    }
}

const READY: u32 = CONTROL_READY;

fn drain_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let request = |r0: u64| [r0, 2, 3, 4, 5, 6, 7, 8];
    vec![
        (
            "valid_single_packet",
            Image::new(2)
                .ready(1)
                .header(1, 0, 0b101, MIX, READY)
                .lane(1, 0, [40, 2, 0, 0, 0, 0, 0, 0])
                .lane(1, 2, request(9))
                .encode(0),
        ),
        (
            // 2 -> 0 (tag 1) -> null; a picky service with odd and even lanes, a refusing one.
            "two_packets_and_error_replies",
            Image::new(3)
                .ready(2)
                .header(2, 4, u64::MAX, PICKY, READY)
                .header(0, 0, 1, REFUSE, READY)
                .lane(2, 0, request(10))
                .lane(2, 1, request(11))
                .lane(2, 63, request(12))
                .encode(0),
        ),
        (
            "cycle",
            Image::new(3).ready(1).header(1, 2, 1, MIX, READY).header(2, 1 + 4, 2, MIX, READY).encode(0),
        ),
        ("self_loop", Image::new(2).ready(2).header(0, 2, 1, MIX, READY).encode(0)),
        // Mask 3 lets index 3 through; the buffer has 3 packets.
        ("out_of_range_top", Image::new(3).ready(3).encode(0)),
        ("out_of_range_mid_chain", Image::new(5).ready(1).header(1, 6, 1, MIX, READY).encode(0)),
        ("not_ready", Image::new(2).ready(1).header(1, 0, 1, MIX, 0).encode(0)),
        (
            // Huge tag, every lane, an unknown id, reserved control bits, then index 31 of 17.
            "garbage_fields",
            Image::new(17)
                .ready(0xdead_beef << 5 | 16)
                .header(16, u64::MAX, u64::MAX, 0xdead_beef, u32::MAX)
                .encode(0),
        ),
        (
            // Index 1 and index 0 with the last tag of the tag space.
            "tag_wraparound",
            Image::new(2)
                .ready(u64::MAX)
                .header(1, u64::MAX - 1, 1, MIX, READY)
                .header(0, 0, 3, PICKY, READY)
                .encode(0),
        ),
        (
            "full_chain_of_17",
            (0..17)
                .fold(Image::new(17).ready(16), |image, i| {
                    let next = if i == 0 { 0 } else { i as u64 - 1 + 32 * i as u64 };
                    image.header(i, next, 1 << i, [MIX, PICKY, REFUSE, 0][i % 4], READY).lane(
                        i,
                        i,
                        request(i as u64),
                    )
                })
                .encode(0),
        ),
        ("xor_fresh_buffer", Image::new(2).encode(XOR_ON_INIT)),
        // On a fresh buffer, point the ready-stack at the free-list: a chain of packets without READY.
        ("xor_ready_into_free_list", Image::new(4).ready(3).encode(XOR_ON_INIT)),
    ]
}

/// An operation sequence for `producer_consumer_ops`.
struct Ops(Vec<u8>);

impl Ops {
    fn new(n: usize) -> Self {
        Self(vec![(n - 2) as u8])
    }
    fn op(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn claim(self) -> Self {
        self.op(&[OP_CLAIM])
    }
    fn write(self, which: u8, lane: u8, seed: u16) -> Self {
        let [lo, hi] = seed.to_le_bytes();
        self.op(&[OP_WRITE_LANE, which, lane, lo, hi])
    }
    /// `service`: 0 MIX, 1 PICKY, 2 REFUSE, 3 reserved id 0; `mask`: see `Run::step`.
    fn submit(self, which: u8, service: u8, mask: u8) -> Self {
        self.op(&[OP_SUBMIT, which, service, mask])
    }
    fn drain(self, via_poller: bool) -> Self {
        self.op(&[OP_DRAIN, u8::from(via_poller)])
    }
    fn try_complete(self, which: u8) -> Self {
        self.op(&[OP_TRY_COMPLETE, which])
    }
    fn wait(self, which: u8) -> Self {
        self.op(&[OP_WAIT, which])
    }
    fn release(self, which: u8) -> Self {
        self.op(&[OP_RELEASE, which])
    }
    fn drop_claimed(self, which: u8) -> Self {
        self.op(&[OP_DROP_CLAIMED, which])
    }
    /// `region`: 0 prefix, 1 headers, 2 payloads; `kind`: see `Run::scribble`.
    fn scribble(self, region: u8, word: u16, kind: u8, value: u64) -> Self {
        let [lo, hi] = word.to_le_bytes();
        self.op(&[OP_SCRIBBLE, region, lo, hi, kind]).op(&value.to_le_bytes())
    }
    fn reinit(self) -> Self {
        self.op(&[OP_REINIT])
    }
    fn retag(self, k: u8) -> Self {
        self.op(&[OP_RETAG, k])
    }
    /// Claim, write lane 0, submit to MIX on lane 0, wait (serving), release.
    fn round_trip(self, seed: u16) -> Self {
        self.claim().write(0, 0, seed).submit(0, 0, 1).wait(0).release(0)
    }
}

fn ops_seeds() -> Vec<(&'static str, Vec<u8>)> {
    const ALL_LANES: u8 = 0;
    const NO_LANES: u8 = 3;
    const RAW_MASK: u8 = 2; // the mask is the next 8 bytes
    vec![
        (
            "round_trip",
            Ops::new(2)
                .claim()
                .write(0, 0, 40)
                .write(0, 5, 7)
                .submit(0, 0, ALL_LANES)
                .drain(false)
                .try_complete(0)
                .release(0),
        ),
        (
            // Claim every packet and one more (none left), serve them through the poller.
            "exhaust_and_return",
            Ops::new(3)
                .claim()
                .claim()
                .claim()
                .claim()
                .write(1, 1, 3)
                .submit(0, 0, 1 | 5 << 2)
                .submit(0, 1, ALL_LANES)
                .submit(0, 2, RAW_MASK)
                .op(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
                .drain(true)
                .wait(0)
                .wait(0)
                .wait(0)
                .release(2)
                .release(1)
                .release(0),
        ),
        (
            // Odd r0 to the picky service; an unknown id (service selector 4 reads a u32) with no lanes.
            "errors_and_unknown_service",
            Ops::new(2)
                .claim()
                .write(0, 0, 13)
                .submit(0, 1, 1)
                .claim()
                .op(&[OP_SUBMIT, 0, 4, 0xef, 0xbe, 0xad, 0xde, NO_LANES])
                .drain(false)
                .try_complete(0)
                .try_complete(0)
                .release(0)
                .release(0)
                .claim()
                .submit(0, 3, ALL_LANES)
                .wait(0)
                .release(0),
        ),
        (
            // Free packets near the end of the tag space, then enough cycles to wrap (packet 0
            // must skip null).
            "tag_wraparound",
            (0..6)
                .fold(Ops::new(2).retag(0), |ops, i| {
                    let both = ops.claim().claim().write(1, 0, i).submit(0, 0, 1).submit(0, 2, 1);
                    both.drain(false).try_complete(0).try_complete(0).release(0).release(0)
                })
                .retag(3)
                .round_trip(9)
                .round_trip(10),
        ),
        (
            "drop_claimed_out_of_order",
            Ops::new(4)
                .claim()
                .claim()
                .claim()
                .drop_claimed(1)
                .drop_claimed(0)
                .claim()
                .write(1, 63, 1)
                .submit(1, 0, 1 | 63 << 2)
                .wait(0)
                .release(0)
                .drop_claimed(0),
        ),
        (
            // Writes the host must ignore: index_mask, the doorbell, header words of free packets,
            // payload words; the model keeps checking.
            "benign_scribbles",
            Ops::new(3)
                .scribble(0, 5, 4, 0)
                .scribble(0, 2, 2, 0x1234)
                .scribble(1, 2, 3, 1)
                .scribble(2, 7, 2, 0xfeed)
                .claim()
                .scribble(2, 1000, 4, 0)
                .submit(0, 0, ALL_LANES)
                .drain(false)
                .scribble(2, 1024, 2, 77)
                .try_complete(0)
                .release(0)
                .round_trip(5),
        ),
        (
            "hostile_ready_stack",
            Ops::new(3)
                .claim()
                .submit(0, 0, 1)
                .scribble(0, 4, 2, 0x0bad_cafe_0000_0003)
                .drain(false)
                .try_complete(0)
                .wait(0)
                .reinit()
                .round_trip(1),
        ),
        (
            // A free packet linked to itself: claims hand out the same packet again and again.
            "hostile_free_list_cycle",
            Ops::new(2)
                .scribble(1, 3, 0, 1)
                .claim()
                .claim()
                .claim()
                .claim()
                .submit(0, 0, 1)
                .submit(0, 0, 1)
                .drain(false)
                .drain(true)
                .try_complete(0)
                .try_complete(0)
                .release(0)
                .release(0),
        ),
        (
            "hostile_control_of_submitted",
            Ops::new(2).claim().submit(0, 0, 1).scribble(1, 5, 3, 0).drain(true).wait(0).release(0),
        ),
    ]
    .into_iter()
    .map(|(name, ops)| (name, ops.0))
    .collect()
}

fn all_seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let drain = drain_seeds().into_iter().map(|(name, bytes)| ("drain_buffer_image", name, bytes));
    let ops = ops_seeds().into_iter().map(|(name, bytes)| ("producer_consumer_ops", name, bytes));
    let whole = whole_host::seeds().into_iter().map(|(name, bytes)| ("whole_host", name, bytes));
    let rpc = rpc_exchange::seeds().into_iter().map(|(name, bytes)| ("rpc_exchange", name, bytes));
    drain.chain(ops).chain(whole).chain(rpc).collect()
}

#[test]
fn seeds_pass() {
    for (target, name, bytes) in all_seeds() {
        println!("{target}/{name}");
        match target {
            "drain_buffer_image" => crate::drain_buffer_image(&bytes),
            "whole_host" => crate::whole_host(&bytes),
            "rpc_exchange" => crate::rpc_exchange(&bytes),
            _ => crate::producer_consumer_ops(&bytes),
        }
    }
}

#[test]
fn seeds_on_disk_match_this_file() {
    for (target, name, bytes) in all_seeds() {
        let path = seeds_dir(target).join(name);
        let on_disk = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run the ignored test write_seeds)", path.display()));
        assert!(on_disk == bytes, "{} is out of date: run the ignored test write_seeds", path.display());
    }
}

#[test]
#[ignore = "writes the seed files; run after changing an input format"]
fn write_seeds() {
    for (target, name, bytes) in all_seeds() {
        let dir = seeds_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
