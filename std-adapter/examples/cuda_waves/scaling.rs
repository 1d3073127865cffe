//! `--scaling`: several GPUs, one process. Throughput of GPU 0 alone against every GPU at once
//! (the same warps per GPU, the same listener threads per GPU), and one warp's latency on each
//! GPU with the others idle against the others loaded.

use crate::gpu::{Gpu, Run};
use crate::options::{Options, LATENCY, THROUGHPUT};
use hostcall::{backend::cuda::Kernel, DeviceListeners, Error, ListenerConfig};
use std::sync::Barrier;
use std::time::Duration;

/// Listener threads per GPU while latency is measured (the loaded GPU's group is busy, the
/// measured GPU's group serves one warp).
const LATENCY_THREADS: usize = 4;

/// Runs `warps` x `calls` of `kernels[i]` on each of `gpus` at once (one host thread per GPU,
/// launched together), every buffer served by its GPU's group of `listeners`.
fn together(
    gpus: &[&Gpu],
    kernels: &[&Kernel],
    listeners: &DeviceListeners,
    shapes: &[(u32, u32, crate::options::Policy)],
) -> Result<Vec<Run>, Error> {
    let start = Barrier::new(gpus.len());
    std::thread::scope(|scope| {
        let runs: Vec<_> = gpus
            .iter()
            .zip(kernels)
            .zip(shapes)
            .map(|((gpu, kernel), &(warps, calls, policy))| {
                let start = &start;
                scope.spawn(move || -> Result<Run, Error> {
                    gpu.cuda.make_current()?;
                    let (buffer, _state) = gpu.buffer(warps.max(32))?;
                    listeners.add(buffer.clone())?;
                    start.wait();
                    let run = gpu.calls_on(buffer.device_address(), kernel, warps, calls, policy, false);
                    listeners.remove_buffer(&buffer)?;
                    run
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().expect("a GPU's host thread panicked")).collect()
    })
}

/// Warp-calls per second of runs made together: all their calls over the span from the first
/// launch to the last kernel seen done.
fn together_rate(runs: &[Run]) -> f64 {
    let first = runs.iter().map(|r| r.window.0).min().expect("one run at least");
    let last = runs.iter().map(|r| r.window.1).max().expect("one run at least");
    let calls: f64 = runs.iter().map(|r| f64::from(r.warps) * f64::from(r.calls)).sum();
    calls / (last - first).as_secs_f64()
}

/// The table and the latency rows; whether every reply verified, and the summary's figures.
pub(crate) fn scaling(gpus: &[Gpu], options: &Options) -> Result<(bool, String), Error> {
    let mut ok = true;
    let kernels: Vec<Kernel> = gpus.iter().map(|g| g.module.kernel("hc_calls")).collect::<Result<_, _>>()?;
    let groups: Vec<_> = gpus.iter().map(|gpu| gpu.host.group()).collect();
    let all: Vec<&Gpu> = gpus.iter().collect();
    let all_kernels: Vec<&Kernel> = kernels.iter().collect();
    let n = gpus.len();
    // (threads per GPU, warps per GPU, GPUs, warp-calls/s of all of them)
    let mut table: Vec<(usize, u32, usize, f64)> = Vec::new();
    for &threads in &options.scaling_threads {
        let config = ListenerConfig::spinning().with_thread_name(format!("cuda-scaling-{threads}t"));
        let listeners = DeviceListeners::start(&groups, threads, config, gpus[0].services.clone())?;
        for &warps in &options.scaling_warps {
            let calls = (800_000 / warps).clamp(100, 4_000);
            let shape = (warps, calls, if warps >= 1056 { THROUGHPUT } else { LATENCY });
            for _ in 0..options.repeat {
                let counts: &[usize] = if n > 1 { &[1, n] } else { &[1] };
                for &count in counts {
                    let runs =
                        together(&all[..count], &all_kernels[..count], &listeners, &vec![shape; count])?;
                    let rate = together_rate(&runs);
                    let per_gpu: Vec<String> =
                        runs.iter().map(|r| format!("{:.3}", r.warp_calls_per_s() / 1e6)).collect();
                    let errors: u64 = runs.iter().map(|r| r.errors).sum();
                    let checked: u64 = runs.iter().map(|r| r.checked).sum();
                    let expected: u64 = runs.iter().map(|r| r.expected).sum();
                    ok &= runs.iter().all(Run::ok);
                    println!(
                        "cuda: scaling gpus={count} threads_per_gpu={threads} warps_per_gpu={} calls_per_warp={calls} warp_calls_per_s={rate:.0} lane_calls_per_s={:.0} per_gpu_M=[{}] per_thread_M={:.3} errors={errors} checked={checked}/{expected}",
                        runs[0].warps,
                        rate * 32.0,
                        per_gpu.join(","),
                        rate / 1e6 / (threads * count) as f64,
                    );
                    table.push((threads, warps, count, rate));
                }
            }
        }
        listeners.shutdown();
    }

    let median = |threads: usize, warps: u32, count: usize| -> (f64, f64, f64) {
        let mut rates: Vec<f64> = table
            .iter()
            .filter(|&&(t, w, c, _)| t == threads && w == warps && c == count)
            .map(|&(.., r)| r)
            .collect();
        rates.sort_by(f64::total_cmp);
        let at = |i: usize| rates.get(i).copied().unwrap_or(0.0) / 1e6;
        (at(rates.len() / 2), at(0), at(rates.len().saturating_sub(1)))
    };
    println!(
        "cuda: scaling table (M warp-calls/s of all GPUs together; listener threads per GPU; median of {} runs [min-max])",
        options.repeat
    );
    print!("cuda: {:>8} {:>5}", "warps", "gpus");
    for &threads in &options.scaling_threads {
        print!(" {:>19}", format!("{threads} thr/gpu"));
    }
    println!();
    let mut best_ratio = (0.0f64, 0usize, 0u32);
    let mut best_ratio_each = Vec::new();
    for &warps in &options.scaling_warps {
        let counts: &[usize] = if n > 1 { &[1, n] } else { &[1] };
        for &count in counts {
            print!("cuda: {warps:>8} {count:>5}");
            for &threads in &options.scaling_threads {
                let (m, low, high) = median(threads, warps, count);
                print!(" {:>19}", format!("{m:.2} [{low:.2}-{high:.2}]"));
            }
            println!();
        }
        if n > 1 {
            print!("cuda: {warps:>8} {:>5}", format!("{n}/1"));
            let mut best_here = 0.0f64;
            for &threads in &options.scaling_threads {
                let ratio = median(threads, warps, n).0 / median(threads, warps, 1).0.max(1e-9);
                best_here = best_here.max(ratio);
                if ratio > best_ratio.0 {
                    best_ratio = (ratio, threads, warps);
                }
                print!(" {:>19}", format!("{ratio:.2} x"));
            }
            println!();
            best_ratio_each.push(format!("{warps}:{best_here:.2}"));
        }
    }
    if n < 2 {
        println!("cuda: scaling with {n} GPU: the {}-GPU rows need a machine with more (blocked here)", 2);
    }

    let (latency_ok, latency) =
        if n > 1 { latency_idle_vs_loaded(gpus, &kernels, options)? } else { (true, String::new()) };
    ok &= latency_ok;
    let summary = format!(
        "scaling_best_ratio={:.2} at_threads_per_gpu={} warps={} best_ratio_per_warps=[{}] {latency}",
        best_ratio.0,
        best_ratio.1,
        best_ratio.2,
        best_ratio_each.join(",")
    );
    Ok((ok, summary))
}

/// One warp's calls on each GPU: with the other GPUs idle, and while they run 4,224 warps each.
/// Interleaved, `options.repeat` times each; the loaded rows check that the load outlasted the
/// measured warp.
fn latency_idle_vs_loaded(
    gpus: &[Gpu],
    kernels: &[Kernel],
    options: &Options,
) -> Result<(bool, String), Error> {
    let mut ok = true;
    let groups: Vec<_> = gpus.iter().map(|gpu| gpu.host.group()).collect();
    let config = ListenerConfig::spinning().with_thread_name("cuda-latency".into());
    let listeners = DeviceListeners::start(&groups, LATENCY_THREADS, config, gpus[0].services.clone())?;
    let mut summary = Vec::new();
    for (g, gpu) in gpus.iter().enumerate() {
        // (idle means, loaded means, idle p99s, loaded p99s)
        let mut means = [Vec::new(), Vec::new()];
        let mut p99s = [Vec::new(), Vec::new()];
        let warm = gpu.calls(&listeners, &kernels[g], (1, 200), LATENCY)?;
        ok &= warm.ok();
        for _ in 0..options.repeat {
            let idle = gpu.calls(&listeners, &kernels[g], (1, 3000), LATENCY)?;
            ok &= idle.ok();
            means[0].push(idle.mean_us());
            p99s[0].push(idle.percentile_us(0.99));

            // The others: 4,224 warps each, long enough to cover the measured warp's 3,000 calls
            // (about 20 ms) after a 20 ms head start.
            let others: Vec<usize> = (0..gpus.len()).filter(|&o| o != g).collect();
            let loaded = std::thread::scope(|scope| -> Result<(Run, Vec<Run>), Error> {
                let load = scope.spawn(|| {
                    let load_gpus: Vec<&Gpu> = others.iter().map(|&o| &gpus[o]).collect();
                    let load_kernels: Vec<&Kernel> = others.iter().map(|&o| &kernels[o]).collect();
                    let shapes = vec![(4224, 200, THROUGHPUT); others.len()];
                    together(&load_gpus, &load_kernels, &listeners, &shapes)
                });
                std::thread::sleep(Duration::from_millis(20));
                gpu.cuda.make_current()?;
                let one = gpu.calls(&listeners, &kernels[g], (1, 3000), LATENCY);
                let load = load.join().expect("the load thread panicked")?;
                Ok((one?, load))
            })?;
            let (one, load) = loaded;
            let covered = load.iter().all(|r| r.window.0 <= one.window.0 && r.window.1 >= one.window.1);
            ok &= one.ok() && load.iter().all(Run::ok);
            means[1].push(one.mean_us());
            p99s[1].push(one.percentile_us(0.99));
            println!(
                "cuda: latency device={g} idle_mean_us={:.3} idle_p99_us={:.3} loaded_mean_us={:.3} loaded_p99_us={:.3} load_covered={covered} load_M_per_s={:.3} errors={}",
                idle.mean_us(),
                idle.percentile_us(0.99),
                one.mean_us(),
                one.percentile_us(0.99),
                load.iter().map(Run::warp_calls_per_s).sum::<f64>() / 1e6,
                one.errors + idle.errors + load.iter().map(|r| r.errors).sum::<u64>(),
            );
            if !covered {
                println!("cuda: latency device={g}: the load ended before the measured warp (a row that measured less)");
            }
        }
        let med = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (idle, loaded) = (med(&mut means[0]), med(&mut means[1]));
        let (idle99, loaded99) = (med(&mut p99s[0]), med(&mut p99s[1]));
        println!(
            "cuda: latency table device={g} (one warp, {LATENCY_THREADS} listener threads per GPU, median of {}): idle mean {idle:.3} us p99 {idle99:.3} us; others loaded mean {loaded:.3} us p99 {loaded99:.3} us; loaded/idle {:.3}",
            options.repeat,
            loaded / idle
        );
        summary.push(format!("latency_gpu{g}_idle_us={idle:.3} latency_gpu{g}_loaded_us={loaded:.3}"));
    }
    listeners.shutdown();
    Ok((ok, summary.join(" ")))
}
