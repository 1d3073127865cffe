//! The device: the fuzz bytes decoded into operations on the shared buffer.
//!
//! Each operation is one byte (the low 3 bits its [`op`] code, the rest flags) and its operands:
//!
//! | op | operands | what the device does |
//! | --- | --- | --- |
//! | `SUBMIT`, `SUBMIT_TOO` | packet, service, lanes, a recipe per lane (up to 8 lanes) | writes a valid-looking request and submits it as the protocol says (push on the ready-stack with READY; flip `device_phase`; line: every word tagged with the next sequence, after the wrap refresh when due) |
//! | `POLL` | | a host round (poller or listener), checked |
//! | `WRITE_WORD` | word index, value | stores (flag bit 4: XORs) any word of the buffer |
//! | `WRITE_SLOT` | packet, lane, 8 words (line: 9) | overwrites a payload slot (line: a lane's request words) |
//! | `HEADER` | packet, activemask, service word | rewrites a header without submitting (line: the mask word and the head, raw) |
//! | `SIGNAL` | packet, value | stack: the ready-stack top (flag bit 3) or a `control` word; phase: `device_phase` (flag bit 3) or `host_phase`; line: `device_seq` (flag bit 3) or `served` |
//! | `LISTENER` | | the remaining rounds are served by a listener thread (if byte 0 allows it) |
//!
//! Lane recipes: PRINTF sends a whole message in one chunk, begins a longer one (continued by
//! later recipes with the id the host answered), continues an open stream, or sends raw words;
//! DEVMEM allocates a size from a table (or any), frees a live block, an address near one, or any
//! address; other ids get two words.

use super::host::Host;
use super::words::Geometry;
use crate::input::Input;
use hostcall::{services::devmem::SLAB_BYTES, services::printf::PrintfMessage, Protocol};
use hostcall_core::lanes;
use hostcall_core::message::{Descriptor, DATA_WORDS};
use hostcall_core::stack::CONTROL_READY;
use hostcall_core::{line, LANES, SLOT_WORDS};
use hostcall_core::{DEVMEM, FUNCTION_CALL, PRINTF, RESERVED, SANITIZER};

/// Operation codes (the low 3 bits of an operation byte).
pub(crate) mod op {
    pub(crate) const SUBMIT: u8 = 0;
    pub(crate) const SUBMIT_TOO: u8 = 1;
    pub(crate) const POLL: u8 = 2;
    pub(crate) const WRITE_WORD: u8 = 3;
    pub(crate) const WRITE_SLOT: u8 = 4;
    pub(crate) const HEADER: u8 = 5;
    pub(crate) const SIGNAL: u8 = 6;
    pub(crate) const LISTENER: u8 = 7;
}

/// Host rounds per input at most (the rest of the input is ignored).
const MAX_ROUNDS: usize = 48;
/// Lanes of one submit that get a recipe (the others keep whatever their slot holds).
const MAX_RECIPES: usize = 8;

/// Format strings of the printf messages the device sends: every conversion kind, flags,
/// `*` fields, strings, unsupported ones (`%1$d`) and expensive ones (`%.4096g`).
const FORMATS: [&[u8]; 12] = [
    b"%d\n",
    b"%s|%5.2s\n",
    b"%x %o %c\n",
    b"%.3f %e %g\n",
    b"%-8ld|%+i|% d\n",
    b"%p %%\n",
    b"%lu %llx %hhd %hd\n",
    b"%*d %.*s\n",
    b"no conversions at all, a longer line than one chunk carries\n",
    b"%n%s\n",
    b"%.4096g %a\n",
    b"%1$d\n",
];

/// Allocation sizes (the last entry reads any size from the input).
const SIZES: [u64; 7] = [0, 1, 4095, 4096, 4097, 64 << 10, SLAB_BYTES];
/// Offsets from a live block's address for frees of addresses near one.
const NEAR: [u64; 8] = [1, 8, 4096, SLAB_BYTES, u64::MAX, 0u64.wrapping_sub(4096), 1 << 63, 64];

