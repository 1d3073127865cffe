//! Every per-device budget, through the listener from emulated waves: open messages (bounded by
//! bytes, not by the lanes of the packets served; refusing a BEGIN instead of evicting), printf work per message,
//! DEVMEM (alignment, bytes with overhead, allocation count, null address on every failure) and
//! the unknown-id table.

#[macro_use]
mod common;

use hostcall::prelude::*;
use hostcall::{
    services::devmem::{DevMemLimits, ALLOCATION_OVERHEAD, BLOCK_ALIGN, SLAB_BYTES},
    services::message::{MessageLimits, OPEN_MESSAGE_OVERHEAD},
    services::printf::PrintfMessage,
    HostMemory, HostcallBuffer, Listener, ListenerConfig, MemoryError, ParkingDoorbell, Protocol, Wave,
    REMEMBERED_UNKNOWN_IDS,
};
use hostcall_core::message::MessageWriter;
use hostcall_core::ErrorCode;
use hostcall_core::{DEVMEM, PRINTF};
use std::ptr::NonNull;
use std::sync::{Arc, Barrier};

use common::printing::printing;

fn lane_message(wave: usize, lane: usize) -> (Vec<u64>, String) {
    let filler = format!("{:->100}", lane);
    let words = PrintfMessage::new(b"wave %3d lane %2d: %s\n")
        .int(wave as i64)
        .int(lane as i64)
        .string(filler.as_bytes())
        .into_words();
    (words, format!("wave {wave:3} lane {lane:2}: {filler}\n"))
}

/// A printf message of exactly 8 words (a BEGIN chunk of 7, an END of 1), which never grows past
/// its first 8-word buffer, and its output.
fn short_message(wave: usize, lane: usize) -> (Vec<u64>, String) {
    let words = PrintfMessage::new(b"wave %3d lane %2d: short message text\n")
        .int(wave as i64)
        .int(lane as i64)
        .into_words();
    assert_eq!(words.len(), 8);
    (words, format!("wave {wave:3} lane {lane:2}: short message text\n"))
}

/// The lanes of one wave in the middle of their messages: one [`MessageWriter`] per lane, sent a
/// chunk at a time.
struct OpenMessages {
    wave: Wave,
    writers: Vec<MessageWriter<std::vec::IntoIter<u64>>>,
    finals: Vec<Option<[u64; 2]>>,
}

impl OpenMessages {
    fn new(wave: Wave, messages: impl Fn(usize) -> Vec<u64>) -> Self {
        let writers = (0..64).map(|lane| MessageWriter::new(messages(lane))).collect();
        Self { wave, writers, finals: vec![None; 64] }
    }

    /// Sends the next chunk of every lane (all lanes' messages have the same length, so the
    /// wave stays converged); a lane whose chunk was refused keeps the error reply as final.
    fn step(&mut self) {
        let requests: Vec<[u64; 8]> = self
            .writers
            .iter_mut()
            .enumerate()
            .map(|(lane, w)| if self.finals[lane].is_some() { [0; 8] } else { w.next_request().unwrap() })
            .collect();
        let reply = self.wave.call(PRINTF, |lane| requests[lane]).unwrap();
        for (lane, writer) in self.writers.iter_mut().enumerate() {
            if self.finals[lane].is_none() {
                match writer.accept_reply(reply.lane(lane)) {
                    Ok(None) => {}
                    Ok(Some(end)) => self.finals[lane] = Some(end),
                    Err(_) => self.finals[lane] = Some(reply.lane(lane)),
                }
            }
        }
    }

    fn finish(&mut self) {
        while self.finals.iter().any(Option::is_none) {
            self.step();
        }
    }
}

/// `snprintf(buf, n, "wave %3d lane %2d: %s\n", wave, lane, filler)`: what C prints for
/// [`lane_message`].
fn c_line(wave: usize, lane: usize) -> String {
    extern "C" {
        fn snprintf(buf: *mut std::ffi::c_char, n: usize, format: *const std::ffi::c_char, ...) -> i32;
    }
    let filler = std::ffi::CString::new(format!("{:->100}", lane)).unwrap();
    let mut out = vec![0u8; 256];
    // SAFETY: `out` has room for `out.len()` bytes; the format is NUL-terminated and takes two
    // C ints and a NUL-terminated string, as passed.
    let n = unsafe {
        snprintf(
            out.as_mut_ptr().cast(),
            out.len(),
            c"wave %3d lane %2d: %s\n".as_ptr(),
            wave as i32,
            lane as i32,
            filler.as_ptr(),
        )
    };
    out.truncate(usize::try_from(n).unwrap());
    String::from_utf8(out).unwrap()
}

