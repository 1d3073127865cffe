//! Host-side message assembly (PROTOCOL.md section 4): chunks in, whole messages out.
//!
//! Every lane sends its message as a series of calls (see [`hostcall_core::message`]). The
//! [`Assembler`] keeps the messages that are open, keyed by the id it allocated on BEGIN:
//!
//! - BEGIN allocates an id and answers the descriptor with BEGIN cleared and the id filled in;
//! - a later chunk appends its LEN words to the message its id names and is answered the same way;
//! - END hands the whole message back ([`ChunkOutcome::Complete`]) so a service runs on it, and
//!   frees the id; BEGIN | END in one call is a message of one chunk.
//!
//! A device cannot exhaust host memory: a message is bounded ([`MessageLimits::max_message_bytes`],
//! default 64 KiB) and so is the number of open messages ([`MessageLimits::max_open`], default
//! 4096: every lane of 64 full packets). A BEGIN when that many are open evicts the message that
//! has been open longest (a device that begins messages and never ends them cannot lock others
//! out; the evicted message's later chunks are refused as an unknown id), and BEGIN | END needs no
//! slot at all. Every malformed chunk is answered with an error reply ([`MessageError::code`]) and the
//! message it names, if open, is dropped and its id freed, so later messages still work.
//!
//! Ids are `generation << 24 | slot`: the slot (1..=max_open) is recycled, the generation grows
//! on every reuse, so a chunk that names a dropped message is refused as an unknown id instead of
//! landing in the next message that got its slot. Id 0 is never allocated: a chunk without BEGIN
//! that carries id 0 is a device that never sent (or never read the reply to) its BEGIN.
//!
//! ```
//! use hostcall::services::message::MessageService;
//! use hostcall_core::message::MessageWriter;
//!
//! // A service that sums the words of each message.
//! let mut service = MessageService::new(|message: &[u64]| [message.iter().sum(), 0]);
//! let reply = MessageWriter::new(1..=100u64).send(|request| service.serve_lane(request));
//! assert_eq!(reply, Ok([5050, 0]));
//! assert_eq!(service.assembler().open_messages(), 0);
//! ```

use hostcall_core::message::{Descriptor, DescriptorError, DATA_WORDS};
use hostcall_core::{ErrorCode, LaneService};
use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;

/// Default bound on one message: 64 KiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 10;
/// Default bound on the number of messages open at once.
pub const DEFAULT_MAX_OPEN: usize = 4096;

/// Bits of an id that name the slot; the rest (32 bits) is the slot's generation.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// The most open messages the id layout can name.
pub const MAX_OPEN_LIMIT: usize = SLOT_MASK as usize;

/// Bounds on what devices may make the assembler hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLimits {
    /// The largest message, in bytes (rounded down to whole words).
    pub max_message_bytes: usize,
    /// The most messages open at once (at most [`MAX_OPEN_LIMIT`]; larger values are clamped).
    pub max_open: usize,
}

impl Default for MessageLimits {
    fn default() -> Self {
        Self { max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES, max_open: DEFAULT_MAX_OPEN }
    }
}

/// Why a chunk was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// Slot 0 is not a descriptor (reserved bits set).
    Descriptor(DescriptorError),
    /// A chunk without BEGIN carrying id 0: no BEGIN was sent (or its reply was not used).
    NoBegin,
    /// A chunk without BEGIN naming an id that is not open (never allocated, completed, dropped).
    UnknownId {
        /// The id in the chunk.
        id: u64,
    },
    /// The message would grow past the size limit; it was dropped.
    Oversize {
        /// The id of the dropped message (0 if refused at BEGIN).
        id: u64,
        /// The limit in bytes.
        limit: usize,
    },
}

impl MessageError {
    /// The error code the lane is answered with: `BadRequest` for a malformed stream, `Refused`
    /// for a limit.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Descriptor(_) | Self::NoBegin | Self::UnknownId { .. } => ErrorCode::BadRequest,
            Self::Oversize { .. } => ErrorCode::Refused,
        }
    }
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Descriptor(e) => e.fmt(f),
            Self::NoBegin => f.write_str("message chunk without a BEGIN"),
            Self::UnknownId { id } => write!(f, "no open message has id {id:#x}"),
            Self::Oversize { id, limit } => write!(f, "message {id:#x} is larger than {limit} bytes"),
        }
    }
}

impl std::error::Error for MessageError {}

