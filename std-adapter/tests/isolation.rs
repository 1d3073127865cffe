//! What one device cannot do to another through the services they share (PROTOCOL.md 7.8): two
//! buffers (two devices' queues) on one listener, one of them hostile. The hostile device knows
//! the other's message id and block address outright (worse than guessing them), and still
//! cannot end, continue or read the message, nor free the block; each attempt is refused,
//! counted for its own buffer, and the victim's output and memory are intact. Nor can it take
//! the other's share of a budget.

#[macro_use]
mod common;

use common::printing::Captured;
use hostcall::prelude::*;
use hostcall::{
    observe::{Reason, Stats},
    services::devmem::DevMemLimits,
    services::message::MessageLimits,
    services::printf::{PrintfMessage, Streams},
    HostMemory, HostcallBuffer, Listener, ListenerConfig, MemoryError, ParkingDoorbell, Protocol, Wave,
};
use hostcall_core::message::Descriptor;
use hostcall_core::{ErrorCode, DEVMEM, PRINTF};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Host memory that counts its live allocations.
#[derive(Debug, Default)]
struct CountingMemory {
    live: AtomicUsize,
}

impl DeviceMemory for CountingMemory {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let block = HostMemory.allocate(size, align)?;
        // Relaxed: a count read by the test thread after the call that changed it returned.
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(block)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: forwarded from this function's contract; the block came from `HostMemory`.
        unsafe { HostMemory.free(ptr, size, align) }
    }
    fn device_address(&self, host: *const u8) -> u64 {
        HostMemory.device_address(host)
    }
}

/// A listener with PRINTF (stdout captured) and DEVMEM over `memory`, serving two buffers: the
/// victim's and the thief's.
struct TwoDevices {
    listener: Listener,
    victim: Arc<HostcallBuffer>,
    thief: Arc<HostcallBuffer>,
    stdout: Captured,
}

fn two_devices(protocol: Protocol, memory: Arc<dyn DeviceMemory>, devmem: DevMemLimits) -> TwoDevices {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let stdout = Captured::default();
    let streams = Streams { stdout: stdout.clone(), stderr: std::io::sink() };
    listener.services().enable_printf(streams, MessageLimits::default()).unwrap();
    listener.services().enable_devmem(memory, devmem).unwrap();
    let buffer = || {
        let buffer = HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell.clone(), protocol);
        let buffer = Arc::new(buffer.unwrap());
        listener.add(buffer.clone()).unwrap();
        buffer
    };
    let (victim, thief) = (buffer(), buffer());
    TwoDevices { listener, victim, thief, stdout }
}

impl TwoDevices {
    /// `reason`'s count for the victim's buffer and for the thief's.
    fn counted(&self, reason: Reason) -> (u64, u64) {
        let stats: Stats = self.listener.stats();
        let of = |buffer: &HostcallBuffer| stats.buffers[&(buffer.as_ptr() as usize)].refusals.get(reason);
        (of(&self.victim), of(&self.thief))
    }
}

/// Lane 0 of a one-lane wave on `buffer` sends `request` to `service`; its reply.
fn call(buffer: &Arc<HostcallBuffer>, service: u32, request: [u64; 8]) -> [u64; 2] {
    Wave::new(buffer.clone(), 1).call(service, |_| request).unwrap().lane(0)
}

/// A chunk of `words` (at most 7) with the descriptor's flags and id.
fn chunk(begin: bool, end: bool, id: u64, words: &[u64]) -> [u64; 8] {
    let mut request = [0; 8];
    request[0] = Descriptor::new(begin, end, words.len(), id).unwrap().encode();
    request[1..=words.len()].copy_from_slice(words);
    request
}

/// The victim's lane 0 is in the middle of a printf; the thief's lane 0 (the same lane number)
/// names its id to end it with its own text, then to continue it, then with a malformed chunk
/// (which drops the message it names, for its own lane). All refused and counted for the thief; the victim's message completes with exactly its own words.
fn another_buffer_cannot_end_continue_or_drop_a_message(protocol: Protocol) {
    let s = two_devices(protocol, Arc::new(HostMemory), DevMemLimits::default());
    let words = PrintfMessage::new(b"victim: %s\n")
        .string(b"all of it, in order, and long enough for three chunks of seven words")
        .into_words();
    let (first, rest) = words.split_at(7);
    let begun = call(&s.victim, PRINTF, chunk(true, false, 0, first));
    let id = Descriptor::raw_id(begun[0]);
    assert!(id != 0 && begun[1] == 0, "{begun:?}");

    let theft = PrintfMessage::new(b"thief was here\n").into_words();
    let refused = ErrorCode::BadRequest.reply();
    assert_eq!(call(&s.thief, PRINTF, chunk(false, true, id, &theft[1..])), refused);
    assert_eq!(call(&s.thief, PRINTF, chunk(false, false, id, &theft[1..])), refused);
    let mut malformed = chunk(false, false, id, &[1]);
    malformed[0] |= 0b1000; // a reserved bit
    assert_eq!(call(&s.thief, PRINTF, malformed), refused);
    // The malformed chunk is counted as what the device sees: a bad request.
    assert_eq!((s.counted(Reason::ForeignMessage), s.counted(Reason::BadRequest)), ((0, 2), (0, 1)));

    let mut reply = begun;
    for (k, piece) in rest.chunks(7).enumerate() {
        let end = (k + 1) * 7 >= rest.len();
        reply = call(&s.victim, PRINTF, chunk(false, end, id, piece));
    }
    let line = "victim: all of it, in order, and long enough for three chunks of seven words\n";
    assert_eq!(reply, [line.len() as u64, 0], "the victim's END answered with its count");
    assert_eq!(s.stdout.text(), line, "only the victim's line, whole");
    assert_eq!(s.listener.stats().refusals.total(), 3, "nothing else refused");
}

