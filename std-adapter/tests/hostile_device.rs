//! A hostile device: while emulated waves call and the listener serves, another thread writes
//! random values all over the shared buffer (stack tops, phase words or tagged line words, prefix
//! words, RPC mailboxes, headers with any lanes and opcodes, payloads and lane buffers with
//! stream lengths). Run once per wire protocol (`rpc_hostile.rs` has the RPC client's own
//! attacks: streams that stop, huge lengths, its own ports' mailboxes flipped at random).
//!
//! The listener must not crash, hang or touch memory outside the buffer (the buffer sits between
//! two canary-filled guard regions, checked at the end), and must report what it found. Waves may
//! time out or get garbage meanwhile, within their timeout. Once the scribbling stops and the
//! buffer is re-initialised, new waves get correct replies.

use hostcall::prelude::*;
use hostcall::{
    services::rpc::{RpcOptions, SharedSink},
    BufferRegistration, HostcallBuffer, Listener, ListenerConfig, MemoryError, ParkingDoorbell, Protocol,
    Wave,
};
use hostcall_core::{line, phase, rpc, stack, AnyView, LANES, SLOT_WORDS};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::rng::Rng;

const ADD: u32 = 100;
const PACKETS: u64 = 8;
const GUARD: usize = 4096;
const CANARY: u8 = 0xa5;

/// Host memory with a canary-filled guard region before and after every allocation.
#[derive(Debug, Default)]
struct GuardedMemory {
    /// Live allocations: (user pointer, size).
    live: Mutex<Vec<(usize, usize)>>,
}

impl GuardedMemory {
    fn region(size: usize, align: usize) -> Option<Layout> {
        Layout::from_size_align(size.checked_add(2 * GUARD)?, align.max(GUARD)).ok()
    }

    /// Panics unless every guard byte of every live allocation still holds the canary.
    fn check_canaries(&self) {
        for &(user, size) in self.live.lock().unwrap().iter() {
            let user = user as *const u8;
            // SAFETY: `user - GUARD .. user + size + GUARD` is one live allocation of ours (see
            // `allocate`); the guards are never handed out, and the caller makes sure nothing
            // accesses the buffer while this runs (the listener has stopped serving it).
            let (before, after) = unsafe {
                (
                    std::slice::from_raw_parts(user.sub(GUARD), GUARD),
                    std::slice::from_raw_parts(user.add(size), GUARD),
                )
            };
            for (side, guard) in [("before", before), ("after", after)] {
                if let Some(at) = guard.iter().position(|&b| b != CANARY) {
                    panic!("guard region {side} the buffer was written at byte {at}: {:#x}", guard[at]);
                }
            }
        }
    }
}

impl DeviceMemory for GuardedMemory {
    fn name(&self) -> &'static str {
        "guarded-host"
    }

    fn allocate(&self, size: usize, align: usize) -> Result<NonNull<u8>, MemoryError> {
        let layout = Self::region(size, align).ok_or(MemoryError::BadRequest { size, align })?;
        // SAFETY: the layout's size is at least 2 * GUARD > 0.
        let region = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or(MemoryError::OutOfMemory { size })?;
        // SAFETY: `region` is `layout.size()` = size + 2 * GUARD bytes, freshly allocated and ours;
        // the guards are its first and last GUARD bytes, and the user part starts GUARD bytes in
        // (aligned: the region is aligned to at least GUARD, a multiple of `align`).
        let user = unsafe {
            let region = region.as_ptr();
            region.write_bytes(CANARY, GUARD);
            region.add(GUARD + size).write_bytes(CANARY, GUARD);
            region.add(GUARD)
        };
        self.live.lock().unwrap().push((user as usize, size));
        Ok(NonNull::new(user).expect("inside a non-null allocation"))
    }

    unsafe fn free(&self, ptr: NonNull<u8>, size: usize, align: usize) {
        self.live.lock().unwrap().retain(|&(user, _)| user != ptr.as_ptr() as usize);
        let layout = Self::region(size, align).expect("accepted by allocate");
        // SAFETY: the caller passes a pointer `allocate(size, align)` returned, so the region
        // starts GUARD bytes before it and was allocated with this same layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr().sub(GUARD), layout) }
    }

    fn device_address(&self, host: *const u8) -> u64 {
        host as u64
    }
}

/// The values a scribbler writes.
trait Interesting {
    /// A value a scribbler would find interesting: garbage, small indices, tagged pointers, flags.
    fn value(&mut self) -> u64;
}

impl Interesting for Rng {
    fn value(&mut self) -> u64 {
        let step = PACKETS.next_power_of_two();
        match self.below(6) {
            0 => self.next(),
            1 => self.below(PACKETS + 2),
            2 => self.below(PACKETS + 2) + self.below(1 << 20) * step,
            3 => 0,
            4 => 1,
            _ => u64::MAX,
        }
    }
}

/// One random write into a random word of the buffer, through its atomics.
fn scribble(view: AnyView<'_>, rng: &mut Rng) {
    match view {
        AnyView::Stack(view) => scribble_stack(&view, rng),
        AnyView::Phase(view) => scribble_phase(&view, rng),
        AnyView::Line(view) => scribble_line(&view, rng),
        AnyView::Rpc(view) => scribble_rpc(&view, rng),
    }
}

