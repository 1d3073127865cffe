//! LLVM libc's `MALLOC` and `FREE` from the GPU (kernels in `examples/cuda/memory.cuh`), served
//! through DEVMEM from [`CudaDeviceMemory::for_services`]: no driver call on the serving thread
//! waits for a kernel, so a free while another kernel waits for its reply cannot deadlock. Each
//! test runs under a watchdog: a hang fails it (the stuck threads are left behind).

use super::*;
use hostcall::{
    backend::cuda::CudaDeviceMemory,
    services::devmem::{DevMemLimits, SLAB_BYTES},
};

/// Runs `test` on a thread of its own; fails it, instead of hanging, after `limit`.
fn within(limit: Duration, test: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    match finished.recv_timeout(limit) {
        Ok(()) => thread.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("watchdog: not done within {limit:?}: a MALLOC or FREE deadlocked the listener")
        }
    }
}

/// A pool of one listener thread serving `mix` and DEVMEM from stream-ordered device memory
/// (within `limits`), and an RPC buffer of `ports` ports in the module's client object.
fn memory_pool(
    gpu: &Gpu,
    ports: u64,
    limits: DevMemLimits,
    config: ListenerConfig,
) -> (ListenerPool, Arc<HostcallBuffer>, DeviceBuffer, Arc<hostcall::backend::DeferredFree<CudaDeviceMemory>>)
{
    let pool = ListenerPool::start(1, gpu.doorbell.clone(), config).unwrap();
    pool.services().register_lane(100, "mix", |r| Ok([mix(r), r[0].wrapping_add(r[1])])).unwrap();
    let devmem = CudaDeviceMemory::for_services(gpu.cuda.clone()).unwrap();
    pool.services().enable_devmem(devmem.clone(), limits).unwrap();
    let (buffer, state) =
        cuda::rpc_buffer(&gpu.cuda, gpu.memory.clone(), ports, gpu.doorbell.clone(), &gpu.module).unwrap();
    pool.add(buffer.clone()).unwrap();
    (pool, buffer, state, devmem)
}

