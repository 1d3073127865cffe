//! Real GPU warps making hostcalls against this crate's listener (feature `cuda`).
//!
//! ```sh
//! # here: build the host program (no CUDA needed to build it)
//! cargo build --release --features cuda --example cuda_waves
//! # where nvcc is: build the kernels (include/hostcall_cuda.cuh does the device side)
//! nvcc -arch=sm_90 -cubin -I include -o kernels.cubin std-adapter/examples/cuda/kernels.cu
//! # on the GPU machine
//! cuda_waves --module kernels.cubin            # checks: every reply verified, printf, FUNCTION_CALL
//! cuda_waves --module kernels.cubin --bench    # and the floor, latency variants, throughput table
//! ```
//!
//! Each warp of 32 lanes is a wave of the phase protocol; buffers live in pinned, device-mapped
//! host memory ([`hostcall::cuda::CudaMemory`]), their `occupied` bitmaps in device memory. The
//! lane service `mix` (id 100) answers `[hash of the 8 request words, word 0 + word 1]`; every
//! lane of every call checks its reply on the GPU, and the kernel counts errors and replies
//! checked (which must equal warps x 32 x calls). Output lines start with `cuda:`; the last line
//! is a `summary:`. Exits 1 on any error or missing reply, 0 with a `SKIPPED` line where there is
//! no CUDA device.
//!
//! `--bench` adds, in the same run: the ping-pong floor (one GPU thread and one host thread
//! bouncing one word each way through pinned memory), one warp's round trip for each device-side
//! variant with a per-step breakdown (clock64 deltas of the leader lane), and the throughput at
//! 1, 32, 1,056 and 4,224 warps served by 1, 2 and 4 listener threads (a [`ListenerPool`]
//! splitting each buffer's packets into stripes).

use hostcall::buffer::HostcallBuffer;
use hostcall::core::layout::SLOT_WORDS;
use hostcall::cuda::{self, Cuda, CudaMemory, DeviceBuffer, Kernel, MappedDoorbell, Module, Stream};
use hostcall::doorbell::Doorbell;
use hostcall::listener::ListenerConfig;
use hostcall::memory::{DeviceAllocation, DeviceMemory};
use hostcall::message::MessageLimits;
use hostcall::pool::ListenerPool;
use hostcall::printf::{PrintfSink, Stream as PrintStream};
use hostcall::service::Services;
use hostcall::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIX: u32 = 100;

/// The host half of the lane service; `kernels.cu` computes the same (`mix`).
fn mix(r: &[u64; SLOT_WORDS]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    for &w in r {
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01B3);
    }
    h ^ (h >> 29)
}

/// The host function of the FUNCTION_CALL check: `{in[0] + in[1], in[0] * in[2]}`.
extern "C" fn add_mul(out: *mut [u64; 2], input: *const [u64; 7]) {
    // SAFETY: the FUNCTION_CALL service passes valid pointers to its own arrays.
    let (out, input) = unsafe { (&mut *out, &*input) };
    *out = [input[0].wrapping_add(input[1]), input[0].wrapping_mul(input[2])];
}

/// How waiting warps poll (the kernels' wait-policy arguments).
#[derive(Clone, Copy, Debug)]
struct Policy {
    name: &'static str,
    spin_ns: u32,
    min_sleep_ns: u32,
    max_sleep_ns: u32,
    poll_stagger_ns: u32,
}

/// Spin for up to 50 us before sleeping: a lone warp's reply comes within that.
const LATENCY: Policy =
    Policy { name: "latency", spin_ns: 50_000, min_sleep_ns: 256, max_sleep_ns: 4_096, poll_stagger_ns: 500 };
/// Poll rarely: with a thousand warps queued, a reply takes 100s of us, and every poll is a PCIe
/// read that competes with the requests and replies.
const THROUGHPUT: Policy = Policy {
    name: "throughput",
    spin_ns: 2_000,
    min_sleep_ns: 1_000,
    max_sleep_ns: 32_000,
    poll_stagger_ns: 500,
};

struct Options {
    module: PathBuf,
    bench: bool,
    threads: Vec<usize>,
    warps: Vec<u32>,
    repeat: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: cuda_waves [--module kernels.cubin] [--bench] [--threads 1,2,4,8] [--warps 1,32,1056,4224]"
    );
    std::process::exit(2)
}