fn scribble_rpc(view: &rpc::View<'_>, rng: &mut Rng) {
    let port = rng.below(PACKETS) as u32;
    let v = rng.value();
    // Opcodes the host knows (a hostcall service, ROCm's, LLVM libc's streams) and any other.
    let opcodes =
        [rpc::opcode_of(ADD), rpc::opcode::rocm::PRINTF, rpc::opcode::libc::WRITE_TO_STDOUT, v as u32];
    // Relaxed everywhere: a hostile device promises no ordering at all.
    match rng.below(10) {
        0 | 1 => view.device_mailbox(port).store(v as u32, Ordering::Relaxed),
        2 => view.host_mailbox(port).store(v as u32, Ordering::Relaxed),
        3 => view.header(port).mask.store(v, Ordering::Relaxed),
        4 => view.header(port).opcode.store(opcodes[rng.below(4) as usize], Ordering::Relaxed),
        5 => view.header(port).padding.store(v as u32, Ordering::Relaxed),
        _ => {
            let (lane, word) =
                (rng.below(u64::from(view.lanes())) as u32, rng.below(SLOT_WORDS as u64) as usize);
            view.lane_buffer(port, lane).words[word].write(v);
        }
    }
}

fn scribble_line(view: &line::View<'_>, rng: &mut Rng) {
    let packet = rng.below(PACKETS) as usize;
    let v = rng.value();
    let (request, reply) = (view.request(packet), view.reply(packet));
    // Half the time a line word of the packet's current head sequence (or the next), so that some
    // scribbled packets are consistent and get served (with garbage services and lanes).
    let seq = line::seq_of(request.head.load(Ordering::Relaxed));
    let v = if rng.below(2) == 0 { line::word(v, (seq + rng.below(2) as u32) % 128) } else { v };
    let (lane, word) =
        (rng.below(LANES as u64) as usize, rng.below(line::REQUEST_LANE_WORDS as u64) as usize);
    // Relaxed everywhere: a hostile device promises no ordering at all.
    match rng.below(10) {
        0 => request.head.store(v, Ordering::Relaxed),
        1 => request.mask.store(v, Ordering::Relaxed),
        2 => view.device_seq(packet).store(v as u32, Ordering::Relaxed),
        3 => view.served(packet).store(v as u32, Ordering::Relaxed),
        4 => view.occupied_word(packet).store(v as u32, Ordering::Relaxed),
        5 => [&view.prefix().requests, &view.prefix().replies, &view.prefix().served][rng.below(3) as usize]
            .store(v, Ordering::Relaxed),
        6 => reply.lanes[lane][word % line::REPLY_LANE_WORDS].store(v, Ordering::Relaxed),
        _ => request.lanes[lane][word].store(v, Ordering::Relaxed),
    }
}

fn scribble_phase(view: &phase::View<'_>, rng: &mut Rng) {
    let packet = rng.below(PACKETS) as usize;
    let v = rng.value();
    let prefix = view.prefix();
    // Relaxed everywhere: a hostile device promises no ordering at all.
    match rng.below(10) {
        0 | 1 => view.device_phase(packet).store(v as u32, Ordering::Relaxed),
        2 => view.host_phase(packet).store(v as u32, Ordering::Relaxed),
        3 => view.occupied_word(packet).store(v as u32, Ordering::Relaxed),
        4 => [&prefix.device_phase, &prefix.host_phase, &prefix.headers, &prefix.payloads]
            [rng.below(4) as usize]
            .store(v, Ordering::Relaxed),
        5 => prefix.num_packets.store(v as u32, Ordering::Relaxed),
        6 => view.header(packet).activemask.store(v, Ordering::Relaxed),
        7 => view.header(packet).service.store(v as u32, Ordering::Relaxed),
        _ => {
            let (lane, word) = (rng.below(LANES as u64) as usize, rng.below(SLOT_WORDS as u64) as usize);
            view.payload(packet).slots[lane][word].write(v);
        }
    }
}

fn scribble_stack(view: &stack::View<'_>, rng: &mut Rng) {
    let packet = rng.below(PACKETS) as usize;
    let v = rng.value();
    let prefix = view.prefix();
    let header = view.header(packet);
    // Relaxed everywhere: a hostile device promises no ordering at all.
    match rng.below(10) {
        0 | 1 => prefix.ready_stack.store(v, Ordering::Relaxed),
        2 => prefix.free_stack.store(v, Ordering::Relaxed),
        3 => [&prefix.headers, &prefix.payloads, &prefix.doorbell, &prefix.index_mask][rng.below(4) as usize]
            .store(v, Ordering::Relaxed),
        4 => header.next.store(v, Ordering::Relaxed),
        5 => header.activemask.store(v, Ordering::Relaxed),
        6 => header.service.store(v as u32, Ordering::Relaxed),
        7 => header.control.store(v as u32, Ordering::Relaxed),
        _ => {
            let (lane, word) = (rng.below(LANES as u64) as usize, rng.below(SLOT_WORDS as u64) as usize);
            view.payload(packet).slots[lane][word].write(v);
        }
    }
}

