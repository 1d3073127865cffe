//! The CUDA backend on a real GPU (feature `cuda`). Every test here needs a CUDA device, so each
//! is `#[ignore]`d: a run without a GPU reports them as ignored, never as passed. On a GPU machine
//! run them with `--include-ignored`; there a missing device or module is a failure.
//!
//! The kernel test also needs the example's kernels built for the device
//! (`nvcc -arch=sm_90 -cubin -I include -o kernels.cubin std-adapter/examples/cuda/kernels.cu`)
//! and their path in `HOSTCALL_CUDA_MODULE`.
#![cfg(feature = "cuda")]

#[path = "cuda/memory.rs"]
mod memory;

use hostcall::amd_signal::AMD_SIGNAL_KIND_USER;
use hostcall::backend::cuda::{
    self, Cuda, CudaMemory, DeviceBuffer, DeviceStateLayout, Kernel, MappedDoorbell, Module, Stream,
};
use hostcall::{
    DeviceAllocation, DeviceListeners, DeviceMemory, Doorbell, Error, HostcallBuffer, ListenerConfig,
    ListenerPool, Protocol, Services, DOORBELL_INIT as INIT,
};
use hostcall_core::SLOT_WORDS;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The device; a test that runs without one fails (it was asked for with `--include-ignored`).
fn cuda_device(test: &str) -> Arc<Cuda> {
    if let Err(why) = cuda::probe() {
        panic!("{test}: no CUDA device ({why})");
    }
    Cuda::new(0).expect("a CUDA device that probe() found")
}

#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn pinned_memory_is_zeroed_and_mapped() {
    let cuda = cuda_device("pinned_memory_is_zeroed_and_mapped");
    let memory = Arc::new(CudaMemory::new(cuda));
    let allocation = DeviceAllocation::new(memory.clone(), 3 * 4096 + 5, 64).unwrap();
    // SAFETY: the allocation is that long and nobody else touches it.
    let bytes = unsafe { std::slice::from_raw_parts(allocation.as_ptr(), allocation.len()) };
    assert!(bytes.iter().all(|&b| b == 0));
    let base = allocation.device_address();
    assert_ne!(base, 0);
    // SAFETY: in bounds.
    let inside = unsafe { allocation.as_ptr().add(4100) };
    assert_eq!(memory.device_address(inside), base + 4100);
    assert!(matches!(memory.allocate(64, 8192), Err(hostcall::MemoryError::BadRequest { .. })));
}

#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn the_stack_protocol_needs_host_native_atomics() {
    let cuda = cuda_device("the_stack_protocol_needs_host_native_atomics");
    let memory = Arc::new(CudaMemory::new(cuda.clone()));
    let doorbell: Arc<dyn Doorbell> = Arc::new(MappedDoorbell::new(memory.clone()).unwrap());
    let stack = cuda::stack_buffer(&cuda, memory.clone(), 8, doorbell.clone());
    if cuda.host_native_atomics().unwrap() {
        assert!(stack.is_ok());
    } else {
        match stack {
            Err(Error::Unsupported(why)) => {
                assert!(why.contains("HOST_NATIVE_ATOMIC_SUPPORTED = 0"), "{why}");
                eprintln!("cuda: stack protocol refused: {why}");
            }
            other => panic!("the stack protocol must be refused here, got {other:?}"),
        }
    }
    assert!(cuda.check_protocol(Protocol::Phase).is_ok());
}

#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn a_phase_buffer_keeps_its_bitmap_in_device_memory() {
    let cuda = cuda_device("a_phase_buffer_keeps_its_bitmap_in_device_memory");
    let memory = Arc::new(CudaMemory::new(cuda.clone()));
    let doorbell: Arc<dyn Doorbell> = Arc::new(MappedDoorbell::new(memory.clone()).unwrap());
    let (buffer, state) = cuda::phase_buffer(&cuda, memory, 100, doorbell.clone()).unwrap();
    assert_eq!(state.len(), DeviceStateLayout::new(100).size);
    let Some(view) = buffer.view().phase() else { panic!("a phase buffer") };
    let prefix = view.prefix();
    assert_eq!(prefix.occupied.load(Ordering::Relaxed), state.device_address());
    assert_eq!(prefix.doorbell.load(Ordering::Relaxed), doorbell.handle());
    assert_eq!(prefix.headers.load(Ordering::Relaxed) - buffer.device_address(), 1024);
    buffer.reset(); // keeps the device bitmap
    assert_eq!(prefix.occupied.load(Ordering::Relaxed), state.device_address());
    assert_eq!(state.read_u64(4).unwrap(), vec![0; 4]);
}

