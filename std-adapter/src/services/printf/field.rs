//! A resolved field (flags, width and precision after `*` arguments) and its padding.

use super::spec::Flags;

/// Flags, width and precision of one conversion, with `*` values applied: a negative `*` width
/// has set `flags.left`, a negative `*` precision has become `None`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Field {
    pub flags: Flags,
    pub width: usize,
    pub precision: Option<usize>,
}

impl Field {
    /// The sign of a signed conversion: `-`, or `+`/space if those flags ask for one.
    pub(super) fn sign(&self, negative: bool) -> &'static [u8] {
        if negative {
            b"-"
        } else if self.flags.plus {
            b"+"
        } else if self.flags.space {
            b" "
        } else {
            b""
        }
    }

    /// Writes `prefix` (sign, `0x`) and `body` padded to the width: spaces before, or with `-`
    /// after; with the `0` flag (where `zero_allowed`) zeros between prefix and body.
    pub(super) fn emit(&self, out: &mut Vec<u8>, prefix: &[u8], body: &[u8], zero_allowed: bool) {
        let pad = self.width.saturating_sub(prefix.len() + body.len());
        let fill = |out: &mut Vec<u8>, byte: u8| out.resize(out.len() + pad, byte);
        if self.flags.left {
            out.extend_from_slice(prefix);
            out.extend_from_slice(body);
            fill(out, b' ');
        } else if self.flags.zero && zero_allowed {
            out.extend_from_slice(prefix);
            fill(out, b'0');
            out.extend_from_slice(body);
        } else {
            fill(out, b' ');
            out.extend_from_slice(prefix);
            out.extend_from_slice(body);
        }
    }
}
