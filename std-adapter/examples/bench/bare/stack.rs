//! `bare_1l_stack`: ROCm's stack algorithm alone (PROTOCOL.md section 1), one lane, two packets.
//!
//! The memory is the ABI's (`hostcall_core::stack`: a 48-byte prefix, 24-byte headers, 4 KB
//! payloads) placed as `HostcallBuffer` places a stack buffer, 32 bytes past a line boundary, so
//! `free_stack` and `ready_stack` sit in different lines and each payload starts a line: the
//! same lines as the full path. What is left out is everything but the algorithm: no bounds
//! checks (an index is masked to the two packets, which is in range), no chain bound, no READY
//! check of a taken packet, no registry, poller, counters or error bit.

use super::{fill, payload, reply, run, serve_in_place, Payload};
use crate::measure::Sample;
use crate::options::Options;
use crate::ECHO;
use hostcall_core::{stack, SLOT_WORDS};
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

const PACKETS: usize = 2;
/// `next_power_of_two(PACKETS) - 1`; the tag step is one more.
const INDEX_MASK: u64 = 1;
const READY: u32 = 1;

#[repr(C)]
struct Header {
    next: AtomicU64,
    activemask: AtomicU64,
    service: AtomicU32,
    control: AtomicU32,
}

/// The stack buffer, 32 bytes into a 64-aligned block as `HostcallBuffer` places it.
#[repr(C, align(64))]
struct Buffer {
    _placement: [u64; 4],
    // The prefix: `headers`, `payloads`, `doorbell`, `free_stack`, `ready_stack`, `index_mask`.
    _addresses: [u64; 3],
    free_stack: AtomicU64,
    ready_stack: AtomicU64,
    _index_mask: u64,
    headers: [Header; PACKETS],
    payloads: [Payload; PACKETS],
}

// The ABI's offsets, from the buffer's start (32 bytes in).
const _: () = assert!(std::mem::offset_of!(Buffer, free_stack) - 32 == 24);
const _: () = assert!(std::mem::offset_of!(Buffer, ready_stack) - 32 == 32);
const _: () = assert!(std::mem::offset_of!(Buffer, headers) - 32 == stack::HEADERS_OFFSET);
const _: () = assert!(std::mem::offset_of!(Buffer, payloads) - 32 == stack::payloads_offset(PACKETS));
const _: () = assert!(std::mem::size_of::<Header>() == 24);

impl Buffer {
    /// Both packets on the free-list (packet 1 on top, as `stack::View::init` leaves it), the
    /// ready-stack empty.
    fn new() -> Arc<Self> {
        let zero = || AtomicU64::new(0);
        let header = |next: u64| Header {
            next: AtomicU64::new(next),
            activemask: zero(),
            service: AtomicU32::new(0),
            control: AtomicU32::new(0),
        };
        Arc::new(Self {
            _placement: [0; 4],
            _addresses: [0; 3],
            free_stack: AtomicU64::new(1),
            ready_stack: zero(),
            _index_mask: INDEX_MASK,
            // Packet 0 carries tag 1 so that its pointer is not null.
            headers: [header(0), header(INDEX_MASK + 1)],
            payloads: std::array::from_fn(|_| payload()),
        })
    }

    fn header(&self, ptr: u64) -> &Header {
        &self.headers[(ptr & INDEX_MASK) as usize]
    }

    fn lane(&self, ptr: u64, lane: usize) -> &[AtomicU64; SLOT_WORDS] {
        &self.payloads[(ptr & INDEX_MASK) as usize][lane]
    }

    /// Device: pops the free-list (ROCm's `pop_free_stack`).
    fn pop_free(&self) -> u64 {
        // Acquire: pairs with the Release CAS of the push that stored this top.
        let mut top = self.free_stack.load(Ordering::Acquire);
        loop {
            // Relaxed: ordered by the Acquire that read `top`; a stale value fails the CAS.
            let next = self.header(top).next.load(Ordering::Relaxed);
            match self.free_stack.compare_exchange_weak(top, next, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return top,
                Err(actual) => top = actual,
            }
        }
    }

    /// Device: pushes `ptr` on `stack` (ROCm's `push_ready_stack` and `return_free_packet`).
    fn push(&self, stack: &AtomicU64, ptr: u64) {
        let header = self.header(ptr);
        // Relaxed: only seeds the CAS.
        let mut top = stack.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS.
            header.next.store(top, Ordering::Relaxed);
            // Release: publishes the packet; pairs with `pop_free`'s Acquire and the host's swap.
            match stack.compare_exchange_weak(top, ptr, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => top = actual,
            }
        }
    }

    /// Host: takes the ready-stack and serves its chain in place. False: it was empty.
    fn serve_ready(&self) -> bool {
        // Relaxed: only decides whether to swap (a blind swap per poll would take the line
        // exclusive on every poll, against the device's pushes: the best host loads first).
        if self.ready_stack.load(Ordering::Relaxed) == 0 {
            return false;
        }
        // Acquire: pairs with the Release CAS of every push it takes.
        let mut ptr = self.ready_stack.swap(0, Ordering::Acquire);
        while ptr != 0 {
            let header = self.header(ptr);
            // Relaxed, all: ordered by the Acquire swap. `next` first: once served, the device
            // owns the packet again.
            let next = header.next.load(Ordering::Relaxed);
            let (_service, mask) =
                (header.service.load(Ordering::Relaxed), header.activemask.load(Ordering::Relaxed));
            serve_in_place(&self.payloads[(ptr & INDEX_MASK) as usize], mask);
            // Release: publishes the replies; pairs with the device's Acquire poll of `control`.
            header.control.store(0, Ordering::Release);
            ptr = next;
        }
        true
    }
}

pub(crate) fn bare_stack(o: &Options) -> Sample {
    run(o, Buffer::new(), Buffer::serve_ready, |buffer, words, doorbell| {
        let ptr = buffer.pop_free();
        fill(buffer.lane(ptr, 0), words);
        let header = buffer.header(ptr);
        // Relaxed: published by the push's Release CAS.
        header.activemask.store(1, Ordering::Relaxed);
        header.service.store(ECHO, Ordering::Relaxed);
        header.control.store(READY, Ordering::Relaxed);
        buffer.push(&buffer.ready_stack, ptr);
        doorbell.0.fetch_add(1, Ordering::Release);
        // Acquire: pairs with the host's Release store of `control`.
        while header.control.load(Ordering::Acquire) & READY != 0 {
            spin_loop();
        }
        let reply = reply(buffer.lane(ptr, 0));
        // The tag bumped by one step (no wrap rule: the bench's calls never reach 2^63 returns).
        buffer.push(&buffer.free_stack, ptr.wrapping_add(INDEX_MASK + 1));
        reply
    })
}
