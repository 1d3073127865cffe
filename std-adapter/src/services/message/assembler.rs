//! The [`Assembler`]: open messages by id, each bound to the lane that began it, within their
//! budgets (see the [parent module](super#budgets)).

use super::ids::IdTags;
use super::{ChunkOutcome, MessageError, MessageLimits, Sender};
use crate::rate_limit::warn_limited;
use hostcall_core::message::{Descriptor, DATA_WORDS};
use std::collections::{HashMap, VecDeque};

/// Bits of an id that name the slot; the rest (32 bits) is the slot's tag, drawn at random.
const SLOT_BITS: u32 = 24;
pub(super) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// The most open messages the id layout can name.
pub const MAX_OPEN_LIMIT: usize = SLOT_MASK as usize;

/// Bytes charged to [`MessageLimits::max_held_bytes`] for each open message besides its words:
/// its slot and its free-list entry.
pub const OPEN_MESSAGE_OVERHEAD: usize = std::mem::size_of::<Slot>() + std::mem::size_of::<usize>();

/// The smallest buffer a growing message gets, in words.
const MIN_MESSAGE_WORDS: usize = 8;

#[derive(Debug, Default)]
struct Slot {
    /// The upper 32 bits of the id of the message open in this slot (drawn anew on every BEGIN).
    tag: u32,
    /// The lane that began the message: only it may continue or end it.
    sender: Sender,
    message: Option<Vec<u64>>,
    /// Bytes charged to the held-bytes budgets for this message (overhead and capacity).
    charged: usize,
}

/// The open messages of every lane, keyed by id. See the [module docs](super).
#[derive(Debug)]
pub struct Assembler {
    limits: MessageLimits,
    max_words: usize,
    slots: Vec<Slot>,
    /// Free slot indices, reused oldest first.
    free: VecDeque<usize>,
    open: usize,
    held_bytes: usize,
    /// Bytes held per buffer (only buffers holding some are present).
    held_by_buffer: HashMap<usize, usize>,
    tags: IdTags,
    refused_begins: u64,
    foreign_chunks: u64,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new(MessageLimits::default())
    }
}

