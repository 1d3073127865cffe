//! The main job: emulated waves making real hostcalls through the listener.
//!
//! ```sh
//! cargo run --release --example waves -- --waves 16 --lanes 64 --calls 2000
//! ```
//!
//! Starts a listener on host memory, runs `--waves` threads each doing `--calls` hostcalls with
//! `--lanes` active lanes, cycling through a lane service (add), a packet service (sum over the
//! wave's lanes) and FUNCTION_CALL (a host function called by address), checks every reply, and
//! ends with one `summary:` line. Exits 1 if any reply was wrong or missing, 2 for a bad command
//! line (a buffer geometry outside its protocol's limits included, named); a closed stdout ends
//! it quietly (SIGPIPE, as for `cat`).
//!
//! Long runs show a progress line on stderr every second (when stderr is a terminal, or with
//! `--progress`). Ctrl-C (SIGINT) stops the waves after their call in flight, prints the summary
//! of what was done (`summary (interrupted):`) and the listener's counters, and exits 130.
//!
//! `--printf N`: every N-th call of each wave is instead a printf from every lane of the wave,
//! through the PRINTF message stream, printed to stdout; the reply (characters printed) is checked.
//! Waves may outnumber packets (`--packets`): a wave holds no packet between the chunks of its
//! messages, and none is lost. The host's warnings go to stderr (`RUST_LOG` to choose).
//!
//! `--threads N`: a [`ListenerPool`] of N listener threads serves the waves. `--buffers` says how:
//! one buffer, which the pool splits into stripes for phase, line and RPC (a stack buffer cannot
//! be split, so one thread serves it), or one buffer per thread, served whole by its thread, the
//! waves split between them in blocks; the default is what lets every thread help (stack: a
//! buffer per thread; the others: one striped buffer). `--scaling` runs the program once per
//! protocol, layout and thread count of a `--threads` list, `--rounds` times, and prints the
//! medians and the ratios to the first thread count ([`scaling`]).
//!
//! `--protocol rpc`: the buffer is LLVM libc's GPU RPC (ports as wide as the waves); each wave is
//! its client, claiming a port through the client's lock bits, and each call goes out as one
//! packet in this project's `'h'` opcodes (ROCm's `'r'` opcode for FUNCTION_CALL); `--printf`
//! calls are LLVM libc's GPU printf (`PRINTF_TO_STDOUT`), formatted by the listener's RPC host.

#[cfg(test)]
mod binary;
mod calls;
#[path = "../cli/mod.rs"]
mod cli;
mod options;
mod printf;
mod run;
mod scaling;

use hostcall::{
    backend::hsa::AtomicsRequirement,
    backend::{Backend, DetectOptions},
    observe::Stats,
    Error, HostcallBuffer, ListenerConfig, ListenerPool, Protocol,
};
use options::{Layout, Options};
use run::Counts;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    cli::quiet_on_closed_pipe();
    let o = cli::run_or_exit(options::parse(std::env::args_os().skip(1)), options::USAGE);
    // The host's warnings (a refused BEGIN, a budget reached: each rate-limited) on stderr;
    // `RUST_LOG` chooses others.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    if let Some(scaling) = &o.scaling {
        return scaling::run(&o, scaling);
    }
    let backend = backend(&o);
    let doorbell = backend.doorbell.clone();
    let config = if o.spin { ListenerConfig::spinning() } else { ListenerConfig::default() };
    let pool = ListenerPool::start(o.threads, doorbell.clone(), config).expect("start the listeners");
    calls::register(pool.services());
    // One doorbell for the listeners and the buffers; the buffers where ROCm puts them.
    let mut buffers = Vec::new();
    for k in 0..o.layout.buffers(o.threads) {
        match backend.buffer(o.packets, o.protocol, doorbell.clone()) {
            Ok(buffer) => buffers.push(Arc::new(buffer)),
            Err(e) => {
                eprintln!("waves: a buffer of {} packets: {e}", o.packets);
                return ExitCode::FAILURE;
            }
        }
        serve(&pool, o.layout, k, buffers[k].clone()).unwrap();
    }
    println!(
        "waves: backend={} ({}), protocol={}, listener={}, waves={} lanes={} calls={} packets={} threads={} buffers={}",
        backend.kind,
        backend.reason,
        options::protocol_name(o.protocol),
        if o.spin { "spinning" } else { "blocking" },
        o.waves,
        o.lanes,
        o.calls,
        o.packets,
        o.threads,
        o.layout.name()
    );

    let counts = Counts::default();
    cli::progress::catch_interrupts();
    let progress = cli::progress::start(
        o.progress,
        "calls",
        o.waves * o.calls,
        counts.done.clone(),
        counts.errors.clone(),
    );
    let started = Instant::now();
    let latencies = run::run_waves(&o, &buffers, &counts);
    let elapsed = started.elapsed();
    progress.finish();
    // An RPC buffer's host counts every call it finished, the printf calls (LLVM libc's opcodes,
    // not hostcall packets) included.
    let rpc_calls_done: Option<u64> =
        buffers.iter().map(|b| pool.rpc_counters(b.as_ptr()).map(|counters| counters.calls_done)).sum();
    let stats = pool.shutdown();
    summary(&o, &counts, latencies, elapsed, rpc_calls_done, &stats)
}

