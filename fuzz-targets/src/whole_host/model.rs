//! What the built-in services must answer, lane by lane, in the order the host served them:
//! DEVMEM's live blocks and budget, PRINTF's open messages and output, and the error reply of
//! every other id. Each `lane` function panics on a wrong reply and returns whether the lane was
//! answered as a host error (the stack protocol's `CONTROL_HOST_ERROR`).

use hostcall::services::devmem::{block_alignment, DevMemLimits, ALLOCATION_OVERHEAD, BLOCK_ALIGN};
use hostcall::services::message::MessageLimits;
use hostcall::services::printf::{printf_partial, PrintfLimits, Stream};
use hostcall_core::message::Descriptor;
use hostcall_core::{ErrorCode, SLOT_WORDS};
use hostcall_core::{DEVMEM, PRINTF, SANITIZER};
use std::collections::BTreeMap;

/// DEVMEM's state as the replies so far determine it.
pub(crate) struct DevMemModel {
    limits: DevMemLimits,
    /// Live blocks: address and cost.
    pub(crate) live: BTreeMap<u64, u64>,
    /// Blocks still live whose buffer is no longer served (its listener round ended): owned by
    /// no buffer, so never freed again by a device; counted in the budget.
    pub(crate) orphans: BTreeMap<u64, u64>,
    /// What they cost together (pages and bookkeeping).
    pub(crate) bytes: u64,
}

impl DevMemModel {
    pub(crate) fn new(limits: DevMemLimits) -> Self {
        Self { limits, live: BTreeMap::new(), orphans: BTreeMap::new(), bytes: 0 }
    }

    /// Bytes the live blocks take from the backend (their pages).
    pub(crate) fn pages(&self) -> u64 {
        self.bytes - self.blocks() as u64 * ALLOCATION_OVERHEAD
    }

    /// Blocks live, orphans included.
    pub(crate) fn blocks(&self) -> usize {
        self.live.len() + self.orphans.len()
    }

    /// The buffer is no longer served: its blocks stay live, owned by no buffer.
    pub(crate) fn forget_buffer(&mut self) {
        self.orphans.append(&mut self.live);
    }

    fn lane(&mut self, request: &[u64; SLOT_WORDS], reply: [u64; 2]) -> bool {
        assert_ne!(reply[0], u64::MAX, "DEVMEM answered u64::MAX, which device code takes as an address");
        let limits = &self.limits;
        if request[0] != 0 {
            let address = request[0];
            return match self.live.remove(&address) {
                Some(cost) => {
                    assert_eq!(reply, [0, 0], "free of live block {address:#x}");
                    self.bytes -= cost;
                    false
                }
                None => {
                    assert_eq!(reply, [0, ErrorCode::BadRequest as u64], "free of {address:#x}, not live");
                    true
                }
            };
        }
        let size = request[1];
        let refused = size == 0
            || size > limits.max_allocation
            || self.blocks() >= limits.max_allocations
            || self.bytes + size.div_ceil(BLOCK_ALIGN) * BLOCK_ALIGN + ALLOCATION_OVERHEAD > limits.max_total;
        if refused {
            assert_eq!(reply, [0, ErrorCode::Refused as u64], "allocation of {size} bytes must be refused");
            return true;
        }
        let address = reply[0];
        assert!(address != 0 && reply[1] == 0, "allocation of {size} bytes within budget: {reply:?}");
        assert_eq!(address % block_alignment(size), 0, "block {address:#x} of {size} bytes misaligned");
        let cost = size.div_ceil(BLOCK_ALIGN) * BLOCK_ALIGN + ALLOCATION_OVERHEAD;
        assert!(self.live.insert(address, cost).is_none(), "block {address:#x} handed out twice");
        self.bytes += cost;
        assert!(self.bytes <= limits.max_total && self.blocks() <= limits.max_allocations);
        false
    }
}

/// Messages printed: each one's stream and bytes, in order.
pub(crate) type Output = Vec<(Stream, Vec<u8>)>;

/// PRINTF's open messages and what it must have printed.
pub(crate) struct PrintfModel {
    limits: MessageLimits,
    /// Open messages by id, with the lane that began each (the fuzzed host has one buffer) and
    /// their words so far.
    pub(crate) open: BTreeMap<u64, (usize, Vec<u64>)>,
    /// Every completed message's output, in order, with its stream.
    pub(crate) printed: Output,
}

impl PrintfModel {
    pub(crate) fn new(limits: MessageLimits) -> Self {
        Self { limits, open: BTreeMap::new(), printed: Vec::new() }
    }

    /// The buffer is no longer served: its open messages are dropped.
    pub(crate) fn forget_buffer(&mut self) {
        self.open.clear();
    }