/// The path of the example's kernels (`HOSTCALL_CUDA_MODULE`); a test that runs without it fails.
fn module_path(test: &str) -> std::ffi::OsString {
    std::env::var_os("HOSTCALL_CUDA_MODULE")
        .unwrap_or_else(|| panic!("{test}: HOSTCALL_CUDA_MODULE is not set (the path of kernels.cubin)"))
}

/// What every kernel test sets up: the device, the example's kernels, pinned mapped memory, a
/// doorbell in it and a stream.
struct Gpu {
    cuda: Arc<Cuda>,
    module: Arc<Module>,
    memory: Arc<CudaMemory>,
    bell: Arc<MappedDoorbell>,
    doorbell: Arc<dyn Doorbell>,
    stream: Stream,
}

impl Gpu {
    fn new(test: &str) -> Gpu {
        let cuda = cuda_device(test);
        let module = Module::load(cuda.clone(), std::path::Path::new(&module_path(test))).unwrap();
        let memory = Arc::new(CudaMemory::new(cuda.clone()));
        let bell = Arc::new(MappedDoorbell::new(memory.clone()).unwrap());
        let doorbell: Arc<dyn Doorbell> = bell.clone();
        let stream = Stream::new(cuda.clone()).unwrap();
        Gpu { cuda, module, memory, bell, doorbell, stream }
    }

    fn kernel(&self, name: &str) -> Kernel {
        self.module.kernel(name).unwrap()
    }

    /// A device buffer of `bytes` zeroed bytes (the kernels' counters and results).
    fn zeroed(&self, bytes: usize) -> DeviceBuffer {
        DeviceBuffer::new(self.cuda.clone(), bytes).unwrap()
    }

