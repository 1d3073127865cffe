//! `--bench`: the ping-pong floor, the link, one warp's round trip for every variant of the
//! protocols asked for (`--protocol`; the list is in [`crate::variants`]), the goals' ratios over
//! interleaved rounds, and the throughput table.

use crate::gpu::{Gpu, Run};
use crate::options::{Options, Wire, LATENCY, THROUGHPUT};
use crate::variants::{variant, Table, Variant, VARIANTS};
use hostcall::{backend::cuda::Kernel, Error};

/// The one-warp goals (issue 28 for rpc, issue 29 for line), as ratios to the floor.
fn goal(wire: Wire) -> Option<f64> {
    match wire {
        Wire::Phase => None,
        Wire::Line => Some(1.3),
        Wire::Rpc => Some(2.0),
    }
}

/// The variants measured in the interleaved rounds: each protocol's fastest one-warp paths.
const ROUNDS: [(Wire, &str); 6] = [
    (Wire::Phase, "keep-packet"),
    (Wire::Line, "keep-packet"),
    (Wire::Line, "keep-packet-pipelined-poll"),
    (Wire::Rpc, "default"),
    (Wire::Rpc, "keep-port"),
    (Wire::Rpc, "llvm-open"),
];

/// How `warps` waiting warps poll: rarely when there are a thousand or more.
fn policy_for(warps: u32) -> crate::options::Policy {
    if warps >= 1056 {
        THROUGHPUT
    } else {
        LATENCY
    }
}

/// One run of `variant`, its expected count fixed for a one-lane variant.
fn run(
    gpu: &Gpu,
    pool: &dyn crate::gpu::Serve,
    v: &Variant,
    k: &Kernel,
    shape: (u32, u32),
    timed: bool,
) -> Result<Run, Error> {
    let mut r = gpu.run(v.kind, pool, k, shape, policy_for(shape.0), timed)?;
    if v.one_lane {
        r.expected /= 32;
    }
    Ok(r)
}

