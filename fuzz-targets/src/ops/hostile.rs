//! The operations outside the protocol: the hostile device's scribbles (and which of them break
//! the model), re-initialisation, and moving the tags next to the wrap.

use super::{tag_step, Model, Run, State, DOORBELL};
use crate::memory::{FREE_STACK_WORD, HEADER_WORDS, PAYLOAD_WORDS, READY_STACK_WORD};
use hostcall_core::SLOT_WORDS;
impl Run<'_> {
    /// A hostile device writes `value` (shaped by `kind`) into one word of the buffer.
    ///
    /// Which writes break the protocol (so the model stops checking): the stack tops; a `next`
    /// word of a packet on a stack (free or submitted); the activemask, service or control word
    /// of a packet between submit and completion. Others must change nothing the host does: the
    /// prefix's `headers`, `payloads`, `doorbell` and `index_mask` (the host keeps its own
    /// copies), the header words of packets that the next submit overwrites, and any payload word
    /// (the model follows it: a request word is read by the service, a reply word by the wave).
    pub(super) fn scribble(&mut self, region: u8, word: u16, kind: u8, value: u64) {
        let n = self.n();
        let step = tag_step(n);
        let word = usize::from(word);
        let at = match region % 3 {
            0 => word % 6,
            1 => self.buffer.header_word(0) + word % (n * HEADER_WORDS),
            _ => self.buffer.payload_word(0) + word % (n * PAYLOAD_WORDS),
        };
        let old = self.buffer.load(at);
        let value = match kind % 6 {
            0 => value & 0xff,
            1 => (value & 0xff) % (n as u64 + 2) + (value >> 8 & 0xffff) * step, // a tagged pointer
            2 => value,
            3 => (value & 3) << 32 | (value >> 2 & 0xff), // control bits, a small service id
            4 => u64::MAX,
            _ => old ^ 1 << (value % 64), // one bit flipped
        };
        self.buffer.store(at, value);

        let model = &mut self.model;
        let header_start = self.buffer.header_word(0);
        let payload_start = self.buffer.payload_word(0);
        let breaks = if at < header_start {
            at == FREE_STACK_WORD || at == READY_STACK_WORD
        } else if at < payload_start {
            let (index, field) = ((at - header_start) / HEADER_WORDS, (at - header_start) % HEADER_WORDS);
            match (field, model.state[index]) {
                (0, state) => matches!(state, State::Free | State::Submitted),
                (_, state) => matches!(state, State::Submitted | State::Served),
            }
        } else {
            let offset = at - payload_start;
            let (index, slot) = (offset / PAYLOAD_WORDS, offset % PAYLOAD_WORDS);
            model.payload[index][slot / SLOT_WORDS][slot % SLOT_WORDS] = value;
            false
        };
        model.broken |= breaks && value != old;
    }

    /// Drops every handle (a submitted packet is simply forgotten: its wave gave up), then
    /// re-initialises the buffer: the model holds again.
    pub(super) fn reinit(&mut self) {
        self.claimed.clear();
        self.completed.clear();
        self.submitted.clear();
        self.view.init(self.buffer.base() as u64, DOORBELL);
        self.model = Model::after_init(self.buffer);
    }

    /// Moves the tags of the free packets next to the end of the tag space (as a buffer that has
    /// served for a very long time has them) and relinks the free-list with them, so that the
    /// next releases wrap. The producer's own doing, so the model follows it.
    pub(super) fn retag(&mut self, k: u8) {
        let n = self.n();
        let step = tag_step(n);
        let model = &mut self.model;
        if model.broken {
            return;
        }
        let last_tag = u64::MAX / step;
        for (j, &index) in model.free.iter().enumerate() {
            let back = (u64::from(k) + j as u64) % 4;
            model.raw[index] = index as u64 + (last_tag - back) * step;
        }
        let mut below = 0;
        for &index in &model.free {
            self.buffer.store(self.buffer.header_word(index), below);
            below = model.raw[index];
        }
        self.buffer.store(FREE_STACK_WORD, model.free_top());
    }
}
