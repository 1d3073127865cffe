//! The lifecycle API with ROCm's two protocols (stack, phase) and its built-in services: `enable_with`
//! and its options (the phase protocol's bitmap passed in or allocated through the runtime's device memory and
//! freed at disable; the device ordinal), PRINTF and DEVMEM served from the start (DEVMEM through
//! the runtime's device memory), FUNCTION_CALL only after the `unsafe` opt-in, and no DEVMEM failure
//! ever replying `u64::MAX` as an address.

#[macro_use]
mod common;

use common::raw_memory::RawMemory;
use hostcall::services::printf::PrintfMessage;
use hostcall::{
    buffer_align_for, buffer_size_for, device_ordinal, occupied_size, protocol_of, EmulatedWave,
    EnableOptions,
};
use hostcall::{
    DeviceMemory, Error, HostMemory, HostcallRuntime, MemoryError, PacketRequest, PacketService, Protocol,
    QueueId,
};
use hostcall_core::message::MessageWriter;
use hostcall_core::phase;
use hostcall_core::{ErrorCode, LayoutError};
use hostcall_core::{DEVMEM, FUNCTION_CALL, PRINTF};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PACKETS: u32 = 8;

/// Host memory that counts what is live.
#[derive(Debug, Default)]
struct Counting {
    live: AtomicUsize,
    total: AtomicUsize,
}

impl DeviceMemory for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let block = HostMemory.allocate(size, align)?;
        self.live.fetch_add(1, Ordering::SeqCst);
        self.total.fetch_add(1, Ordering::SeqCst);
        Ok(block)
    }
    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        // SAFETY: forwarded from this function's contract.
        unsafe { HostMemory.free(ptr, size, align) }
    }
    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

fn options(protocol: Protocol) -> EnableOptions {
    EnableOptions::default().with_protocol(protocol)
}

fn wave(buffer: *mut u8, mask: u64) -> EmulatedWave {
    // SAFETY: callers keep the buffer enabled and allocated while the wave is used.
    unsafe { EmulatedWave::new(buffer, PACKETS, mask) }.unwrap().with_timeout(Duration::from_secs(20))
}

/// Queues are process-wide keys: each test and protocol gets its own.
fn queue(test: u64, protocol: Protocol) -> QueueId {
    QueueId(test << 4 | u64::from(protocol == Protocol::Phase))
}

fn runtime_on(memory: Arc<Counting>) -> HostcallRuntime {
    HostcallRuntime::with_device_memory(
        memory,
        Arc::new(hostcall::ParkingDoorbell::new()),
        HostcallRuntime::default_config(),
    )
}

