//! The descriptor codec and the writer against a model host.

use super::*;
use proptest::prelude::*;

extern crate std;
use std::vec::Vec;

#[test]
fn field_positions() {
    assert_eq!(Descriptor::new(true, false, 0, 0).unwrap().encode(), 1);
    assert_eq!(Descriptor::new(false, true, 0, 0).unwrap().encode(), 2);
    assert_eq!(Descriptor::new(false, false, 1, 0).unwrap().encode(), 1 << 5);
    assert_eq!(Descriptor::new(false, false, 7, 0).unwrap().encode(), 7 << 5);
    assert_eq!(Descriptor::new(false, false, 0, 1).unwrap().encode(), 1 << 8);
    assert_eq!(Descriptor::new(false, false, 0, MAX_ID).unwrap().encode(), !0xff);
}

#[test]
fn every_reserved_bit_is_rejected() {
    for bit in 2..5 {
        assert_eq!(
            Descriptor::decode(1 << bit | 0xff00),
            Err(DescriptorError::ReservedBits { bits: 1 << (bit - 2) })
        );
    }
    // The error reply's first word (all ones) is not a descriptor.
    assert!(Descriptor::decode(ERROR_REPLY).is_err());
}

#[test]
fn impossible_values_are_refused_on_build() {
    assert_eq!(Descriptor::new(true, true, 8, 0), Err(DescriptorError::LenTooLarge { len: 8 }));
    assert_eq!(
        Descriptor::new(true, true, usize::MAX, 0),
        Err(DescriptorError::LenTooLarge { len: usize::MAX })
    );
    assert_eq!(
        Descriptor::new(true, true, 0, MAX_ID + 1),
        Err(DescriptorError::IdTooLarge { id: MAX_ID + 1 })
    );
    let d = Descriptor::new(true, false, 3, 0).unwrap();
    assert_eq!(d.with_id(u64::MAX), Err(DescriptorError::IdTooLarge { id: u64::MAX }));
}

#[test]
fn reply_clears_begin_and_keeps_the_rest() {
    let d = Descriptor::new(true, false, 7, 0).unwrap();
    let r = d.reply_for(42).unwrap();
    assert!(!r.begin() && !r.end());
    assert_eq!((r.len(), r.id()), (7, 42));
}

#[test]
fn raw_accessors_work_on_malformed_words() {
    let word = 5 << 8 | 0b100 | 1;
    assert!(Descriptor::decode(word).is_err());
    assert_eq!(Descriptor::raw_id(word), 5);
    assert!(Descriptor::raw_begin(word));
}

proptest! {

    #![proptest_config(crate::test_support::proptest_config())]
    #[test]
    fn decode_inverts_encode(begin: bool, end: bool, len in 0usize..=7, id in 0..=MAX_ID) {
        let d = Descriptor::new(begin, end, len, id).unwrap();
        prop_assert_eq!(Descriptor::decode(d.encode()), Ok(d));
    }

    #[test]
    fn encode_inverts_decode_when_valid(word: u64) {
        match Descriptor::decode(word) {
            Ok(d) => prop_assert_eq!(d.encode(), word),
            Err(DescriptorError::ReservedBits { bits }) => {
                prop_assert_ne!(bits, 0);
                prop_assert_eq!(u64::from(bits), (word >> 2) & 7);
            }
            Err(e) => prop_assert!(false, "decode cannot report {:?}", e),
        }
    }

    #[test]
    fn packed_words_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..200), nul: bool) {
        let words: Vec<u64> = if nul { PackedWords::c_string(&bytes) } else { PackedWords::bytes(&bytes) }.collect();
        prop_assert_eq!(words.len(), PackedWords::words_for(bytes.len(), nul));
        let back: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        prop_assert_eq!(&back[..bytes.len()], &bytes[..]);
        prop_assert!(back[bytes.len()..].iter().all(|&b| b == 0));
        if nul {
            prop_assert!(back.len() > bytes.len());
        }
    }

    #[test]
    fn writer_chunks_any_message(words in proptest::collection::vec(any::<u64>(), 0..60), first_id in 1..=MAX_ID) {
        let mut host = ModelHost::new(first_id);
        let reply = MessageWriter::new(words.iter().copied()).send(|r| host.serve(r));
        prop_assert_eq!(reply, Ok([words.len() as u64, 0xe0d]));
        prop_assert_eq!(&host.received, &words);
        prop_assert_eq!(host.calls, words.len().div_ceil(7).max(1));
    }
}

