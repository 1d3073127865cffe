//! The checks on every GPU: every reply verified (phase and RPC), printf (both), FUNCTION_CALL; before them, with
//! `--bench`, the one-GPU benchmark, and with `--scaling`, the multi-GPU one.

use crate::add_mul;
use crate::bench::bench;
use crate::gpu::{Gpu, RpcOpen};
use crate::options::{Options, LATENCY, THROUGHPUT};
use crate::scaling::scaling;
use crate::variants::Kind;
use hostcall::{
    backend::cuda::{self, DeviceBuffer},
    DeviceListeners, Error, HostcallBuffer, ListenerConfig,
};
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn run(gpus: &[Gpu], options: &Options) -> Result<bool, Error> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let mut ok = true;
    for gpu in gpus {
        let cuda = &gpu.cuda;
        let t = &gpu.host.topology;
        println!(
            "cuda: device {} {} sms={} clock_mhz={} host_native_atomics={} can_map_host_memory={} memory=cuda-pinned-mapped pci={} numa_node={} local_cpus={} listener_cpus={}",
            cuda.ordinal(),
            cuda.name(),
            gpu.sms,
            cuda.clock_khz()? / 1000,
            cuda.attribute(A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)?,
            cuda.attribute(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)?,
            t.pci_bus_id,
            t.numa_node.map_or("unknown".into(), |n| n.to_string()),
            cpu_list(&t.local_cpus),
            cpu_list(&gpu.host.cpus),
        );
        // The stack protocol: refused without platform atomics (never launched then).
        match cuda::stack_buffer(cuda, gpu.memory.clone(), 64, gpu.doorbell.clone()) {
            Err(Error::Unsupported(why)) => {
                println!(
                    "cuda: stack-protocol refused on device {} (as it must be here): {why}",
                    cuda.ordinal()
                )
            }
            Err(e) => return Err(e),
            Ok(_) => println!(
                "cuda: stack-protocol allowed on device {}: it has host-native atomics (not exercised)",
                cuda.ordinal()
            ),
        }
    }

    // The benchmarks first: a check that hangs (its kernel never ends) would block the stream.
    let mut summaries = Vec::new();
    if options.bench {
        let (bench_ok, summary) = bench(&gpus[0], options)?;
        ok &= bench_ok;
        summaries.push(summary);
    }
    if options.puts {
        let puts_ok = crate::puts::rows(&gpus[0], &options.warps, &options.threads, 1)?;
        ok &= puts_ok;
        summaries.push(format!("puts ok={puts_ok}"));
    }
    if options.scaling {
        let (scaling_ok, summary) = scaling(gpus, options)?;
        ok &= scaling_ok;
        summaries.push(summary);
    }

    // The checks, on every GPU, one process: a listener group of one thread per GPU.
    let groups: Vec<_> = gpus.iter().map(|gpu| gpu.host.group()).collect();
    let config = ListenerConfig::spinning().with_thread_name("cuda-check".into());
    let listeners = DeviceListeners::start(&groups, 1, config, gpus[0].services.clone())?;
    for gpu in gpus {
        ok &= check(gpu, &listeners, options)?;
    }
    listeners.shutdown();

    if summaries.is_empty() {
        println!("summary: mode=check gpus={} ok={ok}", gpus.len());
    } else {
        println!("summary: gpus={} {} ok={ok}", gpus.len(), summaries.join(" "));
    }
    Ok(ok)
}

/// `0-3,8` for a CPU list (`-` when empty).
fn cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

