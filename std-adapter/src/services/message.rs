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
//! # Budgets
//!
//! A device cannot make the assembler hold memory without bound, nor push out a message another
//! lane has open, nor take the budget of another buffer's devices. The bounds are on bytes, each
//! answered with [`ErrorCode::Refused`] and nothing else disturbed:
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | bytes held by the open messages of one buffer's lanes ([`MessageLimits::max_held_bytes_per_buffer`]): their words' capacity plus [`OPEN_MESSAGE_OVERHEAD`] each | 64 MiB | a BEGIN is refused; a message that would grow past it is dropped ([`MessageError::BufferHeldBytes`]) |
//! | bytes held by all open messages ([`MessageLimits::max_held_bytes`]) | 256 MiB | as above ([`MessageError::HeldBytes`]) |
//! | one message ([`MessageLimits::max_message_bytes`]) | 64 KiB | that message is dropped ([`MessageError::Oversize`]) |
//! | open messages ([`MessageLimits::max_open`]) | 2^24 - 1, what ids can name (the bytes bind first: a message costs at least [`OPEN_MESSAGE_OVERHEAD`], 64 bytes) | the BEGIN is refused ([`MessageError::TooManyOpen`]) |
//!
//! Why the bound is bytes and not a count of lanes or packets: a lane has at most one message
//! open (it waits for each chunk's reply), but between two chunks its wave holds no packet, and
//! ROCm's device code lets any number of waves share a few packets (the phase protocol's claim
//! loop, the stack protocol's free-stack). So the lanes that can be mid-message are every lane
//! of every wave the queue runs, not 64 per packet: 130 waves printing on 2 packets have 8,320
//! messages open. A message of a typical printf (a format and a few arguments, under 1 KiB)
//! costs at most 1 KiB plus the overhead, so the per-buffer default holds over 60,000 of them,
//! more lanes than a large GPU runs at once. A device past it is one that begins messages and
//! never ends them (or prints far larger ones); only that buffer's further BEGINs are refused,
//! and they work again as soon as its messages end or are dropped. Every refusal is counted
//! ([`Assembler::refused_begins`], and the registry's error count of PRINTF) and logged,
//! rate-limited. A message whose device went away mid-way (a killed kernel) stays open until
//! [`Assembler::forget_buffer`] or [`Assembler::clear`]. BEGIN | END needs no slot at all.
//!
//! # Isolation
//!
//! Each open message belongs to the lane that began it: its buffer (the base address the
//! poller registered, [`PacketRequest::buffer`](hostcall_core::PacketRequest::buffer)) and its
//! lane number, a [`Sender`]. A chunk from any other sender that names the id is refused
//! ([`MessageError::ForeignId`], answered like an unknown id, counted in
//! [`Assembler::foreign_chunks`] and logged) and the message is untouched: no device can
//! continue, end, drop or read another's message. Ids are `tag << 24 | slot`: the slot
//! (1..=[`MAX_OPEN_LIMIT`]) is recycled, the 32-bit tag is drawn at random on every BEGIN
//! (`ids.rs`), so ids are not guessable either, and a chunk that names a dropped message is
//! refused as an unknown id instead of landing in the next message that got its slot. Id 0 is
//! never allocated: a chunk without BEGIN that carries id 0 is a device that never sent (or
//! never read the reply to) its BEGIN.
//!
//! Every malformed chunk is answered with an error reply ([`MessageError::code`]) and the message
//! it names, if open, is dropped and its id freed, so later messages still work.
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

mod assembler;
mod ids;

pub use assembler::{Assembler, MAX_OPEN_LIMIT, OPEN_MESSAGE_OVERHEAD};

use crate::dispatch::registry::{serve_lanes_guarded, PacketService};
use crate::observe::Reason;
use hostcall_core::message::DescriptorError;
use hostcall_core::{ErrorCode, LaneService, PacketRequest};
use std::fmt;
use std::sync::Mutex;

/// Default bound on one message: 64 KiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 10;
/// Default bound on the bytes all open messages hold together: 256 MiB (four buffers at their
/// own bound).
pub const DEFAULT_MAX_HELD_BYTES: usize = 256 << 20;
/// Default bound on the bytes the open messages of one buffer's lanes hold: 64 MiB (over 60,000
/// open messages of 1 KiB: more lanes than a large GPU runs at once).
pub const DEFAULT_MAX_HELD_BYTES_PER_BUFFER: usize = 64 << 20;

/// Who sent a chunk: the buffer that carried it and the lane. An open message belongs to the
/// sender that began it (see the [module docs](self#isolation)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sender {
    /// The buffer's base address, as [`PacketRequest::buffer`] names it (0 for a standalone
    /// assembler's one sender).
    pub buffer: usize,
    /// The lane within its wave (0..64).
    pub lane: usize,
}

/// Bounds on what devices may make the assembler hold. See the [module docs](self#budgets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageLimits {
    /// The largest message, in bytes (rounded down to whole words).
    pub max_message_bytes: usize,
    /// The most bytes all open messages hold together, bookkeeping included
    /// ([`OPEN_MESSAGE_OVERHEAD`] per message).
    pub max_held_bytes: usize,
    /// The most bytes the open messages of one buffer's lanes hold together, as for
    /// `max_held_bytes`.
    pub max_held_bytes_per_buffer: usize,
    /// The most messages open at once (at most [`MAX_OPEN_LIMIT`], the default; larger values
    /// are clamped). The byte budgets bind long before the default.
    pub max_open: usize,
}