/// `calls` calls of a wave of `lanes` lanes; every reply checked.
fn correct_calls(buffer: &Arc<HostcallBuffer>, id: u64, lanes: u32, calls: u64) {
    let wave = Wave::new(buffer.clone(), lanes).with_timeout(Duration::from_secs(5));
    for call in 0..calls {
        let tag = id << 32 | call;
        let reply = wave.call(ADD, |lane| [tag, lane as u64, id, 0, 0, 0, 0, 0]).expect("served");
        assert!(!reply.host_error());
        for lane in 0..lanes as usize {
            assert_eq!(reply.lane(lane), [tag + lane as u64, id], "wave {id} call {call} lane {lane}");
        }
    }
}

#[macro_use]
mod common;

for_every_protocol!(a_hostile_device_cannot_break_the_listener);

fn a_hostile_device_cannot_break_the_listener(protocol: Protocol) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::default()).unwrap();
    listener.services().register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    let memory = Arc::new(GuardedMemory::default());
    let buffer =
        Arc::new(HostcallBuffer::with_protocol(memory.clone(), PACKETS, doorbell.clone(), protocol).unwrap());
    // An RPC buffer's console writes (the scribbler's garbage) go nowhere, not to the test's stdout.
    let quiet = SharedSink::from_fn(|_, _| {});
    let rpc = RpcOptions::default().with_sink(quiet);
    listener.add(BufferRegistration::new(buffer.clone()).with_rpc(rpc.clone())).unwrap();
    correct_calls(&buffer, 0, 4, 5);

    // The attack: a scribbler and waves that give up after 20 ms, for 1 s.
    let stop = Arc::new(AtomicBool::new(false));
    let scribbler = {
        let (buffer, stop, doorbell) = (buffer.clone(), stop.clone(), doorbell.clone());
        thread::spawn(move || {
            let view = buffer.view();
            let mut rng = Rng(0x5eed_1234_abcd_0001);
            let mut writes = 0u64;
            while !stop.load(Ordering::Relaxed) {
                scribble(view, &mut rng);
                writes += 1;
                if writes % 64 == 0 {
                    doorbell.ring(); // wake the listener: it should look at the mess
                    thread::yield_now();
                }
            }
            writes
        })
    };
    let waves: Vec<_> = (0..4u64)
        .map(|w| {
            let (buffer, stop) = (buffer.clone(), stop.clone());
            thread::spawn(move || {
                let wave = Wave::new(buffer, 1 + w as u32 * 21).with_timeout(Duration::from_millis(20));
                let (mut answered, mut failed) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let begun = Instant::now();
                    match wave.call(ADD, |lane| [w, lane as u64, 0, 0, 0, 0, 0, 0]) {
                        Ok(_) => answered += 1, // possibly garbage: allowed while scribbled on
                        Err(_) => failed += 1,  // timed out, or a corrupt free-list
                    }
                    // A 20 ms timeout, checked every 64 polls (a spin, a yield or a 50 us sleep):
                    // far less than this even on a loaded machine.
                    assert!(begun.elapsed() < Duration::from_secs(3), "a wave hung");
                }
                (answered, failed)
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let writes = scribbler.join().expect("the scribbler");
    let outcomes: Vec<(u64, u64)> = waves.into_iter().map(|w| w.join().expect("a wave panicked")).collect();
    assert!(writes > 1000, "the scribbler ran ({writes} writes)");
    let stats = listener.stats();
    println!("{writes} scribbles; waves (answered, failed): {outcomes:?}; listener: {stats:?}");
    assert!(
        stats.malformed > 0 || stats.total().errors > 0,
        "the listener reported nothing: {stats:?} (waves: {outcomes:?})"
    );

    // Recovery. Take the buffer away from the listener first (a drain in progress could be
    // walking a chain of the old state), re-initialise it, and hand it back.
    listener.remove_buffer(&buffer).unwrap();
    memory.check_canaries();
    buffer.reset();
    listener.add(BufferRegistration::new(buffer.clone()).with_rpc(rpc)).unwrap();
    let served_before = listener.stats().services[&ADD].1.packets;
    let fresh: Vec<_> = (1..=4u64)
        .map(|id| {
            let buffer = buffer.clone();
            thread::spawn(move || correct_calls(&buffer, id, 1 + id as u32 * 15, 25))
        })
        .collect();
    fresh.into_iter().for_each(|t| t.join().expect("a fresh wave got a wrong reply"));

    let ((listener, stats), took) =
        common::watchdog::returns_within("shutdown", Duration::from_secs(10), move || {
            let stats = listener.shutdown();
            (listener, stats)
        });
    assert!(took < Duration::from_secs(2), "shutdown returned, but took {took:?}");
    assert_eq!(stats.services[&ADD].1.packets - served_before, 4 * 25, "the listener lives on");
    listener.remove_buffer(&buffer).unwrap();
    memory.check_canaries();
    drop(buffer);
    assert!(memory.live.lock().unwrap().is_empty(), "the buffer was freed");
}