/// What one chunk did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkOutcome {
    /// The message continues: answer the lane with this (the descriptor with the id).
    Reply([u64; 2]),
    /// The END chunk: run the service on `message` and answer with its reply.
    Complete {
        /// The id the message had (already freed).
        id: u64,
        /// Every data word of the message, in order.
        message: Vec<u64>,
    },
    /// A malformed chunk or a limit: answer `error.code().reply()`.
    Error(MessageError),
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    /// When the message was begun (the assembler's BEGIN count), to find the oldest.
    opened: u64,
    message: Option<Vec<u64>>,
}

/// The open messages of every lane, keyed by id. See the [module docs](self).
#[derive(Debug)]
pub struct Assembler {
    limits: MessageLimits,
    max_words: usize,
    slots: Vec<Slot>,
    /// Free slot indices, reused oldest first.
    free: VecDeque<usize>,
    open: usize,
    begun: u64,
    evicted: u64,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new(MessageLimits::default())
    }
}

impl Assembler {
    /// An assembler with no open message.
    pub fn new(limits: MessageLimits) -> Self {
        let limits = MessageLimits { max_open: limits.max_open.min(MAX_OPEN_LIMIT), ..limits };
        Self {
            limits,
            max_words: limits.max_message_bytes / 8,
            slots: Vec::new(),
            free: VecDeque::new(),
            open: 0,
            begun: 0,
            evicted: 0,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> MessageLimits {
        self.limits
    }

    /// Messages begun and not yet ended or dropped.
    pub fn open_messages(&self) -> usize {
        self.open
    }

    /// Messages evicted so far because a BEGIN found [`MessageLimits::max_open`] open.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Takes one lane's request (slot 0 the descriptor, slots `1..=LEN` the data).
    pub fn on_chunk(&mut self, request: &[u64; 8]) -> ChunkOutcome {
        match self.chunk(request) {
            Ok(outcome) => outcome,
            Err(error) => ChunkOutcome::Error(error),
        }
    }

    fn chunk(&mut self, request: &[u64; 8]) -> Result<ChunkOutcome, MessageError> {
        let word = request[0];
        let descriptor = Descriptor::decode(word).map_err(|e| {
            if !Descriptor::raw_begin(word) {
                self.abandon(Descriptor::raw_id(word));
            }
            MessageError::Descriptor(e)
        })?;
        // LEN is 0..=7 by construction (3 bits), so slots 1..=LEN are always in the request.
        let data = &request[1..=descriptor.len().min(DATA_WORDS)];
        let (index, id) = if descriptor.begin() {
            if data.len() > self.max_words {
                return Err(MessageError::Oversize { id: 0, limit: self.limits.max_message_bytes });
            }
            if descriptor.end() {
                return Ok(ChunkOutcome::Complete { id: 0, message: data.to_vec() });
            }
            self.allocate()
        } else {
            let id = descriptor.id();
            (self.find(id)?, id)
        };
        let message = self.slots[index].message.get_or_insert_with(Vec::new);
        if message.len() + data.len() > self.max_words {
            self.release(index);
            return Err(MessageError::Oversize { id, limit: self.limits.max_message_bytes });
        }
        message.extend_from_slice(data);
        if descriptor.end() {
            let message = self.release(index).unwrap_or_default();
            return Ok(ChunkOutcome::Complete { id, message });
        }
        // `id` is at most 56 bits by construction (`allocate`) or came from a decoded descriptor.
        let reply = descriptor.reply_for(id).map_err(MessageError::Descriptor)?;
        Ok(ChunkOutcome::Reply([reply.encode(), 0]))
    }

    /// Drops the open message `id`, if any; returns whether there was one.
    pub fn abandon(&mut self, id: u64) -> bool {
        match self.find(id) {
            Ok(index) => {
                self.release(index);
                true
            }
            Err(_) => false,
        }
    }

    /// Drops every open message.
    pub fn clear(&mut self) {
        for index in 0..self.slots.len() {
            if self.slots[index].message.is_some() {
                self.release(index);
            }
        }
    }

    fn allocate(&mut self) -> (usize, u64) {
        if self.open >= self.limits.max_open {
            self.evict_oldest();
        }
        let index = match self.free.pop_front() {
            Some(index) => index,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.message = Some(Vec::new());
        slot.opened = self.begun;
        self.begun += 1;
        self.open += 1;
        (index, u64::from(slot.generation) << SLOT_BITS | (index as u64 + 1))
    }

    /// Drops the message open longest. A scan of the slots, only when the limit is reached.
    fn evict_oldest(&mut self) {
        let oldest = (0..self.slots.len())
            .filter(|&i| self.slots[i].message.is_some())
            .min_by_key(|&i| self.slots[i].opened);
        if let Some(index) = oldest {
            log::warn!("message assembler: {} messages open; the oldest is dropped", self.open);
            self.release(index);
            self.evicted += 1;
        }
    }

    fn find(&self, id: u64) -> Result<usize, MessageError> {
        if id == 0 {
            return Err(MessageError::NoBegin);
        }
        let unknown = MessageError::UnknownId { id };
        let index = usize::try_from(id & SLOT_MASK).ok().and_then(|s| s.checked_sub(1)).ok_or(unknown)?;
        let slot = self.slots.get(index).ok_or(unknown)?;
        if u64::from(slot.generation) != id >> SLOT_BITS || slot.message.is_none() {
            return Err(unknown);
        }
        Ok(index)
    }

    /// Closes slot `index`: takes its message, bumps its generation, frees it.
    fn release(&mut self, index: usize) -> Option<Vec<u64>> {
        let slot = &mut self.slots[index];
        let message = slot.message.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push_back(index);
        self.open -= 1;
        Some(message)
    }
}

/// A lane service over messages: assembles chunks, runs `handler` on each complete message and
/// answers with its reply. Wrap it in a [`SharedMessageService`] to register it where a
/// [`LaneService`] (`&self`, `Sync`) is needed.
pub struct MessageService<F> {
    assembler: Assembler,
    handler: F,
    errors: u64,
    last_error: Option<MessageError>,
}

impl<F> fmt::Debug for MessageService<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageService")
            .field("assembler", &self.assembler)
            .field("errors", &self.errors)
            .field("last_error", &self.last_error)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(&[u64]) -> [u64; 2]> MessageService<F> {
    /// A service with default [`MessageLimits`].
    pub fn new(handler: F) -> Self {
        Self::with_limits(MessageLimits::default(), handler)
    }

    /// A service with explicit limits.
    pub fn with_limits(limits: MessageLimits, handler: F) -> Self {
        Self { assembler: Assembler::new(limits), handler, errors: 0, last_error: None }
    }

    /// One lane's request: the reply, or the error the lane is answered with.
    pub fn try_serve_lane(&mut self, request: &[u64; 8]) -> Result<[u64; 2], MessageError> {
        match self.assembler.on_chunk(request) {
            ChunkOutcome::Reply(reply) => Ok(reply),
            ChunkOutcome::Complete { message, .. } => Ok((self.handler)(&message)),
            ChunkOutcome::Error(error) => {
                self.errors += 1;
                self.last_error = Some(error);
                Err(error)
            }
        }
    }

    /// One lane's request, in the shape of [`LaneService::serve`].
    pub fn serve(&mut self, request: &[u64; 8]) -> Result<[u64; 2], ErrorCode> {
        self.try_serve_lane(request).map_err(|e| e.code())
    }

    /// One lane's request; errors become `code.reply()`.
    pub fn serve_lane(&mut self, request: &[u64; 8]) -> [u64; 2] {
        self.serve(request).unwrap_or_else(ErrorCode::reply)
    }

    /// The assembler (open messages, limits).
    pub fn assembler(&self) -> &Assembler {
        &self.assembler
    }

    /// The assembler, to drop messages (e.g. when a device is reset).
    pub fn assembler_mut(&mut self) -> &mut Assembler {
        &mut self.assembler
    }

    /// Chunks refused so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// The last chunk refused, if any.
    pub fn last_error(&self) -> Option<MessageError> {
        self.last_error
    }
}

/// A [`MessageService`] behind a mutex: a [`LaneService`] for the core's service table or the
/// listener. A panic in the handler poisons nothing: the next call takes the lock anyway (the
/// assembler's state stays consistent, as the handler runs after the message left it).
pub struct SharedMessageService<F>(Mutex<MessageService<F>>);

impl<F> fmt::Debug for SharedMessageService<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedMessageService(..)")
    }
}

impl<F: FnMut(&[u64]) -> [u64; 2]> SharedMessageService<F> {
    /// Shares `service`.
    pub fn new(service: MessageService<F>) -> Self {
        Self(Mutex::new(service))
    }

    /// Runs `f` on the service under the lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut MessageService<F>) -> R) -> R {
        let mut guard = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

impl<F: FnMut(&[u64]) -> [u64; 2] + Send> LaneService for SharedMessageService<F> {
    fn serve(&self, request: &[u64; 8]) -> Result<[u64; 2], ErrorCode> {
        self.with(|service| service.serve(request))
    }
}

#[cfg(test)]
mod tests;