setters!(MessageLimits {
    with_max_message_bytes: max_message_bytes: usize,
    with_max_held_bytes: max_held_bytes: usize,
    with_max_held_bytes_per_buffer: max_held_bytes_per_buffer: usize,
    with_max_open: max_open: usize,
});

impl Default for MessageLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            max_held_bytes_per_buffer: DEFAULT_MAX_HELD_BYTES_PER_BUFFER,
            max_open: MAX_OPEN_LIMIT,
        }
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
    /// A chunk naming a message another sender (another lane, or a lane of another buffer) has
    /// open; refused like an unknown id, and that message untouched.
    ForeignId {
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
    /// A BEGIN found [`MessageLimits::max_open`] messages open; it was refused and no open
    /// message was touched.
    TooManyOpen {
        /// The bound in force.
        bound: usize,
    },
    /// The open messages would hold more than [`MessageLimits::max_held_bytes`]: a BEGIN is
    /// refused (`id` 0), a growing message is dropped (its id).
    HeldBytes {
        /// The id of the dropped message (0 for a refused BEGIN).
        id: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// The open messages of the sender's buffer would hold more than
    /// [`MessageLimits::max_held_bytes_per_buffer`]: as for [`MessageError::HeldBytes`].
    BufferHeldBytes {
        /// The id of the dropped message (0 for a refused BEGIN).
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
            Self::Descriptor(_) | Self::NoBegin | Self::UnknownId { .. } | Self::ForeignId { .. } => {
                ErrorCode::BadRequest
            }
            Self::Oversize { .. }
            | Self::TooManyOpen { .. }
            | Self::HeldBytes { .. }
            | Self::BufferHeldBytes { .. } => ErrorCode::Refused,
        }
    }
}

impl MessageError {
    /// What it is counted as ([`crate::observe`]): a malformed stream is a bad request, each
    /// limit its budget.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Descriptor(_) | Self::NoBegin | Self::UnknownId { .. } => Reason::BadRequest,
            Self::Oversize { .. } => Reason::MessageSize,
            Self::TooManyOpen { .. } => Reason::OpenMessages,
            Self::HeldBytes { .. } | Self::BufferHeldBytes { .. } => Reason::HeldBytes,
            Self::ForeignId { .. } => Reason::ForeignMessage,
        }
    }
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Descriptor(e) => e.fmt(f),
            Self::NoBegin => f.write_str("message chunk without a BEGIN"),
            Self::UnknownId { id } => write!(f, "no open message has id {id:#x}"),
            Self::ForeignId { id } => write!(f, "message {id:#x} belongs to another lane"),
            Self::Oversize { id, limit } => write!(f, "message {id:#x} is larger than {limit} bytes"),
            Self::TooManyOpen { bound } => {
                write!(f, "{bound} messages are open, the most allowed; BEGIN refused")
            }
            Self::HeldBytes { id: 0, limit } => {
                write!(f, "open messages hold {limit} bytes, their budget; BEGIN refused")
            }
            Self::HeldBytes { id, limit } => {
                write!(f, "message {id:#x} dropped: open messages would hold more than {limit} bytes")
            }
            Self::BufferHeldBytes { id: 0, limit } => {
                write!(f, "this buffer's open messages hold {limit} bytes, its budget; BEGIN refused")
            }
            Self::BufferHeldBytes { id, limit } => {
                write!(
                    f,
                    "message {id:#x} dropped: this buffer's open messages would hold more than {limit} bytes"
                )
            }
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

    /// One lane's request, as the standalone sender ([`Sender::default`]): the reply, or the
    /// error the lane is answered with.
    pub fn try_serve_lane(&mut self, request: &[u64; 8]) -> Result<[u64; 2], MessageError> {
        self.try_serve_from(Sender::default(), request)
    }

    /// One lane's request from `sender`: the reply, or the error the lane is answered with.
    pub fn try_serve_from(&mut self, sender: Sender, request: &[u64; 8]) -> Result<[u64; 2], MessageError> {
        match self.assembler.on_chunk_from(sender, request) {
            ChunkOutcome::Reply(reply) => Ok(reply),
            ChunkOutcome::Complete { message, .. } => Ok((self.handler)(&message)),
            ChunkOutcome::Error(error) => {
                crate::observe::count(error.reason());
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

/// A [`MessageService`] behind a mutex: a [`PacketService`] for the registry (each lane's chunks
/// bound to its buffer and lane, the lock taken once a packet), or a [`LaneService`] for the
/// core's service table (one sender for every lane: a table serves one device). A panic in the handler poisons nothing: the next call takes the lock anyway (the
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

impl<F: FnMut(&[u64]) -> [u64; 2] + Send> PacketService for SharedMessageService<F> {
    /// Drops the open messages of the buffer's lanes ([`Assembler::forget_buffer`]).
    fn forget_buffer(&self, buffer: usize) {
        self.with(|service| service.assembler_mut().forget_buffer(buffer));
    }

    fn serve(&self, packet: &mut PacketRequest<'_>) {
        let buffer = packet.buffer();
        self.with(|service| {
            serve_lanes_guarded("message service", packet, |lane, request| {
                service.try_serve_from(Sender { buffer, lane }, request).map_err(|e| e.code())
            })
        });
    }
}

impl<F: FnMut(&[u64]) -> [u64; 2] + Send> LaneService for SharedMessageService<F> {
    fn serve(&self, request: &[u64; 8]) -> Result<[u64; 2], ErrorCode> {
        self.with(|service| service.serve(request))
    }
}

#[cfg(test)]
mod tests;
