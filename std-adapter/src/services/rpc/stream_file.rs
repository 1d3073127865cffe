//! The `FILE` values a device holds. LLVM's server hands the device host `FILE*` pointers, the
//! low two bits tagging stdin (1), stdout (2) and stderr (3); this host keeps those three tags
//! and hands out nothing else but handles into a table of its own (`files`), so a device never
//! sees, and never makes the host use, a host pointer.

/// A device's `FILE` value, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StreamFile {
    /// Tag 1.
    Stdin,
    /// Tag 2.
    Stdout,
    /// Tag 3.
    Stderr,
    /// Tag 0: a handle the host gave out (checked against its table before use).
    Handle(u64),
}

impl StreamFile {
    /// Decodes a `FILE` value the device sent.
    pub(super) fn decode(value: u64) -> Self {
        match value & 3 {
            1 => Self::Stdin,
            2 => Self::Stdout,
            3 => Self::Stderr,
            _ => Self::Handle(value >> 2),
        }
    }
}

/// Where a write or a printf of one lane goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The buffer's output sink.
    Console(crate::services::printf::Stream),
    /// A host file, by the device's handle (checked against the table at each use).
    File(u64),
}

/// Reads each lane's `FILE` value from this turn's packet into the target it names: stdout and
/// stderr when `console` (the call's group is on), a handle when `files` too; `None` (refused)
/// for stdin and for anything not allowed.
pub(super) fn read_targets(
    turn: &hostcall_core::rpc::Turn<'_>,
    mask: u64,
    console: bool,
    files: bool,
    targets: &mut [Option<Target>],
) {
    use crate::services::printf::Stream;
    for lane in turn.lanes(mask) {
        let value = turn.read(lane as u32)[0];
        targets[lane] = match StreamFile::decode(value) {
            StreamFile::Stdout => Some(Target::Console(Stream::Stdout)),
            StreamFile::Stderr => Some(Target::Console(Stream::Stderr)),
            StreamFile::Handle(_) if files => Some(Target::File(value)),
            StreamFile::Stdin | StreamFile::Handle(_) => None,
        }
        .filter(|_| console);
    }
}

/// Takes this turn's packet of `input` (a stream from the lanes of `mask`), appending each kept
/// lane's bytes to `bytes[lane]`; `true` when the stream is complete. What a lane keeps is held
/// on the host's budget (`budget.rs`): at the stream's first packet its declared size is charged
/// to `charged` (its call's charge) and its buffer reserved to exactly that; a lane the budget
/// refuses is counted, marked in `dropped` and keeps nothing of this stream or a later one of
/// its call (still followed to the end). Lanes over the stream limit keep nothing either (the
/// stream's own rule, [`StreamIn::kept`](hostcall_core::rpc::StreamIn::kept)).
pub(super) fn receive_held(
    input: &mut hostcall_core::rpc::StreamIn,
    turn: &hostcall_core::rpc::Turn<'_>,
    mask: u64,
    cx: &mut super::Context<'_>,
    charged: &mut usize,
    dropped: &mut u64,
    bytes: &mut [Vec<u8>],
) -> bool {
    let first = input.at_first_packet();
    let skip = *dropped;
    let done = input.receive(turn, &mut |lane, _, chunk: &[u8]| {
        if skip & 1 << lane == 0 {
            bytes[lane as usize].extend_from_slice(chunk);
        }
    });
    if first {
        for lane in turn.lanes(mask & !skip) {
            if !input.kept(lane as u32) {
                continue;
            }
            // At most the stream limit: `kept`.
            let size = input.size(lane as u32) as usize;
            if cx.hold(charged, size) {
                let buffer = &mut bytes[lane];
                buffer.reserve_exact(size.saturating_sub(buffer.len()));
            } else {
                *dropped |= 1 << lane;
                bytes[lane] = Vec::new();
            }
        }
    }
    done
}

impl super::Context<'_> {
    /// Writes `bytes` to `target`: `Some(bytes written)` (short when the write failed), `None`
    /// for a handle the buffer's table does not hold (refused).
    pub(super) fn write(&mut self, target: Target, bytes: &[u8]) -> Option<usize> {
        match target {
            Target::Console(stream) => {
                Some(if self.sink.write_stream(stream, bytes).is_ok() { bytes.len() } else { 0 })
            }
            Target::File(handle) => {
                let mut table = self.files.lock();
                let file = table.get(handle)?;
                // SAFETY: `file` is open while the table is locked; `bytes` is readable.
                Some(unsafe { ::libc::fwrite(bytes.as_ptr().cast(), 1, bytes.len(), file) })
            }
        }
    }
}
