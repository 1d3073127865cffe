//! Message streams (PROTOCOL.md section 4): the descriptor codec and the producer's chunking.
//!
//! A lane sends a message longer than one slot as a series of hostcalls. Slot 0 of each call is a
//! [`Descriptor`]; slots `1..=LEN` carry up to [`DATA_WORDS`] data words:
//!
//! | bits  | field |
//! | ----- | ----- |
//! | 0     | BEGIN |
//! | 1     | END |
//! | 2..4  | reserved, must be 0 |
//! | 5..7  | LEN: data words in this call, 0..=7 |
//! | 8..63 | message id (56 bits) |
//!
//! The host answers a BEGIN with the descriptor, BEGIN cleared and the id it allocated filled in;
//! every later chunk carries that id. On END the host runs the service on the whole message and
//! answers with up to 2 words. [`MessageWriter`] is the device side of that exchange; byte
//! strings become words with [`PackedWords`] (little-endian, zero-padded).
//!
//! ```
//! use hostcall_core::message::{Descriptor, MessageWriter, PackedWords};
//!
//! // A host that only counts words: ids start at 9, the END reply is the total.
//! let mut total = 0;
//! let host = |request: &[u64; 8]| {
//!     let d = Descriptor::decode(request[0]).unwrap();
//!     total += d.len();
//!     if d.end() {
//!         [total as u64, 0]
//!     } else {
//!         let id = if d.begin() { 9 } else { d.id() };
//!         [d.reply_for(id).unwrap().encode(), 0]
//!     }
//! };
//! // 100 bytes + NUL = 13 words = 2 calls (7 + 6 words).
//! let writer = MessageWriter::new(PackedWords::c_string(&[b'x'; 100]));
//! assert_eq!(writer.send(host), Ok([13, 0]));
//! ```

use crate::host::{ErrorCode, ERROR_REPLY};
use core::fmt;
use core::iter::Peekable;

/// Data words one call carries at most (slots `1..=7`).
pub const DATA_WORDS: usize = 7;
/// Bytes one call carries at most.
pub const CHUNK_BYTES: usize = DATA_WORDS * 8;
/// The largest message id (56 bits).
pub const MAX_ID: u64 = (1 << 56) - 1;

const BEGIN_BIT: u64 = 1 << 0;
const END_BIT: u64 = 1 << 1;
const RESERVED_SHIFT: u32 = 2;
const RESERVED_MASK: u64 = 0b111 << RESERVED_SHIFT;
const LEN_SHIFT: u32 = 5;
const LEN_MASK: u64 = 0b111 << LEN_SHIFT;
const ID_SHIFT: u32 = 8;

/// Slot 0 of a message chunk.
///
/// The fields are private so a `Descriptor` always encodes losslessly: `len <= 7` and
/// `id <= MAX_ID` are checked by [`Descriptor::new`] and [`Descriptor::decode`] builds only such
/// values, so [`Descriptor::encode`] cannot fail.
///
/// ```
/// use hostcall_core::message::{Descriptor, DescriptorError};
/// let d = Descriptor::new(true, false, 7, 0).unwrap();
/// assert_eq!(d.encode(), 0b1110_0001);
/// assert_eq!(Descriptor::decode(0x2a_e2), Ok(Descriptor::new(false, true, 7, 0x2a).unwrap()));
/// assert_eq!(Descriptor::decode(0b100), Err(DescriptorError::ReservedBits { bits: 0b001 }));
/// assert_eq!(Descriptor::new(false, false, 8, 0), Err(DescriptorError::LenTooLarge { len: 8 }));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Descriptor {
    begin: bool,
    end: bool,
    len: u8,
    id: u64,
}

/// Why a word is not a valid descriptor, or a descriptor cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DescriptorError {
    /// Reserved bits 2..4 are not zero (`bits` is their value, shifted down to bit 0).
    ReservedBits {
        /// The three reserved bits.
        bits: u8,
    },
    /// More than [`DATA_WORDS`] data words asked for. LEN is a 3-bit field, so a decoded word
    /// never has this error: only [`Descriptor::new`] can report it.
    LenTooLarge {
        /// The length asked for.
        len: usize,
    },
    /// An id wider than 56 bits asked for. Like `LenTooLarge`, only [`Descriptor::new`] and
    /// [`Descriptor::with_id`] can report it.
    IdTooLarge {
        /// The id asked for.
        id: u64,
    },
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReservedBits { bits } => write!(f, "descriptor reserved bits 2..4 set ({bits:#05b})"),
            Self::LenTooLarge { len } => write!(f, "{len} data words do not fit one call (at most 7)"),
            Self::IdTooLarge { id } => write!(f, "message id {id:#x} is wider than 56 bits"),
        }
    }
}

impl core::error::Error for DescriptorError {}

