//! Target 4: the line protocol's exchange, with a device that may scribble on any word.
//!
//! Input: byte 0 picks the packet count (`2 + (b & 7)`); then operations, one byte each plus
//! operands, until the input ends:
//!
//! - `0`: a correct call: claim from a start byte (or take the packet a previous call kept), fill
//!   the lanes of a mask (8 bytes) with words derived from a seed (8 bytes), submit, drain, poll
//!   once; when bit 7 of the start byte is set, keep the answered packet for the next call
//!   (`Completed::keep`);
//! - `1`: a scribble: one 8-byte word anywhere in the buffer (2-byte index) gets a value (8 bytes),
//!   made a line word of the sequence of some packet's head when bit 0 of a mode byte says so
//!   (so scribbled packets can look consistent), or its sequence bumped (a torn word);
//! - `2`: a drain alone;
//! - `3`: `init` again (recovery), after dropping a kept packet.
//!
//! Every drain goes through one scratch payload and one memory of incomplete requests kept for the
//! whole input (`View::drain_scope`, as a poller drains), so what an earlier packet left in them
//! is there for the next (an `init` leaves the memory as it was, as a poller's is).
//!
//! Checked:
//! - no panic, no hang; a drain serves each packet at most once and at most `n` packets;
//! - a drain writes nothing but reply words and `served`: the request blocks, `device_seq`,
//!   `occupied` and the prefix are unchanged by it;
//! - while nothing was scribbled since the last `init`, every call is answered by the drain that
//!   follows its submit, and the wave reads exactly the reply the service computed from the
//!   request it wrote (no torn, stale or foreign word is ever taken).

use crate::input::Input;
use hostcall_core::line::{self, seq_of, word as line_word, ScratchPayload, View, DATA_BITS};
use hostcall_core::DrainScope;
use hostcall_core::{Host as _, PacketRequest, LANE_MASK, SLOT_WORDS};

#[repr(C, align(64))]
struct Line([u64; 8]);

/// The service: a function of the request that no other request gives by accident.
fn answer(request: &[u64; SLOT_WORDS]) -> [u64; 2] {
    let sum = request.iter().fold(0x9e37_79b9u64, |acc, w| acc.rotate_left(7) ^ w);
    [sum, request[7].wrapping_mul(3)]
}

fn serve(p: &mut PacketRequest<'_>) {
    for lane in p.lanes().collect::<Vec<_>>() {
        let reply = answer(&p.request(lane));
        p.reply(lane, reply);
    }
}

/// Target 4 (see the module docs of the source for the format). Panics if an invariant breaks.
pub fn line_exchange(data: &[u8]) {
    let mut input = Input::new(data);
    let n = 2 + usize::from(input.u8() & 7);
    let layout = line::Layout::new(n as u32).expect("a small buffer");
    let mut memory: Vec<Line> = (0..layout.size.div_ceil(64)).map(|_| Line([0; 8])).collect();
    let base = memory.as_mut_ptr().cast::<u8>();
    // SAFETY: `memory` outlives the view, which is the only thing that touches it (every access
    // atomic; the snapshots below read through the same atomics).
    let view = unsafe { View::from_raw(base, layout.size, n as u32) }.expect("a valid buffer");
    view.init(base as u64, 0);
    let words = || {
        // SAFETY: as above: the words are read only atomically.
        let all = unsafe {
            core::slice::from_raw_parts(base as *const hostcall_core::sync::AtomicU64, layout.size / 8)
        };
        all
    };
    let relaxed = hostcall_core::sync::Ordering::Relaxed;
    let mut clean = true;
    let mut ops = 0;
    let mut scratch = ScratchPayload::new();
    let mut incomplete = vec![line::Incomplete::default(); n];
    let mut kept: Option<line::Claimed<'_>> = None;
    while !input.is_empty() && ops < 256 {
        ops += 1;
        match input.u8() % 4 {
            0 => {
                let (start, mask, seed) = (input.u8(), input.u64() & LANE_MASK, input.u64());
                let Some(mut packet) = kept.take().or_else(|| view.claim(usize::from(start))) else {
                    continue;
                };
                let request = |lane: usize| -> [u64; SLOT_WORDS] {
                    core::array::from_fn(|k| seed.rotate_left(lane as u32 * 8 + k as u32) ^ k as u64)
                };
                for lane in hostcall_core::lanes(mask) {
                    packet.write_lane(lane, &request(lane));
                }
                let submitted = packet.submit(1, mask);
                let report = drain_checked(&view, &words, n, &mut scratch, &mut incomplete);
                match submitted.wait_until(|polls| polls < 1) {
                    Ok(done) => {
                        for lane in hostcall_core::lanes(mask) {
                            if clean {
                                assert_eq!(done.reply(lane), answer(&request(lane)), "lane {lane}");
                            }
                        }
                        if start & 0x80 != 0 {
                            kept = Some(done.keep());
                        }
                    }
                    Err(_leaked) => assert!(!clean, "a clean call went unanswered ({report:?})"),
                }
            }
            1 => {
                let (index, value, mode) = (usize::from(input.u16()), input.u64(), input.u8());
                let word = &words()[index % (layout.size / 8)];
                let head = view.request(usize::from(mode >> 2) % n).head.load(relaxed);
                let value = match mode & 3 {
                    1 => line_word(value, seq_of(head)),
                    2 => word.load(relaxed).wrapping_add(1 << DATA_BITS),
                    _ => value,
                };
                word.store(value, relaxed);
                clean = false;
            }
            2 => {
                drain_checked(&view, &words, n, &mut scratch, &mut incomplete);
            }
            _ => {
                drop(kept.take());
                view.init(base as u64, 0);
                clean = true;
            }
        }
    }
    drop(kept);
    drop(memory);
}

/// One drain, checking that it served each packet at most once and wrote only reply words and
/// `served`.
fn drain_checked<'w>(
    view: &View<'_>,
    words: &impl Fn() -> &'w [hostcall_core::sync::AtomicU64],
    n: usize,
    scratch: &mut ScratchPayload,
    incomplete: &mut [line::Incomplete],
) -> hostcall_core::DrainReport {
    let layout = line::Layout::new(n as u32).expect("a small buffer");
    let relaxed = hostcall_core::sync::Ordering::Relaxed;
    let device_side = |w: usize| {
        let byte = w * 8;
        byte < layout.served || (layout.served + 4 * n..layout.replies).contains(&byte)
    };
    let before: Vec<u64> = words().iter().map(|w| w.load(relaxed)).collect();
    let mut seen = Vec::new();
    let report = view.host().drain_scope(
        &mut DrainScope::Whole,
        Some(scratch),
        Some(incomplete),
        &mut |p: &mut PacketRequest<'_>| {
            seen.push(p.index());
            serve(p);
        },
    );
    assert!(report.packets as usize <= n && report.packets as usize == seen.len());
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "a packet served twice in one drain");
    for (w, (word, old)) in words().iter().zip(before).enumerate() {
        if device_side(w) && !(layout.served..layout.served + 4 * n).contains(&(w * 8)) {
            assert_eq!(word.load(relaxed), old, "the drain wrote device-side word {w}");
        }
    }
    report
}