/// The floor, the one-warp variants and the throughput table; whether every reply verified, and
/// the summary's figures.
pub(crate) fn bench(gpu: &Gpu, options: &Options) -> Result<(bool, String), Error> {
    let mut ok = true;
    let asked: Vec<&Variant> =
        VARIANTS.iter().filter(|v| options.protocols.contains(&v.kind.wire())).collect();
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
    link(gpu)?;

    // One warp, each variant, one spinning listener thread.
    let pool = gpu.pool(1)?;
    let mut best: Vec<(Wire, f64, &str)> = Vec::new();
    for v in &asked {
        let Ok(kernel) = gpu.module.kernel(v.kernel) else {
            println!(
                "cuda: variant {} of {}: kernel {} not in the module",
                v.name,
                v.kind.protocol(),
                v.kernel
            );
            ok = false;
            continue;
        };
        let _warm = run(gpu, &pool, v, &kernel, (1, 200), false)?;
        let r = run(gpu, &pool, v, &kernel, (1, 3000), false)?;
        ok &= r.ok();
        let mean = r.mean_us();
        let wire = v.kind.wire();
        if !v.one_lane {
            match best.iter_mut().find(|(w, ..)| *w == wire) {
                Some(b) if mean < b.1 => *b = (wire, mean, v.name),
                Some(_) => {}
                None => best.push((wire, mean, v.name)),
            }
        }
        println!(
            "cuda: one-warp protocol={} variant={} mean_us={mean:.3} p50_us={:.3} p99_us={:.3} ratio_to_floor={:.2} errors={} checked={}/{}",
            v.kind.protocol(),
            v.name,
            r.percentile_us(0.5),
            r.percentile_us(0.99),
            mean * 1e3 / floor_ns,
            r.errors,
            r.checked,
            r.expected
        );
        // The per-step breakdown (clock64 of the leader; the clock reads add a little).
        let t = run(gpu, &pool, v, &kernel, (1, 3000), true)?;
        ok &= t.ok();
        let per = |cycles: u64| cycles as f64 / t.steps[5].max(1) as f64 * t.ns_per_cycle() / 1e3;
        println!(
            "cuda: breakdown protocol={} variant={} claim_us={:.3} fill_us={:.3} release_us={:.3} wait_us={:.3} reply_us={:.3} total_us={:.3}",
            v.kind.protocol(),
            v.name,
            per(t.steps[0]),
            per(t.steps[1]),
            per(t.steps[2]),
            per(t.steps[3]),
            per(t.steps[4]),
            per(t.steps[..5].iter().sum())
        );
    }

    // The goals' ratios with less noise: the floor and each protocol's fastest paths measured in
    // turn, 7 rounds; medians of the per-round ratios.
    let rounds: Vec<(&Variant, Kernel)> = ROUNDS
        .iter()
        .filter(|(wire, _)| options.protocols.contains(wire))
        .filter_map(|&(wire, name)| variant(wire, name))
        .map(|v| Ok((v, gpu.module.kernel(v.kernel)?)))
        .collect::<Result<_, Error>>()?;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); rounds.len()];
    for _ in 0..7 {
        let floor = gpu.floor(5_000, false)?;
        for ((v, kernel), ratios) in rounds.iter().zip(&mut ratios) {
            let r = run(gpu, &pool, v, kernel, (1, 2000), false)?;
            ok &= r.ok();
            ratios.push(r.mean_us() * 1e3 / floor);
        }
    }
    drop(pool);
    let mut medians = Vec::new();
    let mut line = String::from("cuda: one-warp / floor, 7 interleaved rounds:");
    for ((v, _), ratios) in rounds.iter().zip(&mut ratios) {
        ratios.sort_by(f64::total_cmp);
        let (median, low, high) = (ratios[ratios.len() / 2], ratios[0], ratios[ratios.len() - 1]);
        line += &format!(" {}-{} median={median:.2} [{low:.2}-{high:.2}]", v.kind.protocol(), v.name);
        medians.push(format!("{}_{}_ratio_median={median:.2}", v.kind.protocol(), v.name.replace('-', "_")));
    }
    println!("{line} (goals: line <= 1.30, rpc <= 2.00)");
    for &(wire, mean, name) in &best {
        let goal = goal(wire).map_or(String::new(), |g| format!(" (goal <= {g:.2})"));
        println!(
            "cuda: one-warp best protocol={} variant={name} mean_us={mean:.3} floor_us={:.3} ratio={:.2}{goal}",
            wire.name(),
            floor_ns / 1e3,
            mean * 1e3 / floor_ns
        );
    }

    let (table_ok, tables) = throughput(gpu, options, &asked)?;
    ok &= table_ok;
    let mut summary = format!("floor_us={:.3}", floor_ns / 1e3);
    for &(wire, mean, _) in &best {
        let p = wire.name();
        summary += &format!(" {p}_one_warp_best_us={mean:.3} {p}_best_ratio={:.2}", mean * 1e3 / floor_ns);
    }
    for m in medians {
        summary += &format!(" {m}");
    }
    Ok((ok, format!("{summary} {tables}")))
}

/// The link, which bounds how many line requests (2,320 bytes for 32 lanes: the head, the mask
/// word and 9 words a lane) or phase and RPC requests (2 KB) can cross it.
fn link(gpu: &Gpu) -> Result<(), Error> {
    let read = gpu.link_gb_per_s(0)?;
    let write_lines = gpu.link_gb_per_s(1)?;
    let write_pieces = gpu.link_gb_per_s(2)?;
    println!(
        "cuda: link read_lines_GBps={read:.1} write_lines_GBps={write_lines:.1} write_16B_pieces_GBps={write_pieces:.1} pieces_per_s={:.0} (256 MiB of mapped host memory)",
        write_pieces * 1e9 / 16.0
    );
    println!(
        "cuda: link bound at {LINE_REQUEST_BYTES} bytes a warp-call (line): whole lines {:.2} M/s, 16-byte pieces {:.2} M/s; at 2 KB (phase, rpc): {:.2} M/s",
        write_lines * 1e9 / LINE_REQUEST_BYTES / 1e6,
        write_pieces * 1e9 / LINE_REQUEST_BYTES / 1e6,
        write_lines * 1e9 / 2048.0 / 1e6
    );
    Ok(())
}

