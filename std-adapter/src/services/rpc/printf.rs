//! The printf family (`PRINTF_TO_STDOUT`, `_STDERR`, `_STREAM` and their `_PACKED` twins) as
//! LLVM's server runs the exchange, formatted by this crate's printf engine (the output of the
//! other protocols' PRINTF service, byte for byte).
//!
//! The exchange, in the host's turns: (`_STREAM` only: each lane's `FILE`), the format string as
//! a stream, answered with each lane's argument block size (the host walks the format);
//! the argument block (C's `va_list` bytes: `int`-sized and 8-byte arguments, aligned to their
//! size or packed) as a stream; then, while any lane has a `%s` argument not yet fetched, the
//! host names the string's device address in word 1 and the client streams the string; last,
//! word 0 = the characters printed, word 1 = 0. Strings are fetched first to last; a lane's
//! strings together are kept up to the stream limit (past it the lane is answered -1).
//!
//! The wire carries each `%s` pointer, so a null one prints as glibc prints it (`(null)`, or
//! nothing under a precision below 6), unlike the PRINTF message, where it is one zero word like
//! `""`. A conversion the engine cannot print (a width or precision above
//! [`PrintfLimits::max_field`], an unknown conversion) stops the lane's output there with the
//! same marker and rate-limited log line as the other protocols' PRINTF; the lane is answered
//! the count before the marker.
//!
//! What a call keeps (its streams, the argument kinds and string addresses of its walk) is held
//! on the host's budget, a lane it refuses answered -1; the answers are formatted and written
//! lane by lane within the poll's work budget, the rest at later polls (`budget.rs`).

use super::stream_file::{read_targets, receive_held, Target};
use super::Context;
use crate::services::printf::{argument_kinds, format_marked, ArgKind, PrintfLimits, PrintfMessage, Stream};
use hostcall_core::rpc::{StreamIn, Turn};
use hostcall_core::LANES;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Files,
    Format,
    Args,
    Strings,
    /// Every stream is in; the lanes are being answered.
    Answer,
}

/// A printf call in progress.
#[derive(Debug)]
pub(super) struct Printf {
    mask: u64,
    packed: bool,
    allowed: bool,
    stage: Stage,
    targets: [Option<Target>; LANES],
    limit: u64,
    input: StreamIn,
    /// The stream being received, per lane.
    current: Vec<Vec<u8>>,
    formats: Vec<Vec<u8>>,
    kinds: Vec<Vec<ArgKind>>,
    blocks: Vec<Vec<u8>>,
    /// `%s` addresses still to fetch, per lane, first to last.
    pending: Vec<VecDeque<u64>>,
    /// Whether each lane asked for a string in the round in progress.
    asking: [bool; LANES],
    /// Whether each lane sent a stream over the limit (counted as that, not as refused).
    over_limit: [bool; LANES],
    strings: Vec<VecDeque<Vec<u8>>>,
    /// Bytes charged to the held budgets.
    charged: usize,
    /// Lanes the held budget refused (counted; answered -1, nothing more of them kept).
    dropped: u64,
    /// Lanes answered so far (the answer is given lane by lane within the poll's work).
    answered: u64,
}

