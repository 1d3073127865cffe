//! `NOOP` and the console writes (`WRITE_TO_STDOUT`, `_STDERR`, `_STDOUT_NEWLINE`,
//! `WRITE_TO_STREAM`), as LLVM's server does them: for `WRITE_TO_STREAM` one packet with each
//! lane's `FILE` value, then each lane's bytes as a stream, answered in the stream's last turn
//! with the bytes written (plus the newline, when all were written). The bytes are held on the
//! host's budget, and the answer is written lane by lane within the poll's work budget
//! (`budget.rs`): a turn that runs out is deferred and goes on at the next poll.

use super::stream_file::{read_targets, receive_held, Target};
use super::Context;
use crate::services::printf::Stream;
use hostcall_core::rpc::{StreamIn, Turn};
use hostcall_core::LANES;

/// A console write in progress.
#[derive(Debug)]
pub(super) struct Write {
    mask: u64,
    /// Waiting for the packet of `FILE` values (`WRITE_TO_STREAM` only).
    awaiting_files: bool,
    /// Whether the console group is on (else every lane is answered 0 bytes).
    allowed: bool,
    targets: [Option<Target>; LANES],
    newline: bool,
    input: StreamIn,
    bytes: Vec<Vec<u8>>,
    /// Bytes charged to the held budgets.
    charged: usize,
    /// Lanes the held budget refused (counted; answered 0 bytes).
    dropped: u64,
    /// The stream is in; lanes of `answered` have their answer (the rest wait for budget).
    answering: bool,
    answered: u64,
}

impl Write {
    /// A write of the lanes of `mask` to `target` (`None`: each lane's `FILE` comes in the first
    /// packet), refused (every lane followed and answered 0 bytes) unless `allowed`.
    pub(super) fn new(mask: u64, target: Option<Stream>, newline: bool, allowed: bool, limit: u64) -> Self {
        Self {
            mask,
            awaiting_files: target.is_none(),
            allowed,
            targets: [target.map(Target::Console).filter(|_| allowed); LANES],
            newline,
            input: StreamIn::new(mask, limit),
            bytes: vec![Vec::new(); LANES],
            charged: 0,
            dropped: 0,
            answering: false,
            answered: 0,
        }
    }

    /// The lanes of the call.
    pub(super) fn mask(&self) -> u64 {
        self.mask
    }

    /// Bytes charged to the held budgets.
    pub(super) fn charged(&self) -> usize {
        self.charged
    }

    /// One turn; `true` when the call is over.
    pub(super) fn turn(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if self.awaiting_files {
            self.awaiting_files = false;
            read_targets(turn, self.mask, self.allowed, cx.files_allowed, &mut self.targets);
            return false;
        }
        if !self.answering {
            let (mask, bytes) = (self.mask, &mut self.bytes);
            if !receive_held(&mut self.input, turn, mask, cx, &mut self.charged, &mut self.dropped, bytes) {
                return false;
            }
            self.answering = true;
        }
        for (n, lane) in turn.lanes(self.mask & !self.answered).enumerate() {
            if n > 0 && cx.work.spent_out() {
                turn.defer(); // at least one lane a visit; the rest at the next poll
                return false;
            }
            self.answered |= 1 << lane;
            let size = self.input.size(lane as u32);
            let written = match self.targets[lane] {
                _ if self.dropped & 1 << lane != 0 => 0, // counted when refused
                Some(target) if self.input.kept(lane as u32) => {
                    let mut out = std::mem::take(&mut self.bytes[lane]);
                    let all = out.len() as u64 == size;
                    if self.newline && all {
                        out.push(b'\n');
                    }
                    cx.work.spend(out.len());
                    cx.write(target, &out).map_or_else(
                        || {
                            cx.counters.refused_lanes += 1;
                            0
                        },
                        |n| n as u64,
                    )
                }
                Some(_) => {
                    cx.counters.over_limit_lanes += 1;
                    0
                }
                None => {
                    cx.counters.refused_lanes += 1;
                    0
                }
            };
            turn.write(lane as u32, &[written, 0, 0, 0, 0, 0, 0, 0]);
        }
        true
    }
}