/// A host that checks the chunk sequence and echoes the message length on END.
struct ModelHost {
    id: u64,
    open: bool,
    received: Vec<u64>,
    calls: usize,
}

impl ModelHost {
    fn new(id: u64) -> Self {
        Self { id, open: false, received: Vec::new(), calls: 0 }
    }

    fn serve(&mut self, request: &[u64; 8]) -> [u64; 2] {
        self.calls += 1;
        let d = Descriptor::decode(request[0]).unwrap();
        assert_eq!(d.begin(), !self.open, "BEGIN exactly on the first chunk");
        if !d.begin() {
            assert_eq!(d.id(), self.id, "later chunks carry the host's id");
        }
        assert!(d.end() || d.len() == DATA_WORDS, "only the last chunk is short");
        assert!(request[d.len() + 1..].iter().all(|&w| w == 0), "unused slots are zero");
        self.open = true;
        self.received.extend_from_slice(&request[1..=d.len()]);
        if d.end() {
            [self.received.len() as u64, 0xe0d]
        } else {
            [d.reply_for(self.id).unwrap().encode(), 0]
        }
    }
}

#[test]
fn empty_message_is_one_begin_end_call() {
    let mut w = MessageWriter::new(core::iter::empty());
    let r = w.next_request().unwrap();
    assert_eq!(r, [Descriptor::new(true, true, 0, 0).unwrap().encode(), 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(w.accept_reply([5, 6]), Ok(Some([5, 6])));
    assert!(w.is_finished());
    assert_eq!(w.next_request(), Err(WriterError::Finished));
}

#[test]
fn seven_words_fit_one_call_eight_need_two() {
    let mut host = ModelHost::new(3);
    MessageWriter::new(0..7u64).send(|r| host.serve(r)).unwrap();
    assert_eq!(host.calls, 1);
    let mut host = ModelHost::new(3);
    MessageWriter::new(0..8u64).send(|r| host.serve(r)).unwrap();
    assert_eq!(host.calls, 2);
}

#[test]
fn calls_out_of_order_are_refused() {
    let mut w = MessageWriter::new(0..20u64);
    assert_eq!(w.accept_reply([0, 0]), Err(WriterError::NoRequestPending));
    w.next_request().unwrap();
    assert_eq!(w.next_request(), Err(WriterError::ReplyPending));
}

#[test]
fn host_error_stops_the_writer() {
    let mut w = MessageWriter::new(0..20u64);
    w.next_request().unwrap();
    let reply = ErrorCode::Refused.reply();
    assert_eq!(w.accept_reply(reply), Err(WriterError::Host { code: Some(ErrorCode::Refused), reply }));
    assert_eq!(w.next_request(), Err(WriterError::Finished));

    // A garbage BEGIN reply is reported too.
    let mut w = MessageWriter::new(0..20u64);
    w.next_request().unwrap();
    assert_eq!(
        w.accept_reply([0b11100, 0]),
        Err(WriterError::BadBeginReply(DescriptorError::ReservedBits { bits: 7 }))
    );
}

#[test]
fn the_end_reply_is_passed_through_even_if_it_looks_like_an_error() {
    // printf answers -1 on a bad message: that is the service's answer, not a protocol failure.
    let mut w = MessageWriter::new(0..3u64);
    w.next_request().unwrap();
    assert_eq!(w.accept_reply([u64::MAX, 0]), Ok(Some([u64::MAX, 0])));
}