impl Printf {
    /// A printf of the lanes of `mask` to `target` (`None`: each lane's `FILE` first), refused
    /// (followed, answered -1) unless `allowed`.
    pub(super) fn new(mask: u64, target: Option<Stream>, packed: bool, allowed: bool, limit: u64) -> Self {
        Self {
            mask,
            packed,
            allowed,
            stage: if target.is_none() { Stage::Files } else { Stage::Format },
            targets: [target.map(Target::Console).filter(|_| allowed); LANES],
            limit,
            input: StreamIn::new(mask, limit),
            current: per_lane(),
            formats: per_lane(),
            kinds: per_lane(),
            blocks: per_lane(),
            pending: per_lane(),
            asking: [false; LANES],
            over_limit: [false; LANES],
            strings: per_lane(),
            charged: 0,
            dropped: 0,
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

    /// Lane `lane` keeps nothing more: the held budget refused it (already counted).
    fn drop_lane(&mut self, lane: usize) {
        self.dropped |= 1 << lane;
        self.targets[lane] = None;
        self.pending[lane].clear();
    }

    /// One turn; `true` when the call is over.
    pub(super) fn turn(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if self.stage == Stage::Files {
            read_targets(turn, self.mask, self.allowed, cx.files_allowed, &mut self.targets);
            self.stage = Stage::Format;
            return false;
        }
        if self.stage == Stage::Answer {
            return self.answer(turn, cx); // a deferred answer goes on
        }
        let (mask, dropped) = (self.mask, self.dropped);
        let current = &mut self.current;
        if !receive_held(&mut self.input, turn, mask, cx, &mut self.charged, &mut self.dropped, current) {
            if self.dropped != dropped {
                for lane in turn.lanes(self.dropped & !dropped) {
                    self.drop_lane(lane);
                }
            }
            return false;
        }
        for lane in turn.lanes(self.dropped & !dropped) {
            self.drop_lane(lane);
        }
        for lane in turn.lanes(self.mask) {
            let bytes = std::mem::take(&mut self.current[lane]);
            let kept = self.input.kept(lane as u32);
            if !kept && !self.over_limit[lane] {
                cx.counters.over_limit_lanes += 1;
                self.over_limit[lane] = true;
                self.targets[lane] = None;
            }
            match self.stage {
                Stage::Format => {
                    self.formats[lane] = until_nul(&bytes).to_vec();
                    if self.targets[lane].is_some() {
                        let kinds = argument_kinds(&self.formats[lane], PrintfLimits::default().max_field);
                        if cx.hold(&mut self.charged, kinds.len() * std::mem::size_of::<ArgKind>()) {
                            self.kinds[lane] = kinds;
                        } else {
                            self.drop_lane(lane);
                        }
                    }
                    let size = block_size(&self.kinds[lane], self.packed);
                    turn.write(lane as u32, &[size, 0, 0, 0, 0, 0, 0, 0]);
                }
                Stage::Args => {
                    let pending: VecDeque<u64> = self
                        .arguments(lane, &bytes)
                        .filter_map(|(kind, v)| (kind == ArgKind::Str && v != 0).then_some(v))
                        .collect();
                    if pending.is_empty() || cx.hold(&mut self.charged, 8 * pending.len()) {
                        self.pending[lane] = pending;
                    } else {
                        self.drop_lane(lane);
                    }
                    self.blocks[lane] = bytes;
                }
                Stage::Strings if self.asking[lane] => {
                    // One lane's strings together are bounded by the stream limit too.
                    let held: usize = self.strings[lane].iter().map(Vec::len).sum();
                    let string = until_nul(&bytes);
                    if kept && !self.over_limit[lane] && (held + string.len()) as u64 > self.limit {
                        cx.counters.over_limit_lanes += 1;
                        self.over_limit[lane] = true;
                        self.targets[lane] = None;
                    }
                    let keep = self.targets[lane].is_some();
                    self.strings[lane].push_back(if keep { string.to_vec() } else { Vec::new() });
                }
                Stage::Strings | Stage::Files | Stage::Answer => {}
            }
        }
        match self.stage {
            Stage::Format => {
                self.stage = Stage::Args;
                self.input = StreamIn::new(self.mask, self.limit);
                false
            }
            _ => self.next(turn, cx),
        }
    }

    /// Asks for the next string of every lane that has one, or prints and answers.
    fn next(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        if turn.lanes(self.mask).any(|lane| !self.pending[lane].is_empty()) {
            for lane in turn.lanes(self.mask) {
                let address = self.pending[lane].pop_front().unwrap_or(0);
                self.asking[lane] = address != 0;
                turn.write(lane as u32, &[0, address, 0, 0, 0, 0, 0, 0]);
            }
            self.stage = Stage::Strings;
            self.input = StreamIn::new(self.mask, self.limit);
            return false;
        }
        self.stage = Stage::Answer;
        self.answer(turn, cx)
    }

    /// Prints and answers the lanes not answered yet, at least one, then while the poll's work
    /// lasts; `true` when every lane is answered, else the turn is deferred.
    fn answer(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) -> bool {
        for (n, lane) in turn.lanes(self.mask & !self.answered).enumerate() {
            if n > 0 && cx.work.spent_out() {
                turn.defer(); // the rest at the next poll
                return false;
            }
            self.answered |= 1 << lane;
            let printed = match self.targets[lane] {
                Some(target) => {
                    let mut out = Vec::new();
                    let (message, null_strings) = self.message(lane);
                    let limits = PrintfLimits::default();
                    let (printed, _) = format_marked(&message[1..], &null_strings, &limits, &mut out);
                    cx.work.spend(8 * message.len() + out.len());
                    match cx.write(target, &out) {
                        Some(n) if n == out.len() => printed as u64,
                        Some(_) => u64::MAX,
                        None => {
                            cx.counters.refused_lanes += 1;
                            u64::MAX
                        }
                    }
                }
                None => {
                    if !self.over_limit[lane] && self.dropped & 1 << lane == 0 {
                        cx.counters.refused_lanes += 1;
                    }
                    u64::MAX // -1, as the client's `int` reads it
                }
            };
            turn.write(lane as u32, &[printed, 0, 0, 0, 0, 0, 0, 0]);
        }
        true
    }

    /// Lane `lane`'s arguments read from its block (bytes past the block's end read as 0).
    fn arguments<'s>(&'s self, lane: usize, block: &'s [u8]) -> impl Iterator<Item = (ArgKind, u64)> + 's {
        let mut at = 0usize;
        self.kinds[lane].iter().map(move |&kind| {
            let size = arg_size(kind);
            if !self.packed {
                at = at.div_ceil(size) * size;
            }
            let mut bytes = [0u8; 8];
            let end = (at + size).min(block.len());
            if at < end {
                bytes[..end - at].copy_from_slice(&block[at..end]);
            }
            at += size;
            (kind, u64::from_le_bytes(bytes))
        })
    }

    /// Lane `lane`'s call as a PRINTF message (control word first) for the engine, and which of
    /// its `%s` arguments are null pointers (the message's one zero word for each reads as `""`;
    /// glibc prints `(null)`).
    fn message(&self, lane: usize) -> (Vec<u64>, Vec<bool>) {
        let mut strings = self.strings[lane].iter();
        let mut null_strings = Vec::new();
        let message = self.arguments(lane, &self.blocks[lane]).fold(
            PrintfMessage::new(&self.formats[lane]),
            |m, (kind, value)| match kind {
                ArgKind::Str => {
                    null_strings.push(value == 0);
                    match value {
                        0 => m.uint(0),
                        _ => m.string(strings.next().map_or(&[][..], Vec::as_slice)),
                    }
                }
                _ => m.uint(value),
            },
        );
        (message.into_words(), null_strings)
    }
}

/// One empty value per lane.
fn per_lane<T: Default>() -> Vec<T> {
    (0..LANES).map(|_| T::default()).collect()
}

fn arg_size(kind: ArgKind) -> usize {
    match kind {
        ArgKind::Int32 => 4,
        ArgKind::Int64 | ArgKind::Double | ArgKind::Pointer | ArgKind::Str => 8,
    }
}

/// The bytes of the argument block for `kinds`: each aligned to its size, or packed.
fn block_size(kinds: &[ArgKind], packed: bool) -> u64 {
    let end = kinds.iter().fold(0usize, |at, &kind| {
        let size = arg_size(kind);
        if packed {
            at + size
        } else {
            at.div_ceil(size) * size + size
        }
    });
    end as u64
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    bytes.iter().position(|&b| b == 0).map_or(bytes, |n| &bytes[..n])
}
