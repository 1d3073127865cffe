//! Seeds of `whole_host`: a script of device operations and host rounds each.

use crate::whole_host::{op, LINE, LISTENER_ALLOWED};

/// Message limits (byte 1): 4 open messages, default held bytes, 1 KiB messages.
const MESSAGES: u8 = 3 | 3 << 3 | 7 << 5;
/// DEVMEM limits (byte 2): 64 KiB, 64 KiB allocations, 16 live.
const DEVMEM: u8 = 2 | 2 << 2 | 3 << 4;

/// Service selectors of `SUBMIT` (see `Device::submit`).
const PRINTF: u8 = 0;
const DEVMEM_ID: u8 = 3;
const FUNCTION_CALL: u8 = 5;
const SANITIZER: u8 = 6;
const RESERVED: u8 = 0x87;
/// Lanes byte: lane `k` alone.
const fn lane(k: u8) -> u8 {
    k << 2
}
/// Lanes byte: the lanes of the bits of `bits` (lanes 0..=5).
const fn lanes(bits: u8) -> u8 {
    1 | bits << 2
}

/// A seed being written.
struct Script(Vec<u8>);

impl Script {
    fn new(phase: bool, packets: u8, listener: bool, messages: u8, devmem: u8) -> Self {
        let shape = u8::from(phase) | (packets - 2) << 1 | if listener { LISTENER_ALLOWED } else { 0 };
        Self(vec![shape, messages, devmem])
    }
    /// A line-protocol buffer.
    fn line(packets: u8, listener: bool, messages: u8, devmem: u8) -> Self {
        let mut script = Self::new(false, packets, listener, messages, devmem);
        script.0[0] |= LINE;
        script
    }
    fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn poll(self) -> Self {
        self.bytes(&[op::POLL])
    }
    fn listener(self) -> Self {
        self.bytes(&[op::LISTENER])
    }
    /// A submit of packet `packet` to a service selector, its lanes, then one recipe per lane.
    fn submit(self, packet: u8, service: u8, lanes: u8, recipes: &[Vec<u8>]) -> Self {
        recipes.iter().fold(self.bytes(&[op::SUBMIT, packet, service, lanes]), |s, r| s.bytes(r))
    }
}

fn u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// PRINTF recipes: a whole message in one chunk, or the BEGIN of a longer one; `format` indexes
/// `FORMATS`; each argument an int.
fn printf(begin_only: bool, format: u8, ints: &[i64]) -> Vec<u8> {
    let mut r = vec![u8::from(begin_only), format, ints.len() as u8];
    for &v in ints {
        r.push(0);
        r.extend(v.to_le_bytes());
    }
    r
}
/// PRINTF recipe: the next chunk of the device's stream `stream`.
fn next_chunk(stream: u8) -> Vec<u8> {
    vec![2, stream]
}
/// PRINTF recipe: raw words.
fn raw_chunk(words: [u64; 8]) -> Vec<u8> {
    [vec![3], u64s(&words)].concat()
}
/// DEVMEM recipes.
fn alloc(size_index: u8) -> Vec<u8> {
    vec![size_index << 2]
}
fn alloc_any(size: u64) -> Vec<u8> {
    [vec![7 << 2], u64s(&[size])].concat()
}
fn free_live(which: u8) -> Vec<u8> {
    vec![1, which]
}
fn free_near(which: u8, near_index: u8) -> Vec<u8> {
    vec![2 | near_index << 2, which]
}
fn free_raw(address: u64) -> Vec<u8> {
    [vec![3], u64s(&[address, 0])].concat()
}
/// Two request words for any other service.
fn words(a: u64, b: u64) -> Vec<u8> {
    u64s(&[a, b])
}

