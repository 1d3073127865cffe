//! The checks: every reply verified, printf, FUNCTION_CALL; then, with `--bench`, the benchmark.

use crate::add_mul;
use crate::bench::bench;
use crate::gpu::Gpu;
use crate::options::{Options, LATENCY, THROUGHPUT};
use hostcall::backend::cuda::{self, DeviceBuffer};
use hostcall::Error;
use std::time::Duration;

pub(crate) fn run(gpu: &Gpu, options: &Options) -> Result<bool, Error> {
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
