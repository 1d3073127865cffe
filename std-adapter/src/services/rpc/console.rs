//! `NOOP` and the console writes (`WRITE_TO_STDOUT`, `_STDERR`, `_STDOUT_NEWLINE`,
//! `WRITE_TO_STREAM`), as LLVM's server does them: for `WRITE_TO_STREAM` one packet with each
//! lane's `FILE` value, then each lane's bytes as a stream, answered in the stream's last turn
//! with the bytes written (plus the newline, when all were written).
//!
//! A packet's console lanes reach the sink as one write a stream, their bytes in lane order
//! (LLVM's server `fwrite`s each lane into C's buffered `stdout`; one write a lane would be one
//! system call a lane through a sink that flushes each write, as [`StdStreams`] does).
//!
//! What a lane keeps is charged to the host's held-bytes budget at its stream's first packet (a
//! lane the budget refuses is followed to the end, counted and answered 0 bytes), and the
//! answer's bytes are spent from the poll's work budget (`budget.rs`).
//!
//! [`StdStreams`]: crate::services::printf::StdStreams

use super::stream_file::{read_targets, Target};
use super::Context;
use crate::services::printf::Stream;
use hostcall_core::rpc::{StreamIn, Turn, PACKET_BYTES};
use hostcall_core::LANES;

/// One stream's share of a packet: its lanes' bytes, and each lane with its byte count.
type ConsoleLanes = (Vec<u8>, Vec<(u32, u64)>);

