//! The line word and what is made of it (PROTOCOL.md section 9.2): a `u64` whose top
//! [`SEQ_BITS`] bits are the sequence of the call that stored it and whose low [`DATA_BITS`] bits
//! are data, stored and loaded as one 8-byte atomic access. Every encoding of the protocol is
//! here, once, for the wave, the host, the models and the fuzz targets alike:
//!
//! - a lane's request: its carried words' low 57 bits, one word each, then one word packing the
//!   top 7 bits of every one of them (bits `7 k .. 7 k + 7` for word `k`);
//! - the header: the head holds the service (bits 0..32) and the activemask's top 7 bits (bits
//!   32..39), the mask word its low 57 bits;
//! - a lane's reply: each reply word's low 57 bits, then their top bits (bits 0..14).
//!
//! Bits the encodings leave unused (head bits 39..57, bit 56 of a request's packed word, bits
//! 14..57 of a reply's) are reserved: a writer stores zero, and a reader ignores them (no decode
//! below looks at them, so whatever a device puts there changes nothing).

use super::layout::{CARRIED_REQUEST_WORDS, REPLY_LANE_WORDS, REQUEST_LANE_WORDS};
use crate::lane::{REPLY_WORDS, SLOT_WORDS};

/// Bits of a line word's sequence (its top bits).
pub const SEQ_BITS: u32 = 7;
/// Bits of a line word's data (its low bits).
pub const DATA_BITS: u32 = 64 - SEQ_BITS;
/// The data bits of a line word.
pub const DATA_MASK: u64 = (1 << DATA_BITS) - 1;

const _: () = assert!(SEQ_BITS as usize * CARRIED_REQUEST_WORDS < DATA_BITS as usize);
const _: () = assert!(SEQ_BITS as usize * REPLY_WORDS < DATA_BITS as usize);

/// The line word of sequence `seq` (at most [`SEQ_MAX`](super::SEQ_MAX)) holding `data`'s low
/// [`DATA_BITS`] bits.
///
/// ```
/// use hostcall_core::line::{data_of, seq_of, word, DATA_MASK};
/// let w = word(0x1ff_dead_beef_cafe, 7);
/// assert_eq!((seq_of(w), data_of(w)), (7, 0x1ff_dead_beef_cafe));
/// assert_eq!(data_of(word(u64::MAX, 127)), DATA_MASK, "the top bits are the sequence's");
/// ```
#[inline]
pub const fn word(data: u64, seq: u32) -> u64 {
    (seq as u64) << DATA_BITS | data & DATA_MASK
}

/// The sequence of a line word.
#[inline]
pub const fn seq_of(word: u64) -> u32 {
    (word >> DATA_BITS) as u32
}

/// The data of a line word.
#[inline]
pub const fn data_of(word: u64) -> u64 {
    word & DATA_MASK
}

/// Whether a line word carries sequence `seq`.
#[inline]
pub const fn carries(word: u64, seq: u32) -> bool {
    seq_of(word) == seq
}

/// Word `k` of a lane (a request's or a reply's) from its data bits `low` (below 2^57: the data of
/// its own word) and the lane's packed word `top` (a whole line word: only bits `7 k .. 7 k + 7`
/// count, so neither its sequence nor its reserved bits reach the result).
#[inline]
pub(super) const fn joined(low: u64, top: u64, k: usize) -> u64 {
    low | (top >> (SEQ_BITS as usize * k)) << DATA_BITS
}

/// The packed word's data for `values`: the top [`SEQ_BITS`] bits of value `k` at bits `7 k`.
#[inline]
fn packed_tops(values: &[u64]) -> u64 {
    let mut packed = 0;
    let mut k = 0;
    while k < values.len() {
        packed |= (values[k] >> DATA_BITS) << (SEQ_BITS as usize * k);
        k += 1;
    }
    packed
}

/// A lane's request of the call `seq` as its [`REQUEST_LANE_WORDS`] line words: the first
/// [`CARRIED_REQUEST_WORDS`] request words' low bits, then their packed top bits (the words past
/// them are not carried: all of them are, outside loom).
///
/// ```
/// use hostcall_core::line::{decode_request, encode_request};
/// let request = [u64::MAX, 1, 2 << 57, 3, 4, 5, 6, 7 | 1 << 63];
/// assert_eq!(decode_request(&encode_request(&request, 5)), request);
/// ```
#[inline]
pub fn encode_request(request: &[u64; SLOT_WORDS], seq: u32) -> [u64; REQUEST_LANE_WORDS] {
    let top = word(packed_tops(&request[..CARRIED_REQUEST_WORDS]), seq);
    core::array::from_fn(|k| if k < CARRIED_REQUEST_WORDS { word(request[k], seq) } else { top })
}