    /// Launches `kernel` on `grid` blocks of `block` threads and waits for it (60 s at most).
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`]: `args` match the kernel's parameters in order and size, and what
    /// they point to outlives the kernel (this waits for it).
    unsafe fn launch_and_wait(&self, kernel: &Kernel, grid: u32, block: u32, args: &[u64]) {
        // SAFETY: the caller's contract.
        unsafe { kernel.launch(&self.stream, grid, block, args) }.unwrap();
        self.stream.synchronize_for(Duration::from_secs(60)).unwrap();
    }
}

/// A pool of `threads` listener threads serving the example's lane service (id 100, `mix`).
fn mix_pool(threads: usize, doorbell: Arc<dyn Doorbell>) -> ListenerPool {
    let pool = ListenerPool::start(threads, doorbell, ListenerConfig::default()).unwrap();
    pool.services().register_lane(100, "mix", |r| Ok([mix(r), r[0].wrapping_add(r[1])])).unwrap();
    pool
}

/// Runs `hc_calls` of kernels.cu on `buffer` (8 blocks of 256 threads: 64 warps, `calls` calls
/// each, the default wait policy) and waits for it; returns its counters `[errors, lane replies
/// checked]`.
fn run_hc_calls(cuda: &Arc<Cuda>, kernel: &Kernel, buffer: &HostcallBuffer, calls: u64) -> Vec<u64> {
    let counters = DeviceBuffer::new(cuda.clone(), 16).unwrap();
    let per_call = DeviceBuffer::new(cuda.clone(), calls as usize * 8).unwrap();
    let clocks = DeviceBuffer::new(cuda.clone(), 32).unwrap();
    let stream = Stream::new(cuda.clone()).unwrap();
    let args = [
        buffer.device_address(),
        calls,
        20_000,
        256,
        8_192,
        500,
        counters.device_address(),
        0,
        per_call.device_address(),
        clocks.device_address(),
    ];
    // SAFETY: the arguments match `hc_calls` of kernels.cu in order and size; everything they
    // point to outlives the kernel, which is waited for below.
    unsafe { kernel.launch(&stream, 8, 256, &args) }.unwrap();
    stream.synchronize_for(Duration::from_secs(60)).unwrap();
    counters.read_u64(2).unwrap()
}

fn mix(r: &[u64; SLOT_WORDS]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    for &w in r {
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h ^ (h >> 29)
}

#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_warps_make_verified_hostcalls_through_two_listener_threads() {
    let gpu = Gpu::new("gpu_warps_make_verified_hostcalls_through_two_listener_threads");
    let kernel = gpu.kernel("hc_calls");
    let pool = mix_pool(2, gpu.doorbell.clone());
    let (warps, calls) = (64u64, 50u64);
    let (buffer, _state) =
        cuda::phase_buffer(&gpu.cuda, gpu.memory.clone(), warps, gpu.doorbell.clone()).unwrap();
    pool.add(buffer.clone()).unwrap();
    let c = run_hc_calls(&gpu.cuda, &kernel, &buffer, calls);
    assert_eq!(c, vec![0, warps * 32 * calls], "[errors, lane replies checked]");
    // The warps rang the doorbell's value word at +8 (the global timer, odd) and left the rest of
    // the amd_signal_t alone.
    let signal = gpu.bell.signal();
    let value = signal.value.load(Ordering::Acquire);
    assert!(value != INIT as i64 && value % 2 == 1, "doorbell value {value:#x}: the device did not ring +8");
    assert_eq!(signal.kind.load(Ordering::Relaxed), AMD_SIGNAL_KIND_USER);
    assert_eq!(signal.event_mailbox_ptr.load(Ordering::Relaxed), 0);
    let stats = pool.shutdown();
    assert_eq!(stats.total().packets, warps * calls);
    assert_eq!(stats.total().errors, 0);
}

/// The line protocol's device side (`line_call`) on whole and partial warps (the transposed
/// fill and poll, and the per-lane ones), with and without keep-packet, across the sequence wrap:
/// 300 calls a warp from a fresh buffer take each packet's sequence through `SEQ_MAX` (127) and
/// back to 1 once or twice, where the wave refreshes (zeroes) the packet's words on the GPU; two
/// more runs start every packet's `device_seq` 5 calls short of `SEQ_MAX`. Every lane's reply is
/// checked on the GPU.
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_line_calls_on_whole_and_partial_warps_cross_the_sequence_wrap() {
    let gpu = Gpu::new("gpu_line_calls_on_whole_and_partial_warps_cross_the_sequence_wrap");
    let (mixed, set_seq) = (gpu.kernel("hc_line_mixed"), gpu.kernel("hc_line_set_seq"));
    let pool = mix_pool(2, gpu.doorbell.clone());
    let (warps, calls) = (64u64, 300u64);
    assert!(calls > 2 * u64::from(hostcall_core::line::SEQ_MAX), "every packet wraps");
    let per_warp = mixed_lanes(calls);
    let near_wrap = u64::from(hostcall_core::line::SEQ_MAX - 5);
    let mut packets = 0;
    for (keep, start) in [(0u64, 0u64), (1, 0), (0, near_wrap), (1, near_wrap)] {
        let (buffer, _state) =
            cuda::line_buffer(&gpu.cuda, gpu.memory.clone(), 2 * warps, gpu.doorbell.clone()).unwrap();
        pool.add(buffer.clone()).unwrap();
        if start != 0 {
            // SAFETY: matches `hc_line_set_seq(const void*, unsigned)`; the buffer outlives it.
            unsafe { gpu.launch_and_wait(&set_seq, 1, 1, &[buffer.device_address(), start]) };
        }
        let counters = gpu.zeroed(16);
        let args = [buffer.device_address(), calls, keep, counters.device_address()];
        // SAFETY: matches `hc_line_mixed(const void*, unsigned, unsigned, unsigned long long*)`;
        // the buffer and the counters outlive the kernel.
        unsafe { gpu.launch_and_wait(&mixed, 8, 256, &args) };
        let c = counters.read_u64(2).unwrap();
        assert_eq!(c, vec![0, warps * per_warp], "keep={keep} start={start}: [errors, lane replies checked]");
        pool.remove_buffer(&buffer).unwrap();
        packets += warps * calls;
    }
    let stats = pool.shutdown();
    assert_eq!(stats.total().packets, packets);
    assert_eq!(stats.total().errors, 0);
}

#[test]
#[ignore = "needs CUDA devices: run with --include-ignored on a GPU machine (two GPUs for the multi-GPU part)"]
fn every_gpu_makes_verified_hostcalls_in_one_process() {
    let test = "every_gpu_makes_verified_hostcalls_in_one_process";
    let visible = cuda::probe().unwrap_or_else(|why| panic!("{test}: no CUDA device ({why})"));
    if visible < 2 {
        eprintln!("{test}: {visible} GPU visible: the multi-GPU part runs on that one only");
    }
    let path = module_path(test);
    let gpus = cuda::open_gpus(None).unwrap();
    assert_eq!(gpus.len(), visible);
    let groups: Vec<_> = gpus.iter().map(|gpu| gpu.group()).collect();
    let listeners =
        DeviceListeners::start(&groups, 2, ListenerConfig::spinning(), Arc::new(Services::new())).unwrap();
    listeners.services().register_lane(100, "mix", |r| Ok([mix(r), r[0].wrapping_add(r[1])])).unwrap();
    // Every GPU at once, each buffer routed by its ordinal to its GPU's own two threads.
    let (warps, calls) = (64u64, 50u64);
    std::thread::scope(|scope| {
        let runs: Vec<_> = gpus
            .iter()
            .map(|gpu| {
                let (listeners, path) = (&listeners, &path);
                scope.spawn(move || {
                    let cuda = gpu.cuda.clone();
                    let module = Module::load(cuda.clone(), std::path::Path::new(path)).unwrap();
                    let kernel = module.kernel("hc_calls").unwrap();
                    let (buffer, _state) = gpu.phase_buffer(warps).unwrap();
                    assert_eq!(buffer.device_ordinal() as usize, cuda.ordinal());
                    listeners.add(buffer.clone()).unwrap();
                    let counts = run_hc_calls(&cuda, &kernel, &buffer, calls);
                    listeners.remove_buffer(&buffer).unwrap();
                    (cuda.ordinal(), counts)
                })
            })
            .collect();
        for run in runs {
            let (ordinal, c) = run.join().unwrap();
            assert_eq!(c, vec![0, warps * 32 * calls], "GPU {ordinal}: [errors, lane replies checked]");
        }
    });
    let stats = listeners.shutdown();
    assert_eq!(stats.total().packets, warps * calls * gpus.len() as u64);
    assert_eq!(stats.total().errors, 0);
}

/// Lanes calling per warp in `hc_rpc_mixed` (and `hc_line_mixed`): all 32 on even calls, those
/// with (lane + call) % 3 != 0 on odd ones.
fn mixed_lanes(calls: u64) -> u64 {
    (0..calls).map(|call| (0..32).filter(|lane| call % 2 == 0 || (lane + call) % 3 != 0).count() as u64).sum()
}

/// The RPC client of `include/hostcall_cuda_rpc.cuh` (LLVM libc's wire, this project's `'h'`
/// opcodes) on whole and partial warps, with and without keep-port, with its port state and with
/// LLVM's open (both mailboxes read at every open): every lane's reply checked on the GPU; the
/// send-only calls (every fourth call) leave ports the host's, which later opens must find; the
/// unknown opcode of call 1 comes back untouched, counted as malformed. The client
/// object goes into the module's `__llvm_rpc_client`, its size checked first (`rpc_buffer`).
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_rpc_calls_on_whole_and_partial_warps_with_send_only_calls() {
    let gpu = Gpu::new("gpu_rpc_calls_on_whole_and_partial_warps_with_send_only_calls");
    let (_, symbol_size) = gpu.module.global(hostcall_core::rpc::CLIENT_SYMBOL).unwrap();
    assert_eq!(symbol_size, hostcall_core::rpc::CLIENT_OBJECT_SIZE);
    let mixed = gpu.kernel("hc_rpc_mixed");
    let pool = mix_pool(2, gpu.doorbell.clone());
    let (warps, calls) = (64u64, 12u64);
    let runs = [(0u64, true), (1, true), (0, false), (1, false)];
    let mut results = Vec::new();
    for (keep, port_state) in runs {
        let (buffer, state) =
            cuda::rpc_buffer(&gpu.cuda, gpu.memory.clone(), 2 * warps, gpu.doorbell.clone(), &gpu.module)
                .unwrap();
        assert_eq!(buffer.protocol(), Protocol::Rpc { lanes: 32 });
        pool.add(buffer.clone()).unwrap();
        let counters = gpu.zeroed(8 * (2 + calls as usize));
        let target = if port_state { state.device_address() } else { 0 };
        // SAFETY: matches `hc_rpc_mixed(void*, unsigned, unsigned, unsigned long long*)`; the
        // port state, the buffer (the client object's) and the counters outlive the kernel.
        unsafe { gpu.launch_and_wait(&mixed, 8, 256, &[target, calls, keep, counters.device_address()]) };
        let c = counters.read_u64(2 + calls as usize).unwrap();
        results.push((keep, port_state, c[..2].to_vec(), c[2..].to_vec()));
        // The send-only packets may still be the host's when the kernel ends (no warp waits for
        // their answers): the host's counts below are taken once it has served them all.
        let view = buffer.view().rpc().expect("an RPC buffer");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (0..view.ports()).any(|port| view.pending(port)) {
            assert!(std::time::Instant::now() < deadline, "ports still pending 10 s after the kernel");
            std::thread::sleep(Duration::from_millis(1));
        }
        pool.remove_buffer(&buffer).unwrap();
    }
    for (keep, port_state, c, per_call) in &results {
        assert_eq!(
            c,
            &vec![0, warps * mixed_lanes(calls)],
            "keep={keep} port_state={port_state}: [errors, lane replies checked]; errors by call {per_call:?}; all runs {results:?}"
        );
    }
    let stats = pool.shutdown();
    let runs = runs.len() as u64;
    // The lanes that call together may reach the host as more than one packet (a warp's lanes
    // need not reconverge after a branch), so the host's counts are of lanes: per warp and run,
    // every mix call's lanes (all but call 1's, the unknown opcode's) and 32 per send-only call.
    let unknown_lanes = (0..32).filter(|lane| (lane + 1) % 3 != 0).count() as u64;
    let mix_lanes = runs * warps * (mixed_lanes(calls) - unknown_lanes + 32 * (calls / 4));
    assert_eq!(stats.services[&100].1.lane_calls, mix_lanes, "{stats:?}");
    assert_eq!(stats.total().errors, 0);
    // The unknown opcode is counted as malformed once a packet: once per warp and run at least,
    // once per calling lane at most.
    let unknown = runs * warps;
    assert!((unknown..=unknown * unknown_lanes).contains(&stats.malformed), "malformed {}", stats.malformed);
}

/// printf on the GPU through the RPC client (the PRINTF service's message stream over `'h'`
/// opcodes): 4 lanes of one warp, lines of different lengths; the host's output is exactly the
/// lines the same format gives on the host, and every lane gets its line's length back.
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_rpc_printf_prints_what_the_host_formats() {
    struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);
    impl hostcall::services::printf::PrintfSink for Capture {
        fn write_stream(
            &mut self,
            _: hostcall::services::printf::Stream,
            bytes: &[u8],
        ) -> std::io::Result<()> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(())
        }
    }
    let gpu = Gpu::new("gpu_rpc_printf_prints_what_the_host_formats");
    let kernel = gpu.kernel("hc_rpc_printf");
    let pool = ListenerPool::start(1, gpu.doorbell.clone(), ListenerConfig::spinning()).unwrap();
    let printed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let limits = hostcall::services::message::MessageLimits::default();
    pool.services().enable_printf(Capture(printed.clone()), limits).unwrap();
    let (buffer, state) =
        cuda::rpc_buffer(&gpu.cuda, gpu.memory.clone(), 32, gpu.doorbell.clone(), &gpu.module).unwrap();
    pool.add(buffer.clone()).unwrap();
    let lanes = 4u64;
    let results = gpu.zeroed(32 * 8);
    // SAFETY: matches `hc_rpc_printf(void*, unsigned, long long*)`; all outlive the kernel.
    unsafe {
        gpu.launch_and_wait(&kernel, 1, 32, &[state.device_address(), lanes, results.device_address()])
    };
    pool.remove_buffer(&buffer).unwrap();
    let names = ["a", "bb", "a much longer string, to make this lane's message span more calls", "dddd"];
    let expected: Vec<String> = (0..lanes)
        .map(|lane| {
            format!(
                "cuda: rpc printf from the GPU: lane {lane} of warp 0, {}, {:.3}, 0x{:x}\n",
                names[lane as usize % 4],
                1.5 * lane as f64,
                0xabcdu64 << lane
            )
        })
        .collect();
    assert_lanes_printed(&printed.lock().unwrap(), &expected, &results);
}

