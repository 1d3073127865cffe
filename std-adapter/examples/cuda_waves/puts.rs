//! `--puts`: LLVM libc's `puts` from every lane of many warps (`hc_rpc_puts_all`: one 24-byte
//! line a lane and call, `WRITE_TO_STDOUT_NEWLINE`, one packet), served by the listener's RPC
//! host into a sink that writes each of its writes to `/dev/null` with one system call, as the
//! default sink does to stdout. Every lane's answer (25: the line and its newline) is checked on
//! the GPU, and the host's byte count against what the lanes sent.

use crate::gpu::{rpc_ports, Gpu};
use hostcall::backend::cuda::DeviceBuffer;
use hostcall::services::rpc::{RpcOptions, SharedSink};
use hostcall::BufferRegistration;
use hostcall::Error;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One row for each of `warps` x `threads`: the kernel's time from launch to its end, and
/// whether every lane's line was answered and written whole.
pub(crate) fn rows(gpu: &Gpu, warps: &[u32], threads: &[usize], calls: u32) -> Result<bool, Error> {
    let mut ok = true;
    for &w in warps {
        for &t in threads {
            ok &= row(gpu, w, t, calls)?;
        }
    }
    Ok(ok)
}

fn row(gpu: &Gpu, warps: u32, threads: usize, calls: u32) -> Result<bool, Error> {
    let devnull = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(|e| Error::Unsupported(format!("/dev/null: {e}")))?;
    let written = Arc::new(AtomicU64::new(0));
    let count = written.clone();
    let sink = SharedSink::from_fn(move |_, bytes| {
        if (&devnull).write_all(bytes).is_ok() {
            // Relaxed: a count read after the pool has removed the buffer (its threads joined
            // the turn that wrote), which orders it.
            count.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
    });
    let pool = gpu.pool(threads)?;
    let (buffer, state) = gpu.host.rpc_buffer(rpc_ports(warps), &gpu.module)?;
    pool.add(BufferRegistration::new(buffer.clone()).with_rpc(RpcOptions::default().with_sink(sink)))?;
    let kernel = gpu.module.kernel("hc_rpc_puts_all")?;
    let counters = DeviceBuffer::new(gpu.cuda.clone(), 16)?;
    let (grid, block) = gpu.shape(warps);
    let started = Instant::now();
    // SAFETY: matches `hc_rpc_puts_all(void*, unsigned, unsigned long long*)`; the port state
    // and the counters outlive the kernel, which we wait for below.
    unsafe {
        kernel.launch(
            &gpu.stream,
            grid,
            block,
            &[state.device_address(), u64::from(calls), counters.device_address()],
        )?
    };
    gpu.stream.synchronize_for(Duration::from_secs(120))?;
    let elapsed = started.elapsed();
    pool.remove_buffer(&buffer)?;
    let c = counters.read_u64(2)?;
    let lanes = u64::from(grid * block / 32) * 32 * u64::from(calls);
    let bytes = written.load(Ordering::Relaxed);
    let good = c[0] == 0 && c[1] == lanes && bytes == lanes * 25;
    println!(
        "cuda: rpc puts warps={} calls={calls} threads={threads} ms={:.3} lines_per_s={:.0} lanes_checked={} errors={} bytes={bytes} ok={good}",
        grid * block / 32,
        elapsed.as_secs_f64() * 1e3,
        lanes as f64 / elapsed.as_secs_f64(),
        c[1],
        c[0],
    );
    Ok(good)
}
