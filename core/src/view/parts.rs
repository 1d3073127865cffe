//! The construction of a protocol's `View::from_parts`, written once: the length checks of
//! separately held parts ([`check_lengths`]) and their `Debug` ([`debug_parts`]).

use super::LayoutError;
use core::fmt;

/// The length checks of a protocol's `View::from_parts`: each `(array, expected, given)` in
/// order, the first mismatch reported as [`LayoutError::ArrayLength`].
pub(crate) fn check_lengths(lengths: &[(&'static str, usize, usize)]) -> Result<(), LayoutError> {
    for &(array, expected, given) in lengths {
        if expected != given {
            return Err(LayoutError::ArrayLength { array, expected, given });
        }
    }
    Ok(())
}

/// One array of a protocol's `Parts` for [`debug_parts`]: its name, address and length.
pub(crate) fn part<T>(name: &'static str, slice: &[T]) -> (&'static str, *const u8, usize) {
    (name, slice.as_ptr().cast(), slice.len())
}

/// The `Debug` of a protocol's `Parts`: where the prefix and each array are, and each array's
/// length (the shared words are not read).
pub(crate) fn debug_parts<P>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    prefix: &P,
    arrays: &[(&'static str, *const u8, usize)],
) -> fmt::Result {
    let mut s = f.debug_struct(name);
    s.field("prefix", &(prefix as *const P));
    for &(array, address, entries) in arrays {
        s.field(array, &format_args!("{address:p} ({entries} entries)"));
    }
    s.finish()
}
