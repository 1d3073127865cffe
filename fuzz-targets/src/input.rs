//! A byte reader for fuzz inputs: every read succeeds, an exhausted input reads as zeros.

/// Reads little-endian integers off the front of a fuzz input.
///
/// ```
/// use hostcall_fuzz_targets::input::Input;
/// let mut input = Input::new(&[1, 2, 3]);
/// assert_eq!(input.u8(), 1);
/// assert_eq!(input.u16(), 0x0302);
/// assert!(input.is_empty());
/// assert_eq!(input.u64(), 0, "past the end: zeros");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The bytes not read yet (the reader is left empty).
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }

    /// The next `N` bytes, zero-padded past the end.
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let take = N.min(self.data.len());
        out[..take].copy_from_slice(&self.data[..take]);
        self.data = &self.data[take..];
        out
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
}
