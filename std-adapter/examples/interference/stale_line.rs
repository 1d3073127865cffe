//! `stale-line`: a line buffer of `--stale-packets` packets (1,024 by default: 6.1 MiB), each
//! request written once with one word stale (lane 63's last word still carries sequence 0) and its
//! head last, then left alone: a device that stopped mid-request. The listener serves it beside
//! the victim's buffer; none of it is ever served, and each is reported stalled once
//! (`Reason::StalledRequest`) after `line::STALL_LOOKS` looks.

use crate::{Arena, Running};
use hostcall::{HostMemory, HostcallBuffer, Protocol};
use hostcall_core::line::{encode_head, encode_mask, word};
use hostcall_core::LANES;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The service the stale requests name (registered or not, they are never served).
const SERVICE: u32 = 100;

pub(crate) fn start(arena: &Arena<'_>) -> Running {
    let packets = arena.options.stale_packets;
    let doorbell = arena.buffer.doorbell().clone();
    let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell, Protocol::Line)
        .expect("the stale-line buffer");
    let line = buffer.view().line().expect("a line buffer");
    let seq = 1; // every packet's first call
    for index in 0..packets as usize {
        let request = line.request(index);
        for (lane, words) in request.lanes.iter().enumerate() {
            for (k, line_word) in words.iter().enumerate() {
                // The last word of the last lane never arrives. Relaxed: the head's Release below
                // publishes the words, as a device's does.
                let stale = lane == LANES - 1 && k == words.len() - 1;
                let data = (lane * words.len() + k) as u64;
                line_word.store(word(data, if stale { seq - 1 } else { seq }), Ordering::Relaxed);
            }
        }
        request.mask.store(encode_mask(u64::MAX, seq), Ordering::Relaxed);
        // Release: the words before the head, as a device's would be (they are stale anyway).
        request.head.store(encode_head(SERVICE, u64::MAX, seq), Ordering::Release);
    }
    let buffer = Arc::new(buffer);
    arena.listener.add(buffer.clone()).expect("the stale-line buffer served");
    let bytes = buffer.len();
    let note = move || {
        let _keep = &buffer; // served until the listener's shutdown
        format!(
            "{packets} line packets ({:.1} MiB) written once with one word stale",
            bytes as f64 / (1 << 20) as f64
        )
    };
    Running { note: Box::new(note), threads: Vec::new() }
}