fn list<T: std::str::FromStr>(v: Option<String>) -> Vec<T> {
    v.unwrap_or_else(|| usage()).split(',').map(|x| x.parse().unwrap_or_else(|_| usage())).collect()
}

fn parse() -> Options {
    let mut o = Options {
        module: PathBuf::from("kernels.cubin"),
        bench: false,
        threads: vec![1, 2, 4, 8],
        warps: vec![1, 32, 1056, 4224],
        repeat: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--module" => o.module = PathBuf::from(args.next().unwrap_or_else(|| usage())),
            "--bench" => o.bench = true,
            "--threads" => o.threads = list(args.next()),
            "--warps" => o.warps = list(args.next()),
            "--repeat" => {
                o.repeat =
                    args.next().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    o
}

/// Everything a run needs.
struct Gpu {
    cuda: Arc<Cuda>,
    module: Arc<Module>,
    memory: Arc<CudaMemory>,
    doorbell: Arc<dyn Doorbell>,
    stream: Stream,
    sms: u32,
    services: Arc<Services>,
    printed: Arc<Mutex<Vec<u8>>>,
}

/// Printf output goes to stdout and is kept for checking.
struct Capture(Arc<Mutex<Vec<u8>>>);

impl PrintfSink for Capture {
    fn write_stream(&mut self, _stream: PrintStream, bytes: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(bytes);
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(bytes)?;
        out.flush()
    }
}

/// What one run of the calls kernel gave.
struct Run {
    warps: u32,
    calls: u32,
    seconds: f64,
    errors: u64,
    checked: u64,
    expected: u64,
    /// Warp 0's calls: total cycles and global-timer ns over the loop, and each call's cycles.
    clocks: [u64; 4],
    per_call: Vec<u64>,
    /// Per-step cycles of every warp's leader, summed: claim, fill, release, wait, reply, calls.
    steps: [u64; 6],
}

impl Run {
    fn warp_calls_per_s(&self) -> f64 {
        f64::from(self.warps) * f64::from(self.calls) / self.seconds
    }
    fn ns_per_cycle(&self) -> f64 {
        let cycles = self.clocks[1].saturating_sub(self.clocks[0]) as f64;
        let ns = self.clocks[3].saturating_sub(self.clocks[2]) as f64;
        if cycles > 0.0 {
            ns / cycles
        } else {
            0.0
        }
    }
    /// Warp 0's mean call, from the global timer.
    fn mean_us(&self) -> f64 {
        self.clocks[3].saturating_sub(self.clocks[2]) as f64 / f64::from(self.calls) / 1e3
    }
    fn percentile_us(&self, p: f64) -> f64 {
        let mut v = self.per_call.clone();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_unstable();
        let at = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[at] as f64 * self.ns_per_cycle() / 1e3
    }
    fn ok(&self) -> bool {
        self.errors == 0 && self.checked == self.expected
    }
}

impl Gpu {
    fn new(module: &std::path::Path) -> Result<Self, Error> {
        let cuda = Cuda::new(0)?;
        let module = Module::load(cuda.clone(), module)?;
        let memory = Arc::new(CudaMemory::new(cuda.clone()));
        let doorbell: Arc<dyn Doorbell> = Arc::new(MappedDoorbell::new(memory.clone())?);
        let stream = Stream::new(cuda.clone())?;
        let sms = cuda.multiprocessors()?;
        let services = Arc::new(Services::new());
        services.register_lane(MIX, "mix", |r| Ok([mix(r), r[0].wrapping_add(r[1])]))?;
        let printed = Arc::new(Mutex::new(Vec::new()));
        services.enable_printf(Capture(printed.clone()), MessageLimits::default())?;
        // SAFETY: only our own kernels reach these buffers, and they send the address of
        // `add_mul`, a function of exactly the FUNCTION_CALL signature, alive for the whole run.
        unsafe { services.enable_function_calls()? };
        Ok(Self { cuda, module, memory, doorbell, stream, sms, services, printed })
    }

    fn pool(&self, threads: usize) -> Result<ListenerPool, Error> {
        let config =
            ListenerConfig { thread_name: format!("cuda-listener-{threads}t"), ..ListenerConfig::spinning() };
        ListenerPool::start_with_services(threads, self.doorbell.clone(), config, self.services.clone())
    }

    fn buffer(&self, packets: u32) -> Result<(Arc<HostcallBuffer>, DeviceBuffer), Error> {
        cuda::phase_buffer(&self.cuda, self.memory.clone(), u64::from(packets.max(2)), self.doorbell.clone())
    }

    /// 1-D launch shape for `warps` warps of 32 lanes, spread over the SMs.
    fn shape(&self, warps: u32) -> (u32, u32) {
        if warps <= self.sms {
            return (warps, 32);
        }
        let per_block = warps.div_ceil(self.sms).min(32);
        (warps.div_ceil(per_block), per_block * 32)
    }

    /// Runs `kernel` (one of the `hc_calls*` kernels): `warps` warps, `calls` calls each.
    fn calls(
        &self,
        pool: &ListenerPool,
        kernel: &Kernel,
        warps: u32,
        calls: u32,
        policy: Policy,
        timed: bool,
    ) -> Result<Run, Error> {
        let (buffer, _state) = self.buffer(warps.max(32))?;
        pool.add_buffer(buffer.clone())?;
        let result = self.calls_on(&buffer, kernel, warps, calls, policy, timed);
        pool.remove_buffer(&buffer)?;
        result
    }

    fn calls_on(
        &self,
        buffer: &HostcallBuffer,
        kernel: &Kernel,
        warps: u32,
        calls: u32,
        policy: Policy,
        timed: bool,
    ) -> Result<Run, Error> {
        let (grid, block) = self.shape(warps);
        let warps = grid * block / 32;
        let counters = DeviceBuffer::new(self.cuda.clone(), 16)?;
        let timing = DeviceBuffer::new(self.cuda.clone(), if timed { warps as usize * 48 } else { 8 })?;
        let per_call = DeviceBuffer::new(self.cuda.clone(), calls as usize * 8)?;
        let clocks = DeviceBuffer::new(self.cuda.clone(), 32)?;
        let args = [
            buffer.device_address(),
            u64::from(calls),
            u64::from(policy.spin_ns),
            u64::from(policy.min_sleep_ns),
            u64::from(policy.max_sleep_ns),
            u64::from(policy.poll_stagger_ns),
            counters.device_address(),
            if timed { timing.device_address() } else { 0 },
            per_call.device_address(),
            clocks.device_address(),
        ];
        let started = Instant::now();
        // SAFETY: the arguments match `CALLS_KERNEL` in kernels.cu in order and size (the buffer,
        // `calls` and the four wait-policy values as 32-bit integers, four device pointers); the
        // buffer and the device buffers outlive the kernel, which we wait for below.
        unsafe { kernel.launch(&self.stream, grid, block, &args)? };
        self.stream.synchronize_for(Duration::from_secs(120))?;
        let seconds = started.elapsed().as_secs_f64();
        let c = counters.read_u64(2)?;
        let mut steps = [0u64; 6];
        if timed {
            for warp in timing.read_u64(warps as usize * 6)?.chunks_exact(6) {
                for (sum, v) in steps.iter_mut().zip(warp) {
                    *sum += v;
                }
            }
        }
        let clocks = clocks.read_u64(4)?;
        Ok(Run {
            warps,
            calls,
            seconds,
            errors: c[0],
            checked: c[1],
            expected: u64::from(warps) * 32 * u64::from(calls),
            clocks: [clocks[0], clocks[1], clocks[2], clocks[3]],
            per_call: per_call.read_u64(calls as usize)?,
            steps,
        })
    }

    /// The ping-pong floor: mean round trip in ns, one word each way.
    fn floor(&self, rounds: u32, fence: bool) -> Result<f64, Error> {
        let words = DeviceAllocation::new(self.memory.clone(), 256, 128)?;
        // SAFETY: the allocation is 256 bytes, 128-aligned, outlives both views (the kernel and
        // the host thread are done before it drops) and is only accessed atomically.
        let (to_host, from_host) =
            unsafe { (&*words.as_ptr().cast::<AtomicU32>(), &*words.as_ptr().add(128).cast::<AtomicU32>()) };
        // Relaxed: published by the kernel launch below.
        to_host.store(0, Ordering::Relaxed);
        from_host.store(0, Ordering::Relaxed);
        let out = DeviceBuffer::new(self.cuda.clone(), 8)?;
        let kernel = self.module.kernel("hc_floor")?;
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| -> Result<f64, Error> {
            let echo = scope.spawn(|| {
                let mut next = 1;
                // Relaxed: statistics-free ping-pong of one word; nothing else is published.
                while next <= rounds && !stop.load(Ordering::Relaxed) {
                    if to_host.load(Ordering::Relaxed) == next {
                        from_host.store(next, Ordering::Relaxed);
                        next += 1;
                    } else {
                        std::hint::spin_loop();
                    }
                }
            });
            let device = self.memory.device_address(words.as_ptr().cast_const());
            let args = [device, device + 128, u64::from(rounds), u64::from(fence), out.device_address()];
            // SAFETY: matches `hc_floor(unsigned*, const unsigned*, unsigned, unsigned, u64*)`;
            // every address outlives the kernel.
            let launched = unsafe { kernel.launch(&self.stream, 1, 1, &args) };
            let done = launched.and_then(|()| self.stream.synchronize_for(Duration::from_secs(60)));
            // Relaxed: a stop flag for the echo thread; the join orders the rest.
            stop.store(true, Ordering::Relaxed);
            let _ = echo.join();
            done?;
            Ok(out.read_u64(1)?[0] as f64 / f64::from(rounds))
        })
    }
}

fn main() -> ExitCode {
    let options = parse();
    let gpu = match Gpu::new(&options.module) {
        Ok(gpu) => gpu,
        Err(Error::Cuda(why)) if cuda::probe().is_err() => {
            println!("SKIPPED: no CUDA device ({why})");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("cuda: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&gpu, &options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cuda: failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(gpu: &Gpu, options: &Options) -> Result<bool, Error> {
    let cuda = &gpu.cuda;
    use cudarc::driver::sys::CUdevice_attribute as A;
    println!(
        "cuda: device {} sms={} clock_mhz={} host_native_atomics={} can_map_host_memory={} memory=cuda-pinned-mapped",
        cuda.name(),
        gpu.sms,
        cuda.clock_khz()? / 1000,
        cuda.attribute(A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)?,
        cuda.attribute(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?,
    );
    let mut ok = true;

    // The stack protocol: refused without platform atomics (never launched then).
    match cuda::stack_buffer(cuda, gpu.memory.clone(), 64, gpu.doorbell.clone()) {
        Err(Error::Unsupported(why)) => println!("cuda: stack-protocol refused (as it must be here): {why}"),
        Err(e) => return Err(e),
        Ok(_) => {
            println!("cuda: stack-protocol allowed: this device has host-native atomics (not exercised)")
        }
    }

    // The benchmark first: a check that hangs (its kernel never ends) would block the stream.
    let mut bench_summary = None;
    if options.bench {
        let (bench_ok, summary) = bench(gpu, options)?;
        ok &= bench_ok;
        bench_summary = Some(summary);
    }

    let pool = gpu.pool(1)?;

    // FUNCTION_CALL: 2 warps x 10 calls, every reply checked on the GPU.
    {
        let (buffer, _state) = gpu.buffer(32)?;
        pool.add_buffer(buffer.clone())?;
        let counters = DeviceBuffer::new(cuda.clone(), 16)?;
        let kernel = gpu.module.kernel("hc_function_call")?;
        let calls = 10u64;
        let args =
            [buffer.device_address(), add_mul as *const () as usize as u64, calls, counters.device_address()];
        // SAFETY: matches `hc_function_call(const void*, u64, unsigned, u64*)`; the buffer and
        // counters outlive the kernel (synchronised below).
        unsafe { kernel.launch(&gpu.stream, 1, 64, &args)? };
        gpu.stream.synchronize_for(Duration::from_secs(60))?;
        let c = counters.read_u64(2)?;
        let good = c[0] == 0 && c[1] == 64 * calls;
        ok &= good;
        println!(
            "cuda: function-call warps=2 calls={calls} lanes_checked={} errors={} ok={good}",
            c[1], c[0]
        );
        pool.remove_buffer(&buffer)?;
    }

    // PRINTF through the message stream: 4 lanes of one warp, lines of different lengths.
    {
        let (buffer, _state) = gpu.buffer(32)?;
        pool.add_buffer(buffer.clone())?;
        let results = DeviceBuffer::new(cuda.clone(), 32 * 8)?;
        let kernel = gpu.module.kernel("hc_printf")?;
        let lanes = 4u64;
        let before = gpu.printed.lock().unwrap_or_else(|p| p.into_inner()).len();
        // SAFETY: matches `hc_printf(const void*, unsigned, long long*)`; all outlive the kernel.
        unsafe {
            kernel.launch(&gpu.stream, 1, 32, &[buffer.device_address(), lanes, results.device_address()])?
        };
        gpu.stream.synchronize_for(Duration::from_secs(60))?;
        let counts = results.read_u64(lanes as usize)?;
        let printed = gpu.printed.lock().unwrap_or_else(|p| p.into_inner())[before..].to_vec();
        let text = String::from_utf8_lossy(&printed);
        let lines = text.lines().filter(|l| l.starts_with("cuda: printf from the GPU: lane ")).count() as u64;
        let total: u64 = counts.iter().map(|&n| n as i64).filter(|&n| n > 0).map(|n| n as u64).sum();
        let good = lines == lanes && total == printed.len() as u64 && counts.iter().all(|&n| (n as i64) > 0);
        ok &= good;
        println!(
            "cuda: printf lanes={lanes} lines={lines} bytes={} replies={counts:?} ok={good}",
            printed.len()
        );
        pool.remove_buffer(&buffer)?;
    }

    // Every warp count, every reply verified (phase protocol, one listener thread).
    let default_kernel = gpu.module.kernel("hc_calls")?;
    for &warps in &options.warps {
        let calls = if warps >= 1056 { 20 } else { 200 };
        let policy = if warps >= 1056 { THROUGHPUT } else { LATENCY };
        let r = gpu.calls(&pool, &default_kernel, warps, calls, policy, false)?;
        ok &= r.ok();
        println!(
            "cuda: verify warps={} calls={} lane_replies_checked={} expected={} errors={} ok={}",
            r.warps,
            r.calls,
            r.checked,
            r.expected,
            r.errors,
            r.ok()
        );
    }
    drop(pool);

    match bench_summary {
        Some(summary) => println!("summary: {summary} ok={ok}"),
        None => println!("summary: mode=check ok={ok}"),
    }
    Ok(ok)
}

/// The floor, the one-warp variants and the throughput table; whether every reply verified, and
/// the summary's figures.
fn bench(gpu: &Gpu, options: &Options) -> Result<(bool, String), Error> {
    let mut ok = true;
    // The floor, and what a fence before the store adds to it.
    let floor_ns = gpu.floor(20_000, false)?;
    let floor_fence_ns = gpu.floor(5_000, true)?;
    println!(
        "cuda: floor round_trip_us={:.3} (one word each way, GPU thread <-> spinning host thread)",
        floor_ns / 1e3
    );
    println!(
        "cuda: floor-with-fence round_trip_us={:.3} (fence.sc.sys before each GPU store)",
        floor_fence_ns / 1e3
    );

    // One warp, each device-side variant, one spinning listener thread.
    let pool = gpu.pool(1)?;
    let variants = [
        ("default", "hc_calls"),
        ("store-sys", "hc_calls_store_sys"),
        ("fence-sc", "hc_calls_fence_sc"),
        ("pipelined-poll", "hc_calls_pipelined"),
        ("no-ring", "hc_calls_no_ring"),
        ("lane-fill", "hc_calls_lane_fill"),
        ("transposed-fill", "hc_calls_transposed_fill"),
        ("keep-packet", "hc_calls_keep_packet"),
        ("check-claim", "hc_calls_check_claim"),
    ];
    let mut best = (f64::MAX, "");
    let mut default_us = 0.0;
    for (name, symbol) in variants {
        let kernel = gpu.module.kernel(symbol)?;
        let _warm = gpu.calls(&pool, &kernel, 1, 200, LATENCY, false)?;
        let r = gpu.calls(&pool, &kernel, 1, 3000, LATENCY, false)?;
        ok &= r.ok();
        let mean = r.mean_us();
        if name == "default" {
            default_us = mean;
        }
        if mean < best.0 {
            best = (mean, name);
        }
        println!(
            "cuda: one-warp variant={name} mean_us={mean:.3} p50_us={:.3} p99_us={:.3} ratio_to_floor={:.2} errors={}",
            r.percentile_us(0.5),
            r.percentile_us(0.99),
            mean * 1e3 / floor_ns,
            r.errors
        );
        // The per-step breakdown (clock64 of the leader; the clock reads add a little).
        let t = gpu.calls(&pool, &kernel, 1, 3000, LATENCY, true)?;
        ok &= t.ok();
        let per = |cycles: u64| cycles as f64 / t.steps[5].max(1) as f64 * t.ns_per_cycle() / 1e3;
        println!(
            "cuda: breakdown variant={name} claim_us={:.3} fill_us={:.3} release_us={:.3} wait_us={:.3} reply_us={:.3} total_us={:.3}",
            per(t.steps[0]),
            per(t.steps[1]),
            per(t.steps[2]),
            per(t.steps[3]),
            per(t.steps[4]),
            per(t.steps[..5].iter().sum())
        );
    }
    drop(pool);
    println!(
        "cuda: one-warp best variant={} mean_us={:.3} floor_us={:.3} ratio={:.2} (goal <= 2.50)",
        best.1,
        best.0,
        floor_ns / 1e3,
        best.0 * 1e3 / floor_ns
    );

    // Throughput by warps x listener threads: the default device code (which fills transposed
    // under load), and for many warps also the per-lane fill (16-byte pieces of 32 lines per
    // store instead of 512 contiguous bytes).
    let default_kernel = gpu.module.kernel("hc_calls")?;
    let lane_fill = gpu.module.kernel("hc_calls_lane_fill")?;
    let keep_packet = gpu.module.kernel("hc_calls_keep_packet")?;
    let mut table = Vec::new();
    for &threads in &options.threads {
        let pool = gpu.pool(threads)?;
        for &warps in &options.warps {
            let calls = (400_000 / warps).clamp(100, 2_000);
            let policy = if warps >= 1056 { THROUGHPUT } else { LATENCY };
            let kernels: &[(&str, &Kernel)] = if warps >= 1056 {
                &[("default", &default_kernel), ("lane-fill", &lane_fill), ("keep-packet", &keep_packet)]
            } else {
                &[("default", &default_kernel)]
            };
            for &(variant, kernel) in kernels {
                for _ in 0..options.repeat {
                    let r = gpu.calls(&pool, kernel, warps, calls, policy, false)?;
                    ok &= r.ok();
                    println!(
                    "cuda: throughput threads={threads} warps={} variant={variant} policy={} calls_per_warp={} warp_calls_per_s={:.0} lane_calls_per_s={:.0} seconds={:.3} errors={} checked={}/{}",
                    r.warps,
                    policy.name,
                    r.calls,
                    r.warp_calls_per_s(),
                    r.warp_calls_per_s() * 32.0,
                    r.seconds,
                    r.errors,
                    r.checked,
                    r.expected
                );
                    table.push((threads, r.warps, variant, r.warp_calls_per_s(), r.errors));
                }
            }
        }
    }
    println!(
        "cuda: table (M warp-calls/s, default device code, median of {} runs [min-max])",
        options.repeat
    );
    print!("cuda: {:>8}", "warps");
    for &threads in &options.threads {
        print!(" {:>19}", format!("{threads} thr"));
    }
    println!();
    let mut best_1056 = 0.0f64;
    for &warps in &options.warps {
        print!("cuda: {warps:>8}");
        for &threads in &options.threads {
            let mut rates: Vec<f64> = table
                .iter()
                .filter(|(t, w, v, ..)| *t == threads && *w == warps && *v == "default")
                .map(|(.., rate, _)| *rate)
                .collect();
            rates.sort_by(f64::total_cmp);
            let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
            if warps == 1056 {
                best_1056 = best_1056.max(median);
            }
            let (low, high) = (rates.first().copied().unwrap_or(0.0), rates.last().copied().unwrap_or(0.0));
            print!(" {:>19}", format!("{:.2} [{:.2}-{:.2}]", median / 1e6, low / 1e6, high / 1e6));
        }
        println!();
    }
    let errors: u64 = table.iter().map(|(.., e)| e).sum();
    let summary = format!(
        "floor_us={:.3} one_warp_default_us={default_us:.3} default_ratio={:.2} one_warp_best_us={:.3} best_ratio={:.2} best_median_1056_warps_M_per_s={:.3} throughput_errors={errors}",
        floor_ns / 1e3,
        default_us * 1e3 / floor_ns,
        best.0,
        best.0 * 1e3 / floor_ns,
        best_1056 / 1e6
    );
    Ok((ok, summary))
}
