//! The checks of memory against the model after each operation, and the end of a run: every
//! packet claimable again, none lost.

use super::Run;
use crate::memory::{FREE_STACK_WORD, PAYLOAD_WORDS, READY_STACK_WORD};
use crate::services::MIX;
use hostcall_core::lanes;
impl Run<'_> {
    /// The free chain and the ready chain in memory are the model's.
    pub(super) fn check_chains(&self) {
        let model = &self.model;
        if model.broken {
            return;
        }
        for (top_word, list) in [(FREE_STACK_WORD, &model.free), (READY_STACK_WORD, &model.ready)] {
            let top = list.last().map_or(0, |&i| model.raw[i]);
            assert_eq!(self.buffer.load(top_word), top, "stack top at word {top_word}");
            let mut below = 0;
            for &index in list {
                assert_eq!(self.buffer.load(self.buffer.header_word(index)), below, "packet {index}'s next");
                below = model.raw[index];
            }
        }
    }

    /// Every payload word is the model's.
    pub(super) fn check_payloads(&self) {
        let words = self.buffer.snapshot();
        for index in 0..self.n() {
            let start = self.buffer.payload_word(index);
            if words[start..start + PAYLOAD_WORDS] == *self.model.payload[index].as_flattened() {
                continue; // one memcmp: the search below only runs on failure
            }
            let actual = self.buffer.payload_of(&words, index);
            for lane in lanes(u64::MAX) {
                assert_eq!(actual[lane], self.model.payload[index][lane], "packet {index} lane {lane}");
            }
        }
    }

    /// Ends the run: answers and returns everything, then every packet must be claimable once.
    pub(super) fn finish(mut self) {
        if self.model.broken {
            // Whatever the scribbles did, the cleanup ends; then a fresh start is checked.
            self.drain(false);
            for _ in 0..self.submitted.len() {
                self.try_complete(0);
            }
            self.reinit();
            self.claim();
            self.write_lane(0, 0, 0x5eed);
            self.submit(0, MIX, 1);
            self.wait(0);
            self.release(0);
        }
        assert!(!self.model.broken);
        self.drain(false);
        // Everything submitted is served now: each completes (or the model's asserts fail).
        while !self.submitted.is_empty() {
            self.try_complete(0);
            self.release(0);
        }
        while !self.completed.is_empty() {
            self.release(0);
        }
        while !self.claimed.is_empty() {
            self.drop_claimed(0);
        }
        self.check_chains();
        let n = self.n();
        for _ in 0..n {
            self.claim();
        }
        let mut indices: Vec<usize> = self.claimed.iter().map(|h| h.index).collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..n).collect::<Vec<_>>(), "every packet is claimable: none was lost");
        self.claim(); // and no more: the model asserts it gets none
        assert_eq!(self.claimed.len(), n);
    }
}