/// The request a lane's line words hold, whatever their sequences (the words not carried are
/// zero); the host's take checks the sequences and decodes the same way (`joined`).
#[inline]
pub fn decode_request(words: &[u64; REQUEST_LANE_WORDS]) -> [u64; SLOT_WORDS] {
    let top = words[CARRIED_REQUEST_WORDS];
    core::array::from_fn(|k| if k < CARRIED_REQUEST_WORDS { joined(data_of(words[k]), top, k) } else { 0 })
}

/// A lane's reply of the call `seq` as its [`REPLY_LANE_WORDS`] line words: each reply word's low
/// bits, then their packed top bits.
///
/// ```
/// use hostcall_core::line::{decode_reply, encode_reply};
/// assert_eq!(decode_reply(&encode_reply([u64::MAX, 1 << 60 | 9], 127)), [u64::MAX, 1 << 60 | 9]);
/// ```
#[inline]
pub fn encode_reply(reply: [u64; REPLY_WORDS], seq: u32) -> [u64; REPLY_LANE_WORDS] {
    const _: () = assert!(REPLY_WORDS == 2 && REPLY_LANE_WORDS == 3);
    [word(reply[0], seq), word(reply[1], seq), word(packed_tops(&reply), seq)]
}

/// The reply a lane's line words hold, whatever their sequences.
#[inline]
pub fn decode_reply(words: &[u64; REPLY_LANE_WORDS]) -> [u64; REPLY_WORDS] {
    core::array::from_fn(|k| joined(data_of(words[k]), words[REPLY_WORDS], k))
}

/// The head of a call: `service` and the activemask's top bits, with the call's sequence.
///
/// ```
/// use hostcall_core::line::{decode_activemask, decode_service, encode_head, encode_mask};
/// let (head, mask) = (encode_head(9, u64::MAX, 3), encode_mask(u64::MAX, 3));
/// assert_eq!((decode_service(head), decode_activemask(head, mask)), (9, u64::MAX));
/// ```
#[inline]
pub const fn encode_head(service: u32, activemask: u64, seq: u32) -> u64 {
    word((activemask >> DATA_BITS) << 32 | service as u64, seq)
}

/// The mask word of a call: the activemask's low bits, with the call's sequence.
#[inline]
pub const fn encode_mask(activemask: u64, seq: u32) -> u64 {
    word(activemask, seq)
}

/// The service a head names (its low 32 bits).
#[inline]
pub const fn decode_service(head: u64) -> u32 {
    head as u32
}

/// The activemask a head and a mask word hold (head bits 32..39 on top of the mask word's data;
/// the head's reserved bits are not read).
#[inline]
pub const fn decode_activemask(head: u64, mask: u64) -> u64 {
    data_of(mask) | (head >> 32) << DATA_BITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {

        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn every_encoding_round_trips(request in any::<[u64; 8]>(), reply in any::<[u64; 2]>(),
                service in any::<u32>(), activemask in any::<u64>(), seq in 0u32..128) {
            let words = encode_request(&request, seq);
            prop_assert!(words.iter().all(|&w| carries(w, seq)));
            prop_assert_eq!(data_of(words[8]) >> 56, 0, "bit 56 of the packed word is reserved");
            prop_assert_eq!(decode_request(&words), request);
            let words = encode_reply(reply, seq);
            prop_assert!(words.iter().all(|&w| carries(w, seq)) && data_of(words[2]) >> 14 == 0);
            prop_assert_eq!(decode_reply(&words), reply);
            let (head, mask) = (encode_head(service, activemask, seq), encode_mask(activemask, seq));
            prop_assert!(carries(head, seq) && carries(mask, seq) && data_of(head) >> 39 == 0);
            prop_assert_eq!((decode_service(head), decode_activemask(head, mask)), (service, activemask));
        }

        /// Reserved bits and foreign sequences never reach what is decoded.
        #[test]
        fn reserved_bits_are_ignored(request in any::<[u64; 8]>(), noise in any::<u64>(), seq in 0u32..128) {
            let mut words = encode_request(&request, seq);
            words[8] ^= noise & (1 << 56 | !DATA_MASK);
            words[3] ^= noise & !DATA_MASK;
            prop_assert_eq!(decode_request(&words), request);
            let head = encode_head(1, u64::MAX, seq) ^ (noise & (DATA_MASK & !((1 << 39) - 1)));
            prop_assert_eq!(decode_activemask(head, encode_mask(u64::MAX, seq)), u64::MAX);
        }
    }
}