/// ROCm's device code shares a queue's few packets among all its waves, and a wave holds no
/// packet between two chunks of its message: 130 full waves on 2 packets, every lane in the
/// middle of a multi-chunk `%s` at once (8,320 messages open on a buffer of 128 lanes, more than
/// the old fixed cap of 4,096 open messages too). No line
/// is lost: each is printed exactly as `snprintf` prints it and each lane gets its count.
fn waves_outnumbering_packets_lose_no_printf_line(protocol: Protocol) {
    const WAVES: usize = 130;
    let s = printing(2, MessageLimits::default(), protocol);
    let all_open = Arc::new(Barrier::new(WAVES));
    let threads: Vec<_> = (0..WAVES)
        .map(|w| {
            let (buffer, all_open) = (s.buffer.clone(), all_open.clone());
            std::thread::spawn(move || {
                let mut open = OpenMessages::new(Wave::new(buffer, 64), |lane| lane_message(w, lane).0);
                open.step(); // BEGIN: 64 messages open, and the wave's packet given back
                all_open.wait(); // all 8,320 are
                open.finish();
                open.finals
            })
        })
        .collect();
    let finals: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let out = s.stdout.text();
    let lines: std::collections::HashSet<&str> = out.split_inclusive('\n').collect();
    assert_eq!(out.split_inclusive('\n').count(), WAVES * 64, "every line printed once");
    for (w, finals) in finals.into_iter().enumerate() {
        for (lane, reply) in finals.into_iter().enumerate() {
            let line = c_line(w, lane);
            assert_eq!(line, lane_message(w, lane).1);
            assert_eq!(reply, Some([line.len() as u64, 0]), "wave {w} lane {lane}'s reply");
            assert!(lines.contains(line.as_str()), "wave {w} lane {lane}'s line is missing");
        }
    }
    assert_eq!(s.listener.shutdown().services[&PRINTF].1.errors, 0);
}

/// A held-bytes budget that fits 70 open messages: of a second wave's BEGINs, those past it are
/// refused; the rest, and the whole first wave, complete.
fn begins_past_the_held_bytes_are_refused_and_others_complete(protocol: Protocol) {
    let per_message = OPEN_MESSAGE_OVERHEAD + 8 * 8; // 8 words in one 8-word buffer
    let limits = MessageLimits::default().with_max_held_bytes(70 * per_message);
    let s = printing(8, limits, protocol);
    let mut first = OpenMessages::new(Wave::new(s.buffer.clone(), 64), |lane| short_message(1, lane).0);
    first.step();
    let mut second = OpenMessages::new(Wave::new(s.buffer.clone(), 64), |lane| short_message(2, lane).0);
    second.step();
    let refused = second.finals.iter().filter(|r| **r == Some(ErrorCode::Refused.reply())).count();
    assert_eq!(refused, 58, "{:?}", second.finals);
    first.finish();
    for (lane, reply) in first.finals.iter().enumerate() {
        let line = short_message(1, lane).1;
        assert_eq!(*reply, Some([line.len() as u64, 0]), "lane {lane}");
        assert!(s.stdout.text().contains(&line));
    }
    second.finish();
    for (lane, reply) in second.finals.iter().enumerate() {
        let line = short_message(2, lane).1;
        if *reply != Some(ErrorCode::Refused.reply()) {
            assert_eq!(*reply, Some([line.len() as u64, 0]), "lane {lane}");
            assert!(s.stdout.text().contains(&line));
        }
    }
}

/// One printf asking for 40 conversions of `%.4096g`: cut after the 15 the work budget allows;
/// the reply is the count printed.
fn a_printf_past_its_work_budget_prints_up_to_it_and_replies_the_count(protocol: Protocol) {
    let s = printing(2, MessageLimits::default(), protocol);
    let mut message = PrintfMessage::new("%.4096g".repeat(40).as_bytes());
    for _ in 0..40 {
        message = message.float(1.0);
    }
    let words = message.into_words();
    let reply = Wave::new(s.buffer.clone(), 1).send_messages(PRINTF, |_| words.clone()).unwrap();
    assert_eq!(reply.lane(0), [15, 0]);
    assert_eq!(s.stdout.text(), "1".repeat(15));
}

// -- DEVMEM --

