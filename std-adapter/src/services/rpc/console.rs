//! `NOOP` and the console writes (`WRITE_TO_STDOUT`, `_STDERR`, `_STDOUT_NEWLINE`,
//! `WRITE_TO_STREAM`), as LLVM's server does them: for `WRITE_TO_STREAM` one packet with each
//! lane's `FILE` value, then each lane's bytes as a stream, answered in the stream's last turn
//! with the bytes written (plus the newline, when all were written).

use super::stream_file::{read_targets, receive_bytes, Target};
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
        }
    }

    /// Bytes received so far.
    pub(super) fn held_bytes(&self) -> usize {
        self.bytes.iter().map(Vec::len).sum()
    }

    /// One turn; `true` when the call is over.
    pub(super) fn turn(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if self.awaiting_files {
            self.awaiting_files = false;
            read_targets(turn, self.mask, self.allowed, cx.files_allowed, &mut self.targets);
            return false;
        }
        let done = receive_bytes(&mut self.input, turn, &mut self.bytes);
        if !done {
            return false;
        }
        for lane in turn.lanes(self.mask) {
            let size = self.input.size(lane as u32);
            let written = match self.targets[lane] {
                Some(target) if self.input.kept(lane as u32) => {
                    let mut out = std::mem::take(&mut self.bytes[lane]);
                    let all = out.len() as u64 == size;
                    if self.newline && all {
                        out.push(b'\n');
                    }
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