/// LLVM libc's `puts` on the wire from the GPU: 4 lanes of one warp write lines of 20 to 290
/// bytes with `WRITE_TO_STDOUT_NEWLINE` (a `'c'` opcode, served by the listener as LLVM's server
/// does), each line a stream of 1 to 5 packets (`rpc_send_n`); the host's output is exactly the
/// lanes' lines, and each lane's answer is its line's length with the newline.
#[test]
#[ignore = "needs a CUDA device: run with --include-ignored on a GPU machine"]
fn gpu_rpc_console_writes_stream_as_llvm_libc_does() {
    use hostcall::services::rpc::{RpcOptions, SharedSink};
    use hostcall::BufferRegistration;
    let gpu = Gpu::new("gpu_rpc_console_writes_stream_as_llvm_libc_does");
    let kernel = gpu.kernel("hc_rpc_puts");
    let pool = ListenerPool::start(2, gpu.doorbell.clone(), ListenerConfig::spinning()).unwrap();
    let printed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = printed.clone();
    let sink = SharedSink::from_fn(move |_, bytes| into.lock().unwrap().extend_from_slice(bytes));
    let (buffer, state) =
        cuda::rpc_buffer(&gpu.cuda, gpu.memory.clone(), 32, gpu.doorbell.clone(), &gpu.module).unwrap();
    pool.add(BufferRegistration::new(buffer.clone()).with_rpc(RpcOptions::default().with_sink(sink)))
        .unwrap();
    let lanes = 4u64;
    let results = gpu.zeroed(32 * 8);
    // SAFETY: matches `hc_rpc_puts(void*, unsigned, unsigned long long*)`; all outlive the kernel.
    unsafe {
        gpu.launch_and_wait(&kernel, 1, 32, &[state.device_address(), lanes, results.device_address()])
    };
    pool.remove_buffer(&buffer).unwrap();
    let expected: Vec<String> = (0..lanes)
        .map(|lane| {
            let line: String =
                (0..20 + 90 * lane).map(|i| (b'a' + ((i + lane) % 26) as u8) as char).collect();
            line + "\n"
        })
        .collect();
    assert_lanes_printed(&printed.lock().unwrap(), &expected, &results);
}

/// The host printed exactly the lanes' `expected` lines (in any order), and each lane's answer in
/// `results` is its line's length (the newline included).
fn assert_lanes_printed(printed: &[u8], expected: &[String], results: &DeviceBuffer) {
    let text = String::from_utf8(printed.to_vec()).unwrap();
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines.sort();
    let mut sorted: Vec<&str> = expected.iter().map(String::as_str).collect();
    sorted.sort();
    assert_eq!(lines, sorted, "the lanes' lines (in any order)");
    let counts = results.read_u64(expected.len()).unwrap();
    let lengths: Vec<u64> = expected.iter().map(|l| l.len() as u64).collect();
    assert_eq!(counts, lengths, "each lane's count, the newline included");
}