/// A listener with DEVMEM over `memory` within `limits`, and one buffer.
fn devmem(
    memory: Arc<dyn DeviceMemory>,
    limits: DevMemLimits,
    protocol: Protocol,
) -> (Listener, Arc<HostcallBuffer>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    listener.services().enable_devmem(memory, limits).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    (listener, buffer)
}

fn allocate(wave: &Wave, sizes: &[u64]) -> Vec<[u64; 2]> {
    let reply = wave.call(DEVMEM, |lane| [0, sizes[lane % sizes.len()], 0, 0, 0, 0, 0, 0]).unwrap();
    (0..wave.activemask().count_ones() as usize).map(|lane| reply.lane(lane)).collect()
}

fn free(wave: &Wave, addresses: &[u64]) -> Vec<[u64; 2]> {
    let reply = wave.call(DEVMEM, |lane| [addresses[lane % addresses.len()], 0, 0, 0, 0, 0, 0, 0]).unwrap();
    (0..wave.activemask().count_ones() as usize).map(|lane| reply.lane(lane)).collect()
}

/// Host memory that aligns to at most 4 KiB, as HSA pools and CUDA's pinned memory do, and hands
/// out blocks that are 4 KiB- but never 8 KiB-aligned.
#[derive(Debug)]
struct PageAlignedOnly;

impl DeviceMemory for PageAlignedOnly {
    fn name(&self) -> &'static str {
        "page-aligned-only"
    }
    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        if align > 4096 {
            return Err(MemoryError::BadRequest { size, align });
        }
        let region = HostMemory.allocate(size + 4096, 8192)?;
        // SAFETY: `region` has size + 4096 bytes; 4096 in is inside it, with `size` bytes after.
        Ok(unsafe { NonNull::new_unchecked(region.as_ptr().add(4096)) })
    }
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, _align: usize) {
        // SAFETY: `ptr` is 4096 bytes into a region `allocate` made with this layout.
        unsafe { HostMemory.free(NonNull::new_unchecked(ptr.as_ptr().sub(4096)), size + 4096, 8192) }
    }
    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

/// ROCm's device allocator frees a 4 KiB-aligned address as a large block and anything else as a
/// piece of a 2 MiB slab: every block is 4 KiB-aligned, a 2 MiB block 2 MiB-aligned, on a backend
/// that aligns itself and on one that cannot.
fn devmem_blocks_are_aligned_as_rocms_device_allocator_frees_them(protocol: Protocol) {
    let backends: [Arc<dyn DeviceMemory>; 2] = [Arc::new(HostMemory), Arc::new(PageAlignedOnly)];
    for memory in backends {
        let (listener, buffer) = devmem(memory.clone(), DevMemLimits::default(), protocol);
        let sizes = [1, 64, 4097, SLAB_BYTES, 2 * SLAB_BYTES, SLAB_BYTES + 1, 100_000];
        let wave = Wave::new(buffer, sizes.len() as u32);
        let replies = allocate(&wave, &sizes);
        for (reply, size) in replies.iter().zip(sizes) {
            let [address, code] = *reply;
            assert_eq!(code, 0, "{} bytes on {}", size, memory.name());
            assert_eq!(address % BLOCK_ALIGN, 0, "{size} bytes at {address:#x} on {}", memory.name());
            if size == SLAB_BYTES {
                assert_eq!(address % SLAB_BYTES, 0, "a slab at {address:#x} on {}", memory.name());
            }
            // The block is usable, whole. SAFETY: DEVMEM handed out `size` bytes at `address`
            // (host memory: device address = host address); nothing else uses them.
            unsafe { std::ptr::write_bytes(address as *mut u8, 0xab, size as usize) };
        }
        let addresses: Vec<u64> = replies.iter().map(|r| r[0]).collect();
        assert!(free(&wave, &addresses).iter().all(|r| *r == [0, 0]));
        listener.shutdown();
    }
}