/// Starts serving `buffer`, the `k`-th of the run's: one buffer through the pool, which stripes
/// it over the threads (a stack buffer: whole to one thread); a buffer per thread to listener
/// `k` alone. The one place the run hands a buffer to its listeners.
fn serve(pool: &ListenerPool, layout: Layout, k: usize, buffer: Arc<HostcallBuffer>) -> Result<(), Error> {
    match layout {
        Layout::One => pool.add(buffer),
        Layout::PerThread => pool.listeners()[k].add(buffer),
    }
}

/// HSA fine-grained memory where ROCm and a GPU are present, else host memory (the reason is
/// printed); `--host-memory` skips the detection.
fn backend(o: &Options) -> Backend {
    if o.host_only {
        return Backend::host("--host-memory given", None);
    }
    // Only the stack protocol needs platform atomics; HSA memory is usable without them for the others.
    let atomics = match o.protocol {
        Protocol::Stack => AtomicsRequirement::Required,
        Protocol::Phase | Protocol::Line | Protocol::Rpc { .. } => AtomicsRequirement::NotRequired,
    };
    hostcall::backend::detect_with(&DetectOptions::default().with_atomics(atomics))
}

/// Prints the `summary:` line (and, when interrupted, the listener's counters) and returns the
/// exit code: every call answered right, or not, or interrupted.
fn summary(
    o: &Options,
    counts: &Counts,
    mut latencies: Vec<u64>,
    elapsed: Duration,
    rpc_calls_done: Option<u64>,
    stats: &Stats,
) -> ExitCode {
    let interrupted = cli::progress::interrupted();
    latencies.sort_unstable();
    // Percentiles of the timed calls; "-" when there were none (`--calls 0`, or only printfs).
    let pct = |p: f64| match latencies.len() {
        0 => "-".to_string(),
        n => latencies[((n - 1) as f64 * p) as usize].to_string(),
    };
    let (done, wrong_lanes) = counts.after_join();
    // Interrupted: the calls done (each wave stopped after its call in flight), not those asked.
    let calls = if interrupted { done } else { o.waves * o.calls };
    let lane_calls = calls * u64::from(o.lanes);
    let errors = wrong_lanes + stats.total().errors;
    let missing = calls.saturating_sub(rpc_calls_done.unwrap_or(stats.total().packets));
    if interrupted {
        println!(
            "waves: interrupted after {calls} of {} calls; the listener's counters:\n{stats}",
            o.waves * o.calls
        );
    }
    println!(
        "summary{}: calls={calls} lane_calls={lane_calls} errors={} p50_ns={} p99_ns={} calls_per_s={:.0}",
        if interrupted { " (interrupted)" } else { "" },
        errors + missing,
        pct(0.5),
        pct(0.99),
        calls as f64 / elapsed.as_secs_f64()
    );
    if interrupted {
        ExitCode::from(cli::progress::INTERRUPTED_EXIT)
    } else if errors + missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
