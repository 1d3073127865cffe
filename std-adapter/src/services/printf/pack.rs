//! The device side: packing a printf call into the words of a PRINTF message.

use hostcall_core::message::PackedWords;

/// One printf argument as the device sends it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PrintfArg<'a> {
    /// A signed integer or character (sign-extended to a word).
    Int(i64),
    /// An unsigned integer or pointer.
    Uint(u64),
    /// A floating-point value (every float is sent as an f64).
    Float(f64),
    /// A `%s` string (bytes up to the first NUL); `None` is a null pointer (one zero word).
    Str(Option<&'a [u8]>),
    /// A raw word (a `*` width or precision, a `%n` pointer, anything).
    Word(u64),
}

/// A printf message being built: control word, format string, argument words.
///
/// ```
/// use hostcall::services::printf::PrintfMessage;
/// let words = PrintfMessage::new(b"%d\n").to_stderr().int(-1).into_words();
/// assert_eq!(words, [1, u64::from_le_bytes(*b"%d\n\0\0\0\0\0"), u64::MAX]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintfMessage {
    words: Vec<u64>,
}

/// The bytes of `bytes` up to its first NUL, as C's `strlen` sees them.
fn until_nul(bytes: &[u8]) -> &[u8] {
    bytes.iter().position(|&b| b == 0).map_or(bytes, |n| &bytes[..n])
}

impl PrintfMessage {
    /// A message printing `format` (up to its first NUL) to stdout.
    pub fn new(format: &[u8]) -> Self {
        let mut words = vec![0];
        words.extend(PackedWords::c_string(until_nul(format)));
        Self { words }
    }

    /// Prints to stderr instead (control bit 0).
    pub fn to_stderr(mut self) -> Self {
        self.words[0] |= 1;
        self
    }

    /// Replaces the control word (to send reserved bits in tests).
    pub fn control(mut self, control: u64) -> Self {
        self.words[0] = control;
        self
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: PrintfArg<'_>) -> Self {
        match arg {
            PrintfArg::Int(v) => self.words.push(v as u64),
            PrintfArg::Uint(v) | PrintfArg::Word(v) => self.words.push(v),
            PrintfArg::Float(v) => self.words.push(v.to_bits()),
            PrintfArg::Str(Some(s)) => self.words.extend(PackedWords::c_string(until_nul(s))),
            PrintfArg::Str(None) => self.words.push(0),
        }
        self
    }

    /// Appends a signed integer.
    pub fn int(self, v: i64) -> Self {
        self.arg(PrintfArg::Int(v))
    }

    /// Appends an unsigned integer or pointer.
    pub fn uint(self, v: u64) -> Self {
        self.arg(PrintfArg::Uint(v))
    }

    /// Appends a floating-point value.
    pub fn float(self, v: f64) -> Self {
        self.arg(PrintfArg::Float(v))
    }

    /// Appends a `%s` string.
    pub fn string(self, s: &[u8]) -> Self {
        self.arg(PrintfArg::Str(Some(s)))
    }

    /// Appends all of `args`.
    pub fn args(self, args: &[PrintfArg<'_>]) -> Self {
        args.iter().fold(self, |m, &a| m.arg(a))
    }

    /// The words so far.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The finished message.
    pub fn into_words(self) -> Vec<u64> {
        self.words
    }
}
