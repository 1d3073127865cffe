//! The construction of a protocol's `View::from_raw`, written once: the checks of raw memory and
//! the arrays taken from it ([`RawBuffer`]). Outside loom only, like every `from_raw`: only there
//! do the buffer's types have the layout of the device's bytes (see [`crate::sync`]).

use super::packet_count;
use super::LayoutError;

/// Raw memory checked to hold a buffer: `base` is not null, aligned to the protocol's alignment,
/// and the `size` bytes of its layout fit in the `len` given. The protocol's `View::from_raw`
/// takes its prefix and arrays from it with [`RawBuffer::slice`].
pub(crate) struct RawBuffer {
    base: *mut u8,
    size: usize,
    align: usize,
}

impl RawBuffer {
    /// The checks every protocol's `View::from_raw` makes before it builds a reference, in this
    /// order: `base` is not null, `base` is aligned to `align` (a power of two), and `len` covers
    /// the layout's `size`. `layout` is `None` where its size would overflow `usize` (the packet
    /// count bounds it, so only on 32-bit targets); that is reported as too small. Nothing is
    /// read or written. Returns the checked memory and the layout.
    pub(crate) fn check<L>(
        base: *mut u8,
        len: usize,
        align: usize,
        layout: Option<L>,
        size: impl FnOnce(&L) -> usize,
    ) -> Result<(Self, L), LayoutError> {
        if base.is_null() {
            return Err(LayoutError::Null);
        }
        if base as usize % align != 0 {
            return Err(LayoutError::Misaligned { address: base as usize });
        }
        let Some(layout) = layout else {
            return Err(LayoutError::TooSmall { needed: usize::MAX, given: len });
        };
        let size = size(&layout);
        if len < size {
            return Err(LayoutError::TooSmall { needed: size, given: len });
        }
        Ok((Self { base, size, align }, layout))
    }

    /// [`RawBuffer::check`] for a buffer of `num_packets` packets: the packet count checked
    /// first ([`packet_count`]), then the memory against `layout(count)`. Returns the memory, the
    /// layout and the count.
    pub(crate) fn for_packets<L>(
        base: *mut u8,
        len: usize,
        num_packets: u32,
        align: usize,
        layout: impl FnOnce(u32) -> Option<L>,
        size: impl FnOnce(&L) -> usize,
    ) -> Result<(Self, L, usize), LayoutError> {
        let n = packet_count(u64::from(num_packets))?;
        let (raw, layout) = Self::check(base, len, align, layout(n), size)?;
        Ok((raw, layout, n as usize))
    }

    /// The `count` elements of type `T` starting `offset` bytes from the base.
    ///
    /// # Safety
    /// - The memory given to [`RawBuffer::check`] is valid for reads and writes for `'a`, and
    ///   only accessed through atomics while the slice lives (the `from_raw` caller's contract).
    /// - `T` is made only of atomics with the representation of plain integers (the `sync`
    ///   facade's types), for which every bit pattern is valid.
    /// - `offset..offset + count * size_of::<T>()` lies inside the checked `size`, and `offset`
    ///   is a multiple of `align_of::<T>()`, which divides the checked alignment (the protocol's
    ///   `Layout` and its `abi` asserts establish both; debug builds check them here).
    pub(crate) unsafe fn slice<'a, T>(&self, offset: usize, count: usize) -> &'a [T] {
        debug_assert!(offset
            .checked_add(count * core::mem::size_of::<T>())
            .is_some_and(|end| end <= self.size));
        debug_assert!(
            offset % core::mem::align_of::<T>() == 0 && self.align % core::mem::align_of::<T>() == 0
        );
        // SAFETY: in bounds and aligned (this function's contract, checked in debug builds); the
        // memory is valid for 'a and only accessed atomically, and every bit pattern is a valid
        // `T` (the contract), so a shared slice of it is sound.
        unsafe { core::slice::from_raw_parts(self.base.add(offset).cast::<T>(), count) }
    }
}
