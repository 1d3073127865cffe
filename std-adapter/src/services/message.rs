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
//! lane has open. Three bounds, each answered with [`ErrorCode::Refused`] and nothing else
//! disturbed:
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | open messages: the lanes the registry's listeners serve ([`LaneCapacity`]), and at most [`MessageLimits::max_open`] | 64 per packet served | the BEGIN is refused ([`MessageError::TooManyOpen`]) |
//! | bytes held by all open messages ([`MessageLimits::max_held_bytes`]): their words' capacity plus [`OPEN_MESSAGE_OVERHEAD`] each | 256 MiB | a BEGIN is refused; a message that would grow past it is dropped ([`MessageError::HeldBytes`]) |
//! | one message ([`MessageLimits::max_message_bytes`]) | 64 KiB | that message is dropped ([`MessageError::Oversize`]) |
//!
//! Why the count needs no fixed cap: a lane has at most one message in flight (it waits for each
//! chunk's reply) and a buffer holds one packet per wave in flight, so the buffers served carry
//! at most 64 open messages per packet. A GPU with thousands of waves mid-printf is within it;
//! more open messages than that is a device that begins messages and never ends them, and only
//! its own later BEGINs are refused (they work again as soon as messages end or are dropped).
//! A message whose device went away mid-way (a killed kernel) stays open until
//! [`Assembler::clear`]. [`Services::enable_printf`](crate::dispatch::registry::Services) attaches the
//! registry's [`LaneCapacity`]; a standalone assembler (or one whose registry serves no packets)
//! is bounded by `max_open` and the bytes alone. BEGIN | END needs no slot at all.
//!
//! Every malformed chunk is answered with an error reply ([`MessageError::code`]) and the message
//! it names, if open, is dropped and its id freed, so later messages still work.
//!
//! Ids are `generation << 24 | slot`: the slot (1..=[`MAX_OPEN_LIMIT`]) is recycled, the
//! generation grows on every reuse, so a chunk that names a dropped message is refused as an
//! unknown id instead of landing in the next message that got its slot. Id 0 is never allocated:
//! a chunk without BEGIN that carries id 0 is a device that never sent (or never read the reply
//! to) its BEGIN.
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

pub use assembler::{Assembler, MAX_OPEN_LIMIT, OPEN_MESSAGE_OVERHEAD};

use crate::dispatch::LaneCapacity;
use crate::observe::Reason;
use hostcall_core::message::DescriptorError;
use hostcall_core::{ErrorCode, LaneService};
use std::fmt;
use std::sync::Mutex;

/// Default bound on one message: 64 KiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 10;
/// Default bound on the bytes all open messages hold together: 256 MiB (every lane of 4,096
/// packets, a full large GPU, holding a 1 KiB message).
pub const DEFAULT_MAX_HELD_BYTES: usize = 256 << 20;

/// Bounds on what devices may make the assembler hold. See the [module docs](self#budgets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageLimits {
    /// The largest message, in bytes (rounded down to whole words).
    pub max_message_bytes: usize,
    /// The most bytes all open messages hold together, bookkeeping included
    /// ([`OPEN_MESSAGE_OVERHEAD`] per message).
    pub max_held_bytes: usize,
    /// The most messages open at once whatever the lanes served (at most [`MAX_OPEN_LIMIT`], the
    /// default; larger values are clamped).
    pub max_open: usize,
}

setters!(MessageLimits {
    with_max_message_bytes: max_message_bytes: usize,
    with_max_held_bytes: max_held_bytes: usize,
    with_max_open: max_open: usize,
});

impl Default for MessageLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
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
    /// The message would grow past the size limit; it was dropped.
    Oversize {
        /// The id of the dropped message (0 if refused at BEGIN).
        id: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// A BEGIN found as many messages open as the bound allows (the lanes served, or
    /// [`MessageLimits::max_open`]); it was refused and no open message was touched.
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
}

impl MessageError {
    /// The error code the lane is answered with: `BadRequest` for a malformed stream, `Refused`
    /// for a limit.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Descriptor(_) | Self::NoBegin | Self::UnknownId { .. } => ErrorCode::BadRequest,
            Self::Oversize { .. } | Self::TooManyOpen { .. } | Self::HeldBytes { .. } => ErrorCode::Refused,
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
            Self::HeldBytes { .. } => Reason::HeldBytes,
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
            Self::TooManyOpen { bound } => {
                write!(f, "{bound} messages are open, as many as the lanes served; BEGIN refused")
            }
            Self::HeldBytes { id: 0, limit } => {
                write!(f, "open messages hold {limit} bytes, their budget; BEGIN refused")
            }
            Self::HeldBytes { id, limit } => {
                write!(f, "message {id:#x} dropped: open messages would hold more than {limit} bytes")
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

    /// Bounds the open messages by the lanes `capacity` counts (see the
    /// [module docs](self#budgets)).
    pub fn with_lane_capacity(mut self, capacity: LaneCapacity) -> Self {
        self.assembler = self.assembler.with_lane_capacity(capacity);
        self
    }

    /// One lane's request: the reply, or the error the lane is answered with.
    pub fn try_serve_lane(&mut self, request: &[u64; 8]) -> Result<[u64; 2], MessageError> {
        match self.assembler.on_chunk(request) {
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
