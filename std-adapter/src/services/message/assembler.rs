//! The [`Assembler`]: open messages by id, within their budgets (see the
//! [parent module](super#budgets)).

use super::{ChunkOutcome, MessageError, MessageLimits};
use crate::dispatch::LaneCapacity;
use crate::rate_limit::warn_limited;
use hostcall_core::message::{Descriptor, DATA_WORDS};
use std::collections::VecDeque;

/// Bits of an id that name the slot; the rest (32 bits) is the slot's generation.
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
    generation: u32,
    message: Option<Vec<u64>>,
    /// Bytes charged to the held-bytes budget for this message (overhead and capacity).
    charged: usize,
}

/// The open messages of every lane, keyed by id. See the [module docs](super).
#[derive(Debug)]
pub struct Assembler {
    limits: MessageLimits,
    max_words: usize,
    /// The lanes served, bounding the open messages (none: `max_open` alone).
    capacity: Option<LaneCapacity>,
    slots: Vec<Slot>,
    /// Free slot indices, reused oldest first.
    free: VecDeque<usize>,
    open: usize,
    held_bytes: usize,
    refused_begins: u64,
}

impl Default for Assembler {
    fn default() -> Self {
        Self::new(MessageLimits::default())
    }
}

impl Assembler {
    /// An assembler with no open message, bounded by `limits` alone.
    pub fn new(limits: MessageLimits) -> Self {
        let limits = MessageLimits { max_open: limits.max_open.min(MAX_OPEN_LIMIT), ..limits };
        Self {
            limits,
            max_words: limits.max_message_bytes / 8,
            capacity: None,
            slots: Vec::new(),
            free: VecDeque::new(),
            open: 0,
            held_bytes: 0,
            refused_begins: 0,
        }
    }

    /// Bounds the open messages by the lanes `capacity` counts, too.
    ///
    /// ```
    /// use hostcall::dispatch::LaneCapacity;
    /// use hostcall::services::message::{Assembler, ChunkOutcome, MessageError};
    /// use hostcall_core::message::Descriptor;
    ///
    /// let capacity = LaneCapacity::new();
    /// let _buffer = capacity.serve(2); // 2 packets: 128 lanes
    /// let mut assembler = Assembler::default().with_lane_capacity(capacity);
    /// let begin = [Descriptor::new(true, false, 0, 0).unwrap().encode(), 0, 0, 0, 0, 0, 0, 0];
    /// for _ in 0..128 {
    ///     assert!(matches!(assembler.on_chunk(&begin), ChunkOutcome::Reply(_)));
    /// }
    /// // A 129th open message: refused, and the 128 stay open.
    /// assert_eq!(assembler.on_chunk(&begin), ChunkOutcome::Error(MessageError::TooManyOpen { bound: 128 }));
    /// assert_eq!(assembler.open_messages(), 128);
    /// ```
    pub fn with_lane_capacity(mut self, capacity: LaneCapacity) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> MessageLimits {
        self.limits
    }

    /// The most messages that may be open now: the lanes served (if a capacity is attached and
    /// counts any), at most [`MessageLimits::max_open`].
    pub fn open_bound(&self) -> usize {
        let lanes = self.capacity.as_ref().map_or(0, LaneCapacity::lanes);
        match usize::try_from(lanes) {
            Ok(0) => self.limits.max_open,
            Ok(lanes) => lanes.min(self.limits.max_open),
            Err(_) => self.limits.max_open,
        }
    }

    /// Messages begun and not yet ended or dropped.
    pub fn open_messages(&self) -> usize {
        self.open
    }

    /// Bytes the open messages hold, as charged to [`MessageLimits::max_held_bytes`].
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// BEGINs refused so far for a budget ([`MessageError::TooManyOpen`] or
    /// [`MessageError::HeldBytes`]).
    pub fn refused_begins(&self) -> u64 {
        self.refused_begins
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
            self.begin(data.len())?
        } else {
            let id = descriptor.id();
            (self.find(id)?, id)
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

    /// Opens a message whose first chunk has `first_words` words, if the budgets allow it.
    fn begin(&mut self, first_words: usize) -> Result<(usize, u64), MessageError> {
        let bound = self.open_bound();
        let first_bytes = OPEN_MESSAGE_OVERHEAD + 8 * self.growth(0, first_words);
        let refusal = if self.open >= bound {
            Some(MessageError::TooManyOpen { bound })
        } else if self.held_bytes + first_bytes > self.limits.max_held_bytes {
            Some(MessageError::HeldBytes { id: 0, limit: self.limits.max_held_bytes })
        } else {
            None
        };
        if let Some(error) = refusal {
            self.refused_begins += 1;
            warn_limited!("message assembler: {error}");
            return Err(error);
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
        slot.charged = OPEN_MESSAGE_OVERHEAD;
        self.held_bytes += OPEN_MESSAGE_OVERHEAD;
        self.open += 1;
        Ok((index, u64::from(slot.generation) << SLOT_BITS | (index as u64 + 1)))
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
        if grow > 0 && self.held_bytes + 8 * grow > self.limits.max_held_bytes {
            self.release(index);
            let error = MessageError::HeldBytes { id, limit: self.limits.max_held_bytes };
            warn_limited!("message assembler: {error}");
            return Err(error);
        }
        let slot = &mut self.slots[index];
        let message = slot.message.as_mut().expect("checked open above");
        message.reserve_exact(capacity + grow - len);
        let charged = 8 * (message.capacity() - capacity);
        message.extend_from_slice(data);
        slot.charged += charged;
        self.held_bytes += charged;
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

    /// Closes slot `index`: takes its message, returns its bytes to the budget, bumps its
    /// generation, frees it.
    fn release(&mut self, index: usize) -> Option<Vec<u64>> {
        let slot = &mut self.slots[index];
        let message = slot.message.take()?;
        self.held_bytes -= std::mem::take(&mut slot.charged);
        slot.generation = slot.generation.wrapping_add(1);
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