pub(super) fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let long = 8; // the format longer than one chunk
    vec![
        (
            "stack_printf_one_chunk",
            Script::new(false, 3, false, MESSAGES, DEVMEM)
                .submit(1, PRINTF, lanes(0b101), &[printf(false, 0, &[42]), printf(false, 4, &[-7, 3, 9])])
                .poll(),
        ),
        (
            "phase_printf_streams",
            Script::new(true, 4, false, MESSAGES, DEVMEM)
                .submit(0, PRINTF, lanes(0b11), &[printf(true, long, &[]), printf(true, 1, &[])])
                .submit(3, PRINTF, lane(63), &[printf(false, 7, &[5, 17, 3])])
                .poll()
                .submit(0, PRINTF, lanes(0b11), &[next_chunk(0), next_chunk(0)])
                .poll()
                .submit(2, PRINTF, lane(1), &[raw_chunk([2 | 5 << 8, 0, 0, 0, 0, 0, 0, 0])])
                .poll(),
        ),
        (
            "begin_past_the_open_bound",
            Script::new(false, 2, false, 3 << 3 | 7 << 5, DEVMEM)
                .submit(
                    0,
                    PRINTF,
                    lanes(0b111),
                    &[printf(true, long, &[]), printf(true, 0, &[1]), printf(true, 2, &[])],
                )
                .poll(),
        ),
        (
            "printf_malformed_chunks",
            Script::new(true, 2, false, MESSAGES, DEVMEM)
                .submit(
                    1,
                    PRINTF,
                    lanes(0b1111),
                    &[
                        raw_chunk([0b100, 0, 0, 0, 0, 0, 0, 0]),
                        raw_chunk([2 | 77 << 8, 1, 2, 3, 4, 5, 6, 7]),
                        raw_chunk([3 | 1 << 5, 0x2564, 0, 0, 0, 0, 0, 0]),
                        raw_chunk([3 | 1 << 5, 0, 0, 0, 0, 0, 0, 0]),
                    ],
                )
                .poll(),
        ),
        (
            "devmem_alloc_and_free",
            Script::new(false, 3, false, MESSAGES, DEVMEM)
                .submit(2, DEVMEM_ID, lanes(0b1111), &[alloc(3), alloc(1), alloc(0), alloc_any(1 << 40)])
                .poll()
                .submit(0, DEVMEM_ID, lanes(0b111), &[free_live(0), free_near(0, 0), free_raw(u64::MAX)])
                .poll()
                .submit(1, DEVMEM_ID, lanes(0b11), &[free_live(0), free_live(0)])
                .poll(),
        ),
        (
            "devmem_budget",
            Script::new(true, 2, false, MESSAGES, 1 | 2 << 2 | 2 << 4)
                .submit(0, DEVMEM_ID, lanes(0b11111), &[alloc(5), alloc(3), alloc(3), alloc(3), alloc(3)])
                .poll(),
        ),
        (
            "devmem_slab",
            Script::new(false, 2, false, MESSAGES, 3 | 3 << 2 | 3 << 4)
                .submit(0, DEVMEM_ID, lanes(0b11), &[alloc(6), alloc(6)])
                .poll()
                .submit(1, DEVMEM_ID, lane(0), &[free_live(1)])
                .poll(),
        ),
        (
            "unknown_ids",
            Script::new(true, 5, false, MESSAGES, DEVMEM)
                .submit(0, FUNCTION_CALL, lane(0), &[words(0x1234, 5)])
                .submit(1, SANITIZER, lanes(0b11), &[words(1, 2), words(3, 4)])
                .submit(2, RESERVED, lane(5), &[words(0, 0)])
                .bytes(&[op::SUBMIT, 3, 7])
                .bytes(&0xdead_beefu32.to_le_bytes())
                .bytes(&[3 | 60 << 2]) // lanes 0..=3 (u64::MAX >> 60)
                .bytes(&[&words(9, 9)[..], &words(8, 8), &words(7, 7), &words(6, 6)].concat())
                .submit(4, SANITIZER, 2, &[])
                .bytes(&u64s(&[0]))
                .poll(),
        ),
        (
            "sanitizer_reports",
            Script::new(false, 2, false, MESSAGES, DEVMEM | 0x40)
                .submit(0, SANITIZER, lanes(0b101), &[words(0xdead0, 0x1000), words(0xdead8, 0x1000)])
                .submit(1, SANITIZER, 2, &[])
                .bytes(&u64s(&[0]))
                .poll()
                .submit(1, SANITIZER, lane(63), &[words(1, 2)])
                .poll(),
        ),
        (
            // A cycle in the ready-stack, garbage control bits, a packet pushed twice.
            "stack_hostile_chain",
            Script::new(false, 4, false, MESSAGES, DEVMEM)
                .submit(1, PRINTF, lane(0), &[printf(false, 0, &[1])])
                .submit(1, PRINTF, lane(0), &[printf(false, 0, &[2])])
                .submit(2, DEVMEM_ID, lane(0), &[alloc(1)])
                .bytes(&[op::SIGNAL, 2])
                .bytes(&u32::MAX.to_le_bytes())
                .poll()
                .bytes(&[op::SIGNAL | 1 << 3, 0])
                .bytes(&u64s(&[7 << 32 | 3]))
                .poll(),
        ),
        (
            // Upper phase bits, a device store into host_phase, a header rewritten after submit.
            "phase_hostile_words",
            Script::new(true, 3, false, MESSAGES, DEVMEM)
                .submit(0, DEVMEM_ID, lane(1), &[alloc(3)])
                .bytes(&[op::SIGNAL | 1 << 3, 0])
                .bytes(&0x8000_0001u32.to_le_bytes())
                .bytes(&[op::SIGNAL, 2])
                .bytes(&1u32.to_le_bytes())
                .bytes(&[op::HEADER, 2])
                .bytes(&u64s(&[u64::MAX]))
                .bytes(&3u32.to_le_bytes())
                .poll()
                .bytes(&[op::WRITE_WORD | 2 << 3])
                .bytes(&9u16.to_le_bytes())
                .bytes(&u64s(&[1 << 32]))
                .poll(),
        ),
        (
            "listener_stack",
            Script::new(false, 3, true, MESSAGES, DEVMEM)
                .submit(0, PRINTF, lane(2), &[printf(true, long, &[])])
                .poll()
                .listener()
                .submit(1, PRINTF, lane(3), &[next_chunk(0)])
                .submit(2, DEVMEM_ID, lanes(0b11), &[alloc(3), free_raw(8)])
                .poll()
                .submit(0, RESERVED, lane(0), &[words(1, 2)])
                .poll(),
        ),
        (
            "listener_phase",
            Script::new(true, 9, true, MESSAGES, DEVMEM)
                .listener()
                .submit(8, PRINTF, lanes(0b10), &[printf(false, 3, &[1, 2, 3])])
                .submit(4, DEVMEM_ID, lane(0), &[alloc(2)])
                .poll()
                .submit(4, DEVMEM_ID, lane(0), &[free_live(0)])
                .poll(),
        ),
        (
            "line_printf_and_devmem",
            Script::line(3, false, MESSAGES, DEVMEM)
                .submit(0, PRINTF, lanes(0b11), &[printf(true, long, &[]), printf(false, 4, &[-7, 3, 9])])
                .submit(2, DEVMEM_ID, lanes(0b11), &[alloc(3), alloc(1)])
                .poll()
                .submit(0, PRINTF, lane(0), &[next_chunk(0)])
                .submit(2, DEVMEM_ID, lane(1), &[free_live(0)])
                .submit(1, SANITIZER, lane(63), &[words(1, 2)])
                .poll(),
        ),
        (
            // Near the wrap: `device_seq` set to SEQ_MAX - 2, then calls with sequences
            // SEQ_MAX - 1, SEQ_MAX (a refresh) and 1 (a refresh); a stale word planted in between.
            "line_across_the_wrap",
            Script::line(2, false, MESSAGES, DEVMEM)
                .bytes(&[op::SIGNAL | 1 << 3, 1])
                .bytes(&(hostcall_core::line::SEQ_MAX - 2).to_le_bytes())
                .bytes(&[op::SIGNAL, 1])
                .bytes(&(hostcall_core::line::SEQ_MAX - 2).to_le_bytes())
                .submit(1, PRINTF, lane(5), &[printf(false, 0, &[1])])
                .poll()
                .submit(1, PRINTF, lanes(0b11), &[printf(false, 0, &[2]), printf(false, 0, &[3])])
                .poll()
                .submit(1, PRINTF, lane(2), &[printf(false, 0, &[4])])
                .poll(),
        ),
        (
            // A head rewritten, a torn lane word, `served` scribbled, a lane slot overwritten.
            "line_hostile_words",
            Script::line(3, false, MESSAGES, DEVMEM)
                .submit(0, DEVMEM_ID, lane(1), &[alloc(3)])
                .submit(1, PRINTF, lane(0), &[printf(false, 0, &[5])])
                .bytes(&[op::HEADER, 1])
                .bytes(&u64s(&[u64::MAX, hostcall_core::line::word(1, 7)]))
                .bytes(&[op::SIGNAL, 0])
                .bytes(&1u32.to_le_bytes())
                .bytes(&[op::WRITE_SLOT, 2, 3])
                .bytes(&u64s(&[hostcall_core::line::word(0, 1); hostcall_core::line::REQUEST_LANE_WORDS]))
                .poll()
                .submit(2, RESERVED, lane(3), &[words(1, 2)])
                .poll(),
        ),
        (
            // Every lane word of a submitted call overwritten with the next call's sequence (one
            // torn lane): the call is not served; the next submit is.
            "line_torn_lane",
            Script::line(2, false, MESSAGES, DEVMEM)
                .submit(0, PRINTF, lanes(0b11), &[printf(false, 0, &[1]), printf(false, 0, &[2])])
                .bytes(&[op::WRITE_SLOT, 0, 1])
                .bytes(&u64s(&[2 << 32 | 0x25; 16]))
                .poll()
                .submit(0, PRINTF, lane(1), &[printf(false, 0, &[3])])
                .poll(),
        ),
        (
            "listener_line",
            Script::line(4, true, MESSAGES, DEVMEM)
                .listener()
                .submit(3, PRINTF, lanes(0b10), &[printf(false, 3, &[1, 2, 3])])
                .submit(1, DEVMEM_ID, lane(0), &[alloc(2)])
                .poll()
                .submit(1, DEVMEM_ID, lane(0), &[free_live(0)])
                .poll(),
        ),
    ]
    .into_iter()
    .map(|(name, script)| (name, script.0))
    .collect()
}
