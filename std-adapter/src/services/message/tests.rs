//! The assembler: good streams, every malformed stream, limits, recovery.

use super::assembler::SLOT_MASK;
use super::*;
use hostcall_core::message::{Descriptor, MessageWriter, MAX_ID};

fn desc(begin: bool, end: bool, len: usize, id: u64) -> u64 {
    Descriptor::new(begin, end, len, id).unwrap().encode()
}

fn request(descriptor: u64, data: &[u64]) -> [u64; 8] {
    let mut r = [0; 8];
    r[0] = descriptor;
    r[1..=data.len()].copy_from_slice(data);
    r
}

/// A service that answers the sum and length of each message, and records it.
fn summing() -> MessageService<impl FnMut(&[u64]) -> [u64; 2]> {
    MessageService::new(|m: &[u64]| [m.iter().sum(), m.len() as u64])
}

/// Sends a good message through `service` and checks the answer.
fn good_message_works<F: FnMut(&[u64]) -> [u64; 2]>(service: &mut MessageService<F>) {
    let reply = MessageWriter::new(1..=20u64).send(|r| service.serve_lane(r));
    assert_eq!(reply, Ok([210, 20]));
}

#[test]
fn one_chunk_message() {
    let mut a = Assembler::default();
    let outcome = a.on_chunk(&request(desc(true, true, 3, 0), &[7, 8, 9]));
    assert!(matches!(outcome, ChunkOutcome::Complete { ref message, .. } if message == &[7, 8, 9]));
    assert_eq!(a.open_messages(), 0);
    // An empty one-chunk message.
    let outcome = a.on_chunk(&request(desc(true, true, 0, 0), &[]));
    assert!(matches!(outcome, ChunkOutcome::Complete { ref message, .. } if message.is_empty()));
}

#[test]
fn begin_reply_clears_begin_and_names_the_id() {
    let mut a = Assembler::default();
    let ChunkOutcome::Reply([word, 0]) = a.on_chunk(&request(desc(true, false, 7, 0), &[1; 7])) else {
        panic!("BEGIN is answered with a descriptor")
    };
    let d = Descriptor::decode(word).unwrap();
    assert!(!d.begin() && !d.end());
    assert_eq!(d.len(), 7);
    assert_ne!(d.id(), 0);
    assert_eq!(a.open_messages(), 1);
    // Later chunks answer with the same id; the END hands the message over.
    assert_eq!(
        a.on_chunk(&request(desc(false, false, 1, d.id()), &[2])),
        ChunkOutcome::Reply([word & !0xe0 | 1 << 5, 0])
    );
    let outcome = a.on_chunk(&request(desc(false, true, 2, d.id()), &[3, 4]));
    assert_eq!(outcome, ChunkOutcome::Complete { id: d.id(), message: vec![1, 1, 1, 1, 1, 1, 1, 2, 3, 4] });
    assert_eq!(a.open_messages(), 0);
}

#[test]
fn reserved_bits_drop_the_named_message_and_recover() {
    let mut s = summing();
    let Ok([word, _]) = s.try_serve_lane(&request(desc(true, false, 1, 0), &[5])) else { panic!() };
    let id = Descriptor::raw_id(word);
    let bad = desc(false, false, 1, id) | 0b1000;
    assert_eq!(s.serve_lane(&request(bad, &[6])), ErrorCode::BadRequest.reply());
    assert_eq!(s.last_error(), Some(MessageError::Descriptor(DescriptorError::ReservedBits { bits: 0b010 })));
    assert_eq!(s.assembler().open_messages(), 0, "the named message is dropped");
    // Its id is dead now.
    assert_eq!(
        s.try_serve_lane(&request(desc(false, true, 0, id), &[])),
        Err(MessageError::UnknownId { id })
    );
    // A malformed BEGIN allocates nothing.
    assert_eq!(s.serve_lane(&request(0b10001, &[])), ErrorCode::BadRequest.reply());
    assert_eq!(s.assembler().open_messages(), 0);
    good_message_works(&mut s);
}

#[test]
fn unknown_id_is_refused_and_recovers() {
    let mut s = summing();
    for id in [5, 1 << 24 | 1, MAX_ID] {
        assert_eq!(s.serve_lane(&request(desc(false, false, 1, id), &[1])), ErrorCode::BadRequest.reply());
        assert_eq!(s.last_error(), Some(MessageError::UnknownId { id }));
    }
    good_message_works(&mut s);
    assert_eq!(s.errors(), 3);
}

#[test]
fn chunk_or_end_without_begin_is_refused_and_recovers() {
    let mut s = summing();
    assert_eq!(s.try_serve_lane(&request(desc(false, false, 2, 0), &[1, 2])), Err(MessageError::NoBegin));
    assert_eq!(s.try_serve_lane(&request(desc(false, true, 2, 0), &[1, 2])), Err(MessageError::NoBegin));
    assert_eq!(s.serve_lane(&request(desc(false, true, 0, 0), &[])), ErrorCode::BadRequest.reply());
    good_message_works(&mut s);
}

