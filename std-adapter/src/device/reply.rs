//! The replies of one emulated call ([`Reply`]): the words of the lanes that made it, written
//! for those lanes only.

use hostcall_core::{lanes, AnyCompleted, CompletedPacket, LANES, REPLY_WORDS};
use std::mem::MaybeUninit;

/// The replies of one hostcall.
#[derive(Clone)]
pub struct Reply {
    /// Each lane's reply words, written for the lanes of `activemask` only: a call fills the lanes
    /// that made it (16 bytes for one lane), not 1 KiB, and `lane` answers zeros for the others
    /// without reading their words.
    lanes: [MaybeUninit<[u64; REPLY_WORDS]>; LANES],
    activemask: u64,
    host_error: bool,
}

impl Reply {
    /// The replies of `done`'s lanes `activemask`, read before the caller drops it (the
    /// release). Inlined into each call, so the 1 KiB reply is built where the caller keeps it
    /// rather than copied there.
    #[inline(always)]
    pub(super) fn of(done: &AnyCompleted<'_>, activemask: u64) -> Self {
        Self::each_lane(activemask, |lane| done.reply(lane), done.host_error())
    }

    /// A reply of zeros for every lane of `activemask`, lanes to be [`set`](Self::set) after.
    pub(super) fn zeros(activemask: u64) -> Self {
        Self::each_lane(activemask, |_| [0; REPLY_WORDS], false)
    }

    /// A reply whose every lane of `activemask` holds `words(lane)`: the one constructor, so no
    /// reply leaves here with an active lane unwritten (what `lane` relies on).
    #[inline(always)]
    fn each_lane(activemask: u64, words: impl Fn(usize) -> [u64; REPLY_WORDS], host_error: bool) -> Self {
        let mut reply = Self { lanes: [MaybeUninit::uninit(); LANES], activemask, host_error };
        for lane in lanes(activemask) {
            reply.lanes[lane].write(words(lane));
        }
        reply
    }

    /// Replaces lane `lane`'s words; a lane outside the activemask is not kept (never read).
    pub(super) fn set(&mut self, lane: usize, words: [u64; REPLY_WORDS]) {
        self.lanes[lane].write(words);
    }

    /// Records that the host answered a lane with an error.
    pub(super) fn or_host_error(&mut self, host_error: bool) {
        self.host_error |= host_error;
    }

    /// Lane `lane`'s reply words (zeros for inactive lanes).
    ///
    /// # Panics
    /// If `lane` is not below 64.
    pub fn lane(&self, lane: usize) -> [u64; REPLY_WORDS] {
        let words = &self.lanes[lane]; // bound-checked first: `lane` < 64 below
        if self.activemask >> lane & 1 == 0 {
            return [0; REPLY_WORDS];
        }
        // SAFETY: `each_lane`, the only constructor, wrote every lane of `activemask`, and nothing
        // changes `activemask` after or un-writes a lane (`set` writes).
        unsafe { words.assume_init_read() }
    }

    /// The lanes that made the call.
    pub fn activemask(&self) -> u64 {
        self.activemask
    }
    /// Whether the host answered at least one lane with an error reply.
    pub fn host_error(&self) -> bool {
        self.host_error
    }
}

/// The activemask, the host-error flag and the active lanes' words (as `lane: [words]`).
impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Lanes<'r>(&'r Reply);
        impl std::fmt::Debug for Lanes<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_map().entries(lanes(self.0.activemask).map(|lane| (lane, self.0.lane(lane)))).finish()
            }
        }
        f.debug_struct("Reply")
            .field("activemask", &format_args!("{:#x}", self.activemask))
            .field("host_error", &self.host_error)
            .field("lanes", &Lanes(self))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inactive_lanes_answer_zeros_and_active_ones_their_words() {
        let mut reply = Reply::zeros(0b1010);
        reply.set(1, [7, 8]);
        reply.set(3, [9, 10]);
        reply.or_host_error(true);
        assert_eq!(
            (reply.lane(0), reply.lane(1), reply.lane(2), reply.lane(3)),
            ([0; 2], [7, 8], [0; 2], [9, 10])
        );
        assert_eq!(reply.lane(63), [0; 2]);
        assert_eq!(Reply::zeros(u64::MAX).lane(40), [0; 2], "every active lane written at construction");
        assert!(reply.host_error());
        let copy = reply.clone();
        assert_eq!(copy.lane(3), [9, 10]);
        assert_eq!(
            format!("{copy:?}"),
            "Reply { activemask: 0xa, host_error: true, lanes: {1: [7, 8], 3: [9, 10]} }"
        );
    }

    #[test]
    #[should_panic(expected = "index out of bounds: the len is 64 but the index is 64")]
    fn a_lane_past_the_wave_panics() {
        let _ = Reply::zeros(u64::MAX).lane(64);
    }
}