impl Descriptor {
    /// A descriptor with these fields; `len <= 7` and `id <= MAX_ID`.
    pub const fn new(begin: bool, end: bool, len: usize, id: u64) -> Result<Self, DescriptorError> {
        if len > DATA_WORDS {
            return Err(DescriptorError::LenTooLarge { len });
        }
        if id > MAX_ID {
            return Err(DescriptorError::IdTooLarge { id });
        }
        Ok(Self { begin, end, len: len as u8, id })
    }

    /// Decodes slot 0 of a chunk. Only the reserved bits can make it fail: LEN (3 bits) is
    /// 0..=7 by construction and every 56-bit id is representable.
    pub const fn decode(word: u64) -> Result<Self, DescriptorError> {
        let reserved = (word & RESERVED_MASK) >> RESERVED_SHIFT;
        if reserved != 0 {
            return Err(DescriptorError::ReservedBits { bits: reserved as u8 });
        }
        Ok(Self {
            begin: word & BEGIN_BIT != 0,
            end: word & END_BIT != 0,
            len: ((word & LEN_MASK) >> LEN_SHIFT) as u8,
            id: word >> ID_SHIFT,
        })
    }

    /// The word for slot 0.
    pub const fn encode(self) -> u64 {
        (self.begin as u64) | (self.end as u64) << 1 | (self.len as u64) << LEN_SHIFT | self.id << ID_SHIFT
    }

    /// The id bits (8..63) of any word, valid descriptor or not: lets a host drop the message a
    /// malformed chunk names.
    pub const fn raw_id(word: u64) -> u64 {
        word >> ID_SHIFT
    }

    /// Whether the BEGIN bit (bit 0) is set in any word, valid descriptor or not.
    pub const fn raw_begin(word: u64) -> bool {
        word & BEGIN_BIT != 0
    }

    /// BEGIN: the first chunk of a message (its id is ignored; the host allocates one).
    pub const fn begin(self) -> bool {
        self.begin
    }

    /// END: the last chunk; the host answers with the service's reply.
    pub const fn end(self) -> bool {
        self.end
    }

    /// Data words in this call, 0..=7.
    pub const fn len(self) -> usize {
        self.len as usize
    }

    /// Whether this call carries no data words.
    pub const fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The message id.
    pub const fn id(self) -> u64 {
        self.id
    }

    /// The same descriptor naming message `id`.
    pub const fn with_id(self, id: u64) -> Result<Self, DescriptorError> {
        Self::new(self.begin, self.end, self.len as usize, id)
    }

    /// The host's intermediate reply to this chunk: BEGIN cleared, `id` filled in.
    pub const fn reply_for(self, id: u64) -> Result<Self, DescriptorError> {
        Self::new(false, self.end, self.len as usize, id)
    }
}

/// A byte string as little-endian u64 words, zero-padded to a whole word, optionally with a NUL
/// terminator first (the C string layout of the printf message).
///
/// ```
/// use hostcall_core::message::PackedWords;
/// let words: Vec<u64> = PackedWords::c_string(b"hi").collect();
/// assert_eq!(words, [u64::from_le_bytes(*b"hi\0\0\0\0\0\0")]);
/// // A NUL-terminated string whose length is a multiple of 8 takes one more (zero) word.
/// assert_eq!(PackedWords::c_string(b"12345678").count(), 2);
/// assert_eq!(PackedWords::bytes(b"12345678").count(), 1);
/// assert_eq!(PackedWords::bytes(b"").count(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct PackedWords<'a> {
    bytes: &'a [u8],
    nul: bool,
}

impl<'a> PackedWords<'a> {
    /// The words of `bytes`, zero-padded; no terminator.
    pub const fn bytes(bytes: &'a [u8]) -> Self {
        Self { bytes, nul: false }
    }

    /// The words of `bytes` followed by a NUL, zero-padded (at least one word). Bytes after an
    /// interior NUL are packed as given; a C reader stops at the first NUL.
    pub const fn c_string(bytes: &'a [u8]) -> Self {
        Self { bytes, nul: true }
    }

    /// Words a byte string of `len` bytes takes (`nul`: plus a terminator).
    pub const fn words_for(len: usize, nul: bool) -> usize {
        (len + nul as usize).div_ceil(8)
    }
}

impl Iterator for PackedWords<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.bytes.is_empty() && !self.nul {
            return None;
        }
        let take = self.bytes.len().min(8);
        let mut word = [0u8; 8];
        word[..take].copy_from_slice(&self.bytes[..take]);
        self.bytes = &self.bytes[take..];
        if take < 8 {
            // The terminator (a zero byte, already there) fits in this word.
            self.nul = false;
        }
        Some(u64::from_le_bytes(word))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = Self::words_for(self.bytes.len(), self.nul);
        (n, Some(n))
    }
}

impl ExactSizeIterator for PackedWords<'_> {}