/// PRINTF (to this process's stdout) and DEVMEM (through the runtime's device memory) with no
/// registration at all; FUNCTION_CALL not before the opt-in.
fn builtin_services_are_there_from_the_start(protocol: Protocol) {
    let memory = Arc::new(Counting::default());
    let runtime = runtime_on(memory.clone());
    let buffer = RawMemory::buffer(protocol, PACKETS);
    let queue = queue(1, protocol);
    // SAFETY: `buffer` outlives the enablement.
    unsafe { runtime.enable_with(buffer.ptr(), PACKETS, queue, options(protocol)) }.unwrap();
    assert_eq!(protocol_of(buffer.ptr()), Some(protocol));
    let bitmaps = memory.live.load(Ordering::SeqCst);
    assert_eq!(
        bitmaps,
        usize::from(protocol == Protocol::Phase),
        "a phase bitmap from the runtime's device memory"
    );

    let one = wave(buffer.ptr(), 1);
    let words = PrintfMessage::new(b"lifecycle %s printf: %d\n").string(b"built-in").int(42).into_words();
    let printed =
        MessageWriter::new(words).send(|request| one.call(PRINTF, |_| *request).unwrap().lane(0)).unwrap();
    assert_eq!(printed, [b"lifecycle built-in printf: 42\n".len() as u64, 0]);

    let allocated = wave(buffer.ptr(), 0b11).call(DEVMEM, |lane| [0, 64 << lane, 0, 0, 0, 0, 0, 0]).unwrap();
    let blocks = [allocated.lane(0)[0], allocated.lane(1)[0]];
    assert!(blocks.iter().all(|&b| b != 0 && b != u64::MAX), "{blocks:x?}");
    assert_eq!(
        memory.live.load(Ordering::SeqCst),
        bitmaps + 2,
        "DEVMEM allocates through the runtime's device memory"
    );
    let freed = wave(buffer.ptr(), 0b11).call(DEVMEM, |lane| [blocks[lane], 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!([freed.lane(0), freed.lane(1)], [[0, 0], [0, 0]]);
    assert_eq!(memory.live.load(Ordering::SeqCst), bitmaps);

    let refused = one.call(FUNCTION_CALL, |_| [0x1000, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(refused.lane(0), ErrorCode::UnknownService.reply(), "no FUNCTION_CALL before the opt-in");
    runtime.disable(buffer.ptr(), queue).unwrap();
    assert_eq!(memory.live.load(Ordering::SeqCst), 0, "the runtime's bitmap is freed at disable");
}

extern "C" fn mul_add(out: *mut [u64; 2], inputs: *const [u64; 7]) {
    // SAFETY: the FUNCTION_CALL service passes valid arrays for the call.
    unsafe {
        let i = *inputs;
        *out = [i[0] * i[1] + i[2], i[6]];
    }
}

fn function_calls_only_after_the_opt_in(protocol: Protocol) {
    let runtime = HostcallRuntime::new();
    let buffer = RawMemory::buffer(protocol, PACKETS);
    let queue = queue(2, protocol);
    // SAFETY: `buffer` outlives the enablement.
    unsafe { runtime.enable_with(buffer.ptr(), PACKETS, queue, options(protocol)) }.unwrap();
    let request = [mul_add as *const () as usize as u64, 6, 7, 0, 0, 0, 0, 99];
    let before = wave(buffer.ptr(), 1).call(FUNCTION_CALL, |_| request).unwrap();
    assert_eq!(before.lane(0), ErrorCode::UnknownService.reply());
    // SAFETY: the only device is this test, which sends the address of `mul_add` (or null).
    unsafe { runtime.enable_function_calls() }.unwrap();
    let after = wave(buffer.ptr(), 0b11)
        .call(FUNCTION_CALL, |lane| if lane == 0 { request } else { [0; 8] })
        .unwrap();
    assert_eq!(after.lane(0), [42, 99]);
    assert_eq!(after.lane(1), ErrorCode::BadRequest.reply(), "a null address is refused");
    // SAFETY: as above.
    assert_eq!(unsafe { runtime.enable_function_calls() }, Err(Error::ServiceTaken(FUNCTION_CALL)));
    runtime.disable(buffer.ptr(), queue).unwrap();
}

/// Unregistered, DEVMEM is an unknown service: still a null address, never `u64::MAX`.
fn devmem_failures_reply_a_null_address(protocol: Protocol) {
    let runtime = HostcallRuntime::new();
    let buffer = RawMemory::buffer(protocol, PACKETS);
    let queue = queue(3, protocol);
    // SAFETY: `buffer` outlives the enablement.
    unsafe { runtime.enable_with(buffer.ptr(), PACKETS, queue, options(protocol)) }.unwrap();
    let refused = wave(buffer.ptr(), 1).call(DEVMEM, |_| [0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(refused.lane(0), [0, ErrorCode::Refused as u64], "zero bytes");
    assert!(runtime.services().unregister(DEVMEM));
    let unknown = wave(buffer.ptr(), 0b101).call(DEVMEM, |_| [0, 64, 0, 0, 0, 0, 0, 0]).unwrap();
    for lane in [0, 2] {
        assert_eq!(unknown.lane(lane), [0, ErrorCode::UnknownService as u64]);
    }
    runtime.services().register_lane(DEVMEM, "panics", |_| panic!("a broken allocator")).unwrap();
    let panicked = wave(buffer.ptr(), 1).call(DEVMEM, |_| [0, 64, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(panicked.lane(0), [0, ErrorCode::ServicePanicked as u64]);
    runtime.disable(buffer.ptr(), queue).unwrap();
}

for_rocm_protocols!(
    builtin_services_are_there_from_the_start,
    function_calls_only_after_the_opt_in,
    devmem_failures_reply_a_null_address
);

#[test]
fn a_phase_bitmap_passed_in_is_used_and_kept() {
    struct Device;
    impl PacketService for Device {
        fn serve(&self, packet: &mut PacketRequest<'_>) {
            let device = u64::from(packet.device());
            for lane in packet.lanes() {
                packet.reply(lane, [device, 0]);
            }
        }
    }
    let runtime = HostcallRuntime::new();
    runtime.services().register_lane(100, "add", |r| Ok([r[0] + r[1], 0])).unwrap();
    runtime.services().register_packet(101, "device", Device).unwrap();
    let buffer = RawMemory::buffer(Protocol::Phase, PACKETS);
    assert_eq!(occupied_size(PACKETS), 4);
    let mut bitmap = [0u32; 1];
    let given = EnableOptions::default()
        .with_protocol(Protocol::Phase)
        .with_occupied(NonNull::new(bitmap.as_mut_ptr()))
        .with_device_ordinal(3);
    // SAFETY: `buffer` and `bitmap` outlive the enablement.
    unsafe { runtime.enable_with(buffer.ptr(), PACKETS, QueueId(0x40), given) }.unwrap();
    assert_eq!(device_ordinal(buffer.ptr()), Some(3));
    assert_eq!(
        wave(buffer.ptr(), 1).call(101, |_| [0; 8]).unwrap().lane(0),
        [3, 0],
        "services see the ordinal"
    );
    // SAFETY: the buffer is enabled (so initialised); the prefix load is atomic.
    let view = unsafe { phase::View::from_raw(buffer.ptr(), buffer.len(), PACKETS) }.unwrap();
    assert_eq!(view.prefix().occupied.load(Ordering::Relaxed), bitmap.as_ptr() as u64);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let w = wave(buffer.ptr(), u64::MAX);
            std::thread::spawn(move || {
                for c in 0..50u64 {
                    let reply = w.call(100, |lane| [t << 32 | c, lane as u64, 0, 0, 0, 0, 0, 0]).unwrap();
                    assert_eq!(reply.lane(63), [(t << 32 | c) + 63, 0]);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    runtime.disable(buffer.ptr(), QueueId(0x40)).unwrap();
    assert_eq!(device_ordinal(buffer.ptr()), None);
    // Every claim went through the bitmap, and was released.
    assert_eq!(bitmap, [0]);
}

#[test]
fn phase_options_are_checked() {
    let runtime = HostcallRuntime::new();
    let buffer = RawMemory::buffer(Protocol::Phase, PACKETS);
    let mut words = [0u32; 4];
    let with = |occupied: *mut u32, protocol| {
        EnableOptions::default()
            .with_protocol(protocol)
            .with_occupied(NonNull::new(occupied))
            .with_device_ordinal(0)
    };
    let q = QueueId(0x50);
    let misaligned = words.as_mut_ptr().cast::<u8>().wrapping_add(2).cast::<u32>();
    let inside = buffer.ptr().wrapping_add(512).cast::<u32>();
    // SAFETY (all): each is refused before anything is touched.
    unsafe {
        assert!(matches!(
            runtime.enable_with(buffer.ptr(), PACKETS, q, with(words.as_mut_ptr(), Protocol::Stack)),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            runtime.enable_with(buffer.ptr(), PACKETS, q, with(misaligned, Protocol::Phase)),
            Err(Error::Layout(LayoutError::Misaligned { .. }))
        ));
        assert!(matches!(
            runtime.enable_with(buffer.ptr(), PACKETS, q, with(inside, Protocol::Phase)),
            Err(Error::Overlaps { .. })
        ));
        // A phase buffer must be 64-aligned (8 would do for the stack protocol).
        let off_line = buffer.ptr().wrapping_add(8);
        assert!(matches!(
            runtime.enable_with(off_line, 2, q, options(Protocol::Phase)),
            Err(Error::Layout(LayoutError::Misaligned { .. }))
        ));
    }
    assert!(!runtime.is_running(), "nothing was enabled");
    // A bitmap inside another enabled buffer is refused too.
    let other = RawMemory::buffer(Protocol::Stack, PACKETS);
    // SAFETY: `other` and `buffer` outlive their enablements.
    unsafe {
        runtime.enable(other.ptr(), PACKETS, QueueId(0x51)).unwrap();
        let in_other = other.ptr().wrapping_add(64).cast::<u32>();
        assert!(matches!(
            runtime.enable_with(buffer.ptr(), PACKETS, q, with(in_other, Protocol::Phase)),
            Err(Error::Overlaps { .. })
        ));
    }
    runtime.disable(other.ptr(), QueueId(0x51)).unwrap();
}

#[test]
fn sizes_and_alignments_per_protocol() {
    assert_eq!(buffer_size_for(Protocol::Stack, PACKETS), hostcall::buffer_size(PACKETS));
    assert_eq!(buffer_size_for(Protocol::Phase, PACKETS).ok(), phase::buffer_size(PACKETS));
    assert_eq!((buffer_align_for(Protocol::Stack), buffer_align_for(Protocol::Phase)), (8, 64));
    assert!(buffer_size_for(Protocol::Phase, 1).is_err());
    assert!(buffer_size_for(Protocol::Phase, u32::MAX).is_err());
    assert_eq!((occupied_size(1), occupied_size(32), occupied_size(33)), (4, 4, 8));
}
