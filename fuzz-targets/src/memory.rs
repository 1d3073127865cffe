//! A buffer in raw memory, as a device would see it, and the word offsets of its fields.
//!
//! The memory is an exactly sized, 8-aligned array of `AtomicU64` (so AddressSanitizer sees any
//! access past its end), viewed through `stack::View::from_raw` like a buffer from a GPU runtime.
//! The targets read and write it word by word to play the device and to check the host.

use hostcall_core::stack::{buffer_size, payloads_offset, View, HEADERS_OFFSET};
use hostcall_core::{LANES, SLOT_WORDS};
use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// Words of the prefix: `free_stack`.
pub(crate) const FREE_STACK_WORD: usize = 3;
/// Words of the prefix: `ready_stack`.
pub(crate) const READY_STACK_WORD: usize = 4;
/// Words in one header: `next`, `activemask`, `service | control << 32`.
pub(crate) const HEADER_WORDS: usize = 3;
/// Words in one payload.
pub(crate) const PAYLOAD_WORDS: usize = LANES * SLOT_WORDS;

/// One lane-by-word copy of a payload.
pub(crate) type PayloadWords = [[u64; SLOT_WORDS]; LANES];

/// A buffer of `n` packets in memory of exactly `buffer_size(n)` bytes.
///
/// Not `Sync`: the targets are single-threaded, which lets [`RawBuffer::snapshot`] and
/// [`RawBuffer::restore`] copy the whole buffer with `memcpy` (fuzzing spends its time where the
/// host's code is, not in word-by-word loops instrumented for coverage).
pub(crate) struct RawBuffer {
    words: Box<[AtomicU64]>,
    num_packets: usize,
    single_threaded: PhantomData<Cell<()>>,
}

impl RawBuffer {
    /// Zeroed memory for `num_packets` packets (2..=`Geometry::MAX_PACKETS`).
    pub(crate) fn new(num_packets: usize) -> Self {
        let size = buffer_size(num_packets as u32).expect("small packet counts fit");
        debug_assert_eq!(size % 8, 0);
        let len = size / 8;
        let layout = Layout::array::<AtomicU64>(len).expect("small packet counts fit");
        // SAFETY: the layout's size is not zero (a buffer has at least its 48-byte prefix).
        let ptr = unsafe { alloc_zeroed(layout) }.cast::<AtomicU64>();
        if ptr.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: `ptr` is a fresh allocation of the global allocator with the layout of
        // `[AtomicU64; len]`, the layout `Box<[AtomicU64]>` frees it with; all-zero bytes are a
        // valid `AtomicU64` (holding 0).
        let words = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) };
        Self { words, num_packets, single_threaded: PhantomData }
    }

    pub(crate) fn num_packets(&self) -> usize {
        self.num_packets
    }

    /// The first byte (what a runtime would hand the listener).
    pub(crate) fn base(&self) -> *mut u8 {
        self.words.as_ptr() as *mut u8
    }

    /// Size in bytes (exactly `buffer_size(num_packets)`).
    pub(crate) fn len(&self) -> usize {
        self.words.len() * 8
    }

    /// The buffer's view, through the raw-memory path.
    pub(crate) fn view(&self) -> View<'_> {
        // SAFETY: `words` is `len()` bytes, 8-aligned (`AtomicU64`), and lives as long as the
        // returned borrow of `self`. The view's accesses and this type's `load`/`store` are atomic
        // (`AtomicU64` has the representation of `u64`, and its `UnsafeCell` allows writes through
        // a pointer derived from a shared reference); the plain copies of `snapshot`/`restore`
        // run on the one thread that uses the buffer and its views, so nothing races with them.
        unsafe { View::from_raw(self.base(), self.len(), self.num_packets as u32) }
            .expect("memory sized and aligned for this packet count")
    }

    pub(crate) fn load(&self, word: usize) -> u64 {
        // Relaxed: the targets are single-threaded; this is the device's or the checker's access.
        self.words[word].load(Ordering::Relaxed)
    }

    pub(crate) fn store(&self, word: usize, value: u64) {
        // Relaxed: as in `load`.
        self.words[word].store(value, Ordering::Relaxed);
    }

    /// Every word, in order.
    pub(crate) fn snapshot(&self) -> Vec<u64> {
        let mut out = vec![0; self.words.len()];
        // SAFETY: `AtomicU64` has the size and bit validity of `u64`, and `out` has as many words
        // as the buffer. The plain read races with nothing: this type is not `Sync`, and the
        // targets use the buffer and its views on this one thread only.
        unsafe {
            std::ptr::copy_nonoverlapping(self.words.as_ptr().cast::<u64>(), out.as_mut_ptr(), out.len())
        };
        out
    }

    /// Writes back a snapshot of this buffer.
    pub(crate) fn restore(&self, words: &[u64]) {
        assert_eq!(words.len(), self.words.len());
        // SAFETY: as in `snapshot`; writing through a pointer derived from `&[AtomicU64]` is
        // allowed because each `AtomicU64` is an `UnsafeCell`.
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr(), self.words.as_ptr() as *mut u64, words.len())
        };
    }

    /// The first word of header `index`.
    pub(crate) fn header_word(&self, index: usize) -> usize {
        HEADERS_OFFSET / 8 + index * HEADER_WORDS
    }

    /// The first word of payload `index`.
    pub(crate) fn payload_word(&self, index: usize) -> usize {
        payloads_offset(self.num_packets) / 8 + index * PAYLOAD_WORDS
    }

    /// Payload `index` copied out of `words` (a snapshot or the live memory).
    pub(crate) fn payload_of(&self, words: &[u64], index: usize) -> Box<PayloadWords> {
        let start = self.payload_word(index);
        let mut out = Box::new([[0; SLOT_WORDS]; LANES]);
        out.as_flattened_mut().copy_from_slice(&words[start..start + PAYLOAD_WORDS]);
        out
    }
}