/// Why a [`MessageWriter`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterError {
    /// `next_request` was called while the reply to the previous request is still owed.
    ReplyPending,
    /// `accept_reply` was called with no request outstanding.
    NoRequestPending,
    /// The message was already sent completely (or the writer failed before).
    Finished,
    /// The host answered an intermediate chunk with an error reply; it dropped the message.
    Host {
        /// The error code, if the second word is one this project writes.
        code: Option<ErrorCode>,
        /// The reply as received.
        reply: [u64; 2],
    },
    /// The host's reply to BEGIN is not a descriptor.
    BadBeginReply(DescriptorError),
}

impl fmt::Display for WriterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReplyPending => f.write_str("a reply is still owed for the previous chunk"),
            Self::NoRequestPending => f.write_str("no chunk is waiting for a reply"),
            Self::Finished => f.write_str("the message was already sent"),
            Self::Host { code: Some(code), .. } => write!(f, "the host dropped the message: {code}"),
            Self::Host { reply, .. } => write!(f, "the host dropped the message: reply {reply:x?}"),
            Self::BadBeginReply(e) => write!(f, "the host's BEGIN reply is not a descriptor: {e}"),
        }
    }
}

impl core::error::Error for WriterError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterState {
    /// The next request is the BEGIN chunk.
    Start,
    /// A request is out; `end`: it was the last one; `begin`: it was the first.
    Awaiting { begin: bool, end: bool, id: u64 },
    /// The next request is a later chunk of message `id`.
    Next { id: u64 },
    /// Done or failed.
    Finished,
}

/// The device side of one lane's message: splits a word stream into calls of up to 7 data words,
/// BEGIN on the first, END on the last, and the host's id on every call after the first.
///
/// Drive it request by request (an emulated wave that services 64 lanes at once keeps one writer
/// per lane): [`next_request`](Self::next_request) gives the 8 slot words to send,
/// [`accept_reply`](Self::accept_reply) takes the host's 2 reply words and returns the final reply
/// once the END chunk is answered. [`send`](Self::send) does the loop for a single caller. An
/// empty message is one call with BEGIN | END and LEN 0.
#[derive(Clone, Debug)]
pub struct MessageWriter<I: Iterator<Item = u64>> {
    words: Peekable<I>,
    state: WriterState,
}

impl<I: Iterator<Item = u64>> MessageWriter<I> {
    /// A writer for the message whose words `words` yields.
    pub fn new<W: IntoIterator<IntoIter = I>>(words: W) -> Self {
        Self { words: words.into_iter().peekable(), state: WriterState::Start }
    }

    /// Whether the whole message was sent and its final reply accepted (or the writer failed).
    pub fn is_finished(&self) -> bool {
        self.state == WriterState::Finished
    }

    /// The 8 slot words of the next call: descriptor, then up to 7 data words, zero-filled.
    pub fn next_request(&mut self) -> Result<[u64; 8], WriterError> {
        let (begin, id) = match self.state {
            WriterState::Start => (true, 0),
            WriterState::Next { id } => (false, id),
            WriterState::Awaiting { .. } => return Err(WriterError::ReplyPending),
            WriterState::Finished => return Err(WriterError::Finished),
        };
        let mut request = [0u64; 8];
        let mut len = 0;
        while len < DATA_WORDS {
            let Some(word) = self.words.next() else { break };
            len += 1;
            request[len] = word;
        }
        let end = self.words.peek().is_none();
        // `len <= 7` by the loop and `id` came from a decoded descriptor (<= MAX_ID) or is 0.
        let descriptor = Descriptor { begin, end, len: len as u8, id };
        request[0] = descriptor.encode();
        self.state = WriterState::Awaiting { begin, end, id };
        Ok(request)
    }

    /// Takes the host's reply to the last request. `Ok(Some(reply))`: that was the END chunk and
    /// `reply` is the service's answer (which may itself signal an error, e.g. printf's -1);
    /// `Ok(None)`: send the next request.
    pub fn accept_reply(&mut self, reply: [u64; 2]) -> Result<Option<[u64; 2]>, WriterError> {
        let WriterState::Awaiting { begin, end, id } = self.state else {
            return Err(WriterError::NoRequestPending);
        };
        if end {
            self.state = WriterState::Finished;
            return Ok(Some(reply));
        }
        if reply[0] == ERROR_REPLY {
            self.state = WriterState::Finished;
            return Err(WriterError::Host { code: ErrorCode::from_reply(reply), reply });
        }
        let id = if begin {
            match Descriptor::decode(reply[0]) {
                Ok(d) => d.id(),
                Err(e) => {
                    self.state = WriterState::Finished;
                    return Err(WriterError::BadBeginReply(e));
                }
            }
        } else {
            id
        };
        self.state = WriterState::Next { id };
        Ok(None)
    }

    /// Sends the whole message through `call` (one hostcall per chunk) and returns the reply to
    /// the END chunk.
    pub fn send<C: FnMut(&[u64; 8]) -> [u64; 2]>(mut self, mut call: C) -> Result<[u64; 2], WriterError> {
        loop {
            let request = self.next_request()?;
            if let Some(reply) = self.accept_reply(call(&request))? {
                return Ok(reply);
            }
        }
    }
}

#[cfg(test)]
mod tests;
