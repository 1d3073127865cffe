//! `--bench`: the ping-pong floor, the one-warp variants and the throughput table.

use crate::gpu::Gpu;
use crate::options::{Options, LATENCY, THROUGHPUT};
use hostcall::backend::cuda::Kernel;
use hostcall::Error;

/// The line protocol's kernels (kernels.cu `LINE_CALLS_KERNEL`): variant name, kernel, and the
/// label of its throughput table (`None`: one-warp rows only). The `lane-fill` variants keep a
/// full warp on the per-lane fill and poll (16-byte pieces of 32 lines per instruction), the
/// others store and poll whole lines. `one-lane`: only lane 0 of the warp calls (128 bytes of
/// request words and 32 of reply words against the warp's 4 KB and 1 KB). `pipelined-poll`: two
/// looks at the replies in flight (`variants::pipelined`, examples/cuda/variants.cuh).
const LINE_VARIANTS: [(&str, &str, Option<&str>); 7] = [
    ("default", "hc_line_calls", Some("line")),
    ("no-ring", "hc_line_calls_no_ring", None),
    ("keep-packet", "hc_line_calls_keep_packet", Some("line-keep-packet")),
    ("lane-fill", "hc_line_calls_lane_fill", Some("line-lane-fill")),
    ("keep-packet-lane-fill", "hc_line_calls_keep_packet_lane_fill", Some("line-keep-packet-lane-fill")),
    ("one-lane", "hc_line_calls_one_lane", None),
    (
        "keep-packet-pipelined-poll",
        "hc_line_calls_keep_packet_pipelined",
        Some("line-keep-packet-pipelined-poll"),
    ),
];

