//! Benchmarks: hostcall round trips and throughput against a cache-line ping-pong floor and
//! crossbeam-channel request/response, measured side by side in one run.
//!
//! ```sh
//! cargo run --release --example bench                  # 5 rounds, about a minute
//! cargo run --release --example bench -- --quick       # CI smoke run, a few seconds
//! cargo run --release --example bench -- --rounds 9    # more rounds
//! ```
//!
//! Every row is measured once per round; rounds rotate the order of the rows, so slow phases of a
//! shared machine hit every row alike. Ratios are taken within a round (a row against the floor,
//! or against crossbeam at the same client count, measured seconds apart) and reported as the
//! median over rounds with min..max. The two threads of each latency row are pinned to two CPUs
//! (`--no-pin` to leave them to the scheduler), and latency percentiles skip windows in which the
//! pair was descheduled (see `round_trips`; the share kept is the `clean` column). Nothing here
//! asserts a timing.
//!
//! Rows:
//! - `floor_ping_pong`: two threads, one 128-byte-aligned line each way (A writes a counter to
//!   line 1, B spins on it and answers on line 2): the cost of a round trip between two cores.
//! - `core_1l_spinning`: the protocol alone, the core's producer path (`stack::View::claim`,
//!   `submit`, `wait`) against a thread spinning on `stack::Host::drain`: no listener,
//!   registry, doorbell or `Wave`. The bound under the next row.
//! - `hostcall_1l_spinning` / `hostcall_1l_blocking`: one wave of one lane calling a trivial lane
//!   service through the real listener (poller, `Services` registry, doorbell), the listener
//!   spinning (`ListenerConfig::spinning()`) or blocking on its doorbell (the default config).
//!   The device side is the core producer path as a GPU wave runs it: claim, fill, submit, ring,
//!   spin on READY (`Submitted::wait`, one CPU pause per poll like the floor), read, release.
//! - `core_1l_line_kept`: `core_1l_line` with the producer keeping its packet from call to call
//!   (`line::Completed::keep`, what `keep_packet` does on a GPU).
//! - `wire_1l_line` / `llvm_rpc_1l`: the shared-memory traffic alone of one lane's round trip in
//!   the line protocol's layout and in LLVM libc's GPU RPC's one-port layout, no project code on
//!   either side (see `wire.rs`): what a layout costs before any instruction of ours.
//! - `rpc_host_1l`: LLVM libc's GPU RPC on one port of one lane with this project's code on both
//!   sides: the core's RPC client (open, send, receive, close per call) and `RpcHost::drain`
//!   spinning with the ECHO service behind it (see `rpc.rs`; not through the `Listener`), beside
//!   `llvm_rpc_1l`, the wire shape alone; `core_1l_rpc` the same client against the core's turn
//!   alone (no call state, no service dispatch); `hostcall_1l_rpc` the same client through the
//!   full listener (spinning), the buffer a `HostcallBuffer` of `Protocol::Rpc`.
//! - `bare_1l_stack` / `bare_1l_phase`: ROCm's stack and phase algorithms alone, no project code
//!   on either side, in the memory the project's buffers use (see `bare/`): the rows the full
//!   paths are measured against. The report prints `hostcall_1l_spinning` and `core_1l_spinning`
//!   over `bare_1l_stack`, `hostcall_1l_phase` and `core_1l_phase` over `bare_1l_phase`.
//! - `wave_1l_spinning`: the same with the emulated `Wave` (`with_spin_wait`) as the device side:
//!   what the emulation adds.
//! - `crossbeam_blocking` / `crossbeam_spinning`: the same payload (8 u64 request, 2 u64 reply)
//!   over two crossbeam-channel channels, `recv` or a `try_recv` spin on both sides.
//! - `throughput_<W>w_<L>l`: W waves of L lanes calling as fast as they can (default listener,
//!   default wave waiting); calls/s counts wave calls, lane_calls/s lanes. `crossbeam_tput_<C>c`:
//!   C client threads sending requests to one server thread over one channel, each waiting for
//!   its reply on its own channel (blocking).
//! - `rpc_tput_1c` / `llvm_rpc_tput_1c`: the clients of `hostcall_1l_rpc` and `llvm_rpc_1l`
//!   calling as fast as they can (one client, pinned as the latency pairs): one client's
//!   throughput.
//! - `rpc_puts_<C>c` / `llvm_puts_<C>c` (C = 1, 8): C clients, each a 32-lane warp on a port of
//!   its own, calling `puts` over LLVM libc's GPU RPC (80 bytes a lane, two packets) as fast as
//!   they can, output to `/dev/null`: through the full listener, and through a model of LLVM's
//!   server loop (see `puts.rs`). calls/s counts warp calls.
//! - `listener_cost_64l`: producer and listener on one thread, no cross-core traffic: claim, fill
//!   64 lanes, submit, one poll of a poll session (`PollSession::poll_once`, held across the
//!   loop as a listener thread holds one while it polls) with the std `Services` registry
//!   through `Services::dispatcher`, read 64 replies, release.
//!   ns per 64-lane packet. `listener_cost_1l` is the same with one lane.
//! - `listener_cost_32l_<protocol>` (`stack`, `phase`, `line`): that loop with 32 lanes on a
//!   buffer of each protocol, through the core's protocol switch and the producer traits (hot: the
//!   listener's own thread just wrote the request); the figure is the time inside `poll_once` per
//!   packet (less an empty pair of clock reads), the whole loop beside it.
//! - `listener_cold_32l_<protocol>`: a producer thread on another CPU fills and submits all 256
//!   packets of a buffer while the measuring thread waits on a channel, then one `poll_once`
//!   serves them all; its time per packet, median over repetitions (cold: the request lines were
//!   last written by another core, as a GPU's DMA writes look to the host). The stack and line
//!   rows of both kinds show their ratio to the phase row of the same kind, within each round.
//!
//! Instructions per packet under callgrind (`--callgrind-listener N` runs only that loop):
//!
//! ```sh
//! cargo build --release --example bench
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*listener_loop*' \
//!     --callgrind-out-file=/tmp/cg.out target/release/examples/bench --callgrind-listener 10000
//! callgrind_annotate --inclusive=yes /tmp/cg.out | grep -E 'listener_loop|poll_once'
//! ```
//!
//! `--gaps` measures the listener's wait policies instead (see `gaps.rs`): one call after idle
//! gaps of 0.1 ms to 1 s under each preset, and the idle listener's CPU.
//!
//! Divide the `listener_loop` total by N for the whole loop, and the inclusive `poll_once` count
//! by N for the listener's own share (drain + dispatch + service).
//!
//! `--through listener` serves the same packets with a real `Listener` thread instead (its
//! stuck-call watch, its RPC hosts; see `listener_full.rs`): collect `--toggle-collect='*poll_once*'`,
//! and subtract the empty polls measured by `--through listener-rings-only`. `--through
//! listener-puts` has that listener serve RPC `puts` calls from a warp of `--lanes` lanes (the
//! `rpc_puts` rows' call) instead.

