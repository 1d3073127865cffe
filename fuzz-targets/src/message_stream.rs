//! Target 3: message streams and printf. The device chooses every chunk a lane sends (descriptor
//! and data words, ids made up or copied from earlier replies); the host's assembler and the
//! PRINTF formatter must answer each with a reply and stay within their bounds.

use crate::input::Input;
use hostcall::{
    services::message::{ChunkOutcome, MessageError, MessageLimits, Sender},
    services::printf::{printf_message, PrintfLimits},
};
use hostcall_core::message::Descriptor;
use hostcall_core::ERROR_REPLY;

/// Decodes `data` into limits and a stream of chunks and feeds them to an
/// [`Assembler`](hostcall::services::message::Assembler); each completed message goes to the printf formatter.
///
/// Input: one byte of limits (open messages 1..=8, message size 8..=1024 bytes, held bytes 256,
/// 1 KiB, 4 KiB or the default), then per chunk one control byte and 8 words. Control bit 0: replace the descriptor's id with an id the host
/// handed out earlier (byte 1 picks which), so the fuzzer reaches real message continuations;
/// bits 1..=3 the sender (one of two buffers, one of four lanes), so ids reach other senders'
/// messages too.
///
/// Checks: the assembler never holds more than its open-message and held-bytes limits (a budget
/// refuses, it never evicts: an open message is dropped only by a chunk of its own sender naming
/// it; another sender's chunk changes nothing); a
/// continuation reply is a
/// descriptor without BEGIN and with a nonzero id; a completed message is within the size limit;
/// printf either fails with a typed error or prints at most its output limit; and the whole
/// message words through `printf::format_with` agree with `printf_message`.
pub fn message_stream(data: &[u8]) {
    let mut input = Input::new(data);
    let shape = input.u8();
    let held = [256, 1 << 10, 4 << 10, MessageLimits::default().max_held_bytes];
    let limits = MessageLimits::default()
        .with_max_open(1 + usize::from(shape & 7))
        .with_max_message_bytes(8 << (shape >> 3 & 7))
        .with_max_held_bytes(held[usize::from(shape >> 6)]);
    let printf_limits = PrintfLimits::default().with_max_field(512).with_max_output(4096).with_max_work(8192);
    let mut assembler = hostcall::services::message::Assembler::new(limits);
    let mut ids: Vec<u64> = Vec::new();
    while !input.is_empty() {
        let control = input.u8();
        let pick = input.u8();
        let mut request = [0u64; 8];
        for word in &mut request {
            *word = input.u64();
        }
        if control & 1 == 1 && !ids.is_empty() {
            let id = ids[usize::from(pick) % ids.len()];
            request[0] = (request[0] & 0xff) | id << 8;
        }
        let open_before = assembler.open_messages();
        let sender =
            Sender { buffer: usize::from(control >> 1 & 1) << 12, lane: usize::from(control >> 2 & 3) };
        let outcome = assembler.on_chunk_from(sender, &request);
        if request[0] & 1 == 1 {
            // A BEGIN opens at most one message and closes none.
            assert!(assembler.open_messages() >= open_before, "a BEGIN dropped an open message");
        }
        match outcome {
            ChunkOutcome::Reply(reply) => {
                let descriptor = Descriptor::decode(reply[0]).expect("a continuation reply is a descriptor");
                assert!(!descriptor.begin() && descriptor.id() != 0, "reply {reply:?}");
                ids.push(descriptor.id());
            }
            ChunkOutcome::Complete { message, .. } => {
                assert!(message.len() * 8 <= limits.max_message_bytes, "message over its limit");
                print(&message, &printf_limits);
            }
            ChunkOutcome::Error(error @ MessageError::ForeignId { .. }) => {
                assert_eq!(error.code().reply()[0], ERROR_REPLY);
                assert_eq!(
                    assembler.open_messages(),
                    open_before,
                    "another sender's chunk dropped a message"
                );
            }
            ChunkOutcome::Error(error) => assert_eq!(error.code().reply()[0], ERROR_REPLY),
        }
        assert!(assembler.open_messages() <= limits.max_open, "more messages open than the limit");
        assert!(assembler.held_bytes() <= limits.max_held_bytes, "more bytes held than the budget");
    }
}

fn print(message: &[u64], limits: &PrintfLimits) {
    match printf_message(message, limits) {
        Ok((_, bytes)) => {
            assert!(bytes.len() <= limits.max_output, "printed past the output limit");
            let mut again = Vec::new();
            let count = hostcall::services::printf::format_with(&message[1..], limits, &mut again)
                .expect("the formatter accepts what printf_message accepted");
            assert_eq!((count, again), (bytes.len(), bytes), "the formatter is deterministic");
        }
        Err(_) => {
            let mut out = Vec::new();
            if let Some(words) = message.get(1..) {
                // The control word may be what was refused; the format itself may still print.
                if let Ok(count) = hostcall::services::printf::format_with(words, limits, &mut out) {
                    assert_eq!(count, out.len());
                } else {
                    assert!(out.is_empty(), "a failed format appends nothing");
                }
            }
        }
    }
}
