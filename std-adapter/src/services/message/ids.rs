//! The tags that make message ids unguessable: 32 bits drawn for every BEGIN from a keyed hash
//! (SipHash with the process's random keys, [`RandomState`]) of a counter, so neither an id seen
//! nor the order of BEGINs tells a device the tag of any other message.
//!
//! A tag is a second lock, not the first: a chunk continues a message only if its lane began it
//! (the assembler checks the [`Sender`](super::Sender)). The tag keeps a lane's stale id (a
//! message that was dropped, its slot reused by the same lane) from reaching the new message but
//! with a chance of 2^-32, and keeps ids from telling a device how many messages other devices
//! send.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// Draws 32-bit tags. See the [module docs](self).
pub(super) struct IdTags {
    keys: RandomState,
    counter: u64,
}

impl IdTags {
    /// A drawer with fresh random keys.
    pub(super) fn new() -> Self {
        Self { keys: RandomState::new(), counter: 0 }
    }

    /// The next tag.
    pub(super) fn next(&mut self) -> u32 {
        self.counter = self.counter.wrapping_add(1);
        let hash = self.keys.hash_one(self.counter);
        (hash ^ hash >> 32) as u32
    }
}

/// The keys stay private: a `Debug` print shows how many tags were drawn, nothing else.
impl std::fmt::Debug for IdTags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdTags").field("drawn", &self.counter).finish_non_exhaustive()
    }
}