/// What the device remembers between rounds.
#[derive(Default)]
struct Device {
    /// Tag of the next push on the ready-stack.
    tag: u64,
    /// BEGINs sent in this round: packet, lane and the words still to send.
    begun: Vec<(usize, usize, Vec<u64>)>,
    /// Message streams the host gave an id: the lane that began it (only it may continue it), the
    /// id and the words still to send.
    streams: Vec<(usize, u64, Vec<u64>)>,
}

/// Plays the device: operations until the input ends or [`MAX_ROUNDS`] host rounds ran.
pub(super) fn run(host: &mut Host, input: &mut Input<'_>, listener_allowed: bool) {
    let mut device = Device { tag: 1, ..Device::default() };
    let mut rounds = 0;
    while !input.is_empty() && rounds < MAX_ROUNDS {
        let byte = input.u8();
        let flags = byte >> 3;
        match byte & 7 {
            op::SUBMIT | op::SUBMIT_TOO => device.submit(host, input),
            op::POLL => {
                host.round();
                device.learn_ids(host);
                rounds += 1;
            }
            op::WRITE_WORD => {
                let words = host.words();
                let at = 8 * (usize::from(input.u16()) % words.len());
                let value = input.u64();
                let old = if flags & 2 != 0 { words.load(at) } else { 0 };
                words.store(at, old ^ value);
            }
            op::WRITE_SLOT => {
                let (i, lane) = (host.packet(input.u8()), usize::from(input.u8()) % LANES);
                let start = host.geometry.slot(i, lane);
                for k in 0..host.geometry.slot_words() {
                    host.words().store(start + 8 * k, input.u64());
                }
            }
            op::HEADER => {
                let i = host.packet(input.u8());
                let g = host.geometry;
                host.words().store(g.activemask(i), input.u64());
                match g.protocol {
                    Protocol::Rpc { .. } => {
                        unreachable!("whole_host draws stack, phase and line buffers only")
                    }
                    Protocol::Stack | Protocol::Line => host.words().store(g.service(i), input.u64()),
                    Protocol::Phase => host.words().store32(g.service(i), input.u32()),
                }
            }
            op::SIGNAL => {
                let i = host.packet(input.u8());
                let g = host.geometry;
                let (device_word, host_word) = g.phases(i);
                match (g.protocol, flags & 1 != 0) {
                    (Protocol::Rpc { .. }, _) => {
                        unreachable!("whole_host draws stack, phase and line buffers only")
                    }
                    (Protocol::Stack, true) => host.words().store(g.ready_stack(), input.u64()),
                    (Protocol::Stack, false) => host.words().store32(g.service(i) + 4, input.u32()),
                    (Protocol::Phase | Protocol::Line, true) => {
                        host.words().store32(device_word, input.u32())
                    }
                    (Protocol::Phase | Protocol::Line, false) => host.words().store32(host_word, input.u32()),
                }
            }
            code => {
                debug_assert_eq!(code, op::LISTENER);
                if listener_allowed {
                    host.switch_to_listener();
                }
            }
        }
    }
}

