//! A buffer in raw memory, as a device would see it, and the word offsets of its fields.
//!
//! The memory is an exactly sized, 8-aligned array of `AtomicU64` (so AddressSanitizer sees any
//! access past its end), viewed through `BufferView::from_raw` like a buffer from a GPU runtime.
//! The targets read and write it word by word to play the device and to check the host.

use hostcall_core::buffer::BufferView;
use hostcall_core::layout::{buffer_size, payloads_offset, HEADERS_OFFSET, LANES, SLOT_WORDS};
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
pub(crate) struct RawBuffer {
    words: Box<[AtomicU64]>,
    num_packets: usize,
}

impl RawBuffer {
    /// Zeroed memory for `num_packets` packets (2..=`Geometry::MAX_PACKETS`).
    pub(crate) fn new(num_packets: usize) -> Self {
        let size = buffer_size(num_packets).expect("small packet counts fit");
        debug_assert_eq!(size % 8, 0);
        Self { words: (0..size / 8).map(|_| AtomicU64::new(0)).collect(), num_packets }
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
    pub(crate) fn view(&self) -> BufferView<'_> {
        // SAFETY: `words` is `len()` bytes, 8-aligned (`AtomicU64`), and lives as long as the
        // returned borrow of `self`. Every access to it is atomic: the view's, and this type's own
        // `load`/`store` (`AtomicU64` has the representation of `u64`, and its `UnsafeCell` allows
        // writes through a pointer derived from a shared reference).
        unsafe { BufferView::from_raw(self.base(), self.len(), self.num_packets as u64) }
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
        (0..self.words.len()).map(|w| self.load(w)).collect()
    }

    /// Writes back a snapshot.
    pub(crate) fn restore(&self, words: &[u64]) {
        for (w, &value) in words.iter().enumerate() {
            self.store(w, value);
        }
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
        for (lane, slot) in out.iter_mut().enumerate() {
            slot.copy_from_slice(&words[start + lane * SLOT_WORDS..][..SLOT_WORDS]);
        }
        out
    }
}

/// The lanes of an activemask, lowest first.
pub(crate) fn lanes(mask: u64) -> impl Iterator<Item = usize> {
    (0..LANES).filter(move |&lane| mask >> lane & 1 == 1)
}
