//! The buffer as the device sees it: where each field of each protocol lives, and word access
//! to the shared memory.
//!
//! Every access here is Relaxed: the target plays a hostile device, whose words promise no
//! ordering; what is tested is that the host's own orderings (and its checks of every word it
//! loads) hold against whatever these stores leave.

use hostcall::{HostcallBuffer, Protocol};
use hostcall_core::line::{self, carries, decode_activemask, decode_request, seq_of};
use hostcall_core::{phase, stack, LANES, LANE_MASK, SLOT_WORDS};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Byte offset of the stack protocol's `ready_stack` word.
const READY_STACK: usize = 32;
/// Bytes of one stack-protocol header: `next`, `activemask`, `service | control << 32`.
const STACK_HEADER: usize = 24;
/// Bytes of one phase-protocol header: `activemask`, `service`, padding.
const PHASE_HEADER: usize = 16;
/// Bytes of one payload.
const PAYLOAD: usize = LANES * SLOT_WORDS * 8;

/// Byte offsets of one buffer's fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub(crate) protocol: Protocol,
    pub(crate) n: usize,
    /// The headers (line protocol: the request blocks).
    headers: usize,
    /// The payloads (line protocol: the reply blocks).
    payloads: usize,
    /// Phase protocol: `device_phase` and `host_phase`; line protocol: `device_seq` and `served`.
    phases: (usize, usize),
}

impl Geometry {
    pub(crate) fn new(protocol: Protocol, n: usize) -> Self {
        match protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack => Self {
                protocol,
                n,
                headers: stack::HEADERS_OFFSET,
                payloads: stack::payloads_offset(n),
                phases: (0, 0),
            },
            Protocol::Phase => {
                let layout = phase::Layout::new(n as u32).expect("small packet counts fit");
                Self {
                    protocol,
                    n,
                    headers: layout.headers,
                    payloads: layout.payloads,
                    phases: (layout.device_phase, layout.host_phase),
                }
            }
            Protocol::Line => {
                let layout = line::Layout::new(n as u32).expect("small packet counts fit");
                Self {
                    protocol,
                    n,
                    headers: layout.requests,
                    payloads: layout.replies,
                    phases: (layout.device_seq, layout.served),
                }
            }
        }
    }

    /// Byte offset of the stack protocol's `ready_stack`.
    pub(crate) fn ready_stack(&self) -> usize {
        READY_STACK
    }

    /// Stack protocol: byte offset of header `i`'s `next` (then `activemask`, then
    /// `service | control << 32`). Phase protocol: of its `activemask` (then `service`). Line
    /// protocol: of request block `i`'s head (then the mask word).
    pub(crate) fn header(&self, i: usize) -> usize {
        let size = match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack => STACK_HEADER,
            Protocol::Phase => PHASE_HEADER,
            Protocol::Line => line::REQUEST_SIZE,
        };
        self.headers + i * size
    }

    /// Byte offset of the word holding packet `i`'s activemask (line protocol: the mask word, its
    /// low 57 bits; the top 7 are in the head).
    pub(crate) fn activemask(&self, i: usize) -> usize {
        match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack | Protocol::Line => self.header(i) + 8,
            Protocol::Phase => self.header(i),
        }
    }

    /// Byte offset of packet `i`'s service id (a `u32`; the stack protocol's `control` follows;
    /// the line protocol's is the head, tagged).
    pub(crate) fn service(&self, i: usize) -> usize {
        match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack => self.header(i) + 16,
            Protocol::Phase => self.header(i) + 8,
            Protocol::Line => self.header(i),
        }
    }

    /// Phase protocol: byte offsets of `device_phase[i]` and `host_phase[i]`; line protocol: of
    /// `device_seq[i]` and `served[i]` (`u32`s).
    pub(crate) fn phases(&self, i: usize) -> (usize, usize) {
        (self.phases.0 + 4 * i, self.phases.1 + 4 * i)
    }

    /// Byte offset of lane `lane`'s request words of packet `i`: its payload slot (line
    /// protocol: its [`Geometry::slot_words`] line words).
    pub(crate) fn slot(&self, i: usize, lane: usize) -> usize {
        match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Line => self.header(i) + 16 + lane * line::REQUEST_LANE_WORDS * 8,
            _ => self.payloads + i * PAYLOAD + lane * SLOT_WORDS * 8,
        }
    }

    /// Words of one lane's request at [`Geometry::slot`]: 8, or the line protocol's 9 line words.
    pub(crate) fn slot_words(&self) -> usize {
        match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Line => line::REQUEST_LANE_WORDS,
            _ => SLOT_WORDS,
        }
    }

    /// Byte offset of lane `lane`'s reply words of packet `i`: the first 2 of its slot, or the
    /// line protocol's 3 reply line words.
    pub(crate) fn reply(&self, i: usize, lane: usize) -> usize {
        match self.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Line => self.payloads + i * line::REPLY_SIZE + lane * line::REPLY_LANE_WORDS * 8,
            _ => self.slot(i, lane),
        }
    }

    /// The stack protocol's tagged pointer to packet `i` with tag `tag`.
    pub(crate) fn tagged(&self, i: usize, tag: u64) -> u64 {
        let step = (self.n as u64).next_power_of_two();
        (i as u64).wrapping_add(tag.wrapping_mul(step))
    }
}

/// Word access to a buffer's memory, as device code has it (every access atomic).
pub(crate) struct Words<'b> {
    buffer: &'b HostcallBuffer,
}