impl Device {
    /// A valid-looking request, submitted as the protocol says.
    fn submit(&mut self, host: &mut Host, input: &mut Input<'_>) {
        let i = host.packet(input.u8());
        let selector = input.u8();
        let service = match selector % 8 {
            0..=2 => PRINTF,
            3 | 4 => DEVMEM,
            5 => FUNCTION_CALL,
            6 => SANITIZER,
            _ if selector & 0x80 != 0 => RESERVED,
            _ => input.u32(),
        };
        let lanes_byte = input.u8();
        let activemask = match lanes_byte & 3 {
            0 => 1 << (lanes_byte >> 2),
            1 => u64::from(lanes_byte >> 2),
            2 => input.u64(),
            _ => u64::MAX >> (lanes_byte >> 2),
        };
        let g: Geometry = host.geometry;
        if g.protocol == Protocol::Line {
            return self.submit_line(host, input, i, service, activemask);
        }
        for lane in lanes(activemask).take(MAX_RECIPES) {
            let request = self.request(host, input, service, i, lane);
            let start = g.slot(i, lane);
            for (k, word) in request.into_iter().enumerate() {
                host.words().store(start + 8 * k, word);
            }
        }
        let words = host.words();
        words.store(g.activemask(i), activemask);
        match g.protocol {
            Protocol::Rpc { .. } => unreachable!("whole_host draws stack, phase and line buffers only"),
            Protocol::Stack => {
                words.store(g.service(i), u64::from(service) | u64::from(CONTROL_READY) << 32);
                words.store(g.header(i), words.load(g.ready_stack()));
                words.store(g.ready_stack(), g.tagged(i, self.tag));
                self.tag += 1;
            }
            Protocol::Phase => {
                words.store32(g.service(i), service);
                let (device_word, _) = g.phases(i);
                words.store32(device_word, words.load32(device_word) ^ 1);
            }
            Protocol::Line => unreachable!("submitted above"),
        }
    }

    /// One lane's request for `service`, from its recipe.
    fn request(
        &mut self,
        host: &Host,
        input: &mut Input<'_>,
        service: u32,
        i: usize,
        lane: usize,
    ) -> [u64; SLOT_WORDS] {
        match service {
            PRINTF => self.printf_chunk(host, input, i, lane),
            DEVMEM => devmem_request(host, input),
            _ => [input.u64(), input.u64(), 0, 0, 0, 0, 0, 0],
        }
    }

    /// The line protocol's submit, as `line::Claimed` does it (the packet is not claimed through
    /// `occupied`: the device here may submit any packet, pending or not): the next sequence
    /// after `device_seq[i]`, the wrap refresh when due (every request and reply word of the
    /// packet but the head zeroed), each active lane's request as line words (lanes past
    /// [`MAX_RECIPES`] keep the request their words hold, encoded anew), the mask word, the head.
    fn submit_line(&mut self, host: &Host, input: &mut Input<'_>, i: usize, service: u32, activemask: u64) {
        let g = host.geometry;
        let (device_seq, _) = g.phases(i);
        let previous = host.words().load32(device_seq);
        let seq = line::next_seq(previous);
        if line::refreshes(previous, seq) {
            let words = host.words();
            let zero = |start: usize, count: usize| (0..count).for_each(|k| words.store(start + 8 * k, 0));
            zero(g.activemask(i), 1);
            for lane in 0..LANES {
                zero(g.slot(i, lane), g.slot_words());
                zero(g.reply(i, lane), line::REPLY_LANE_WORDS);
            }
        }
        for (n, lane) in lanes(activemask).enumerate() {
            let start = g.slot(i, lane);
            let request = if n < MAX_RECIPES {
                self.request(host, input, service, i, lane)
            } else {
                let words = host.words();
                line::decode_request(&core::array::from_fn(|k| words.load(start + 8 * k)))
            };
            for (k, word) in line::encode_request(&request, seq).into_iter().enumerate() {
                host.words().store(start + 8 * k, word);
            }
        }
        let words = host.words();
        words.store(g.activemask(i), line::encode_mask(activemask, seq));
        words.store(g.service(i), line::encode_head(service, activemask, seq));
        words.store32(device_seq, seq);
    }