/// A 32-lane line request's bytes: the head, the mask word and 9 line words a lane.
const LINE_REQUEST_BYTES: f64 = (8 * (2 + 32 * hostcall_core::line::REQUEST_LANE_WORDS)) as f64;

/// One cell's run: (threads, warps, protocol, variant, warp-calls/s, errors).
type Cell = (usize, u32, &'static str, &'static str, f64, u64);

/// Throughput by warps x listener threads for every variant with a table; whether every reply
/// verified, and the summary's best medians at 1,056 warps per table.
fn throughput(gpu: &Gpu, options: &Options, asked: &[&Variant]) -> Result<(bool, String), Error> {
    let mut ok = true;
    let tabled: Vec<(&Variant, Kernel)> = asked
        .iter()
        .filter(|v| v.table != Table::None)
        .map(|v| Ok((*v, gpu.module.kernel(v.kernel)?)))
        .collect::<Result<_, Error>>()?;
    let mut cells: Vec<Cell> = Vec::new();
    for &threads in &options.threads {
        let pool = gpu.pool(threads)?;
        for &warps in &options.warps {
            let calls = (400_000 / warps).clamp(100, 2_000);
            for (v, kernel) in &tabled {
                if v.table == Table::Loaded && warps < 1056 {
                    continue;
                }
                for _ in 0..options.repeat {
                    let r = run(gpu, &pool, v, kernel, (warps, calls), false)?;
                    ok &= r.ok();
                    println!(
                        "cuda: throughput protocol={} threads={threads} warps={} variant={} policy={} calls_per_warp={} warp_calls_per_s={:.0} lane_calls_per_s={:.0} seconds={:.3} errors={} checked={}/{}",
                        v.kind.protocol(),
                        r.warps,
                        v.name,
                        policy_for(warps).name,
                        r.calls,
                        r.warp_calls_per_s(),
                        r.warp_calls_per_s() * 32.0,
                        r.seconds,
                        r.errors,
                        r.checked,
                        r.expected
                    );
                    cells.push((threads, r.warps, v.kind.protocol(), v.name, r.warp_calls_per_s(), r.errors));
                }
            }
        }
    }
    let mut summary = Vec::new();
    for (v, _) in &tabled {
        let best = print_table(&cells, v, options);
        summary.push(format!(
            "{}_{}_1056_warps_M_per_s={:.3}",
            v.kind.protocol(),
            v.name.replace('-', "_"),
            best / 1e6
        ));
    }
    let errors: u64 = cells.iter().map(|(.., e)| e).sum();
    summary.push(format!("throughput_errors={errors}"));
    Ok((ok, summary.join(" ")))
}

/// Prints the throughput table of `v`; returns its best median at 1,056 warps.
fn print_table(cells: &[Cell], v: &Variant, options: &Options) -> f64 {
    println!(
        "cuda: table (M warp-calls/s, protocol={} variant={}, median of {} runs [min-max])",
        v.kind.protocol(),
        v.name,
        options.repeat
    );
    print!("cuda: {:>8}", "warps");
    for &threads in &options.threads {
        print!(" {:>19}", format!("{threads} thr"));
    }
    println!();
    let mut best_1056 = 0.0f64;
    for &warps in &options.warps {
        if v.table == Table::Loaded && warps < 1056 {
            continue;
        }
        print!("cuda: {warps:>8}");
        for &threads in &options.threads {
            let mut rates: Vec<f64> = cells
                .iter()
                .filter(|c| c.0 == threads && c.1 == warps && c.2 == v.kind.protocol() && c.3 == v.name)
                .map(|c| c.4)
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
