//! Code-object URIs, as the HSA loader names loaded code objects (`hsa_ven_amd_loader.h`):
//!
//! ```text
//! file_uri        ::= "file://" file_path [ range_specifier ]
//! memory_uri      ::= "memory://" process_id range_specifier
//! range_specifier ::= ( "#" | "?" ) "offset=" number "&" "size=" number
//! ```
//!
//! `file_path` is percent-encoded (every byte outside `[a-zA-Z0-9/_.~-]` as `%XX`); a number is a
//! C integer literal (`0x` hexadecimal, leading `0` octal, else decimal).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// A parsed code-object URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodeObjectUri {
    /// A code object in a file (an executable, a shared library, a `.co` or `.hsaco` file), at
    /// `offset` (0 when the URI gives none) for `size` bytes (`None`: the whole file).
    File {
        /// The decoded path.
        path: PathBuf,
        /// Where the code object starts in the file.
        offset: u64,
        /// Its size, where the URI gives one.
        size: Option<u64>,
    },
    /// A code object loaded from memory of process `pid`, at address `offset`, `size` bytes.
    Memory {
        /// The process that owned the memory.
        pid: u64,
        /// The memory address.
        offset: u64,
        /// Its size.
        size: u64,
    },
}

impl CodeObjectUri {
    /// Parses `uri`; `None` for anything else than the two forms above (a bad percent escape or
    /// number included).
    ///
    /// ```
    /// use hostcall::services::sanitizer::CodeObjectUri;
    /// assert_eq!(
    ///     CodeObjectUri::parse("file:///opt/my%20app/kernels.so#offset=0x2000&size=3000"),
    ///     Some(CodeObjectUri::File { path: "/opt/my app/kernels.so".into(), offset: 0x2000, size: Some(3000) })
    /// );
    /// assert_eq!(
    ///     CodeObjectUri::parse("memory://1234#offset=0x7f0000&size=0400"),
    ///     Some(CodeObjectUri::Memory { pid: 1234, offset: 0x7f0000, size: 0o400 })
    /// );
    /// assert_eq!(CodeObjectUri::parse("file:///a.co"), Some(CodeObjectUri::File { path: "/a.co".into(), offset: 0, size: None }));
    /// assert_eq!(CodeObjectUri::parse("http://x"), None);
    /// ```
    pub fn parse(uri: &str) -> Option<Self> {
        if let Some(rest) = uri.strip_prefix("file://") {
            let (path, range) = split_range(rest);
            let path = PathBuf::from(OsString::from_vec(percent_decode(path)?));
            let (offset, size) = match range {
                Some(range) => parse_range(range).map(|(offset, size)| (offset, Some(size)))?,
                None => (0, None),
            };
            Some(Self::File { path, offset, size })
        } else if let Some(rest) = uri.strip_prefix("memory://") {
            let (pid, range) = split_range(rest);
            let pid = pid.parse().ok().filter(|_| pid.bytes().all(|b| b.is_ascii_digit()))?;
            let (offset, size) = parse_range(range?)?;
            Some(Self::Memory { pid, offset, size })
        } else {
            None
        }
    }
}

/// Splits off the range specifier (after the first `#` or `?`).
fn split_range(rest: &str) -> (&str, Option<&str>) {
    match rest.find(['#', '?']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    }
}

/// `offset=N&size=M`.
fn parse_range(range: &str) -> Option<(u64, u64)> {
    let (offset, size) = range.split_once('&')?;
    Some((c_number(offset.strip_prefix("offset=")?)?, c_number(size.strip_prefix("size=")?)?))
}

/// A C integer literal: `0x`/`0X` hexadecimal, a leading `0` octal, else decimal.
fn c_number(text: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        (hex, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Decodes `%XX` escapes; `None` for a malformed one.
fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(
                u8::from_str_radix(hex, 16).ok().filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))?,
            );
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_c_literals() {
        assert_eq!(c_number("0"), Some(0));
        assert_eq!(c_number("17"), Some(17));
        assert_eq!(c_number("017"), Some(15));
        assert_eq!(c_number("0X1f"), Some(31));
        assert_eq!(c_number("08"), None);
        assert_eq!(c_number("0x"), None);
        assert_eq!(c_number(""), None);
        assert_eq!(c_number("99999999999999999999"), None);
    }

    #[test]
    fn paths_are_percent_decoded() {
        let uri = "file:///tmp/a%2Fb%25c%C3%A9?offset=8&size=16";
        let expected = b"/tmp/a/b%c\xc3\xa9".to_vec();
        assert_eq!(
            CodeObjectUri::parse(uri),
            Some(CodeObjectUri::File {
                path: OsString::from_vec(expected).into(),
                offset: 8,
                size: Some(16)
            })
        );
        assert_eq!(CodeObjectUri::parse("file:///bad%2"), None);
        assert_eq!(CodeObjectUri::parse("file:///bad%zz"), None);
        assert_eq!(CodeObjectUri::parse("file:///a#offset=1"), None);
    }

    #[test]
    fn memory_uris_need_a_range() {
        assert_eq!(CodeObjectUri::parse("memory://12"), None);
        assert_eq!(CodeObjectUri::parse("memory://x#offset=1&size=2"), None);
        assert_eq!(CodeObjectUri::parse("memory://+1#offset=1&size=2"), None);
    }
}
