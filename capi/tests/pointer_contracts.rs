//! The pointer contracts of the C entry points, one test per case: what can be checked (null,
//! alignment, overlap with the memory the listener shares) is refused with its code; what the
//! contract allows (arrays overlapping each other, options at any alignment) works.

use hostcall_capi::options::{HostcallEnableOptions, HOSTCALL_PROTOCOL_PHASE};
use hostcall_capi::status::*;
use hostcall_capi::{hostcall_disable, hostcall_emulated_call, hostcall_enable_ex};
use hostcall_rs::{buffer_size_for, protocol_of, HostcallRuntime, Protocol};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

const ECHO: u32 = 300;
const PACKETS: u32 = 4;

/// Registers ECHO (`[r0 + 1, r1]`) on the default runtime, once per test process.
fn echo_service() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        HostcallRuntime::global().services().register_lane(ECHO, "echo", |r| Ok([r[0] + 1, r[1]])).unwrap();
    });
}

/// Zeroed, 64-aligned memory, freed on drop.
struct Memory {
    ptr: *mut u8,
    layout: Layout,
}

impl Memory {
    fn new(bytes: usize) -> Self {
        let layout = Layout::from_size_align(bytes, 64).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Self { ptr, layout }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// A buffer enabled on the default runtime for its own queue, disabled on drop.
struct Enabled {
    memory: Memory,
    queue: u64,
}

impl Enabled {
    fn new(options: Option<HostcallEnableOptions>) -> Self {
        static NEXT_QUEUE: AtomicU64 = AtomicU64::new(0x7000_0000);
        echo_service();
        let protocol = match options {
            Some(o) if o.protocol == HOSTCALL_PROTOCOL_PHASE => Protocol::Phase,
            _ => Protocol::Stack,
        };
        let memory = Memory::new(buffer_size_for(protocol, PACKETS).unwrap());
        let queue = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
        let options_ptr = options.as_ref().map_or(std::ptr::null(), |o| o as *const _);
        // SAFETY: `memory` outlives the enablement (disabled in `drop` before it is freed).
        let status =
            unsafe { hostcall_enable_ex(memory.ptr.cast(), PACKETS, queue as *const c_void, options_ptr) };
        assert_eq!(status, HOSTCALL_OK);
        Self { memory, queue }
    }

    fn buffer(&self) -> *mut c_void {
        self.memory.ptr.cast()
    }

    /// One ECHO call with `mask`, through the given arrays.
    ///
    /// # Safety
    /// As `hostcall_emulated_call`.
    unsafe fn call(&self, mask: u64, requests: *const [u64; 8], replies: *mut [u64; 2]) -> i32 {
        // SAFETY: forwarded.
        unsafe { hostcall_emulated_call(self.buffer(), PACKETS, ECHO, mask, requests, replies) }
    }
}

impl Drop for Enabled {
    fn drop(&mut self) {
        assert_eq!(hostcall_disable(self.buffer(), self.queue as *const c_void), HOSTCALL_OK);
    }
}

fn phase_options(occupied: *mut u32) -> HostcallEnableOptions {
    HostcallEnableOptions {
        size: std::mem::size_of::<HostcallEnableOptions>() as u32,
        protocol: HOSTCALL_PROTOCOL_PHASE,
        occupied,
        device_ordinal: 0,
        reserved: 0,
        rpc_lanes: 0,
        rpc_allow: 0,
        rpc_deny: 0,
        rpc_open_files: 0,
        rpc_stream_bytes: 0,
        rpc_files_dir: std::ptr::null(),
    }
}

#[test]
fn null_arrays_are_refused_unless_no_lane_is_active() {
    let b = Enabled::new(None);
    let requests = [[0u64; 8]; 1];
    let mut replies = [[0u64; 2]; 1];
    // SAFETY (all): valid or null arrays of one entry for mask 1; none read for mask 0.
    unsafe {
        assert_eq!(b.call(1, std::ptr::null(), replies.as_mut_ptr()), HOSTCALL_ERR_NULL);
        assert_eq!(b.call(1, requests.as_ptr(), std::ptr::null_mut()), HOSTCALL_ERR_NULL);
        assert_eq!(b.call(0, std::ptr::null(), std::ptr::null_mut()), HOSTCALL_OK);
        assert_eq!(b.call(1, requests.as_ptr(), replies.as_mut_ptr()), HOSTCALL_OK);
    }
    assert_eq!(replies[0], [1, 0]);
}

#[test]
fn misaligned_requests_are_refused() {
    let b = Enabled::new(None);
    let bytes = Memory::new(8 * 8 + 8);
    let mut replies = [[0u64; 2]; 1];
    // SAFETY: the pointer is refused before anything is read through it.
    let status = unsafe { b.call(1, bytes.ptr.wrapping_add(4).cast(), replies.as_mut_ptr()) };
    assert_eq!(status, HOSTCALL_ERR_MISALIGNED);
}

#[test]
fn misaligned_replies_are_refused() {
    let b = Enabled::new(None);
    let bytes = Memory::new(2 * 8 + 8);
    let requests = [[0u64; 8]; 1];
    // SAFETY: the pointer is refused before anything is written through it.
    let status = unsafe { b.call(1, requests.as_ptr(), bytes.ptr.wrapping_add(1).cast()) };
    assert_eq!(status, HOSTCALL_ERR_MISALIGNED);
}

/// Replies written into the requests' own memory: every lane's request is read before any reply
/// is written, so lane 4's request (at the bytes lane 16's reply overwrites) arrives intact.
#[test]
fn requests_and_replies_may_overlap() {
    let b = Enabled::new(None);
    let mut io = [[0u64; 8]; 64];
    for (lane, slot) in io.iter_mut().enumerate() {
        *slot = [lane as u64 * 10, lane as u64, 0, 0, 0, 0, 0, 0];
    }
    let base = io.as_mut_ptr();
    // SAFETY: both views span `io` (64 * 64 bytes of requests, 64 * 16 of replies), owned here.
    let status = unsafe { b.call(u64::MAX, base, base.cast()) };
    assert_eq!(status, HOSTCALL_OK);
    // SAFETY: `io` is plain memory; read as the 2-word replies just written.
    let replies = unsafe { std::slice::from_raw_parts(base.cast::<[u64; 2]>(), 64) };
    for (lane, reply) in replies.iter().enumerate() {
        assert_eq!(*reply, [lane as u64 * 10 + 1, lane as u64], "lane {lane}");
    }
}

#[test]
fn requests_inside_the_buffer_are_refused() {
    let b = Enabled::new(None);
    let mut replies = [[0u64; 2]; 1];
    let inside = b.memory.ptr.wrapping_add(4096).cast::<[u64; 8]>();
    // SAFETY: refused before anything is read.
    assert_eq!(unsafe { b.call(1, inside, replies.as_mut_ptr()) }, HOSTCALL_ERR_OVERLAPS);
}

#[test]
fn replies_inside_the_buffer_are_refused() {
    let b = Enabled::new(None);
    let requests = [[0u64; 8]; 2];
    // Ending one byte into the buffer is overlapping too.
    let straddling = b.memory.ptr.wrapping_sub(2 * 16 - 8).cast::<[u64; 2]>();
    // SAFETY: refused before anything is written.
    assert_eq!(unsafe { b.call(0b11, requests.as_ptr(), straddling) }, HOSTCALL_ERR_OVERLAPS);
}

#[test]
fn arrays_over_the_phase_bitmap_are_refused() {
    let mut bitmap = [0u64; 4]; // 32 bytes, 8-aligned; the bitmap is its first word
    let b = Enabled::new(Some(phase_options(bitmap.as_mut_ptr().cast())));
    let requests = [[0u64; 8]; 1];
    // SAFETY: refused before anything is written.
    let status = unsafe { b.call(1, requests.as_ptr(), bitmap.as_mut_ptr().cast()) };
    assert_eq!(status, HOSTCALL_ERR_OVERLAPS);
    let mut replies = [[0u64; 2]; 1];
    // SAFETY: a call on the phase buffer with arrays of our own.
    assert_eq!(unsafe { b.call(1, requests.as_ptr(), replies.as_mut_ptr()) }, HOSTCALL_OK);
    assert_eq!(replies[0], [1, 0]);
}

/// Options are read bytewise: a struct at an odd address is fine.
#[test]
fn options_at_any_alignment_are_read() {
    let bytes = Memory::new(64);
    let at = bytes.ptr.wrapping_add(3).cast::<HostcallEnableOptions>();
    // SAFETY: 24 bytes at offset 3 of 64 owned bytes; written unaligned.
    unsafe { at.write_unaligned(phase_options(std::ptr::null_mut())) };
    let memory = Memory::new(buffer_size_for(Protocol::Phase, PACKETS).unwrap());
    let queue = 0x7100_0000usize as *const c_void;
    // SAFETY: `memory` outlives the enablement; `at` holds `size` readable bytes.
    assert_eq!(unsafe { hostcall_enable_ex(memory.ptr.cast(), PACKETS, queue, at) }, HOSTCALL_OK);
    assert_eq!(protocol_of(memory.ptr), Some(Protocol::Phase));
    assert_eq!(hostcall_disable(memory.ptr.cast(), queue), HOSTCALL_OK);
}

#[test]
fn null_options_are_the_defaults() {
    let b = Enabled::new(None);
    assert_eq!(protocol_of(b.memory.ptr), Some(Protocol::Stack));
    assert_eq!(hostcall_rs::device_ordinal(b.memory.ptr), Some(0));
}

#[test]
fn a_null_buffer_is_refused_by_enable_ex() {
    let options = phase_options(std::ptr::null_mut());
    // SAFETY: null is refused before anything is touched.
    let status = unsafe { hostcall_enable_ex(std::ptr::null_mut(), PACKETS, std::ptr::null(), &options) };
    assert_eq!(status, HOSTCALL_ERR_NULL);
}

/// The LLVM-RPC client object: written whole over a buffer's device address; a short or null
/// `out`, a refused port count, and a device symbol of another size are refused, nothing written.
#[test]
fn rpc_client_object_checks_its_arguments() {
    use hostcall_capi::status::*;
    use hostcall_capi::{hostcall_rpc_buffer_size, hostcall_rpc_client_object};
    use std::ffi::c_void;
    assert_eq!(hostcall_rpc_buffer_size(4096, 32), 8_486_912);
    assert_eq!(hostcall_rpc_buffer_size(0, 32), 0);
    let mut out = [0xaau8; 600];
    let p = out.as_mut_ptr().cast::<c_void>();
    // SAFETY (every call): `out` is 600 writable bytes; the lengths passed never exceed that.
    unsafe {
        assert_eq!(hostcall_rpc_client_object(64, 0x7000_0000, 8, p, 600), HOSTCALL_ERR_RPC_CLIENT_SIZE);
        assert_eq!(hostcall_rpc_client_object(64, 0x7000_0000, 0, p, 551), HOSTCALL_ERR_NULL);
        assert_eq!(
            hostcall_rpc_client_object(64, 0x7000_0000, 0, std::ptr::null_mut(), 600),
            HOSTCALL_ERR_NULL
        );
        assert_eq!(hostcall_rpc_client_object(5000, 0x7000_0000, 552, p, 600), HOSTCALL_ERR_PACKET_COUNT);
        assert!(out.iter().all(|&b| b == 0xaa), "nothing written on failure");
        assert_eq!(hostcall_rpc_client_object(64, 0x7000_0000, 552, p, 600), HOSTCALL_OK);
    }
    let expected = hostcall_core::rpc::client_object(64, 0x7000_0000).unwrap();
    assert_eq!(&out[..552], &expected[..]);
    assert!(out[552..].iter().all(|&b| b == 0xaa), "nothing past the object");
}
