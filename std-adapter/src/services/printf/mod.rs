//! The PRINTF service (PROTOCOL.md section 4): formatting a printf message exactly as glibc's
//! `printf` would, and the service around it.
//!
//! A printf message is a word stream: word 0 is the control word (bit 0: stderr; any other bit
//! set: the reply is -1), then the format string NUL-terminated and zero-padded to 8 bytes, then
//! one word per argument: integers, characters and pointers as u64, floating point as the bits of
//! an f64, `%s` strings inline (NUL-terminated, padded to 8; a null pointer is one zero word and
//! prints as the empty string, since it cannot be told from `""`), one word before the value for
//! each `*` width or precision, one word for `%n` (which prints nothing).
//!
//! [`format()`] turns the words after the control word into the bytes glibc would print:
//!
//! - conversions `d i u o x X c s p f F e E g G a A n %`, flags `- + space # 0`, width and
//!   precision as digits or `*` (the low 32 bits of a word, a C `int`: a negative width means
//!   `-`, a negative precision means none), length modifiers `hh h l ll j z t L` (and glibc's
//!   `q` and `Z`), applied as C converts the argument (`%hhd` prints a `signed char`, `%d` an
//!   `int`). Floats are always one f64 word, so `%Lf` prints that double as `%f` would.
//! - glibc's choices where C leaves them open: `%p` prints `(nil)` for 0 and `0x...` otherwise
//!   (honouring `+`, space, precision and `0` like `%#lx`), `%5%` prints `%`, `-nan` for a NaN
//!   with the sign bit, no zero padding for `inf`/`nan`, `%a` of a subnormal as `0x0.xxxp-1022`.
//! - `%s` advances by the string's stored size, never by the printed length.
//!
//! Not supported, answered with an error (reply -1) rather than guessed: positional arguments
//! (`%1$d`), `%m`, `%C`/`%S`/`%ls` (wide strings) and `%lc` outside ASCII, glibc's `'` and `I`
//! flags, and any conversion character not listed. Widths and precisions above
//! [`PrintfLimits::max_field`] (default 4096, enough for the exact expansion of every f64: the
//! longest, `%.1074f` of the smallest subnormal, needs 1074 decimals) and output above
//! [`PrintfLimits::max_output`] (default 1 MiB) are refused, so a device cannot make the host
//! allocate without bound. On any error nothing is printed.
//!
//! ```
//! use hostcall::services::printf::{format, PrintfMessage};
//! let words = PrintfMessage::new(b"%s=%5.2f|%-4x|%c")
//!     .string(b"pi")
//!     .float(3.14159)
//!     .int(255)
//!     .int(i64::from(b'!'))
//!     .into_words();
//! let mut out = Vec::new();
//! // Word 0 is the control word; the formatter takes the rest.
//! assert_eq!(format(&words[1..], &mut out), Ok(15));
//! assert_eq!(out, b"pi= 3.14|ff  |!");
//! ```

mod args;
mod field;
mod float;
mod int;
mod pack;
mod sink;
mod spec;

pub use pack::{PrintfArg, PrintfMessage};
pub use sink::{
    printf_message, printf_reply, printf_reply_with, printf_service, PrintfSink, StdStreams, Stream, Streams,
};

use field::Field;
use spec::{Conv, Count, Length, Spec};
use std::fmt;

/// Default bound on any width or precision.
pub const DEFAULT_MAX_FIELD: usize = 4096;
/// Default bound on the bytes one message may print.
pub const DEFAULT_MAX_OUTPUT: usize = 1 << 20;

/// Bounds on what one message may make the host do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrintfLimits {
    /// The largest width or precision accepted (digits or `*`).
    pub max_field: usize,
    /// The most bytes one message may print.
    pub max_output: usize,
}

impl Default for PrintfLimits {
    fn default() -> Self {
        Self { max_field: DEFAULT_MAX_FIELD, max_output: DEFAULT_MAX_OUTPUT }
    }
}

/// Why a printf message cannot be printed (the reply is then -1). Offsets are byte offsets into
/// the format string of the `%` that starts the offending conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintfError {
    /// The message has no control word.
    EmptyMessage,
    /// The control word has bits other than bit 0 set.
    ControlBits {
        /// The control word.
        control: u64,
    },
    /// No NUL ends the format string within the message.
    UnterminatedFormat,
    /// The format string ends inside a conversion specification.
    IncompleteSpec {
        /// Where the specification starts.
        offset: usize,
    },
    /// A conversion character this formatter does not know (or does not support).
    BadConversion {
        /// Where the specification starts.
        offset: usize,
        /// The conversion character.
        byte: u8,
    },
    /// The message ends before an argument this conversion needs.
    MissingArgument {
        /// Where the specification starts.
        offset: usize,
    },
    /// No NUL ends a `%s` argument within the message.
    UnterminatedString {
        /// Where the specification starts.
        offset: usize,
    },
    /// A width or precision above the limit.
    FieldTooLarge {
        /// Where the specification starts.
        offset: usize,
        /// The limit ([`PrintfLimits::max_field`]).
        limit: usize,
    },
    /// The message would print more than the limit.
    OutputTooLarge {
        /// The limit ([`PrintfLimits::max_output`]).
        limit: usize,
    },
    /// `%ls`, or `%lc` of a value outside ASCII: wide characters are not supported.
    WideCharacter {
        /// Where the specification starts.
        offset: usize,
    },
}