/// Waits (10 s at most) until nothing freed is still queued for the side thread.
fn frees_done(devmem: &hostcall::backend::DeferredFree<CudaDeviceMemory>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while devmem.pending_bytes() != 0 {
        assert!(std::time::Instant::now() < deadline, "{} bytes still being freed", devmem.pending_bytes());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The sequence: a kernel that allocates (LLVM's request for malloc(4 MiB): 6 MiB), one
/// that frees it (FREE is send only: the kernel ends before the host serves it), then one that
/// makes 100 calls while the host frees. With the free on the listener thread through
/// `cuMemFreeHost` (pinned memory), the third kernel hangs: the free waits for it, and it waits
/// for the listener.
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_rpc_malloc_free_then_calls_do_not_deadlock() {
    within(Duration::from_secs(120), || {
        let gpu = Gpu::new("gpu_rpc_malloc_free_then_calls_do_not_deadlock");
        let (pool, buffer, state, devmem) =
            memory_pool(&gpu, 32, DevMemLimits::default(), ListenerConfig::default());
        let (malloc, free, calls) =
            (gpu.kernel("hc_rpc_malloc"), gpu.kernel("hc_rpc_free"), gpu.kernel("hc_rpc_mixed"));
        let size = 6u64 << 20;
        for round in 0..3 {
            let out = gpu.zeroed(16);
            // SAFETY: matches `hc_rpc_malloc(void*, unsigned long long, unsigned long long*)`;
            // the port state, the buffer and `out` outlive the kernel.
            unsafe {
                gpu.launch_and_wait(&malloc, 1, 1, &[state.device_address(), size, out.device_address()])
            };
            let [address, unread] = out.read_u64(2).unwrap()[..] else { unreachable!() };
            assert_ne!(address, 0, "round {round}: MALLOC refused");
            assert_eq!(address % SLAB_BYTES, 0, "round {round}: {address:#x} not 2 MiB aligned");
            assert_eq!(unread, 0, "round {round}: the block did not read back on the GPU");
            // SAFETY: matches `hc_rpc_free(void*, unsigned long long)`; the state outlives it.
            unsafe { gpu.launch_and_wait(&free, 1, 1, &[state.device_address(), address]) };
            let counters = gpu.zeroed(8 * (2 + 100));
            // SAFETY: matches `hc_rpc_mixed(void*, unsigned, unsigned, unsigned long long*)`; all
            // it points to outlives the kernel.
            unsafe {
                gpu.launch_and_wait(
                    &calls,
                    1,
                    32,
                    &[state.device_address(), 100, 0, counters.device_address()],
                )
            };
            let c = counters.read_u64(2).unwrap();
            assert_eq!(c, vec![0, mixed_lanes(100)], "round {round}: [errors, lane replies checked]");
            frees_done(&devmem);
        }
        let view = buffer.view().rpc().expect("an RPC buffer");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (0..view.ports()).any(|port| view.pending(port)) {
            assert!(std::time::Instant::now() < deadline, "ports still pending 10 s after the kernels");
            std::thread::sleep(Duration::from_millis(1));
        }
        pool.remove_buffer(&buffer).unwrap();
        let stats = pool.shutdown();
        assert_eq!(stats.total().errors, 0, "{stats:?}");
    });
}

/// 1,056 warps (132 blocks of 256 threads), 8 rounds each: four lanes of every warp together ask
/// for LLVM libc's allocator's sizes (a 2 MiB slab; 2, 4 and 6 MiB for malloc of 1, 2 and 4 MiB),
/// check every block on the GPU (not null, 2 MiB aligned, its first and last words read back) and
/// free them, all while the other warps allocate. The budget is raised to hold every warp's
/// blocks at once (about 14 MiB a warp).
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_1056_warps_allocate_and_free_as_llvm_libc_does() {
    within(Duration::from_secs(240), || {
        let gpu = Gpu::new("gpu_1056_warps_allocate_and_free_as_llvm_libc_does");
        let limits = DevMemLimits::default()
            .with_max_total(48 << 30)
            .with_max_total_per_buffer(48 << 30)
            .with_max_allocations(1 << 16)
            .with_max_allocations_per_buffer(1 << 16);
        let (warps, rounds) = (1056u64, 8u64);
        let (pool, buffer, state, devmem) = memory_pool(&gpu, warps, limits, ListenerConfig::spinning());
        let kernel = gpu.kernel("hc_rpc_alloc_loop");
        let counters = gpu.zeroed(16);
        // SAFETY: matches `hc_rpc_alloc_loop(void*, unsigned, unsigned long long*)`; the state,
        // the buffer and the counters outlive the kernel.
        unsafe {
            gpu.launch_and_wait(
                &kernel,
                132,
                256,
                &[state.device_address(), rounds, counters.device_address()],
            )
        };
        let c = counters.read_u64(2).unwrap();
        assert_eq!(c, vec![0, warps * 4 * rounds], "[errors, blocks checked]");
        let view = buffer.view().rpc().expect("an RPC buffer");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (0..view.ports()).any(|port| view.pending(port)) {
            assert!(std::time::Instant::now() < deadline, "ports still pending 10 s after the kernel");
            std::thread::sleep(Duration::from_millis(1));
        }
        frees_done(&devmem);
        pool.remove_buffer(&buffer).unwrap();
        let stats = pool.shutdown();
        assert_eq!(stats.total().errors, 0, "{stats:?}");
        eprintln!("cuda: 1,056 warps x {rounds} rounds x 4 blocks allocated, checked and freed: {stats:?}");
    });
}

/// The C ABI's memory on this machine, as `Backend::cuda` sets it up: stream-ordered device
/// memory that hands out zeroed, 256-aligned device addresses, and refuses larger alignments
/// (DEVMEM then pads or takes a block that happens to be aligned).
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn the_cuda_backend_serves_with_stream_ordered_device_memory() {
    within(Duration::from_secs(60), || {
        let backend = hostcall::backend::Backend::cuda(0).unwrap();
        assert_eq!(backend.kind, hostcall::backend::BackendKind::Cuda, "{}", backend.reason);
        assert_eq!(backend.device_memory.name(), "cuda-device-stream-ordered");
        let block = backend.device_memory.allocate(3 << 20, 256).unwrap();
        assert_eq!(block.as_ptr() as u64 % 256, 0);
        assert!(matches!(
            backend.device_memory.allocate(1 << 20, 2 << 20),
            Err(hostcall::MemoryError::BadRequest { .. })
        ));
        // SAFETY: allocated above with this size and alignment, not used afterwards.
        unsafe { backend.device_memory.free(block, 3 << 20, 256) };
        let chosen = hostcall::backend::choose(hostcall::backend::MemoryChoice::Auto).unwrap();
        eprintln!("cuda: auto chose {}: {}", chosen.kind, chosen.reason);
    });
}
