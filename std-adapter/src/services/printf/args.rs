//! Reading the printf message: the format string and the argument words after it.

use super::PrintfError;

/// The bytes of a NUL-terminated string packed little-endian into `words`, without the NUL, and
/// the number of words it occupies (its stored size, NUL and padding included). `None` if no
/// word holds a NUL byte.
pub(super) fn c_string(words: &[u64]) -> Option<(Vec<u8>, usize)> {
    let mut bytes = Vec::new();
    for (n, word) in words.iter().enumerate() {
        let le = word.to_le_bytes();
        match le.iter().position(|&b| b == 0) {
            Some(nul) => {
                bytes.extend_from_slice(&le[..nul]);
                return Some((bytes, n + 1));
            }
            None => bytes.extend_from_slice(&le),
        }
    }
    None
}

/// The argument words, consumed in order.
pub(super) struct Args<'a> {
    words: &'a [u64],
    /// Which `%s` arguments, in the order the format takes them, are null pointers (a transport
    /// that knows, LLVM's RPC; past its end: none).
    null_strings: &'a [bool],
    /// `%s` arguments taken so far.
    strings: usize,
}

impl<'a> Args<'a> {
    pub(super) fn new(words: &'a [u64], null_strings: &'a [bool]) -> Self {
        Self { words, null_strings, strings: 0 }
    }

    /// The next word; `offset` is the format offset of the conversion that wants it.
    pub(super) fn word(&mut self, offset: usize) -> Result<u64, PrintfError> {
        let (&first, rest) = self.words.split_first().ok_or(PrintfError::MissingArgument { offset })?;
        self.words = rest;
        Ok(first)
    }

    /// The next word as a C `int` (a `*` width or precision): its low 32 bits.
    pub(super) fn int(&mut self, offset: usize) -> Result<i32, PrintfError> {
        Ok(self.word(offset)? as u32 as i32)
    }

    /// An inline `%s` argument: its bytes, advancing past its stored size (not its printed
    /// length, which a precision may cut short); `None` for a null pointer. A null pointer
    /// arrives as one zero word, which reads as the empty string unless `null_strings` says it
    /// is one.
    pub(super) fn string(&mut self, offset: usize) -> Result<Option<Vec<u8>>, PrintfError> {
        if self.words.is_empty() {
            return Err(PrintfError::MissingArgument { offset });
        }
        let (bytes, used) = c_string(self.words).ok_or(PrintfError::UnterminatedString { offset })?;
        self.words = &self.words[used..];
        let null = self.null_strings.get(self.strings).copied().unwrap_or(false);
        self.strings += 1;
        Ok((!null).then_some(bytes))
    }
}
