//! The PRINTF service (PROTOCOL.md section 4): formatting a printf message exactly as glibc's
//! `printf` would, and the service around it.
//!
//! A printf message is a word stream: word 0 is the control word (bit 0: stderr; any other bit
//! set: the reply is -1), then the format string NUL-terminated and zero-padded to 8 bytes, then
//! one word per argument: integers, characters and pointers as u64, floating point as the bits of
//! an f64, `%s` strings inline (NUL-terminated, padded to 8; a null pointer is one zero word and
//! prints as the empty string, since it cannot be told from `""`; LLVM's RPC printf, whose wire
//! carries the pointer, prints glibc's `(null)`), one word before the value for each `*` width or
//! precision, one word for `%n` (which prints nothing).
//!
//! [`format()`] turns the words after the control word into the bytes glibc would print:
//!
//! - conversions `d i u o x X b B c s p f F e E g G a A n %` (`b`/`B`: C23's binary, as glibc
//!   2.35 and later prints it: as `x`, in base 2, `#` prefixing `0b`/`0B`), flags
//!   `- + space # 0`, width and precision as digits or `*` (the low 32 bits of a word, a C
//!   `int`: a negative width means `-`, a negative precision means none), length modifiers
//!   `hh h l ll j z t L` (and glibc's `q` and `Z`), applied as C converts the argument (`%hhd`
//!   prints a `signed char`, `%d` an `int`). Floats are always one f64 word, so `%Lf` prints
//!   that double as `%f` would.
//! - glibc's choices where C leaves them open: `%p` prints `(nil)` for 0 and `0x...` otherwise
//!   (honouring `+`, space, precision and `0` like `%#lx`), `%5%` prints `%`, `-nan` for a NaN
//!   with the sign bit, no zero padding for `inf`/`nan`, `%a` of a subnormal as `0x0.xxxp-1022`.
//! - `%s` advances by the string's stored size, never by the printed length.
//!
//! Not supported, never guessed: positional arguments (`%1$d`), `%m`, `%C`/`%S`/`%ls` (wide
//! strings) and `%lc` outside ASCII, glibc's `'` and `I` flags, and any conversion character not
//! listed. On such a conversion, or a missing argument, the service does what ROCm's host does:
//! it prints the message up to that conversion and replies with the count printed so far; then it
//! prints a short marker naming the problem (e.g. `<hostcall: bad conversion %y>`, not counted).
//! Only a message with no format string at all (no control word, unknown control bits, no NUL)
//! prints nothing and is answered with -1. [`format()`] itself stays strict (an error, nothing
//! appended); [`format_partial`] is the service's way.
//!
//! # Budgets
//!
//! A device chooses every format string, so the work of one message is bounded ([`PrintfLimits`]):
//!
//! | bound | default | when exceeded |
//! | --- | --- | --- |
//! | a width or precision ([`PrintfLimits::max_field`]) | 4096 (the exact expansion of every f64: the longest, `%.1074f` of the smallest subnormal, needs 1074 decimals) | printing stops before that conversion, with a marker (as for a bad conversion) |
//! | bytes printed per message ([`PrintfLimits::max_output`]) | 64 KiB | the output is cut there |
//! | conversion work per message ([`PrintfLimits::max_work`]): each conversion costs 1 + its width + its precision | 65,536 | printing stops before the conversion that would pass it |
//!
//! The work bound is what keeps a `%.4096g` cheap to ask for and dear to compute (it prints one
//! character for 1.0, but computes 4096 digits) from holding the listener: a message may ask for
//! 16 of them. A cut message prints what came before the cut and is answered with the number of
//! bytes printed, as C's printf returns the number of characters it wrote (ROCm's host printf has
//! no such bound); a rate-limited warning says a message was cut.
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
mod error;
mod field;
mod float;
mod int;
mod pack;
mod sink;
mod spec;
mod walk;

pub use error::PrintfError;
pub use pack::{PrintfArg, PrintfMessage};
pub use sink::{
    printf_message, printf_partial, printf_reply, printf_reply_with, printf_service, PrintedMessage,
    PrintfSink, StdStreams, Stream, Streams,
};

pub(crate) use sink::format_marked;
pub(crate) use walk::{argument_kinds, ArgKind};

use crate::observe::Reason;
use crate::rate_limit::warn_limited;
use field::Field;
use spec::{Conv, Count, Length, Spec};

/// Default bound on any width or precision.
pub const DEFAULT_MAX_FIELD: usize = 4096;
/// Default bound on the bytes one message may print: 64 KiB.
pub const DEFAULT_MAX_OUTPUT: usize = 64 << 10;
/// Default bound on the conversion work of one message (see [`PrintfLimits::max_work`]).
pub const DEFAULT_MAX_WORK: usize = 1 << 16;

/// Bounds on what one message may make the host do. See the [module docs](self#budgets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrintfLimits {
    /// The largest width or precision accepted (digits or `*`); a larger one refuses the message.
    pub max_field: usize,
    /// The most bytes one message prints; the output is cut there.
    pub max_output: usize,
    /// The most conversion work one message does, each conversion costing 1 + its width + its
    /// precision; printing stops before the conversion that would pass it.
    pub max_work: usize,
}

setters!(PrintfLimits {
    with_max_field: max_field: usize,
    with_max_output: max_output: usize,
    with_max_work: max_work: usize,
});