    /// One lane's PRINTF chunk.
    fn printf_chunk(
        &mut self,
        host: &Host,
        input: &mut Input<'_>,
        i: usize,
        lane: usize,
    ) -> [u64; SLOT_WORDS] {
        let recipe = input.u8();
        match recipe & 3 {
            0 => {
                let message = printf_words(input);
                chunk(true, true, 0, &message[..message.len().min(DATA_WORDS)])
            }
            1 => {
                let mut message = printf_words(input);
                let rest = message.split_off(message.len().min(DATA_WORDS));
                self.begun.push((i, lane, rest));
                chunk(true, false, 0, &message)
            }
            2 if self.streams.iter().any(|s| s.0 == lane) => {
                let mine: Vec<usize> =
                    (0..self.streams.len()).filter(|&k| self.streams[k].0 == lane).collect();
                let at = mine[usize::from(input.u8()) % mine.len()];
                let (_, id, words) = &mut self.streams[at];
                let take = words.len().min(DATA_WORDS);
                let data: Vec<u64> = words.drain(..take).collect();
                // Flag bit 2: end the message early (what is left is never sent).
                let end = words.is_empty() || recipe & 4 != 0;
                let request = chunk(false, end, *id, &data);
                if end {
                    self.streams.swap_remove(at);
                }
                request
            }
            2 => {
                // No stream of this lane's: name a message the host holds (another lane's: refused,
                // and left alone), or make an id up.
                let open: Vec<u64> = host.model.printf.open.keys().copied().collect();
                let id = if open.is_empty() {
                    input.u64() >> 8
                } else {
                    open[usize::from(input.u8()) % open.len()]
                };
                let data = [input.u64(), input.u64()];
                chunk(false, recipe & 4 != 0, id, &data)
            }
            _ => {
                let mut request = [0; SLOT_WORDS];
                request.iter_mut().for_each(|w| *w = input.u64());
                request
            }
        }
    }

    /// After a round: the BEGINs the host answered with an id become streams.
    fn learn_ids(&mut self, host: &Host) {
        for (i, lane, rest) in std::mem::take(&mut self.begun) {
            let reply = host.reply_word0(i, lane);
            match Descriptor::decode(reply) {
                Ok(d) if !d.begin() && host.model.printf.open.contains_key(&d.id()) => {
                    self.streams.push((lane, d.id(), rest));
                }
                _ => {}
            }
        }
    }
}

/// A chunk: the descriptor and `data` (at most 7 words).
fn chunk(begin: bool, end: bool, id: u64, data: &[u64]) -> [u64; SLOT_WORDS] {
    let descriptor = Descriptor::new(begin, end, data.len(), id).map_or(u64::MAX, |d| d.encode());
    let mut request = [0; SLOT_WORDS];
    request[0] = descriptor;
    request[1..=data.len()].copy_from_slice(data);
    request
}

/// A printf message: a format from [`FORMATS`], stdout or stderr (or a bad control word), and
/// up to 3 arguments of any kind.
fn printf_words(input: &mut Input<'_>) -> Vec<u64> {
    let pick = input.u8();
    let mut message = PrintfMessage::new(FORMATS[usize::from(pick) % FORMATS.len()]);
    if pick & 0x80 != 0 {
        message = message.to_stderr();
    }
    if pick & 0x40 != 0 {
        message = message.control(input.u64());
    }
    for _ in 0..input.u8() % 4 {
        let kind = input.u8();
        message = match kind & 3 {
            0 => message.int(input.u64() as i64),
            1 => message.uint(input.u64()),
            2 => message.float(f64::from_bits(input.u64())),
            _ => {
                let bytes: Vec<u8> = (0..(kind >> 2) % 12).map(|_| input.u8()).collect();
                message.string(&bytes)
            }
        };
    }
    message.into_words()
}

/// One lane's DEVMEM request.
fn devmem_request(host: &Host, input: &mut Input<'_>) -> [u64; SLOT_WORDS] {
    let recipe = input.u8();
    let live: Vec<u64> = host.model.devmem.live.keys().copied().collect();
    let live_block = |input: &mut Input<'_>| {
        if live.is_empty() {
            input.u64()
        } else {
            live[usize::from(input.u8()) % live.len()]
        }
    };
    let pick = usize::from(recipe >> 2 & 7);
    let (address, size) = match recipe & 3 {
        0 => (0, SIZES.get(pick).copied().unwrap_or_else(|| input.u64())),
        1 => (live_block(input), 0),
        2 => (live_block(input).wrapping_add(NEAR[pick]), 0),
        _ => (input.u64(), input.u64()),
    };
    [address, size, 0, 0, 0, 0, 0, 0]
}