#[test]
fn oversize_message_is_dropped_and_recovers() {
    let limits = MessageLimits { max_message_bytes: 160, ..MessageLimits::default() };
    let mut s = MessageService::with_limits(limits, |m: &[u64]| [m.iter().sum(), m.len() as u64]);
    // 22 words > 20: refused at the third of four chunks, which the writer reports.
    let result = MessageWriter::new(0..22u64).send(|r| s.serve_lane(r));
    assert!(matches!(
        result,
        Err(hostcall_core::message::WriterError::Host { code: Some(ErrorCode::Refused), .. })
    ));
    assert!(matches!(s.last_error(), Some(MessageError::Oversize { limit: 160, .. })));
    assert_eq!(s.assembler().open_messages(), 0);
    // 21 words: refused at the END chunk, whose reply is the final answer (-1 in word 0).
    let result = MessageWriter::new(0..21u64).send(|r| s.serve_lane(r));
    assert_eq!(result, Ok(ErrorCode::Refused.reply()));
    assert_eq!(s.assembler().open_messages(), 0);
    good_message_works(&mut s); // exactly 20 words fits

    // A limit below one chunk refuses at BEGIN without allocating.
    let limits = MessageLimits { max_message_bytes: 8, ..MessageLimits::default() };
    let mut a = Assembler::new(limits);
    assert_eq!(
        a.on_chunk(&request(desc(true, true, 2, 0), &[1, 2])),
        ChunkOutcome::Error(MessageError::Oversize { id: 0, limit: 8 })
    );
    assert_eq!(a.open_messages(), 0);
}

#[test]
fn too_many_open_messages_refuses_the_begin_and_keeps_the_open_ones() {
    let limits = MessageLimits { max_open: 2, ..MessageLimits::default() };
    let mut s = MessageService::with_limits(limits, |m: &[u64]| [m.iter().sum(), m.len() as u64]);
    let begin = request(desc(true, false, 1, 0), &[1]);
    let first = s.serve_lane(&begin);
    let second = s.serve_lane(&begin);
    assert_eq!(s.serve_lane(&begin), ErrorCode::Refused.reply());
    assert_eq!(s.last_error(), Some(MessageError::TooManyOpen { bound: 2 }));
    assert_eq!(s.assembler().open_messages(), 2);
    assert_eq!(s.assembler().refused_begins(), 1);
    // A one-chunk message needs no slot.
    assert_eq!(s.serve_lane(&request(desc(true, true, 1, 0), &[4])), [4, 1]);
    // Both open messages finish; then BEGINs work again.
    let end = |reply: [u64; 2]| request(desc(false, true, 1, Descriptor::raw_id(reply[0])), &[2]);
    assert_eq!(s.serve_lane(&end(first)), [3, 2]);
    assert_eq!(s.serve_lane(&end(second)), [3, 2]);
    good_message_works(&mut s);
}