/// Every reply verified on one GPU: FUNCTION_CALL, printf, and the calls kernel at each warp
/// count, its buffers served by the GPU's own listener group.
fn check(gpu: &Gpu, pool: &DeviceListeners, options: &Options) -> Result<bool, Error> {
    let cuda = &gpu.cuda;
    let device = cuda.ordinal();
    let mut ok = true;
    // FUNCTION_CALL: 2 warps x 10 calls, every reply checked on the GPU.
    {
        let (buffer, _state) = gpu.buffer(32)?;
        pool.add(buffer.clone())?;
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
            "cuda: function-call device={device} warps=2 calls={calls} lanes_checked={} errors={} ok={good}",
            c[1], c[0]
        );
        pool.remove_buffer(&buffer)?;
    }

    // PRINTF through the message stream: 4 lanes of one warp, lines of different lengths, on a
    // phase buffer and through the RPC client's 'h' opcodes.
    {
        let (buffer, _state) = gpu.buffer(32)?;
        ok &= printf(gpu, pool, &buffer, buffer.device_address(), "hc_printf", "printf from the GPU")?;
        let (buffer, state) = gpu.host.rpc_buffer(32, &gpu.module)?;
        ok &= printf(gpu, pool, &buffer, state.device_address(), "hc_rpc_printf", "rpc printf from the GPU")?;
    }

    // Every warp count, every reply verified (phase protocol, then the RPC client, one listener
    // thread).
    let phase = (Kind::Phase, gpu.module.kernel("hc_calls")?);
    let rpc = (Kind::Rpc(RpcOpen::PortState), gpu.module.kernel("hc_rpc_calls")?);
    for (kind, kernel) in [phase, rpc] {
        for &warps in &options.warps {
            let calls = if warps >= 1056 { 20 } else { 200 };
            let policy = if warps >= 1056 { THROUGHPUT } else { LATENCY };
            let r = gpu.run(kind, pool, &kernel, (warps, calls), policy, false)?;
            ok &= r.ok();
            println!(
                "cuda: verify device={device} protocol={} warps={} calls={} lane_replies_checked={} expected={} errors={} ok={}",
                kind.protocol(),
                r.warps,
                r.calls,
                r.checked,
                r.expected,
                r.errors,
                r.ok()
            );
        }
    }
    Ok(ok)
}

/// Runs printf `kernel` (`hc_printf` or `hc_rpc_printf`: 4 lanes of one warp print one line each,
/// starting `cuda: {what}: lane `) on `buffer`, passing it `target`; whether every line came out
/// whole and every lane got the host's count.
fn printf(
    gpu: &Gpu,
    pool: &DeviceListeners,
    buffer: &Arc<HostcallBuffer>,
    target: u64,
    kernel: &str,
    what: &str,
) -> Result<bool, Error> {
    pool.add(buffer.clone())?;
    let results = DeviceBuffer::new(gpu.cuda.clone(), 32 * 8)?;
    let kernel = gpu.module.kernel(kernel)?;
    let lanes = 4u64;
    let before = gpu.printed.lock().unwrap_or_else(|p| p.into_inner()).len();
    // SAFETY: matches `hc_printf(const void*, unsigned, long long*)` and `hc_rpc_printf(void*,
    // unsigned, long long*)`; all outlive the kernel.
    unsafe { kernel.launch(&gpu.stream, 1, 32, &[target, lanes, results.device_address()])? };
    gpu.stream.synchronize_for(Duration::from_secs(60))?;
    let counts = results.read_u64(lanes as usize)?;
    let printed = gpu.printed.lock().unwrap_or_else(|p| p.into_inner())[before..].to_vec();
    let text = String::from_utf8_lossy(&printed);
    let prefix = format!("cuda: {what}: lane ");
    let lines = text.lines().filter(|l| l.starts_with(&prefix)).count() as u64;
    let total: u64 = counts.iter().map(|&n| n as i64).filter(|&n| n > 0).map(|n| n as u64).sum();
    let good = lines == lanes && total == printed.len() as u64 && counts.iter().all(|&n| (n as i64) > 0);
    println!(
        "cuda: printf device={} kernel={} lanes={lanes} lines={lines} bytes={} replies={counts:?} ok={good}",
        gpu.cuda.ordinal(),
        kernel.name(),
        printed.len()
    );
    pool.remove_buffer(buffer)?;
    Ok(good)
}
