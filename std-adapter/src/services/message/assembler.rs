//! The [`Assembler`]: open messages by id, each bound to the lane that began it, within their
//! budgets (see the [parent module](super#budgets)).

use super::ids::IdTags;
use super::{ChunkOutcome, MessageError, MessageLimits, Sender};
use crate::rate_limit::warn_limited;
use crate::services::held::{charge_both, fits_both, release_both, HeldAccount, OverBudget};
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
    /// Bytes all open messages hold (`services/held.rs`, the budgets' one mechanism).
    held: HeldAccount,
    /// Bytes held per buffer (only buffers holding some are present).
    held_by_buffer: HashMap<usize, HeldAccount>,
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
            held: HeldAccount::default(),
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
        self.held.held()
    }

    /// Bytes the open messages of `buffer`'s lanes hold, as charged to
    /// [`MessageLimits::max_held_bytes_per_buffer`].
    pub fn held_bytes_of(&self, buffer: usize) -> usize {
        self.held_by_buffer.get(&buffer).map_or(0, HeldAccount::held)
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
        if let Err(error) = self.admit(sender.buffer, first_bytes) {
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
        self.open += 1;
        if let Err(error) = self.charge(index, OPEN_MESSAGE_OVERHEAD, 0) {
            self.release(index); // not reached: `admit` found room for more, and nothing else charges
            return Err(error);
        }
        Ok((index, u64::from(tag) << SLOT_BITS | (index as u64 + 1)))
    }

    /// Whether a BEGIN of `buffer` whose first chunk needs `bytes` may open: the open count, the
    /// registry's bytes and the buffer's own (a check; the bytes are charged as they are used).
    fn admit(&self, buffer: usize, bytes: usize) -> Result<(), MessageError> {
        if self.open >= self.limits.max_open {
            return Err(MessageError::TooManyOpen { bound: self.limits.max_open });
        }
        let none = HeldAccount::default();
        let account = self.held_by_buffer.get(&buffer).unwrap_or(&none);
        let (all, per_buffer) = self.budgets();
        fits_both((&self.held, all), (account, per_buffer), bytes).map_err(|over| self.over(over, 0))
    }

    /// The limits of all buffers' and of one buffer's held bytes.
    fn budgets(&self) -> (usize, usize) {
        (self.limits.max_held_bytes, self.limits.max_held_bytes_per_buffer)
    }

    /// The error of a budget `over` for message `id` (0: a BEGIN).
    fn over(&self, over: OverBudget, id: u64) -> MessageError {
        match over {
            OverBudget::All => MessageError::HeldBytes { id, limit: self.limits.max_held_bytes },
            OverBudget::Buffer => {
                MessageError::BufferHeldBytes { id, limit: self.limits.max_held_bytes_per_buffer }
            }
        }
    }

    /// Charges `bytes` to the message in slot `index` (id `id`, 0 while it begins), to its buffer
    /// and to the registry, if all have room.
    fn charge(&mut self, index: usize, bytes: usize, id: u64) -> Result<(), MessageError> {
        let (all, per_buffer) = self.budgets();
        let slot = &mut self.slots[index];
        let account = self.held_by_buffer.entry(slot.sender.buffer).or_default();
        match charge_both((&self.held, all), (account, per_buffer), bytes) {
            Ok(()) => {
                slot.charged += bytes;
                Ok(())
            }
            Err(over) => {
                if account.held() == 0 {
                    self.held_by_buffer.remove(&self.slots[index].sender.buffer);
                }
                Err(self.over(over, id))
            }
        }
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
            if let Err(error) = self.charge(index, 8 * grow, id) {
                self.release(index);
                warn_limited!("message assembler: buffer {:#x} lane {}: {error}", sender.buffer, sender.lane);
                return Err(error);
            }
        }
        let message = self.slots[index].message.as_mut().expect("checked open above");
        // Exactly `grow` words more (`reserve_exact` of a `Vec`: what was charged).
        message.reserve_exact(capacity + grow - len);
        message.extend_from_slice(data);
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
        if let Some(account) = self.held_by_buffer.get(&slot.sender.buffer) {
            release_both(&self.held, account, charged);
            if account.held() == 0 {
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