impl<'b> Words<'b> {
    pub(crate) fn new(buffer: &'b HostcallBuffer) -> Self {
        Self { buffer }
    }

    /// Words in the buffer.
    pub(crate) fn len(&self) -> usize {
        self.buffer.len() / 8
    }

    fn word(&self, byte: usize) -> &AtomicU64 {
        assert!(byte % 8 == 0 && byte + 8 <= self.buffer.len(), "word {byte:#x} outside the buffer");
        // SAFETY: in bounds (checked) and 8-aligned (the buffer is); the buffer outlives the
        // borrow, and all accesses to its memory, host and device, are atomic.
        unsafe { AtomicU64::from_ptr(self.buffer.as_ptr().add(byte).cast()) }
    }

    fn word32(&self, byte: usize) -> &AtomicU32 {
        assert!(byte % 4 == 0 && byte + 4 <= self.buffer.len(), "word {byte:#x} outside the buffer");
        // SAFETY: as in `word`, with 4-byte alignment.
        unsafe { AtomicU32::from_ptr(self.buffer.as_ptr().add(byte).cast()) }
    }

    // Relaxed throughout: the device writes before the host polls and reads after it, on one
    // thread (the poller) or across the listener's registration (`add`/`remove_buffer`
    // lock, which orders them).
    pub(crate) fn load(&self, byte: usize) -> u64 {
        self.word(byte).load(Ordering::Relaxed)
    }

    pub(crate) fn store(&self, byte: usize, value: u64) {
        self.word(byte).store(value, Ordering::Relaxed);
    }

    pub(crate) fn load32(&self, byte: usize) -> u32 {
        self.word32(byte).load(Ordering::Relaxed)
    }

    pub(crate) fn store32(&self, byte: usize, value: u32) {
        self.word32(byte).store(value, Ordering::Relaxed);
    }

    /// Every word, in order, copied at once (fuzzing spends its time in the host's code, not in
    /// a word-by-word loop instrumented for coverage).
    ///
    /// Only while no other thread touches the buffer: the poller runs on the calling thread, and
    /// the listener serves the buffer only between `add` and `remove_buffer`, which the
    /// target never spans with a snapshot.
    pub(crate) fn snapshot(&self) -> Vec<u64> {
        let mut out = vec![0; self.len()];
        // SAFETY: `out` has as many words as the buffer, which is 8-aligned; `AtomicU64` has the
        // size and bit validity of `u64`. The plain read races with nothing (see above).
        unsafe {
            std::ptr::copy_nonoverlapping(self.buffer.as_ptr().cast::<u64>(), out.as_mut_ptr(), out.len())
        };
        out
    }
}

/// Reads the `u32` at byte `byte` out of a snapshot.
pub(crate) fn read32(words: &[u64], byte: usize) -> u32 {
    (words[byte / 8] >> (8 * (byte % 8))) as u32
}

/// Writes the `u32` at byte `byte` into a snapshot.
pub(crate) fn write32(words: &mut [u64], byte: usize, value: u32) {
    let shift = 8 * (byte % 8);
    let word = &mut words[byte / 8];
    *word = *word & !(u64::from(u32::MAX) << shift) | u64::from(value) << shift;
}

/// Lane `lane`'s request of packet `i` out of a snapshot (line protocol: decoded from its line
/// words, whatever their sequences).
pub(crate) fn slot_of(words: &[u64], geometry: &Geometry, i: usize, lane: usize) -> [u64; SLOT_WORDS] {
    let start = geometry.slot(i, lane) / 8;
    match geometry.protocol {
        Protocol::Line => decode_request(&line_words(words, start)),
        _ => words[start..start + SLOT_WORDS].try_into().expect("a slot is 8 words"),
    }
}

/// The `N` words of a snapshot from word `start` on.
pub(crate) fn line_words<const N: usize>(words: &[u64], start: usize) -> [u64; N] {
    words[start..start + N].try_into().expect("N words")
}

/// Packet `i`'s activemask out of a snapshot (line protocol: from its mask word and head).
pub(crate) fn activemask_of(words: &[u64], geometry: &Geometry, i: usize) -> u64 {
    let at = geometry.activemask(i) / 8;
    match geometry.protocol {
        Protocol::Line => decode_activemask(words[geometry.header(i) / 8], words[at]) & LANE_MASK,
        _ => words[at],
    }
}

/// Packet `i`'s service id out of a snapshot.
pub(crate) fn service_of(words: &[u64], geometry: &Geometry, i: usize) -> u32 {
    read32(words, geometry.service(i))
}

/// Line protocol: the sequence packet `i`'s head carries, if the host would take the request it
/// heads now (neither 0 nor `served[i]`, and the mask word and every active lane's word carrying it,
/// as `line::View`'s scan checks).
pub(crate) fn line_pending(words: &[u64], geometry: &Geometry, i: usize) -> Option<u32> {
    let seq = seq_of(words[geometry.header(i) / 8]);
    let served = read32(words, geometry.phases(i).1);
    if seq == 0 || seq == served {
        return None;
    }
    let carries = |at: usize| carries(words[at / 8], seq);
    if !carries(geometry.activemask(i)) {
        return None;
    }
    let complete = hostcall_core::lanes(activemask_of(words, geometry, i)).all(|lane| {
        let start = geometry.slot(i, lane);
        (0..line::REQUEST_LANE_WORDS).all(|k| carries(start + 8 * k))
    });
    complete.then_some(seq)
}
