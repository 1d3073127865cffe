//! The arguments a format asks for, in order, with the same parser that formats it: what a
//! transport that carries C's `va_list` bytes (LLVM libc's GPU RPC) needs to read them.

use super::spec::{self, Conv, Count, Length};

/// One argument a format consumes, by the C type the caller passed (after default promotions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgKind {
    /// An `int` or `unsigned` (a `*` width or precision, `%c`, integers without `l`/`ll`/...).
    Int32,
    /// A 64-bit integer (`l`, `ll`, `j`, `z`, `t`, `q`, `L` on an integer conversion).
    Int64,
    /// A `double` (every float conversion).
    Double,
    /// A pointer printed or ignored (`%p`, `%n`).
    Pointer,
    /// A `char *` whose bytes are printed (`%s`).
    Str,
}

/// The arguments of `format` (no NUL inside) up to its end or to its first conversion the
/// formatter would refuse (the formatter prints nothing from there on, so nothing past it is
/// needed).
pub(crate) fn argument_kinds(format: &[u8], max_field: usize) -> Vec<ArgKind> {
    let mut kinds = Vec::new();
    let mut i = 0;
    while let Some(percent) = format[i..].iter().position(|&b| b == b'%').map(|p| i + p) {
        let Ok((spec, next)) = spec::parse(format, percent + 1, max_field) else {
            break;
        };
        for count in [spec.width, spec.precision] {
            if count == Some(Count::Star) {
                kinds.push(ArgKind::Int32);
            }
        }
        let wide = matches!(spec.length, Length::Long | Length::LongLong);
        match spec.conv {
            Conv::Signed | Conv::Unsigned | Conv::Octal | Conv::Hex(_) | Conv::Binary(_) if wide => {
                kinds.push(ArgKind::Int64)
            }
            Conv::Signed | Conv::Unsigned | Conv::Octal | Conv::Hex(_) | Conv::Binary(_) | Conv::Char => {
                kinds.push(ArgKind::Int32)
            }
            Conv::Float(..) => kinds.push(ArgKind::Double),
            Conv::Pointer | Conv::Count => kinds.push(ArgKind::Pointer),
            Conv::Str => kinds.push(ArgKind::Str),
            Conv::Percent => {}
        }
        i = next;
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::ArgKind::*;
    use super::*;

    #[test]
    fn kinds_follow_the_conversions() {
        assert_eq!(
            argument_kinds(b"%d %ld %*.*f %s %c %p %n %% %hhx %llu %Lg", 4096),
            [Int32, Int64, Int32, Int32, Double, Str, Int32, Pointer, Pointer, Int32, Int64, Double]
        );
        // C23's binary reads its argument as `%x` does.
        assert_eq!(
            argument_kinds(b"%b %#B %lb %llB %hhb %*b", 4096),
            [Int32, Int32, Int64, Int64, Int32, Int32, Int32]
        );
        assert_eq!(argument_kinds(b"%d %y %d", 4096), [Int32]);
        assert_eq!(argument_kinds(b"plain", 4096), []);
    }
}