/// More messages open than 64 per packet of any buffer: the bytes bound them, not a count of
/// lanes (a wave holds no packet between its chunks).
#[test]
fn open_messages_are_bounded_by_bytes_not_by_lanes() {
    let mut a = Assembler::default();
    let begin = request(desc(true, false, 1, 0), &[5]);
    // Far more messages than lanes either way; fewer under Miri, which interprets every step.
    let count = if cfg!(miri) { 200 } else { 20_000 };
    let senders = (0..count).map(|n| Sender { buffer: 0x1000, lane: n % 64 });
    let ids: Vec<(Sender, u64)> = senders
        .map(|sender| match a.on_chunk_from(sender, &begin) {
            ChunkOutcome::Reply([word, 0]) => (sender, Descriptor::raw_id(word)),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(a.open_messages(), count);
    for (sender, id) in ids {
        let end = request(desc(false, true, 1, id), &[6]);
        assert_eq!(a.on_chunk_from(sender, &end), ChunkOutcome::Complete { id, message: vec![5, 6] });
    }
    assert_eq!((a.open_messages(), a.held_bytes(), a.held_bytes_of(0x1000)), (0, 0, 0));
}

/// A chunk naming another sender's open message (another buffer, or another lane of the same
/// buffer) is refused, counted, and leaves that message intact, even when malformed.
#[test]
fn a_message_belongs_to_the_lane_that_began_it() {
    let mut a = Assembler::default();
    let owner = Sender { buffer: 0x1000, lane: 7 };
    let ChunkOutcome::Reply([word, 0]) = a.on_chunk_from(owner, &request(desc(true, false, 1, 0), &[1]))
    else {
        panic!()
    };
    let id = Descriptor::raw_id(word);
    for thief in [Sender { buffer: 0x2000, lane: 7 }, Sender { buffer: 0x1000, lane: 8 }] {
        for chunk in [
            request(desc(false, false, 1, id), &[66]),
            request(desc(false, true, 1, id), &[66]),
            request(desc(false, false, 1, id) | 0b1000, &[66]), // malformed: would drop the message it names
        ] {
            let outcome = a.on_chunk_from(thief, &chunk);
            assert!(
                matches!(outcome, ChunkOutcome::Error(e) if e.code() == ErrorCode::BadRequest),
                "{outcome:?}"
            );
        }
        assert!(!a.abandon_from(thief, id));
    }
    assert_eq!(a.foreign_chunks(), 6 + 2);
    assert_eq!(a.open_messages(), 1);
    assert_eq!(
        a.on_chunk_from(owner, &request(desc(false, true, 1, id), &[2])),
        ChunkOutcome::Complete { id, message: vec![1, 2] }
    );
}

/// One buffer's open messages cannot take the bytes another buffer's lanes need.
#[test]
fn each_buffer_has_its_own_held_bytes_budget() {
    let per_message = OPEN_MESSAGE_OVERHEAD + 8 * 8;
    let limits = MessageLimits { max_held_bytes_per_buffer: 3 * per_message, ..MessageLimits::default() };
    let mut a = Assembler::new(limits);
    let begin = request(desc(true, false, 1, 0), &[1]);
    let (hog, other) = (0x1000, 0x2000);
    for lane in 0..3 {
        assert!(matches!(a.on_chunk_from(Sender { buffer: hog, lane }, &begin), ChunkOutcome::Reply(_)));
    }
    assert_eq!(
        a.on_chunk_from(Sender { buffer: hog, lane: 3 }, &begin),
        ChunkOutcome::Error(MessageError::BufferHeldBytes { id: 0, limit: 3 * per_message })
    );
    for lane in 0..3 {
        assert!(matches!(a.on_chunk_from(Sender { buffer: other, lane }, &begin), ChunkOutcome::Reply(_)));
    }
    assert_eq!((a.held_bytes_of(hog), a.held_bytes_of(other)), (3 * per_message, 3 * per_message));
    assert_eq!(a.refused_begins(), 1);
    assert_eq!(a.forget_buffer(hog), 3);
    assert_eq!((a.open_messages(), a.held_bytes_of(hog)), (3, 0));
}

#[test]
fn the_held_bytes_budget_refuses_begins_and_drops_only_the_growing_message() {
    // Room for two messages of one 8-word buffer each, and a little more.
    let budget = 2 * (OPEN_MESSAGE_OVERHEAD + 64) + 32;
    let limits = MessageLimits { max_held_bytes: budget, ..MessageLimits::default() };
    let mut s = MessageService::with_limits(limits, |m: &[u64]| [m.iter().sum(), m.len() as u64]);
    let begin = request(desc(true, false, 7, 0), &[1; 7]);
    let first = s.serve_lane(&begin);
    let second = s.serve_lane(&begin);
    assert_eq!(s.assembler().held_bytes(), 2 * (OPEN_MESSAGE_OVERHEAD + 64));
    // A third BEGIN with data does not fit: refused; the open two are untouched.
    assert_eq!(s.serve_lane(&begin), ErrorCode::Refused.reply());
    assert_eq!(s.last_error(), Some(MessageError::HeldBytes { id: 0, limit: budget }));
    assert_eq!(s.assembler().open_messages(), 2);
    // The first grows past the budget: it alone is dropped.
    let id = |reply: [u64; 2]| Descriptor::raw_id(reply[0]);
    let grow = request(desc(false, false, 7, id(first)), &[1; 7]);
    assert_eq!(s.serve_lane(&grow), ErrorCode::Refused.reply());
    assert_eq!(s.last_error(), Some(MessageError::HeldBytes { id: id(first), limit: budget }));
    assert_eq!(s.assembler().open_messages(), 1);
    // The second ends normally, and the budget is whole again.
    assert_eq!(s.serve_lane(&request(desc(false, true, 1, id(second)), &[2])), [9, 8]);
    assert_eq!(s.assembler().held_bytes(), 0);
    // BEGINs work again.
    let third = s.serve_lane(&begin);
    assert_eq!(s.serve_lane(&request(desc(false, true, 1, id(third)), &[3])), [10, 8]);
}

#[test]
#[cfg(target_pointer_width = "64")]
fn the_overhead_per_open_message_is_what_the_readme_says() {
    assert_eq!(OPEN_MESSAGE_OVERHEAD, 64);
}

#[test]
fn the_held_bytes_budget_counts_capacity_and_overhead() {
    let mut a = Assembler::default();
    let ChunkOutcome::Reply([word, _]) = a.on_chunk(&request(desc(true, false, 7, 0), &[1; 7])) else {
        panic!()
    };
    assert_eq!(a.held_bytes(), OPEN_MESSAGE_OVERHEAD + 8 * 8);
    let id = Descriptor::raw_id(word);
    a.on_chunk(&request(desc(false, false, 7, id), &[1; 7]));
    assert_eq!(a.held_bytes(), OPEN_MESSAGE_OVERHEAD + 16 * 8, "doubled");
    assert!(a.abandon(id));
    assert_eq!(a.held_bytes(), 0);
}

#[test]
fn slots_are_recycled_but_stale_ids_do_not_reach_new_messages() {
    let mut a = Assembler::default();
    let begin = request(desc(true, false, 0, 0), &[]);
    let ChunkOutcome::Reply([w, _]) = a.on_chunk(&begin) else { panic!() };
    let old = Descriptor::raw_id(w);
    assert!(a.abandon(old));
    let ChunkOutcome::Reply([w, _]) = a.on_chunk(&begin) else { panic!() };
    let new = Descriptor::raw_id(w);
    assert_eq!(old & SLOT_MASK, new & SLOT_MASK, "the slot is reused");
    assert_ne!(old, new, "with a new tag");
    assert_eq!(
        a.on_chunk(&request(desc(false, true, 0, old), &[])),
        ChunkOutcome::Error(MessageError::UnknownId { id: old })
    );
    assert!(matches!(a.on_chunk(&request(desc(false, true, 0, new), &[])), ChunkOutcome::Complete { .. }));

    // Sequential messages never need more than one slot.
    let mut s = summing();
    for _ in 0..100 {
        good_message_works(&mut s);
    }
    assert_eq!(s.assembler().slot_count(), 1);
}

#[test]
fn interleaved_lanes_keep_their_messages_apart() {
    let mut s = summing();
    let mut writers: Vec<_> =
        (0..64u64).map(|lane| MessageWriter::new(lane * 1000..lane * 1000 + lane + 3)).collect();
    let mut replies = vec![None; 64];
    // Round-robin, as a wave submits one chunk per active lane per packet.
    while replies.iter().any(Option::is_none) {
        for (lane, w) in writers.iter_mut().enumerate() {
            if replies[lane].is_none() {
                let request = w.next_request().unwrap();
                replies[lane] = w.accept_reply(s.serve_lane(&request)).unwrap();
            }
        }
    }
    for (lane, reply) in replies.into_iter().enumerate() {
        let lane = lane as u64;
        let words = lane * 1000..lane * 1000 + lane + 3;
        assert_eq!(reply, Some([words.clone().sum(), lane + 3]));
    }
    assert_eq!(s.assembler().open_messages(), 0);
}

#[test]
fn clear_drops_everything() {
    let mut a = Assembler::default();
    for _ in 0..5 {
        a.on_chunk(&request(desc(true, false, 0, 0), &[]));
    }
    assert_eq!(a.open_messages(), 5);
    a.clear();
    assert_eq!(a.open_messages(), 0);
}

#[test]
fn max_open_is_clamped_to_what_ids_can_name() {
    let a = Assembler::new(MessageLimits { max_open: usize::MAX, ..MessageLimits::default() });
    assert_eq!(a.limits().max_open, MAX_OPEN_LIMIT);
}

#[test]
fn shared_service_is_a_lane_service() {
    let shared = SharedMessageService::new(summing());
    let service: &dyn LaneService = &shared;
    let reply = MessageWriter::new(1..=20u64).send(|r| service.serve(r).unwrap_or_else(ErrorCode::reply));
    assert_eq!(reply, Ok([210, 20]));
    assert_eq!(service.serve(&request(desc(false, true, 0, 0), &[])), Err(ErrorCode::BadRequest));
    assert_eq!(shared.with(|s| s.errors()), 1);
}

/// The ids a slot gets are drawn, not counted: a device that saw one id cannot name the next.
#[test]
fn ids_do_not_follow_from_each_other() {
    let mut a = Assembler::default();
    let begin = request(desc(true, false, 0, 0), &[]);
    // Fewer draws under Miri, which interprets every step.
    let draws = if cfg!(miri) { 100 } else { 1000 };
    let ids: Vec<u64> = (0..draws)
        .map(|_| {
            let ChunkOutcome::Reply([word, _]) = a.on_chunk(&begin) else { panic!() };
            let id = Descriptor::raw_id(word);
            assert!(a.abandon(id));
            id
        })
        .collect();
    let distinct: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), draws, "draws of 32 bits, all distinct (1000 fail about once in 10^4 runs)");
    let steps = ids.windows(2).filter(|w| w[1] == w[0] + (1 << 24)).count();
    assert!(steps < 2, "{steps} ids were the previous one's generation plus one");
}