impl Assembler {
    /// An assembler with no open message, bounded by `limits`.
    pub fn new(limits: MessageLimits) -> Self {
        let limits = MessageLimits { max_open: limits.max_open.min(MAX_OPEN_LIMIT), ..limits };
        Self {
            limits,
            max_words: limits.max_message_bytes / 8,
            slots: Vec::new(),
            free: VecDeque::new(),
            open: 0,
            held_bytes: 0,
            held_by_buffer: HashMap::new(),
            tags: IdTags::new(),
            refused_begins: 0,
            foreign_chunks: 0,
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

    /// Bytes the open messages hold, as charged to [`MessageLimits::max_held_bytes`].
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Bytes the open messages of `buffer`'s lanes hold, as charged to
    /// [`MessageLimits::max_held_bytes_per_buffer`].
    pub fn held_bytes_of(&self, buffer: usize) -> usize {
        self.held_by_buffer.get(&buffer).copied().unwrap_or(0)
    }

    /// BEGINs refused so far for a budget ([`MessageError::TooManyOpen`],
    /// [`MessageError::HeldBytes`] or [`MessageError::BufferHeldBytes`]).
    pub fn refused_begins(&self) -> u64 {
        self.refused_begins
    }

    /// Chunks refused so far because they named a message another lane (of this buffer or
    /// another) has open ([`MessageError::ForeignId`]).
    pub fn foreign_chunks(&self) -> u64 {
        self.foreign_chunks
    }

    /// Takes one lane's request (slot 0 the descriptor, slots `1..=LEN` the data), as the one
    /// sender of a standalone assembler ([`Sender::default`]).
    pub fn on_chunk(&mut self, request: &[u64; 8]) -> ChunkOutcome {
        self.on_chunk_from(Sender::default(), request)
    }

    /// Takes one lane's request from `sender`: a message continues or ends only for the lane
    /// that began it.
    ///
    /// ```
    /// use hostcall::services::message::{Assembler, ChunkOutcome, MessageError, Sender};
    /// use hostcall_core::message::Descriptor;
    ///
    /// let mut assembler = Assembler::default();
    /// let (a, b) = (Sender { buffer: 0x1000, lane: 3 }, Sender { buffer: 0x2000, lane: 3 });
    /// let begin = [Descriptor::new(true, false, 1, 0).unwrap().encode(), 7, 0, 0, 0, 0, 0, 0];
    /// let ChunkOutcome::Reply([word, 0]) = assembler.on_chunk_from(a, &begin) else { panic!() };
    /// let id = Descriptor::raw_id(word);
    /// // Another buffer's lane names the id: refused, and a's message is untouched.
    /// let end = [Descriptor::new(false, true, 1, id).unwrap().encode(), 8, 0, 0, 0, 0, 0, 0];
    /// assert_eq!(assembler.on_chunk_from(b, &end), ChunkOutcome::Error(MessageError::ForeignId { id }));
    /// assert_eq!(assembler.on_chunk_from(a, &end), ChunkOutcome::Complete { id, message: vec![7, 8] });
    /// ```
    pub fn on_chunk_from(&mut self, sender: Sender, request: &[u64; 8]) -> ChunkOutcome {
        match self.chunk(sender, request) {
            Ok(outcome) => outcome,
            Err(error) => ChunkOutcome::Error(error),
        }
    }

    fn chunk(&mut self, sender: Sender, request: &[u64; 8]) -> Result<ChunkOutcome, MessageError> {
        let word = request[0];
        let descriptor = Descriptor::decode(word).map_err(|e| {
            if !Descriptor::raw_begin(word) {
                self.abandon_from(sender, Descriptor::raw_id(word));
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
            self.begin(sender, data.len())?
        } else {
            let id = descriptor.id();
            (self.find(sender, id)?, id)
        };
        self.append(index, id, data)?;
        if descriptor.end() {
            let message = self.release(index).unwrap_or_default();
            return Ok(ChunkOutcome::Complete { id, message });
        }
        // `id` is at most 56 bits by construction (`begin`) or came from a decoded descriptor.
        let reply = descriptor.reply_for(id).map_err(MessageError::Descriptor)?;
        Ok(ChunkOutcome::Reply([reply.encode(), 0]))
    }

    /// Drops the open message `id` of the standalone sender ([`Sender::default`]), if any;
    /// returns whether there was one.
    pub fn abandon(&mut self, id: u64) -> bool {
        self.abandon_from(Sender::default(), id)
    }

    /// Drops the open message `id` if `sender` began it; returns whether it did.
    pub fn abandon_from(&mut self, sender: Sender, id: u64) -> bool {
        match self.find(sender, id) {
            Ok(index) => {
                self.release(index);
                true
            }
            Err(_) => false,
        }
    }

    /// Drops every open message of `buffer`'s lanes (its device was reset or went away);
    /// returns how many.
    pub fn forget_buffer(&mut self, buffer: usize) -> usize {
        let mut dropped = 0;
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.message.is_some() && slot.sender.buffer == buffer {
                self.release(index);
                dropped += 1;
            }
        }
        dropped
    }

    /// Drops every open message.
    pub fn clear(&mut self) {
        for index in 0..self.slots.len() {
            if self.slots[index].message.is_some() {
                self.release(index);
            }
        }
    }

    /// Opens a message for `sender` whose first chunk has `first_words` words, if the budgets
    /// allow it.
    fn begin(&mut self, sender: Sender, first_words: usize) -> Result<(usize, u64), MessageError> {
        let first_bytes = OPEN_MESSAGE_OVERHEAD + 8 * self.growth(0, first_words);
        if let Err(error) = self.admit(sender.buffer, first_bytes, 0) {
            self.refused_begins += 1;
            warn_limited!("message assembler: buffer {:#x} lane {}: {error}", sender.buffer, sender.lane);
            return Err(error);
        }
        let index = match self.free.pop_front() {
            Some(index) => index,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        let tag = self.tags.next();
        let slot = &mut self.slots[index];
        *slot = Slot { tag, sender, message: Some(Vec::new()), charged: 0 };
        self.charge(index, OPEN_MESSAGE_OVERHEAD);
        self.open += 1;
        Ok((index, u64::from(tag) << SLOT_BITS | (index as u64 + 1)))
    }

    /// Whether `buffer` may hold `bytes` more (for message `id`, 0 for a BEGIN): the open count
    /// (BEGINs only), the registry's bytes and the buffer's own.
    fn admit(&self, buffer: usize, bytes: usize, id: u64) -> Result<(), MessageError> {
        let limits = &self.limits;
        if id == 0 && self.open >= limits.max_open {
            Err(MessageError::TooManyOpen { bound: limits.max_open })
        } else if self.held_bytes + bytes > limits.max_held_bytes {
            Err(MessageError::HeldBytes { id, limit: limits.max_held_bytes })
        } else if self.held_bytes_of(buffer) + bytes > limits.max_held_bytes_per_buffer {
            Err(MessageError::BufferHeldBytes { id, limit: limits.max_held_bytes_per_buffer })
        } else {
            Ok(())
        }
    }

    /// Charges `bytes` to the message in slot `index` and to its buffer.
    fn charge(&mut self, index: usize, bytes: usize) {
        let slot = &mut self.slots[index];
        slot.charged += bytes;
        self.held_bytes += bytes;
        *self.held_by_buffer.entry(slot.sender.buffer).or_default() += bytes;
    }

    /// Appends `data` to the open message in slot `index` (id `id`), growing it within the
    /// budgets; a message that would break one is dropped.
    fn append(&mut self, index: usize, id: u64, data: &[u64]) -> Result<(), MessageError> {
        let (len, capacity) = match &self.slots[index].message {
            Some(message) => (message.len(), message.capacity()),
            None => return Err(MessageError::UnknownId { id }),
        };
        if len + data.len() > self.max_words {
            self.release(index);
            return Err(MessageError::Oversize { id, limit: self.limits.max_message_bytes });
        }
        let grow = self.growth(capacity, len + data.len());
        if grow > 0 {
            let sender = self.slots[index].sender;
            if let Err(error) = self.admit(sender.buffer, 8 * grow, id) {
                self.release(index);
                warn_limited!("message assembler: buffer {:#x} lane {}: {error}", sender.buffer, sender.lane);
                return Err(error);
            }
        }
        let message = self.slots[index].message.as_mut().expect("checked open above");
        message.reserve_exact(capacity + grow - len);
        let charged = 8 * (message.capacity() - capacity);
        message.extend_from_slice(data);
        self.charge(index, charged);
        Ok(())
    }

    /// Words to add to a message buffer of `capacity` words so that it holds `needed`: doubling,
    /// at least [`MIN_MESSAGE_WORDS`], never past the message limit.
    fn growth(&self, capacity: usize, needed: usize) -> usize {
        if needed <= capacity {
            return 0;
        }
        let target = (capacity * 2).max(needed).max(MIN_MESSAGE_WORDS).min(self.max_words.max(needed));
        target - capacity
    }

    /// The slot of the open message `id`, if `sender` began it. An id open for another lane is
    /// refused ([`MessageError::ForeignId`], counted and logged) and its message left alone.
    fn find(&mut self, sender: Sender, id: u64) -> Result<usize, MessageError> {
        if id == 0 {
            return Err(MessageError::NoBegin);
        }
        let unknown = MessageError::UnknownId { id };
        let index = usize::try_from(id & SLOT_MASK).ok().and_then(|s| s.checked_sub(1)).ok_or(unknown)?;
        let slot = self.slots.get(index).ok_or(unknown)?;
        if u64::from(slot.tag) != id >> SLOT_BITS || slot.message.is_none() {
            return Err(unknown);
        }
        if slot.sender != sender {
            self.foreign_chunks += 1;
            let owner = slot.sender;
            warn_limited!(
                "message assembler: buffer {:#x} lane {} named message {id:#x} of buffer {:#x} lane {} \
                 (refused; that message is untouched)",
                sender.buffer,
                sender.lane,
                owner.buffer,
                owner.lane
            );
            return Err(MessageError::ForeignId { id });
        }
        Ok(index)
    }

    /// Closes slot `index`: takes its message, returns its bytes to the budgets, frees it (its
    /// next message gets a new tag).
    fn release(&mut self, index: usize) -> Option<Vec<u64>> {
        let slot = &mut self.slots[index];
        let message = slot.message.take()?;
        let charged = std::mem::take(&mut slot.charged);
        self.held_bytes -= charged;
        if let Some(held) = self.held_by_buffer.get_mut(&slot.sender.buffer) {
            *held -= charged;
            if *held == 0 {
                self.held_by_buffer.remove(&slot.sender.buffer);
            }
        }
        self.free.push_back(index);
        self.open -= 1;
        Some(message)
    }

    /// Slots ever used (open or free): the assembler's high-water mark.
    #[cfg(test)]
    pub(super) fn slot_count(&self) -> usize {
        self.slots.len()
    }
}