/// The most buffer capacity, in bytes, of the one finished write a host keeps for its next
/// ([`Write::boxed`]); a write whose buffers grew past it is freed.
pub(super) const SPARE_WRITE_BYTES: usize = 64 << 10;

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
    /// Every kept lane's bytes so far, as they came (packet by packet, lanes ascending in each):
    /// one buffer for the call, not one a lane.
    bytes: Vec<u8>,
    /// Where each chunk of `bytes` is: (lane, start, end), in the order they came.
    chunks: Vec<(u8, u32, u32)>,
    /// Bytes charged to the held budgets.
    charged: usize,
    /// Lanes the held budget refused (counted; answered 0 bytes).
    dropped: u64,
    /// Each console stream's share of the answer, built by `finish` (kept with the rest for the
    /// host's next write).
    consoles: [ConsoleLanes; 2],
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
            bytes: Vec::new(),
            chunks: Vec::new(),
            charged: 0,
            dropped: 0,
            consoles: Default::default(),
        }
    }

    /// [`Write::new`] in a box: `spare`'s (a finished write the host kept), its buffers emptied
    /// and their capacity kept, where there is one, so that a host's console writes allocate
    /// nothing once their buffers have grown.
    pub(super) fn boxed(
        spare: &mut Option<Box<Write>>,
        mask: u64,
        target: Option<Stream>,
        newline: bool,
        allowed: bool,
        limit: u64,
    ) -> Box<Self> {
        match spare.take() {
            Some(mut write) => {
                write.restart(mask, target, newline, allowed, limit);
                write
            }
            None => Box::new(Self::new(mask, target, newline, allowed, limit)),
        }
    }

    /// Makes this (finished) write what [`Write::new`] makes, in place, its buffers emptied but
    /// their capacity kept. (Every field is named: a field added to `Write` must be reset here.)
    fn restart(&mut self, mask: u64, target: Option<Stream>, newline: bool, allowed: bool, limit: u64) {
        let Self {
            mask: call_mask,
            awaiting_files,
            allowed: call_allowed,
            targets,
            newline: call_newline,
            input,
            bytes,
            chunks,
            charged,
            dropped,
            consoles,
        } = self;
        *call_mask = mask;
        *awaiting_files = target.is_none();
        *call_allowed = allowed;
        *targets = [target.map(Target::Console).filter(|_| allowed); LANES];
        *call_newline = newline;
        *input = StreamIn::new(mask, limit);
        bytes.clear();
        chunks.clear();
        *charged = 0;
        *dropped = 0;
        for (bytes, lanes) in consoles {
            bytes.clear();
            lanes.clear();
        }
    }

    /// Whether the host keeps this finished write for its next: its buffers' capacity is at most
    /// [`SPARE_WRITE_BYTES`].
    pub(super) fn worth_keeping(&self) -> bool {
        let lanes = |lanes: &Vec<(u32, u64)>| lanes.capacity() * size_of::<(u32, u64)>();
        let consoles: usize = self.consoles.iter().map(|(bytes, l)| bytes.capacity() + lanes(l)).sum();
        let capacity =
            self.bytes.capacity() + self.chunks.capacity() * size_of::<(u8, u32, u32)>() + consoles;
        capacity <= SPARE_WRITE_BYTES
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
        if self.input.at_first_packet() {
            // Each lane's declared size (word 0 of its first packet), charged before any byte is
            // kept; a lane over the stream limit keeps nothing anyway (`StreamIn::kept`).
            for lane in turn.lanes(self.mask & !self.dropped) {
                let size = turn.read(lane as u32)[0];
                if size <= cx.limit && !cx.hold(&mut self.charged, size as usize) {
                    self.dropped |= 1 << lane;
                }
            }
        }
        // What this packet can carry at most, no more.
        let lanes = self.mask.count_ones() as usize;
        self.bytes.reserve(lanes * PACKET_BYTES as usize);
        self.chunks.reserve(lanes);
        let (bytes, chunks, dropped) = (&mut self.bytes, &mut self.chunks, self.dropped);
        let done = self.input.receive(turn, &mut |lane, _, chunk: &[u8]| {
            if !chunk.is_empty() && dropped & 1 << lane == 0 {
                let start = bytes.len() as u32;
                bytes.extend_from_slice(chunk);
                chunks.push((lane as u8, start, bytes.len() as u32));
            }
        });
        if !done {
            return false;
        }
        self.finish(turn, cx);
        true
    }

    /// Writes every lane's bytes where it goes and answers it: the console lanes of each
    /// stream with one write, their bytes in lane order (the sink's `write_stream` gets whole
    /// lanes, never part of one), each answered its byte count, or 0 when that write failed.
    fn finish(&mut self, turn: &mut Turn<'_>, cx: &mut Context<'_>) {
        // Stable: each lane's chunks stay in the order they came (a one-packet call's are sorted).
        if self.chunks.windows(2).any(|pair| pair[0].0 > pair[1].0) {
            self.chunks.sort_by_key(|&(lane, ..)| lane);
        }
        let consoles = &mut self.consoles;
        let first_target = self.targets.iter().flatten().next();
        if let Some(Target::Console(stream)) = first_target {
            // Most calls write every lane to one stream: its bytes and a newline a lane.
            let lanes = self.mask.count_ones() as usize;
            consoles[*stream as usize].0.reserve(self.bytes.len() + lanes);
            consoles[*stream as usize].1.reserve(lanes);
        }
        let mut file_bytes = Vec::new();
        let mut next = 0;
        for lane in turn.lanes(self.mask) {
            let first = next;
            while self.chunks.get(next).is_some_and(|&(l, ..)| usize::from(l) == lane) {
                next += 1;
            }
            let lane_chunks =
                self.chunks[first..next].iter().map(|&(_, s, e)| &self.bytes[s as usize..e as usize]);
            let size = self.input.size(lane as u32);
            let written = match self.targets[lane] {
                _ if self.dropped & 1 << lane != 0 => 0, // counted when refused
                Some(target) if self.input.kept(lane as u32) => {
                    let out = match target {
                        Target::Console(stream) => &mut consoles[stream as usize].0,
                        Target::File(_) => &mut file_bytes,
                    };
                    let from = out.len();
                    lane_chunks.for_each(|chunk| out.extend_from_slice(chunk));
                    if self.newline && (out.len() - from) as u64 == size {
                        out.push(b'\n');
                    }
                    let len = (out.len() - from) as u64;
                    if let Target::Console(stream) = target {
                        consoles[stream as usize].1.push((lane as u32, len));
                        continue;
                    }
                    let written = cx.write(target, &file_bytes).map_or_else(
                        || {
                            cx.counters.refused_lanes += 1;
                            0
                        },
                        |n| n as u64,
                    );
                    file_bytes.clear();
                    written
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
        cx.work.spend(self.bytes.len());
        for (stream, (out, lanes)) in [Stream::Stdout, Stream::Stderr].into_iter().zip(consoles.iter()) {
            if lanes.is_empty() {
                continue;
            }
            let ok = cx.write(Target::Console(stream), out) == Some(out.len());
            for &(lane, len) in lanes {
                turn.write(lane, &[if ok { len } else { 0 }, 0, 0, 0, 0, 0, 0, 0]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{patience, Buffer};
    use super::super::{RpcHost, RpcLimits, RpcPolicy};
    use crate::services::printf::{PrintfSink, Stream};
    use hostcall_core::rpc::opcode::libc;
    use hostcall_core::ServiceTable;
    use std::io;
    use std::time::{Duration, Instant};

    /// Every write the sink got, and whether it fails them.
    #[derive(Default)]
    struct Recording {
        writes: Vec<(Stream, Vec<u8>)>,
        fail: bool,
    }

    impl PrintfSink for Recording {
        fn write_stream(&mut self, stream: Stream, bytes: &[u8]) -> io::Result<()> {
            self.writes.push((stream, bytes.to_vec()));
            if self.fail {
                Err(io::Error::other("full"))
            } else {
                Ok(())
            }
        }
    }

    /// A `WRITE_TO_STREAM` from 32 lanes (even lanes stdout, odd stderr), as `fputs` from a warp;
    /// the bytes written per lane.
    fn warp_fputs(sink: &mut Recording) -> Vec<u64> {
        let buffer = Buffer::new(1, 32);
        let mut host = RpcHost::new(1, RpcPolicy::default(), RpcLimits::default());
        let services = ServiceTable::<1>::new();
        let (view, client) = (buffer.view(), buffer.client());
        std::thread::scope(|s| {
            let wave = s.spawn(move || {
                let mut port = client.try_open(libc::WRITE_TO_STREAM, u32::MAX.into(), 0).unwrap();
                port.send(|lane| [2 + u64::from(lane % 2), 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
                let lines: Vec<Vec<u8>> = (0..32).map(|lane| format!("lane {lane}\n").into_bytes()).collect();
                port.send_n(|lane| &lines[lane as usize], &mut patience()).unwrap();
                let mut written = vec![u64::MAX; 32];
                port.recv(|lane, words| written[lane as usize] = words[0], &mut patience()).unwrap();
                port.close();
                written
            });
            let start = Instant::now();
            while !wave.is_finished() {
                host.drain(&view, sink, &services);
                assert!(start.elapsed() < Duration::from_secs(120), "the wave did not finish");
            }
            wave.join().unwrap()
        })
    }

    /// A finished write the host kept, restarted for another call, is that call's new write
    /// (every field as `Write::new` makes it), its buffers' capacity kept.
    #[test]
    fn a_kept_write_restarts_as_a_new_one() {
        use super::{Target, Write};
        use crate::services::printf::Stream;
        let mut used = Box::new(Write::new(u64::MAX, None, true, false, 7));
        used.awaiting_files = false;
        used.targets[3] = Some(Target::File(5));
        used.input = hostcall_core::rpc::StreamIn::new(1, 1);
        used.bytes.extend_from_slice(b"left over");
        used.chunks.push((3, 0, 9));
        (used.charged, used.dropped) = (9, 0b1000);
        used.consoles[1].0.extend_from_slice(b"left over");
        used.consoles[1].1.push((3, 9));
        assert!(used.worth_keeping());
        let capacity = used.bytes.capacity();
        let mut spare = Some(used);
        let restarted = Write::boxed(&mut spare, 0b11, Some(Stream::Stdout), false, true, 100);
        let fresh = Write::new(0b11, Some(Stream::Stdout), false, true, 100);
        assert_eq!(format!("{restarted:?}"), format!("{fresh:?}"));
        assert_eq!((restarted.bytes.capacity(), spare.is_none()), (capacity, true));
    }

    /// A write whose buffers grew past the spare's bound is not kept.
    #[test]
    fn a_large_write_is_not_kept() {
        let mut write = super::Write::new(1, None, false, true, 100);
        write.bytes.reserve(super::SPARE_WRITE_BYTES + 1);
        assert!(!write.worth_keeping());
    }

    #[test]
    fn a_packets_console_lanes_are_one_write_a_stream() {
        let mut sink = Recording::default();
        let written = warp_fputs(&mut sink);
        let line = |lane: usize| format!("lane {lane}\n");
        assert_eq!(written, (0..32).map(|lane| line(lane).len() as u64).collect::<Vec<_>>());
        let text = |odd: usize| (0..32).filter(|l| l % 2 == odd).map(line).collect::<String>().into_bytes();
        assert_eq!(sink.writes, [(Stream::Stdout, text(0)), (Stream::Stderr, text(1))]);
    }

    #[test]
    fn a_failed_console_write_answers_its_lanes_zero() {
        let mut sink = Recording { fail: true, ..Recording::default() };
        assert_eq!(warp_fputs(&mut sink), vec![0; 32]);
        assert_eq!(sink.writes.len(), 2);
    }
}