    fn max_words(&self) -> usize {
        self.limits.max_message_bytes / 8
    }

    fn lane(&mut self, lane: usize, request: &[u64; SLOT_WORDS], reply: [u64; 2]) -> bool {
        let word = request[0];
        let refused = ErrorCode::Refused.reply();
        let Ok(descriptor) = Descriptor::decode(word) else {
            let id = Descriptor::raw_id(word);
            if !Descriptor::raw_begin(word) && self.open.get(&id).is_some_and(|m| m.0 == lane) {
                self.open.remove(&id); // a malformed chunk drops what it names, if its lane's
            }
            assert_eq!(reply, ErrorCode::BadRequest.reply(), "a malformed descriptor {word:#x}");
            return true;
        };
        let data = &request[1..=descriptor.len()];
        if descriptor.begin() {
            if data.len() > self.max_words() {
                assert_eq!(reply, refused, "an oversize first chunk");
                return true;
            }
            if descriptor.end() {
                self.complete(data, reply);
                return false;
            }
            if self.open.len() >= self.limits.max_open {
                assert_eq!(reply, refused, "a BEGIN with {} messages open must be refused", self.open.len());
                return true;
            }
            if reply == refused {
                return true; // the held-bytes budget (not modelled) may refuse a BEGIN
            }
            let answer = Descriptor::decode(reply[0]).expect("a BEGIN's reply is a descriptor");
            let id = answer.id();
            assert!(!answer.begin() && answer.end() == descriptor.end() && reply[1] == 0, "reply {reply:?}");
            assert!(id != 0 && !self.open.contains_key(&id), "BEGIN answered with id {id:#x}, open or 0");
            assert_eq!(answer, descriptor.reply_for(id).expect("a valid id"));
            self.open.insert(id, (lane, data.to_vec()));
            return false;
        }
        let (id, max_words) = (descriptor.id(), self.max_words());
        let Some(message) = self.open.get_mut(&id).filter(|m| m.0 == lane).map(|m| &mut m.1) else {
            assert_eq!(
                reply,
                ErrorCode::BadRequest.reply(),
                "a chunk of id {id:#x}, not open for lane {lane}"
            );
            return true;
        };
        if message.len() + data.len() > max_words || reply == refused {
            // Oversize (modelled) or past the held bytes (not modelled): dropped either way.
            assert_eq!(reply, refused, "chunk of message {id:#x}");
            self.open.remove(&id);
            return true;
        }
        message.extend_from_slice(data);
        if descriptor.end() {
            let (_, message) = self.open.remove(&id).expect("open above");
            self.complete(&message, reply);
        } else {
            let answer = descriptor.reply_for(id).expect("a decoded id");
            assert_eq!(reply, [answer.encode(), 0], "continuation of message {id:#x}");
        }
        false
    }

    /// A complete message: PRINTF prints it with the default limits (up to a conversion it
    /// cannot print, then a marker) and answers the bytes printed before any marker, or -1 for a
    /// message without a format string (not a host error: printf's own return value).
    fn complete(&mut self, message: &[u64], reply: [u64; 2]) {
        let limits = PrintfLimits::default();
        let expected = match printf_partial(message, &limits) {
            Ok(printed) => {
                assert!(printed.printed <= printed.bytes.len().min(limits.max_output), "{printed:?}");
                self.printed.push((printed.stream, printed.bytes));
                [printed.printed as u64, 0]
            }
            Err(_) => ErrorCode::BadRequest.reply(),
        };
        assert_eq!(reply, expected, "printf of {message:x?}");
    }
}

/// Every service the registry holds, modelled.
pub(crate) struct Model {
    pub(crate) devmem: DevMemModel,
    pub(crate) printf: PrintfModel,
    /// Whether SANITIZER is registered.
    pub(crate) sanitizer: bool,
    /// SANITIZER packets served with at least one lane (the most reports it may print).
    pub(crate) sanitizer_packets: usize,
}

impl Model {
    /// Checks one served lane's reply; returns whether it is a host error.
    pub(crate) fn lane(
        &mut self,
        service: u32,
        lane: usize,
        request: &[u64; SLOT_WORDS],
        reply: [u64; 2],
    ) -> bool {
        match service {
            DEVMEM => self.devmem.lane(request, reply),
            PRINTF => self.printf.lane(lane, request, reply),
            SANITIZER if self.sanitizer => {
                assert_eq!(reply, [0, 0], "SANITIZER answers every lane [0, 0]");
                false
            }
            // FUNCTION_CALL is not enabled; RESERVED and the rest are not registered.
            _ => {
                assert_eq!(reply, ErrorCode::UnknownService.reply(), "service {service}");
                true
            }
        }
    }
}
