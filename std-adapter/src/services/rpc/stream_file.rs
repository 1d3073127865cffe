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