use hostcall_core::SLOT_WORDS;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

/// The benchmark's lane service id.
const ECHO: u32 = 100;

/// The trivial lane service: two words back from eight.
fn echo(request: &[u64; SLOT_WORDS]) -> [u64; 2] {
    [request[0].wrapping_add(1), request[7]]
}

/// One lane's request for call `i`.
fn request(i: u64, lane: usize) -> [u64; SLOT_WORDS] {
    [i, lane as u64, 2, 3, 4, 5, 6, i ^ lane as u64]
}

mod bare;
#[path = "../cli/mod.rs"]
mod cli;
mod gaps;
mod latency;
mod listener_cold;
mod listener_cost;
mod listener_full;
mod measure;
mod options;
mod pin;
mod puts;
mod report;
mod rows;
mod rpc;
mod throughput;
mod wire;

use listener_cost::run_callgrind;
use measure::unpin;
use options::{parse, Mode, Through, USAGE};
use report::{print_goals, print_lines, print_table, summarise};
use rows::rows;

fn main() {
    let o = match cli::run_or_exit(parse(std::env::args_os().skip(1)), USAGE) {
        Mode::Callgrind(n, lanes, protocol, Through::Poller) => return run_callgrind(n, lanes, protocol),
        Mode::Callgrind(n, lanes, _, Through::ListenerPuts) => {
            return listener_full::run_callgrind_puts(n, lanes)
        }
        Mode::Callgrind(n, lanes, protocol, through) => {
            return listener_full::run_callgrind(n, lanes, protocol, through == Through::ListenerRingsOnly)
        }
        Mode::Gaps(o, quick) => {
            pin::allowed_at_start();
            return gaps::run(&o, quick);
        }
        Mode::Bench(o) => o,
    };
    pin::allowed_at_start(); // before any pinning
    let mut rows = rows(&o);
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench: rounds={} cores={cores} pinned_pairs={} latency_budget_ms={} window_ms={} (medians over rounds)",
        o.rounds,
        o.pin && pin::allowed_at_start().len() >= 2,
        o.latency_budget.as_millis(),
        o.window.as_millis()
    );
    let started = Instant::now();
    let n = rows.len();
    let done = Arc::new(AtomicU64::new(0));
    cli::progress::catch_interrupts();
    let progress =
        cli::progress::start(o.progress, "rows", (o.rounds * n) as u64, done.clone(), Arc::default());
    let mut rounds_done = 0;
    'rounds: for round in 0..o.rounds {
        // Rotate the order so that each row sees a different phase of a noisy machine.
        for k in 0..n {
            if cli::progress::interrupted() {
                break 'rounds;
            }
            let row = &mut rows[(k + round * 3) % n];
            let sample = (row.run)(&o);
            unpin(&o);
            row.samples.push(sample);
            // Relaxed: a counter for the progress line.
            done.fetch_add(1, Ordering::Relaxed);
        }
        rounds_done += 1;
        eprintln!("round {}/{} done ({:.1} s)", round + 1, o.rounds, started.elapsed().as_secs_f64());
    }
    progress.finish();
    if cli::progress::interrupted() {
        // The table of the rounds completed (every row has one sample of each).
        println!("bench: interrupted after {rounds_done} of {} rounds", o.rounds);
        if rounds_done == 0 {
            println!("bench: no round completed: no table");
            std::process::exit(i32::from(cli::progress::INTERRUPTED_EXIT));
        }
        for row in &mut rows {
            row.samples.truncate(rounds_done);
        }
    }
    let summaries = summarise(&rows);
    print_lines(&summaries);
    print_table(&summaries, rounds_done);
    println!();
    print_goals(&summaries);
    bare::print_ratios(&rows);
    println!("bench: total_s={:.1}", started.elapsed().as_secs_f64());
    if cli::progress::interrupted() {
        std::process::exit(i32::from(cli::progress::INTERRUPTED_EXIT));
    }
}