impl Default for PrintfLimits {
    fn default() -> Self {
        Self { max_field: DEFAULT_MAX_FIELD, max_output: DEFAULT_MAX_OUTPUT, max_work: DEFAULT_MAX_WORK }
    }
}

/// Formats a printf message without its control word (`words` starts with the format string),
/// appending the output to `out`; returns the number of bytes appended. On error `out` is left
/// as it was. Uses the default [`PrintfLimits`]; a message past its output or work bound is cut
/// (see the [module docs](self#budgets)).
pub fn format(words: &[u64], out: &mut Vec<u8>) -> Result<usize, PrintfError> {
    format_with(words, &PrintfLimits::default(), out)
}

/// [`format()`] with explicit limits.
pub fn format_with(words: &[u64], limits: &PrintfLimits, out: &mut Vec<u8>) -> Result<usize, PrintfError> {
    let start = out.len();
    let result = format_into(words, &[], limits, out, start);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Formats as ROCm's host does on bad input: everything up to the first conversion that cannot
/// be printed (a bad or unsupported conversion, a missing argument, a field past the limit) is
/// appended to `out` and counted; the error says where it stopped. A message without a format
/// string (no NUL) appends nothing and returns that error.
///
/// ```
/// use hostcall::services::printf::{format_partial, PrintfError, PrintfLimits, PrintfMessage};
/// let words = PrintfMessage::new(b"a=%d b=%y c=%d").int(1).int(2).into_words();
/// let mut out = Vec::new();
/// let (printed, stopped) = format_partial(&words[1..], &PrintfLimits::default(), &mut out);
/// assert_eq!((printed, out.as_slice()), (6, &b"a=1 b="[..]));
/// assert_eq!(stopped, Some(PrintfError::BadConversion { offset: 7, byte: b'y' }));
/// ```
pub fn format_partial(
    words: &[u64],
    limits: &PrintfLimits,
    out: &mut Vec<u8>,
) -> (usize, Option<PrintfError>) {
    format_partial_nulls(words, &[], limits, out)
}

/// [`format_partial`] where `null_strings` says which `%s` arguments, in the order the format
/// takes them, are null pointers (printed `(null)`, as glibc does): a transport that carries the
/// pointer knows.
pub(crate) fn format_partial_nulls(
    words: &[u64],
    null_strings: &[bool],
    limits: &PrintfLimits,
    out: &mut Vec<u8>,
) -> (usize, Option<PrintfError>) {
    let start = out.len();
    match format_into(words, null_strings, limits, out, start) {
        Ok(printed) => (printed, None),
        Err(error) if error.is_fatal() => {
            out.truncate(start);
            (0, Some(error))
        }
        Err(error) => (cut(out, start, limits), Some(error)),
    }
}

fn format_into(
    words: &[u64],
    null_strings: &[bool],
    limits: &PrintfLimits,
    out: &mut Vec<u8>,
    start: usize,
) -> Result<usize, PrintfError> {
    let (fmt, used) = args::c_string(words).ok_or(PrintfError::UnterminatedFormat)?;
    let mut args = args::Args::new(&words[used..], null_strings);
    let mut work_left = limits.max_work;
    let mut i = 0;
    while i < fmt.len() && out.len() - start <= limits.max_output {
        let Some(percent) = fmt[i..].iter().position(|&b| b == b'%').map(|p| i + p) else {
            out.extend_from_slice(&fmt[i..]);
            break;
        };
        out.extend_from_slice(&fmt[i..percent]);
        let (spec, next) = spec::parse(&fmt, percent + 1, limits.max_field)?;
        let field = resolve(&spec, percent, &mut args, limits)?;
        let Some(left) = work_left.checked_sub(conversion_work(&field)) else {
            crate::observe::count(Reason::PrintfWork);
            warn_limited!(
                "printf: message cut at the conversion at {percent} of its format: its conversions ask for more \
                 than {} units of work",
                limits.max_work
            );
            return Ok(cut(out, start, limits));
        };
        work_left = left;
        convert(out, &spec, &field, percent, &mut args)?;
        i = next;
    }
    if out.len() - start > limits.max_output {
        crate::observe::count(Reason::PrintfOutput);
        warn_limited!("printf: message cut at {} bytes of output", limits.max_output);
    }
    Ok(cut(out, start, limits))
}

/// The work one conversion may cost: 1 + its width + its precision (the padding it may write,
/// the digits it may compute even where it prints fewer, like `%.4096g` of 1.0).
fn conversion_work(field: &Field) -> usize {
    1 + field.width + field.precision.unwrap_or(0)
}

/// Cuts the output past `limits.max_output` bytes; returns the bytes printed.
fn cut(out: &mut Vec<u8>, start: usize, limits: &PrintfLimits) -> usize {
    out.truncate(start + limits.max_output);
    out.len() - start
}

/// One conversion with its resolved field: take its argument, append its output.
fn convert(
    out: &mut Vec<u8>,
    spec: &Spec,
    field: &Field,
    offset: usize,
    args: &mut args::Args<'_>,
) -> Result<(), PrintfError> {
    let field = *field;
    match spec.conv {
        Conv::Signed | Conv::Unsigned | Conv::Octal | Conv::Hex(_) | Conv::Binary(_) => {
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
            int::string(out, &field, args.string(offset)?.as_deref())
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
