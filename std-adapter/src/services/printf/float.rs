//! `f F e E g G a A` exactly as glibc prints an `f64`.
//!
//! Decimal digits come from Rust's `{:.N}` and `{:.Ne}` formatting, which is exact: it expands
//! the binary value to as many digits as asked and rounds the exact expansion half to even, which
//! is what glibc does in the default rounding mode (round to nearest). Hexadecimal digits come
//! straight from the bits, rounded half to even on the cut nibbles as glibc's `printf_fphex` does.

use super::field::Field;
use super::spec::FloatConv;

/// One float conversion of the f64 with bit pattern `bits`.
pub(super) fn float(out: &mut Vec<u8>, field: &Field, kind: FloatConv, upper: bool, bits: u64) {
    let x = f64::from_bits(bits);
    // The sign bit, so -0.0 prints `-0` and a NaN with the sign bit set prints `-nan` (glibc).
    let mut prefix = field.sign(bits >> 63 == 1).to_vec();
    if !x.is_finite() {
        let body: &[u8] = match (x.is_nan(), upper) {
            (true, false) => b"nan",
            (true, true) => b"NAN",
            (false, false) => b"inf",
            (false, true) => b"INF",
        };
        // glibc pads infinities and NaNs with spaces even under the `0` flag.
        field.emit(out, &prefix, body, false);
        return;
    }
    let abs = x.abs();
    let alt = field.flags.alt;
    let body = match kind {
        FloatConv::Fixed => fixed(abs, field.precision.unwrap_or(6), alt),
        FloatConv::Exp => {
            let precision = field.precision.unwrap_or(6);
            let (mantissa, exponent) = exp_parts(abs, precision);
            exp_form(mantissa, precision == 0 && alt, exponent, upper)
        }
        FloatConv::General => general(abs, field.precision.unwrap_or(6), alt, upper),
        FloatConv::Hex => {
            prefix.extend_from_slice(if upper { b"0X" } else { b"0x" });
            hex(bits, field.precision, alt, upper)
        }
    };
    field.emit(out, &prefix, body.as_bytes(), true);
}

/// `%f` of a non-negative finite value.
fn fixed(abs: f64, precision: usize, alt: bool) -> String {
    let mut s = format!("{abs:.precision$}");
    if precision == 0 && alt {
        s.push('.');
    }
    s
}

/// The mantissa digits (`d.ddd`) of `abs` rounded to `precision` digits after the point, and the
/// decimal exponent after that rounding.
fn exp_parts(abs: f64, precision: usize) -> (String, i32) {
    let s = format!("{abs:.precision$e}");
    match s.split_once('e') {
        Some((mantissa, exponent)) => (mantissa.to_owned(), exponent.parse().unwrap_or(0)),
        // Rust always writes an exponent for `{:e}`; keep going rather than panic.
        None => (s, 0),
    }
}

/// `d.ddde+XX`: at least two exponent digits, `.` forced by `#` with precision 0.
fn exp_form(mut mantissa: String, force_point: bool, exponent: i32, upper: bool) -> String {
    if force_point {
        mantissa.push('.');
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{sign}{:02}", exponent.unsigned_abs())
}

/// `%g`: precision P (0 means 1) significant digits; with X the exponent `%e` would print, `%f`
/// style with precision P - 1 - X if P > X >= -4, else `%e` style with precision P - 1; then,
/// without `#`, trailing zeros and a trailing point are removed.
fn general(abs: f64, precision: usize, alt: bool, upper: bool) -> String {
    let p = precision.max(1);
    let (mantissa, x) = exp_parts(abs, p - 1);
    // `p` is bounded by the field limit, far below i32::MAX.
    let p_i = i32::try_from(p).unwrap_or(i32::MAX);
    if x < p_i && x >= -4 {
        // Same cut position as the `%e` rounding above, so the same digits.
        let decimals = (p_i - 1 - x) as usize;
        let mut s = format!("{abs:.decimals$}");
        if alt {
            if decimals == 0 {
                s.push('.');
            }
        } else {
            strip_fraction_zeros(&mut s);
        }
        s
    } else if alt && x == p_i && p <= 16 && abs < ten_to(p) {
        // glibc quirk, matched on purpose: the unrounded value picked `%f` style (its exponent
        // is P - 1) and rounding carried into a new digit, forcing `%e` style; glibc then keeps
        // the `%f` style's count of forced fraction digits (zero), so `%#.2g` of 99.5 prints
        // `1.e+02`, not `1.0e+02`. (For P > 16 such values are integers of P digits: no carry.)
        exp_form("1".to_owned(), true, x, upper)
    } else {
        let mut mantissa = mantissa;
        if !alt {
            strip_fraction_zeros(&mut mantissa);
        }
        exp_form(mantissa, alt && p == 1, x, upper)
    }
}

/// 10^p, exactly (p <= 22, where every power of ten is an f64).
fn ten_to(p: usize) -> f64 {
    format!("1e{p}").parse().unwrap_or(f64::INFINITY)
}

/// Removes trailing zeros after a decimal point, then the point if nothing follows it.
fn strip_fraction_zeros(s: &mut String) {
    if s.contains('.') {
        let kept = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(kept);
    }
}

/// `%a` after the `0x`: `h.hhhp±d`, as glibc prints a double. Normal numbers lead with 1,
/// subnormals with 0 and exponent -1022, zero is `0p+0`. Without a precision the fraction is
/// exact with trailing zeros removed; with one it is rounded half to even on the cut nibbles,
/// and a carry out of the lead digit gives `2` (normal) or `1` (subnormal), as glibc leaves it.
fn hex(bits: u64, precision: Option<usize>, alt: bool, upper: bool) -> String {
    const FRACTION_NIBBLES: usize = 13;
    let exponent_field = ((bits >> 52) & 0x7ff) as i32;
    let mut fraction = bits & ((1 << 52) - 1);
    let (mut lead, exponent) = match (exponent_field, fraction) {
        (0, 0) => (0u64, 0),
        (0, _) => (0, -1022),
        (e, _) => (1, e - 1023),
    };
    let (digits, zeros_after) = match precision {
        None if fraction == 0 => (0, 0),
        None => {
            let trailing = fraction.trailing_zeros() as usize / 4;
            fraction >>= 4 * trailing;
            (FRACTION_NIBBLES - trailing, 0)
        }
        Some(p) if p < FRACTION_NIBBLES => {
            let cut = 4 * (FRACTION_NIBBLES - p) as u32;
            let rest = fraction & ((1 << cut) - 1);
            let half = 1 << (cut - 1);
            fraction >>= cut;
            let odd = if p == 0 { lead & 1 == 1 } else { fraction & 1 == 1 };
            if rest > half || (rest == half && odd) {
                fraction += 1;
                if fraction >> (4 * p) != 0 {
                    fraction = 0;
                    lead += 1;
                }
            }
            (p, 0)
        }
        Some(p) => (FRACTION_NIBBLES, p - FRACTION_NIBBLES),
    };
    let mut s = format!("{lead}");
    if digits > 0 || zeros_after > 0 || alt {
        s.push('.');
    }
    if digits > 0 {
        if upper {
            s.push_str(&format!("{fraction:0digits$X}"));
        } else {
            s.push_str(&format!("{fraction:0digits$x}"));
        }
    }
    s.extend(std::iter::repeat('0').take(zeros_after));
    let sign = if exponent < 0 { '-' } else { '+' };
    s.push(if upper { 'P' } else { 'p' });
    s.push(sign);
    s.push_str(&exponent.unsigned_abs().to_string());
    s
}