impl fmt::Display for PrintfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyMessage => f.write_str("printf message without a control word"),
            Self::ControlBits { control } => write!(f, "printf control word {control:#x} has unknown bits"),
            Self::UnterminatedFormat => f.write_str("printf format string without a NUL"),
            Self::IncompleteSpec { offset } => write!(f, "format ends inside the conversion at {offset}"),
            Self::BadConversion { offset, byte } => {
                write!(f, "unsupported conversion {:?} at {offset}", char::from(*byte))
            }
            Self::MissingArgument { offset } => write!(f, "no argument left for the conversion at {offset}"),
            Self::UnterminatedString { offset } => {
                write!(f, "%s argument of the conversion at {offset} has no NUL")
            }
            Self::FieldTooLarge { offset, limit } => {
                write!(f, "width or precision above {limit} in the conversion at {offset}")
            }
            Self::OutputTooLarge { limit } => write!(f, "printf output above {limit} bytes"),
            Self::WideCharacter { offset } => {
                write!(f, "wide character conversion at {offset} not supported")
            }
        }
    }
}

impl std::error::Error for PrintfError {}

/// Formats a printf message without its control word (`words` starts with the format string),
/// appending the output to `out`; returns the number of bytes appended. On error `out` is left
/// as it was. Uses the default [`PrintfLimits`].
pub fn format(words: &[u64], out: &mut Vec<u8>) -> Result<usize, PrintfError> {
    format_with(words, &PrintfLimits::default(), out)
}

/// [`format()`] with explicit limits.
pub fn format_with(words: &[u64], limits: &PrintfLimits, out: &mut Vec<u8>) -> Result<usize, PrintfError> {
    let start = out.len();
    let result = format_into(words, limits, out, start);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn format_into(
    words: &[u64],
    limits: &PrintfLimits,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<usize, PrintfError> {
    let (fmt, used) = args::c_string(words).ok_or(PrintfError::UnterminatedFormat)?;
    let mut args = args::Args::new(&words[used..]);
    let mut i = 0;
    while i < fmt.len() {
        let Some(percent) = fmt[i..].iter().position(|&b| b == b'%').map(|p| i + p) else {
            out.extend_from_slice(&fmt[i..]);
            break;
        };
        out.extend_from_slice(&fmt[i..percent]);
        let (spec, next) = spec::parse(&fmt, percent + 1, limits.max_field)?;
        convert(out, &spec, percent, &mut args, limits)?;
        if out.len() - start > limits.max_output {
            return Err(PrintfError::OutputTooLarge { limit: limits.max_output });
        }
        i = next;
    }
    let printed = out.len() - start;
    if printed > limits.max_output {
        return Err(PrintfError::OutputTooLarge { limit: limits.max_output });
    }
    Ok(printed)
}

/// One conversion: take its `*` words and its argument, append its output.
fn convert(
    out: &mut Vec<u8>,
    spec: &Spec,
    offset: usize,
    args: &mut args::Args<'_>,
    limits: &PrintfLimits,
) -> Result<(), PrintfError> {
    let field = resolve(spec, offset, args, limits)?;
    match spec.conv {
        Conv::Signed | Conv::Unsigned | Conv::Octal | Conv::Hex(_) => {
            int::integer(out, &field, spec.conv, spec.length, args.word(offset)?)
        }
        Conv::Pointer => int::pointer(out, &field, args.word(offset)?),
        Conv::Char => {
            let word = args.word(offset)?;
            let byte = match spec.length {
                // `%lc`: a `wint_t`; in the C locale only ASCII converts.
                Length::Long => u8::try_from(word as u32)
                    .ok()
                    .filter(u8::is_ascii)
                    .ok_or(PrintfError::WideCharacter { offset })?,
                _ => word as u8,
            };
            int::character(out, &field, byte)
        }
        Conv::Str => {
            if spec.length == Length::Long {
                return Err(PrintfError::WideCharacter { offset });
            }
            int::string(out, &field, &args.string(offset)?)
        }
        Conv::Float(kind, upper) => float::float(out, &field, kind, upper, args.word(offset)?),
        Conv::Count => {
            args.word(offset)?;
        }
        // glibc prints a bare `%` whatever the flags and width.
        Conv::Percent => out.push(b'%'),
    }
    Ok(())
}

/// Applies `*` widths and precisions (in that order, each one word before the value).
fn resolve(
    spec: &Spec,
    offset: usize,
    args: &mut args::Args<'_>,
    limits: &PrintfLimits,
) -> Result<Field, PrintfError> {
    let too_large = PrintfError::FieldTooLarge { offset, limit: limits.max_field };
    let mut flags = spec.flags;
    let width = match spec.width {
        None => 0,
        Some(Count::Fixed(w)) => w,
        Some(Count::Star) => {
            let w = args.int(offset)?;
            if w < 0 {
                flags.left = true;
            }
            w.unsigned_abs() as usize
        }
    };
    let precision = match spec.precision {
        None => None,
        Some(Count::Fixed(p)) => Some(p),
        Some(Count::Star) => usize::try_from(args.int(offset)?).ok(),
    };
    if width > limits.max_field || precision.is_some_and(|p| p > limits.max_field) {
        return Err(too_large);
    }
    Ok(Field { flags, width, precision })
}

#[cfg(test)]
mod tests;