/// A one-byte allocation costs a page and bookkeeping: a 1 MiB budget admits fewer than 256 of
/// them (it admitted a million when only requested bytes counted).
fn devmem_counts_pages_and_bookkeeping_against_its_budget(protocol: Protocol) {
    let limits = DevMemLimits::default().with_max_total(1 << 20);
    let (listener, buffer) = devmem(Arc::new(HostMemory), limits, protocol);
    let wave = Wave::new(buffer, 64);
    let replies: Vec<[u64; 2]> = (0..8).flat_map(|_| allocate(&wave, &[1])).collect();
    let granted = replies.iter().filter(|r| r[1] == 0).count() as u64;
    assert_eq!(granted, (1 << 20) / (BLOCK_ALIGN + ALLOCATION_OVERHEAD));
    assert!(replies.iter().all(|r| r[1] == 0 || *r == [0, ErrorCode::Refused as u64]));
    // Freeing makes room again.
    let granted: Vec<u64> = replies.iter().filter(|r| r[1] == 0).map(|r| r[0]).collect();
    for chunk in granted.chunks(64) {
        let wave = Wave::new(wave.buffer().clone(), chunk.len() as u32);
        assert!(free(&wave, chunk).iter().all(|r| *r == [0, 0]));
    }
    assert!(allocate(&wave, &[1]).iter().all(|r| r[0] != 0));
    listener.shutdown();
}

/// The count bound: past `max_allocations` live, allocations are refused whatever their size.
fn devmem_bounds_the_allocation_count(protocol: Protocol) {
    let limits = DevMemLimits::default().with_max_allocations(10);
    let (listener, buffer) = devmem(Arc::new(HostMemory), limits, protocol);
    let replies = allocate(&Wave::new(buffer, 64), &[1]);
    assert_eq!(replies.iter().filter(|r| r[0] != 0).count(), 10);
    assert_eq!(replies[10..], [[0, ErrorCode::Refused as u64]; 54]);
    listener.shutdown();
}

/// Memory whose allocate panics.
#[derive(Debug)]
struct Panicking;

impl DeviceMemory for Panicking {
    fn name(&self) -> &'static str {
        "panicking"
    }
    fn allocate(&self, _: usize, _: usize) -> Result<NonNull<u8>, MemoryError> {
        panic!("backend failure")
    }
    unsafe fn free(&self, _: NonNull<u8>, _: usize, _: usize) {}
    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

/// Every DEVMEM failure is a null address (ROCm's device code checks for null and takes
/// `u64::MAX` as memory): refusals, bad frees, a panicking backend, DEVMEM not registered.
fn devmem_failures_always_reply_a_null_address(protocol: Protocol) {
    let (listener, buffer) = devmem(Arc::new(Panicking), DevMemLimits::default(), protocol);
    let wave = Wave::new(buffer.clone(), 2);
    assert_eq!(allocate(&wave, &[64]), [[0, ErrorCode::ServicePanicked as u64]; 2]);
    assert_eq!(allocate(&wave, &[0]), [[0, ErrorCode::Refused as u64]; 2]);
    assert_eq!(allocate(&wave, &[u64::MAX]), [[0, ErrorCode::Refused as u64]; 2]);
    assert_eq!(free(&wave, &[0x1000]), [[0, ErrorCode::BadRequest as u64]; 2]);
    listener.shutdown();

    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 2, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    assert_eq!(allocate(&Wave::new(buffer, 1), &[64]), [[0, ErrorCode::UnknownService as u64]]);
    listener.shutdown();
}

/// 5,000 distinct unknown ids: 32 remembered with their counts, the rest only counted.
fn unknown_ids_are_remembered_in_a_fixed_table(protocol: Protocol) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 2, doorbell, protocol).unwrap());
    listener.add(buffer.clone()).unwrap();
    let wave = Wave::new(buffer, 1);
    for id in 1000..6000 {
        assert_eq!(wave.call(id, |_| [0; 8]).unwrap().lane(0), ErrorCode::UnknownService.reply());
    }
    wave.call(1000, |_| [0; 8]).unwrap();
    let stats = listener.shutdown();
    assert_eq!(stats.unknown_ids.len(), REMEMBERED_UNKNOWN_IDS);
    assert_eq!(stats.unknown_ids[&1000], 2);
    assert_eq!(stats.unknown_ids_not_remembered, 5000 - REMEMBERED_UNKNOWN_IDS as u64);
    assert_eq!(stats.unknown.packets, 5001);
}

for_every_protocol!(
    waves_outnumbering_packets_lose_no_printf_line,
    begins_past_the_held_bytes_are_refused_and_others_complete,
    a_printf_past_its_work_budget_prints_up_to_it_and_replies_the_count,
    devmem_blocks_are_aligned_as_rocms_device_allocator_frees_them,
    devmem_counts_pages_and_bookkeeping_against_its_budget,
    devmem_bounds_the_allocation_count,
    devmem_failures_always_reply_a_null_address,
    unknown_ids_are_remembered_in_a_fixed_table,
);
