//! LLVM libc's GPU allocator against the listener's `MALLOC` / `FREE` (through DEVMEM), on host
//! memory that aligns to 4 KiB and never to 8 KiB (as HSA pools and CUDA's pinned memory may):
//! the sizes `allocator.cpp` asks for (a 2 MiB slab; `malloc(n)` for n >= 1 MiB as n rounded up
//! past the next 2 MiB multiple: 2, 4 and 6 MiB) come back 2 MiB aligned, as LLVM's servers give
//! them, so a free of one is not taken for a chunk of a slab; smaller requests 4 KiB aligned.
//! DEVMEM's own requests keep ROCm's rule (a 4 MiB block 4 KiB aligned).

use hostcall::prelude::*;
use hostcall::{
    services::devmem::{DevMemLimits, BLOCK_ALIGN, SLAB_BYTES},
    services::rpc::client::one_lane::one_packet,
    BufferRegistration, MemoryError, Protocol,
};
use hostcall::{
    DeviceAllocation, HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Wave,
};
use hostcall_core::rpc::opcode::libc;
use hostcall_core::rpc::{Client, View};
use hostcall_core::sync::AtomicU32;
use hostcall_core::DEVMEM;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const PORTS: u64 = 4;
const LANES: u32 = 1;

/// Host memory that aligns to at most 4 KiB, and hands out blocks that are 4 KiB- but never
/// 8 KiB-aligned (so never 2 MiB-aligned by luck).
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

fn patience() -> impl FnMut(u32) -> bool {
    let start = Instant::now();
    move |_| start.elapsed() < Duration::from_secs(30)
}

/// `rpc_allocate(size)` as LLVM libc sends it: one lane, `MALLOC`, the address back.
fn rpc_allocate(client: &Client<'_>, size: u64) -> u64 {
    one_packet(client, 0, libc::MALLOC, [size, 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap()
}

/// `rpc_free(ptr)`: one lane, `FREE`, send only.
fn rpc_free(client: &Client<'_>, address: u64) {
    let start = Instant::now();
    let mut port = loop {
        if let Some(port) = client.try_open(libc::FREE, 1, 0) {
            break port;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no port for FREE");
        std::hint::spin_loop();
    };
    port.send(|_| [address, 0, 0, 0, 0, 0, 0, 0], &mut patience()).unwrap();
    port.close();
}

/// `allocate(n)` of LLVM libc's GPU allocator for n >= 1 MiB: `round_up<SLAB_SIZE>(n)`, which
/// adds a whole slab before masking (so 2 MiB asks for 4).
fn llvm_large_request(size: u64) -> u64 {
    (size + SLAB_BYTES) & !(SLAB_BYTES - 1)
}

#[test]
fn llvm_sized_blocks_come_back_2_mib_aligned_and_devmem_keeps_rocms_rule() {
    let protocol = Protocol::Rpc { lanes: LANES };
    let len = protocol.buffer_size(PORTS as u32).unwrap();
    // Before the listener, so that it is dropped after the listener stops, even when a check fails.
    let memory = DeviceAllocation::new(Arc::new(HostMemory), len, protocol.buffer_align()).unwrap();
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), ListenerConfig::spinning()).unwrap();
    listener.services().enable_devmem(Arc::new(PageAlignedOnly), DevMemLimits::default()).unwrap();
    // SAFETY: `memory` stays allocated until after `remove_raw`, touched only atomically.
    listener.add(unsafe { BufferRegistration::raw(protocol, memory.as_ptr(), len, PORTS) }).unwrap();
    // SAFETY: as above; the view is used only while the listener serves the memory.
    let view = unsafe { View::from_raw(memory.as_ptr(), len, PORTS as u32, LANES) }.unwrap();
    let locks = [AtomicU32::new(0)];
    let client = Client::new(view, &locks).unwrap();

    assert_eq!(llvm_large_request(MIB), 2 * MIB);
    assert_eq!(llvm_large_request(2 * MIB), 4 * MIB);
    assert_eq!(llvm_large_request(4 * MIB), 6 * MIB);
    // A slab (sizeof(Slab) = 2 MiB), then malloc(1, 2 and 4 MiB) as the allocator asks for them.
    let sizes =
        [SLAB_BYTES, llvm_large_request(MIB), llvm_large_request(2 * MIB), llvm_large_request(4 * MIB)];
    for round in 0..3 {
        let blocks: Vec<u64> = sizes.iter().map(|&size| rpc_allocate(&client, size)).collect();
        for (&size, &block) in sizes.iter().zip(&blocks) {
            assert_ne!(block, 0, "round {round}: {size} bytes refused");
            assert_eq!(block % SLAB_BYTES, 0, "round {round}: {size} bytes at {block:#x}, not 2 MiB aligned");
        }
        let small = rpc_allocate(&client, 16);
        assert!(small != 0 && small % BLOCK_ALIGN == 0, "{small:#x}");
        // Frees of large blocks and slabs, as `deallocate` and a slab's release send them.
        for &block in blocks.iter().chain([&small]) {
            rpc_free(&client, block);
        }
    }
    // DEVMEM (ROCm's device allocator) keeps ROCm's rule: a 4 MiB block is 4 KiB aligned, taken
    // as this backend gives it (4 KiB past an 8 KiB boundary).
    let phase =
        Arc::new(HostcallBuffer::with_protocol(Arc::new(HostMemory), 4, doorbell, Protocol::Phase).unwrap());
    listener.add(phase.clone()).unwrap();
    let wave = Wave::new(phase, 1).with_timeout(Duration::from_secs(30));
    let rocm = wave.call(DEVMEM, |_| [0, 4 * MIB, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)[0];
    assert_eq!(rocm % 8192, 4096, "{rocm:#x}: ROCm's rule takes the backend's 4 KiB alignment");
    let slab = wave.call(DEVMEM, |_| [0, SLAB_BYTES, 0, 0, 0, 0, 0, 0]).unwrap().lane(0)[0];
    assert_eq!(slab % SLAB_BYTES, 0, "{slab:#x}: ROCm's 2 MiB slab");

    // Every FREE was served: nothing of the RPC buffer's is live (the two DEVMEM blocks are).
    let stats = listener.shutdown();
    assert_eq!(stats.total().errors, 0, "{stats:?}");
    drop(memory);
}