/// The floor, the one-warp variants and the throughput table; whether every reply verified, and
/// the summary's figures.
pub(crate) fn bench(gpu: &Gpu, options: &Options) -> Result<(bool, String), Error> {
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

    // The link, which bounds how many 4 KB line requests (or 2 KB phase requests) can cross it.
    let read = gpu.link_gb_per_s(0)?;
    let write_lines = gpu.link_gb_per_s(1)?;
    let write_pieces = gpu.link_gb_per_s(2)?;
    println!(
        "cuda: link read_lines_GBps={read:.1} write_lines_GBps={write_lines:.1} write_16B_pieces_GBps={write_pieces:.1} pieces_per_s={:.0} (256 MiB of mapped host memory)",
        write_pieces * 1e9 / 16.0
    );
    println!(
        "cuda: link bound at 4 KB a warp-call: whole lines {:.2} M/s, 16-byte pieces {:.2} M/s; at 2 KB: {:.2} M/s",
        write_lines * 1e9 / 4096.0 / 1e6,
        write_pieces * 1e9 / 4096.0 / 1e6,
        write_lines * 1e9 / 2048.0 / 1e6
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
    // The line protocol beside it: the same warp, service and checks on a line buffer.
    let mut line_best = (f64::MAX, "");
    for (name, symbol, _) in LINE_VARIANTS {
        let Ok(kernel) = gpu.module.kernel(symbol) else {
            println!("cuda: line variant={name}: kernel {symbol} not in the module");
            ok = false;
            continue;
        };
        // One lane calls and checks per warp-call in `one-lane`.
        let lanes_checked = |mut r: crate::gpu::Run| {
            if name == "one-lane" {
                r.expected /= 32;
            }
            r
        };
        let _warm = gpu.line_calls(&pool, &kernel, 1, 200, LATENCY, false)?;
        let r = lanes_checked(gpu.line_calls(&pool, &kernel, 1, 3000, LATENCY, false)?);
        ok &= r.ok();
        let mean = r.mean_us();
        if mean < line_best.0 && name != "one-lane" {
            line_best = (mean, name);
        }
        println!(
            "cuda: one-warp protocol=line variant={name} mean_us={mean:.3} p50_us={:.3} p99_us={:.3} ratio_to_floor={:.2} errors={} checked={}/{}",
            r.percentile_us(0.5),
            r.percentile_us(0.99),
            mean * 1e3 / floor_ns,
            r.errors,
            r.checked,
            r.expected
        );
        let t = lanes_checked(gpu.line_calls(&pool, &kernel, 1, 3000, LATENCY, true)?);
        ok &= t.ok();
        let per = |cycles: u64| cycles as f64 / t.steps[5].max(1) as f64 * t.ns_per_cycle() / 1e3;
        println!(
            "cuda: breakdown protocol=line variant={name} claim_us={:.3} fill_us={:.3} submit_us={:.3} wait_us={:.3} reply_us={:.3} total_us={:.3}",
            per(t.steps[0]),
            per(t.steps[1]),
            per(t.steps[2]),
            per(t.steps[3]),
            per(t.steps[4]),
            per(t.steps[..5].iter().sum())
        );
    }
    // The goal's ratio with less noise: the floor and the best line and phase variants measured
    // in turn, 7 rounds; medians of the per-round ratios.
    let line_keep = gpu.module.kernel("hc_line_calls_keep_packet")?;
    let line_pipelined = gpu.module.kernel("hc_line_calls_keep_packet_pipelined")?;
    let phase_keep = gpu.module.kernel("hc_calls_keep_packet")?;
    let (mut line_ratios, mut pipelined_ratios, mut phase_ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        let floor = gpu.floor(5_000, false)?;
        let line = gpu.line_calls(&pool, &line_keep, 1, 2000, LATENCY, false)?;
        let pipelined = gpu.line_calls(&pool, &line_pipelined, 1, 2000, LATENCY, false)?;
        let phase = gpu.calls(&pool, &phase_keep, 1, 2000, LATENCY, false)?;
        ok &= line.ok() && pipelined.ok() && phase.ok();
        line_ratios.push(line.mean_us() * 1e3 / floor);
        pipelined_ratios.push(pipelined.mean_us() * 1e3 / floor);
        phase_ratios.push(phase.mean_us() * 1e3 / floor);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let (line_median, line_low, line_high) = median(&mut line_ratios);
    let (pipelined_median, pipelined_low, pipelined_high) = median(&mut pipelined_ratios);
    let (phase_median, phase_low, phase_high) = median(&mut phase_ratios);
    println!(
        "cuda: one-warp keep-packet / floor, 7 interleaved rounds: line median={line_median:.2} [{line_low:.2}-{line_high:.2}] line-pipelined-poll median={pipelined_median:.2} [{pipelined_low:.2}-{pipelined_high:.2}] phase median={phase_median:.2} [{phase_low:.2}-{phase_high:.2}] (goal: line <= 1.40)"
    );
    drop(pool);
    println!(
        "cuda: one-warp line best variant={} mean_us={:.3} floor_us={:.3} ratio={:.2} (goal <= 1.40)",
        line_best.1,
        line_best.0,
        floor_ns / 1e3,
        line_best.0 * 1e3 / floor_ns
    );
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
    let mut line_1056 = 0.0f64;
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
            // The line protocol beside it, on the same pool: its threads split the line buffer
            // in disjoint packet ranges, as they split a phase buffer.
            for (variant, symbol, label) in LINE_VARIANTS {
                let Some(label) = label else { continue };
                // The per-lane variants only where the link is loaded.
                if variant.ends_with("lane-fill") && warps < 1056 {
                    continue;
                }
                let Ok(kernel) = gpu.module.kernel(symbol) else { continue };
                for _ in 0..options.repeat {
                    let r = gpu.line_calls(&pool, &kernel, warps, calls, policy, false)?;
                    ok &= r.ok();
                    println!(
                        "cuda: throughput protocol=line threads={threads} warps={} variant={variant} policy={} calls_per_warp={} warp_calls_per_s={:.0} lane_calls_per_s={:.0} seconds={:.3} errors={} checked={}/{}",
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
                    if r.warps == 1056 {
                        line_1056 = line_1056.max(r.warp_calls_per_s());
                    }
                    table.push((threads, r.warps, label, r.warp_calls_per_s(), r.errors));
                }
            }
        }
    }
    let mut best_1056 = 0.0f64;
    for (label, title) in [
        ("default", "phase, default device code"),
        ("line", "line, default device code"),
        ("line-keep-packet", "line, keep-packet device code"),
        ("line-lane-fill", "line, per-lane fill and poll"),
        ("line-keep-packet-lane-fill", "line, keep-packet, per-lane fill and poll"),
        ("line-keep-packet-pipelined-poll", "line, keep-packet, two polls in flight"),
    ] {
        let best = print_table(&table, label, title, options);
        if label == "default" {
            best_1056 = best;
        }
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
    let summary = format!(
        "{summary} line_one_warp_best_us={:.3} line_best_ratio={:.2} line_keep_ratio_median={line_median:.2} line_best_1056_warps_M_per_s={:.3}",
        line_best.0,
        line_best.0 * 1e3 / floor_ns,
        line_1056 / 1e6
    );
    Ok((ok, summary))
}

/// Prints the throughput table of the runs labelled `label`; returns the best median at 1,056
/// warps.
fn print_table(table: &[(usize, u32, &str, f64, u64)], label: &str, title: &str, options: &Options) -> f64 {
    println!("cuda: table (M warp-calls/s, {title}, median of {} runs [min-max])", options.repeat);
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
                .filter(|(t, w, v, ..)| *t == threads && *w == warps && *v == label)
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
    best_1056
}
