//! A firmware-like runtime over `hostcall-core`, with nothing but the core: no `std`, no
//! allocator, no OS, no `main`. Everything lives in statics built at compile time (the buffer's
//! memory, the service table, the poller), and the program's one loop plays both sides: it
//! submits a call from the "device" side, then polls to serve it and checks the reply.
//!
//! `./run-tests` builds and links it for `aarch64-unknown-none` (a target with no `std` at all),
//! so a change that makes the core need `std` or an allocator, or a dependency that pulls one in,
//! fails the build there:
//!
//! ```text
//! cd core/examples/bare_metal && cargo build --release
//! ```
//!
//! The target and the link (rust-lld with `link.x`, which places the program at QEMU virt's RAM
//! base and enters it at `_start`) are set in `.cargo/config.toml`. The binary is not run: a
//! board's runtime would set up a stack and jump to `_start`.

#![no_std]
#![no_main]

use core::cell::UnsafeCell;
use core::panic::PanicInfo;
use hostcall_core::stack::{buffer_size, View};
use hostcall_core::{ErrorCode, Poller, Protocol, Registration, ServiceTable, SLOT_WORDS};

/// Packets in the buffer.
const PACKETS: u32 = 4;
/// The buffer's size in bytes (the stack protocol's layout for `PACKETS`).
const BYTES: usize = match buffer_size(PACKETS) {
    Some(bytes) => bytes,
    None => panic!("no stack buffer of PACKETS packets"),
};
/// The service the loop calls.
const DOUBLE: u32 = 42;

/// The buffer's memory: a static, aligned as the layout needs, shared with the "device" only
/// through the view's atomics.
#[repr(C, align(64))]
struct Memory(UnsafeCell<[u8; BYTES]>);

// SAFETY: the bytes are only ever accessed through the view and the poller, whose atomic words
// (and the protocol's ordering on them) make concurrent access sound.
unsafe impl Sync for Memory {}

static MEMORY: Memory = Memory(UnsafeCell::new([0; BYTES]));

/// Doubles word 0; refuses what would overflow.
fn double(request: &[u64; SLOT_WORDS]) -> Result<[u64; 2], ErrorCode> {
    request[0].checked_mul(2).map(|d| [d, 0]).ok_or(ErrorCode::Refused)
}

/// The services, registered at compile time.
static SERVICES: ServiceTable<'static, 2> = ServiceTable::new().with(DOUBLE, &double);

/// The poller over every buffer of the program (one here).
static POLLER: Poller<1> = Poller::new();

/// The entry point (named in `link.x`).
#[no_mangle]
pub extern "C" fn _start() -> ! {
    let base = MEMORY.0.get().cast::<u8>();
    // SAFETY: `MEMORY` is static (it outlives the view) and is only accessed through the view
    // and the poller.
    let device = unsafe { View::from_raw(base, BYTES, PACKETS) }.expect("the layout fits");
    device.init(base as u64, 0);
    // SAFETY: as above; the buffer is never removed, and the memory lives for the program.
    unsafe { POLLER.add(Registration::new(Protocol::Stack, base, BYTES, PACKETS).unwrap()) }
        .expect("room for one buffer");

    // One poll session for the loop: its polls take no lock (the buffer is never removed).
    let mut polls = POLLER.session().expect("the only poller");
    let mut round = 0u64;
    loop {
        // The device side: one call, lanes 0 and 1.
        let mut packet = device.claim().expect("a sound free-list").expect("a free packet");
        packet.write_lane(0, &[round, 0, 0, 0, 0, 0, 0, 0]);
        packet.write_lane(1, &[u64::MAX, 0, 0, 0, 0, 0, 0, 0]);
        let submitted = packet.submit(DOUBLE, 0b11);
        // The host side: one poll serves it.
        let report = polls.poll_once(&SERVICES);
        assert_eq!(report.packets, 1);
        let done = submitted.wait_until(|_| false).expect("served by the poll");
        assert_eq!(done.reply(0), [round * 2, 0]);
        assert!(done.host_error(), "lane 1 overflowed: refused");
        drop(done);
        round = (round + 1) % 1_000_000;
    }
}

/// A panic stops the program where it is (a board's runtime would report it).
#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
