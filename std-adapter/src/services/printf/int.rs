//! Integer, character, string and pointer conversions.

use super::field::Field;
use super::spec::{Conv, Length};

/// The argument word converted as C converts the promoted argument for a signed conversion with
/// this length modifier (`%hhd` prints a `signed char`, `%d` an `int`, `%ld` a `long`).
fn signed(word: u64, length: Length) -> i64 {
    match length {
        Length::Char => i64::from(word as i8),
        Length::Short => i64::from(word as i16),
        Length::Int => i64::from(word as i32),
        Length::Long | Length::LongLong => word as i64,
    }
}

/// As [`signed`], for the unsigned conversions `o u x X b B`.
fn unsigned(word: u64, length: Length) -> u64 {
    match length {
        Length::Char => u64::from(word as u8),
        Length::Short => u64::from(word as u16),
        Length::Int => u64::from(word as u32),
        Length::Long | Length::LongLong => word,
    }
}

/// `d i u o x X b B` with their flags, width and precision.
pub(super) fn integer(out: &mut Vec<u8>, field: &Field, conv: Conv, length: Length, word: u64) {
    let (sign, magnitude): (&[u8], u64) = match conv {
        Conv::Signed => {
            let value = signed(word, length);
            (field.sign(value < 0), value.unsigned_abs())
        }
        _ => (b"", unsigned(word, length)),
    };
    let mut digits = match conv {
        Conv::Octal => format!("{magnitude:o}"),
        Conv::Hex(false) => format!("{magnitude:x}"),
        Conv::Hex(true) => format!("{magnitude:X}"),
        Conv::Binary(_) => format!("{magnitude:b}"),
        _ => format!("{magnitude}"),
    }
    .into_bytes();
    apply_precision(&mut digits, field.precision, magnitude);
    if conv == Conv::Octal && field.flags.alt && digits.first() != Some(&b'0') {
        // `#o`: the precision grows until the first digit is 0.
        digits.insert(0, b'0');
    }
    let mut prefix = sign.to_vec();
    if field.flags.alt && magnitude != 0 {
        match conv {
            Conv::Hex(false) => prefix.extend_from_slice(b"0x"),
            Conv::Hex(true) => prefix.extend_from_slice(b"0X"),
            Conv::Binary(false) => prefix.extend_from_slice(b"0b"),
            Conv::Binary(true) => prefix.extend_from_slice(b"0B"),
            _ => {}
        }
    }
    field.emit(out, &prefix, &digits, field.precision.is_none());
}

/// A precision is the minimum number of digits; precision 0 prints nothing for the value 0.
fn apply_precision(digits: &mut Vec<u8>, precision: Option<usize>, magnitude: u64) {
    match precision {
        Some(0) if magnitude == 0 => digits.clear(),
        Some(p) if p > digits.len() => {
            digits.splice(0..0, std::iter::repeat(b'0').take(p - digits.len()));
        }
        _ => {}
    }
}

/// `%p` as glibc prints it: `(nil)` for 0 (width applies, precision and `0` do not), otherwise
/// `%#lx`, keeping the `+` and space flags (glibc prints `%+p` of 0x10 as `+0x10`).
pub(super) fn pointer(out: &mut Vec<u8>, field: &Field, word: u64) {
    if word == 0 {
        field.emit(out, b"", b"(nil)", false);
        return;
    }
    let mut prefix = field.sign(false).to_vec();
    prefix.extend_from_slice(b"0x");
    let mut digits = format!("{word:x}").into_bytes();
    apply_precision(&mut digits, field.precision, word);
    field.emit(out, &prefix, &digits, field.precision.is_none());
}

/// `%c`: the argument converted to `unsigned char`; only width and `-` apply.
pub(super) fn character(out: &mut Vec<u8>, field: &Field, byte: u8) {
    field.emit(out, b"", &[byte], false);
}

/// What glibc prints for a null `%s`.
const NULL_STRING: &[u8] = b"(null)";

/// `%s`: at most `precision` bytes of the string; only width and `-` apply. A null pointer
/// (`None`) prints as glibc prints it: `(null)` where no precision or one of at least its 6
/// bytes allows it whole, otherwise nothing (`%.3s` prints no `(nu`); the width pads either.
pub(super) fn string(out: &mut Vec<u8>, field: &Field, bytes: Option<&[u8]>) {
    let bytes = match bytes {
        Some(bytes) => bytes,
        None if field.precision.map_or(true, |p| p >= NULL_STRING.len()) => NULL_STRING,
        None => b"",
    };
    let shown = field.precision.map_or(bytes, |p| &bytes[..p.min(bytes.len())]);
    field.emit(out, b"", shown, false);
}
