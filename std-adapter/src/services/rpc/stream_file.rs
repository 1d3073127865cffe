//! The `FILE` values a device holds. LLVM's server hands the device host `FILE*` pointers, the
//! low two bits tagging stdin (1), stdout (2) and stderr (3); this host keeps those three tags
//! and hands out nothing else but handles into a table of its own (value `index << 2`), so a
//! device never sees, and never makes the host use, a host pointer.

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

/// Reads each lane's `FILE` value from this turn's packet into the console stream it names
/// (stdin and host files are not console streams: `None`, as is every lane unless `allowed`).
pub(super) fn read_console_targets(
    turn: &hostcall_core::rpc::Turn<'_>,
    mask: u64,
    allowed: bool,
    targets: &mut [Option<crate::services::printf::Stream>],
) {
    use crate::services::printf::Stream;
    for lane in turn.lanes(mask) {
        targets[lane] = match StreamFile::decode(turn.read(lane as u32)[0]) {
            StreamFile::Stdout => Some(Stream::Stdout),
            StreamFile::Stderr => Some(Stream::Stderr),
            StreamFile::Stdin | StreamFile::Handle(_) => None,
        }
        .filter(|_| allowed);
    }
}

/// Takes this turn's packet of `input`, appending each kept lane's bytes to `bytes[lane]`;
/// `true` when the stream is complete.
pub(super) fn receive_bytes(
    input: &mut hostcall_core::rpc::StreamIn,
    turn: &hostcall_core::rpc::Turn<'_>,
    bytes: &mut [Vec<u8>],
) -> bool {
    input.receive(turn, &mut |lane, _, chunk: &[u8]| bytes[lane as usize].extend_from_slice(chunk))
}
