//! Parsing one conversion specification: `%[flags][width][.precision][length]conversion`.

use super::PrintfError;

/// The flag characters `- + space # 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    /// `-`: left-justify.
    pub left: bool,
    /// `+`: always print a sign for signed conversions.
    pub plus: bool,
    /// space: a space where a non-negative signed value has no sign.
    pub space: bool,
    /// `#`: the alternate form.
    pub alt: bool,
    /// `0`: pad numbers with zeros after the sign and prefix.
    pub zero: bool,
}

/// A width or precision as written: digits, or `*` (taken from the next argument word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Count {
    Fixed(usize),
    Star,
}

/// Length modifiers. `L`, `q`, `j`, `z`, `t`, `l`, `ll` all mean 64 bits here (LP64), as in glibc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Length {
    /// none: `int`.
    Int,
    /// `hh`: `char`.
    Char,
    /// `h`: `short`.
    Short,
    /// `l`: `long` (and `wint_t`/`wchar_t*` for `%lc`/`%ls`).
    Long,
    /// `ll`, `q`, `j`, `z`, `Z`, `t`, `L`: 64-bit integers (`L` is `long double` for floats).
    LongLong,
}

/// The conversion character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Conv {
    /// `d`, `i`.
    Signed,
    /// `u`.
    Unsigned,
    /// `o`.
    Octal,
    /// `x` (false) or `X` (true).
    Hex(bool),
    /// `b` (false) or `B` (true): C23's binary, as glibc (2.35 and later) prints it.
    Binary(bool),
    /// `c`.
    Char,
    /// `s`.
    Str,
    /// `p`.
    Pointer,
    /// `f`/`F`, `e`/`E`, `g`/`G`, `a`/`A`: the lowercase letter and whether it was uppercase.
    Float(FloatConv, bool),
    /// `n`.
    Count,
    /// `%`.
    Percent,
}

/// The float conversion family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FloatConv {
    Fixed,
    Exp,
    General,
    Hex,
}

/// One parsed specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Spec {
    pub flags: Flags,
    pub width: Option<Count>,
    pub precision: Option<Count>,
    pub length: Length,
    pub conv: Conv,
}

/// Parses the specification starting after a `%` at `fmt[start - 1]`. Returns it and the index
/// just past the conversion character. Digit strings larger than `max_field` are refused.
pub(super) fn parse(fmt: &[u8], start: usize, max_field: usize) -> Result<(Spec, usize), PrintfError> {
    let spec_at = start - 1;
    let mut i = start;
    let at = |i: usize| fmt.get(i).copied().ok_or(PrintfError::IncompleteSpec { offset: spec_at });

    let mut flags = Flags::default();
    loop {
        match at(i)? {
            b'-' => flags.left = true,
            b'+' => flags.plus = true,
            b' ' => flags.space = true,
            b'#' => flags.alt = true,
            b'0' => flags.zero = true,
            _ => break,
        }
        i += 1;
    }

    let width = parse_count(fmt, &mut i, spec_at, max_field)?;
    let precision = if at(i)? == b'.' {
        i += 1;
        Some(parse_count(fmt, &mut i, spec_at, max_field)?.unwrap_or(Count::Fixed(0)))
    } else {
        None
    };

    let length = match at(i)? {
        b'h' if at(i + 1)? == b'h' => {
            i += 2;
            Length::Char
        }
        b'h' => {
            i += 1;
            Length::Short
        }
        b'l' if at(i + 1)? == b'l' => {
            i += 2;
            Length::LongLong
        }
        b'l' => {
            i += 1;
            Length::Long
        }
        b'q' | b'j' | b'z' | b'Z' | b't' | b'L' => {
            i += 1;
            Length::LongLong
        }
        _ => Length::Int,
    };

    let byte = at(i)?;
    let conv = match byte {
        b'd' | b'i' => Conv::Signed,
        b'u' => Conv::Unsigned,
        b'o' => Conv::Octal,
        b'x' => Conv::Hex(false),
        b'X' => Conv::Hex(true),
        b'b' => Conv::Binary(false),
        b'B' => Conv::Binary(true),
        b'c' => Conv::Char,
        b's' => Conv::Str,
        b'p' => Conv::Pointer,
        b'f' => Conv::Float(FloatConv::Fixed, false),
        b'F' => Conv::Float(FloatConv::Fixed, true),
        b'e' => Conv::Float(FloatConv::Exp, false),
        b'E' => Conv::Float(FloatConv::Exp, true),
        b'g' => Conv::Float(FloatConv::General, false),
        b'G' => Conv::Float(FloatConv::General, true),
        b'a' => Conv::Float(FloatConv::Hex, false),
        b'A' => Conv::Float(FloatConv::Hex, true),
        b'n' => Conv::Count,
        b'%' => Conv::Percent,
        _ => return Err(PrintfError::BadConversion { offset: spec_at, byte }),
    };
    Ok((Spec { flags, width, precision, length, conv }, i + 1))
}

/// `*`, a digit string, or nothing.
fn parse_count(
    fmt: &[u8],
    i: &mut usize,
    spec_at: usize,
    max_field: usize,
) -> Result<Option<Count>, PrintfError> {
    if fmt.get(*i) == Some(&b'*') {
        *i += 1;
        return Ok(Some(Count::Star));
    }
    let mut value: Option<usize> = None;
    while let Some(&d @ b'0'..=b'9') = fmt.get(*i) {
        let v = value.unwrap_or(0).saturating_mul(10).saturating_add(usize::from(d - b'0'));
        if v > max_field {
            return Err(PrintfError::FieldTooLarge { offset: spec_at, limit: max_field });
        }
        value = Some(v);
        *i += 1;
    }
    Ok(value.map(Count::Fixed))
}