/// The thief frees the victim's block by its address: refused exactly like a free of an address
/// never handed out (so probing tells it nothing), counted as a bad free for the thief; the
/// block stays live and holds what the victim wrote, and the victim's own free works.
fn another_buffer_cannot_free_a_block(protocol: Protocol) {
    let memory = Arc::new(CountingMemory::default());
    let s = two_devices(protocol, memory.clone(), DevMemLimits::default());
    let [address, 0] = call(&s.victim, DEVMEM, [0, 4096, 0, 0, 0, 0, 0, 0]) else { panic!("allocation") };
    // SAFETY: host memory: the device address is the host address of a live 4 KiB block, which
    // only this test touches.
    unsafe { std::ptr::write_bytes(address as *mut u8, 0xa5, 4096) };

    let refused = [0, ErrorCode::BadRequest as u64];
    assert_eq!(call(&s.thief, DEVMEM, [address, 0, 0, 0, 0, 0, 0, 0]), refused, "the victim's block");
    assert_eq!(call(&s.thief, DEVMEM, [address + (1 << 30), 0, 0, 0, 0, 0, 0, 0]), refused, "no block");
    assert_eq!(s.counted(Reason::BadFree), (0, 2));
    assert_eq!(memory.live.load(Ordering::Relaxed), 1, "the victim's block is still allocated");
    // SAFETY: as above; the block is still live (checked just above).
    let intact = unsafe { std::slice::from_raw_parts(address as *const u8, 4096) }.iter().all(|&b| b == 0xa5);
    assert!(intact, "the victim's block holds what it wrote");

    assert_eq!(call(&s.victim, DEVMEM, [address, 0, 0, 0, 0, 0, 0, 0]), [0, 0]);
    assert_eq!(memory.live.load(Ordering::Relaxed), 0);
    assert_eq!(s.listener.stats().refusals.total(), 2, "nothing else refused");
}

/// The thief allocates until its own budget refuses it; the victim still gets its blocks.
fn one_buffer_cannot_take_another_s_devmem_budget(protocol: Protocol) {
    let limits = DevMemLimits::default().with_max_allocations_per_buffer(8);
    let s = two_devices(protocol, Arc::new(HostMemory), limits);
    for _ in 0..8 {
        assert_ne!(call(&s.thief, DEVMEM, [0, 64, 0, 0, 0, 0, 0, 0])[0], 0);
    }
    assert_eq!(call(&s.thief, DEVMEM, [0, 64, 0, 0, 0, 0, 0, 0]), [0, ErrorCode::Refused as u64]);
    for _ in 0..8 {
        assert_ne!(call(&s.victim, DEVMEM, [0, 64, 0, 0, 0, 0, 0, 0])[0], 0, "the victim's own share");
    }
    assert_eq!(s.counted(Reason::DevmemCount), (0, 1));
}

/// The victim leaves a message open and a block live, and its buffer is removed and added again
/// at the same address: the new registration inherits neither. Ending the old message is refused
/// (its id names nothing) and prints nothing; freeing the old block is refused (it belongs to no
/// buffer now) and the block stays live; the buffer's new calls work as for a new one.
fn a_buffer_added_again_at_its_address_inherits_nothing(protocol: Protocol) {
    let memory = Arc::new(CountingMemory::default());
    let s = two_devices(protocol, memory.clone(), DevMemLimits::default());
    let words =
        PrintfMessage::new(b"left open: %s\n").string(b"more than one chunk of seven words").into_words();
    let begun = call(&s.victim, PRINTF, chunk(true, false, 0, &words[..7]));
    let id = Descriptor::raw_id(begun[0]);
    let [address, 0] = call(&s.victim, DEVMEM, [0, 4096, 0, 0, 0, 0, 0, 0]) else { panic!("allocation") };

    s.listener.remove_buffer(&s.victim).unwrap();
    s.listener.add(s.victim.clone()).unwrap();
    let rest = &words[7..words.len().min(14)];
    assert_eq!(call(&s.victim, PRINTF, chunk(false, true, id, rest)), ErrorCode::BadRequest.reply());
    assert_eq!(call(&s.victim, DEVMEM, [address, 0, 0, 0, 0, 0, 0, 0]), [0, ErrorCode::BadRequest as u64]);
    assert_eq!(memory.live.load(Ordering::Relaxed), 1, "the old block stays live, owned by no buffer");
    assert_eq!(s.stdout.text(), "", "the old message printed nothing");

    let line = PrintfMessage::new(b"new\n").into_words();
    assert_eq!(call(&s.victim, PRINTF, chunk(true, true, 0, &line)), [4, 0], "a new message works");
    let [fresh, 0] = call(&s.victim, DEVMEM, [0, 64, 0, 0, 0, 0, 0, 0]) else { panic!("allocation") };
    assert_eq!(call(&s.victim, DEVMEM, [fresh, 0, 0, 0, 0, 0, 0, 0]), [0, 0], "and a new block is its own");
}

for_every_protocol!(
    another_buffer_cannot_end_continue_or_drop_a_message,
    another_buffer_cannot_free_a_block,
    one_buffer_cannot_take_another_s_devmem_budget,
    a_buffer_added_again_at_its_address_inherits_nothing,
);
