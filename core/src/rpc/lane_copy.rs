//! A hostcall packet's lanes between a port's lane buffers and the host's scratch payload
//! (`packet.rs`): a lane's eight request words in, its two reply words back.
//!
//! On x86-64 the words go through vector registers: the shared lane buffer's words are each
//! loaded or stored with one 8-byte access (`movq`, `movhps`), as a Relaxed atomic access of the
//! word would be, and the scratch's (the host's own memory, which no one else touches while the
//! packet is built or its reply read) with one 16-byte access per pair (`movups`): 12
//! instructions a lane in, 3 back, against 16 and 4 with the words one at a time through general
//! registers, and none of the eight general registers the scalar copy holds the words in (the
//! packet's turn spills less around it). Elsewhere, under loom and under Miri, one word at a time
//! (the reference the tests compare with).

use super::layout::LaneBuffer;
use crate::lane::{REPLY_WORDS, SLOT_WORDS};
use crate::sync::PayloadWord;

/// Copies the eight words of `from` (a lane of the port) into `to` (its slot of the scratch).
#[inline(always)]
pub(super) fn request_in(from: &LaneBuffer, to: &[PayloadWord; SLOT_WORDS]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    vector::request_in(from, to);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))))]
    scalar::request_in(from, to);
}

/// Copies the reply's words of `from` (a slot of the scratch) into `to` (its lane of the port);
/// the lane's other words keep the request.
#[inline(always)]
pub(super) fn reply_out(from: &[PayloadWord; SLOT_WORDS], to: &LaneBuffer) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
    vector::reply_out(from, to);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri))))]
    scalar::reply_out(from, to);
}

/// One word at a time (Relaxed loads and stores).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)), allow(dead_code))]
mod scalar {
    use super::{LaneBuffer, PayloadWord, REPLY_WORDS, SLOT_WORDS};

    #[inline(always)]
    pub(in crate::rpc) fn request_in(from: &LaneBuffer, to: &[PayloadWord; SLOT_WORDS]) {
        for (to, from) in to.iter().zip(&from.words) {
            to.write(from.read());
        }
    }

    #[inline(always)]
    pub(in crate::rpc) fn reply_out(from: &[PayloadWord; SLOT_WORDS], to: &LaneBuffer) {
        for (to, from) in to.words[..REPLY_WORDS].iter().zip(from) {
            to.write(from.read());
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom), not(miri)))]
mod vector {
    use super::{LaneBuffer, PayloadWord, REPLY_WORDS, SLOT_WORDS};

    const _: () = assert!(SLOT_WORDS == 8 && REPLY_WORDS == 2);
    const _: () = assert!(core::mem::size_of::<LaneBuffer>() == 64);

    #[inline(always)]
    pub(in crate::rpc) fn request_in(from: &LaneBuffer, to: &[PayloadWord; SLOT_WORDS]) {
        // SAFETY: eight 8-byte loads from `from.words` (a live array of eight 8-byte aligned
        // `PayloadWord`s, each `repr(transparent)` over an `AtomicU64`, offsets 0..64) and four
        // 16-byte stores to `to` (the same, offsets 0..64), nothing else: no stack, flags kept.
        // Each load is one aligned quadword access, which x86-64 performs atomically (Intel SDM
        // vol. 3A, 9.1.1; AMD APM vol. 2, 7.3.2), as the `mov` of a Relaxed `AtomicU64::load`
        // does: the device may write the shared words meanwhile (a hostile one), and each word
        // read is then some value it stored, never undefined behaviour. The stores write the
        // host's scratch, which nothing else accesses while a packet is built (the caller's
        // `&Payload` is the scratch's only use, on this thread), through the atomics' interior
        // mutability; the 16-byte store need not be atomic.
        unsafe {
            core::arch::asm!(
                "movq {a}, qword ptr [{from}]",
                "movhps {a}, qword ptr [{from} + 8]",
                "movq {b}, qword ptr [{from} + 16]",
                "movhps {b}, qword ptr [{from} + 24]",
                "movq {c}, qword ptr [{from} + 32]",
                "movhps {c}, qword ptr [{from} + 40]",
                "movq {d}, qword ptr [{from} + 48]",
                "movhps {d}, qword ptr [{from} + 56]",
                "movups xmmword ptr [{to}], {a}",
                "movups xmmword ptr [{to} + 16], {b}",
                "movups xmmword ptr [{to} + 32], {c}",
                "movups xmmword ptr [{to} + 48], {d}",
                from = in(reg) from.words.as_ptr(),
                to = in(reg) to.as_ptr(),
                a = out(xmm_reg) _,
                b = out(xmm_reg) _,
                c = out(xmm_reg) _,
                d = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
        }
    }

    #[inline(always)]
    pub(in crate::rpc) fn reply_out(from: &[PayloadWord; SLOT_WORDS], to: &LaneBuffer) {
        // SAFETY: one 16-byte load from `from` (the scratch's slot, eight `PayloadWord`s, offsets
        // 0..16: the reply's two words, which the service wrote on this thread and nothing
        // touches now) and two 8-byte stores to `to.words` (offsets 0..16), nothing else: no
        // stack, flags kept. Each store is one aligned quadword access, atomic on x86-64 (as in
        // `request_in`), as the `mov` of a Relaxed `AtomicU64::store` is; the Release fence of
        // the turn's `finish` publishes them.
        unsafe {
            core::arch::asm!(
                "movups {reply}, xmmword ptr [{from}]",
                "movq qword ptr [{to}], {reply}",
                "movhps qword ptr [{to} + 8], {reply}",
                from = in(reg) from.as_ptr(),
                to = in(reg) to.words.as_ptr(),
                reply = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(words: [u64; SLOT_WORDS]) -> LaneBuffer {
        let buffer = LaneBuffer::default();
        buffer.write(&words);
        buffer
    }

    /// The copies move exactly the words they name, in order, as the word-at-a-time reference
    /// does: all eight in, the reply's two back, the lane's other six kept.
    #[test]
    fn the_copies_move_the_words_they_name_as_the_reference_does() {
        let request: [u64; SLOT_WORDS] = core::array::from_fn(|i| 0x0101_0101_0101_0101 * (i as u64 + 1));
        let slot: [PayloadWord; SLOT_WORDS] = Default::default();
        request_in(&buffer(request), &slot);
        assert_eq!(slot.each_ref().map(PayloadWord::read), request);
        let reference: [PayloadWord; SLOT_WORDS] = Default::default();
        scalar::request_in(&buffer(request), &reference);
        assert_eq!(reference.each_ref().map(PayloadWord::read), request);

        let reply: [PayloadWord; SLOT_WORDS] = core::array::from_fn(|i| PayloadWord::new(!(i as u64)));
        let lane = buffer(request);
        reply_out(&reply, &lane);
        let mut expected = request;
        expected[..REPLY_WORDS].copy_from_slice(&[!0, !1]);
        assert_eq!(lane.read(), expected);
        let reference = buffer(request);
        scalar::reply_out(&reply, &reference);
        assert_eq!(reference.read(), expected);
    }
}
