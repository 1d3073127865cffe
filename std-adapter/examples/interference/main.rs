//! Interference: what one buffer's device can do to another buffer's calls on the same listener.
//!
//! ```sh
//! cargo run --release --example interference -- --adversary slow-service
//! cargo run --release --example interference -- --adversary sanitizer --protocol phase
//! ```
//!
//! One listener (the default [`ListenerConfig`]: it sleeps on its doorbell when idle) serves two
//! buffers of `--protocol`. A victim wave of one lane calls a trivial service on the first in a
//! loop for `--seconds`; an adversary ([`adversaries`]) works the second. The run is done twice
//! in one process, first without the adversary, then with it, and each prints the victim's
//! latency (calls, p50, p99, max) and the CPU time of the listener's threads over the run (from
//! `/proc/self/task/*/schedstat`, every thread whose name starts with the listener's), then how
//! long `Listener::shutdown` took and the listener's counters that moved. Nothing asserts a
//! timing: the figures are the output.
//!
//! Adversaries (`--adversary`):
//! - `none`: the two runs are the same (the noise floor);
//! - `slow-service`: one call to a service that blocks for `--block-ms` (10 s by default) on the
//!   adversary's buffer, made at the start of the run; the shutdown is timed while it still blocks
//!   (when `--block-ms` outlasts the run);
//! - `stale-line`: a line buffer of `--stale-packets` packets (1,024: 6.1 MiB), each request written
//!   once with one word stale and then left, served beside the victim (never served; each reported
//!   stalled once);
//! - `rpc-held`: an LLVM-RPC buffer of 4,096 ports x 64 lanes whose lanes all print a format of
//!   `--format-bytes` (8 KiB) at once, round after round: the held calls past the budget are
//!   refused, and the calls complete together (the work of a poll bounded);
//! - `sanitizer`: `--reports` SANITIZER reports (300 by default) spread over the first second,
//!   through the default SANITIZER service (its code-object lookup opens the HSA runtime named by
//!   `HOSTCALL_HSA_LIB`, such as the tests' stand-in, or none: the run says which).
//!
//! A new adversary is one file beside this one: a `fn start(&Arena) -> Running` and one line in
//! [`adversaries`].

use hostcall::prelude::*;
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, Protocol, Wave};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../cli/mod.rs"]
mod cli;
mod rpc_held;
mod sanitizer;
mod slow_service;
mod stale_line;
mod threads;

use cli::{Arg, Command};

/// The victim's service: echoes word 0.
const ECHO: u32 = 100;
/// The listener threads' name (and the prefix `/proc` is searched for).
const LISTENER_NAME: &str = "ifx-listener";

/// What an adversary gets: the listener, its own buffer, the options.
pub(crate) struct Arena<'a> {
    pub(crate) listener: &'a Listener,
    pub(crate) buffer: Arc<HostcallBuffer>,
    pub(crate) options: &'a Options,
}

/// An adversary at work; dropped after the victim's run and the shutdown.
pub(crate) struct Running {
    /// What it did, for the output (one line).
    pub(crate) note: Box<dyn Fn() -> String>,
    /// Threads it started; joined only if they are done (a blocked call is left to finish).
    pub(crate) threads: Vec<std::thread::JoinHandle<()>>,
}

/// Every adversary: its name on the command line and how it starts.
type Start = fn(&Arena<'_>) -> Running;

fn adversaries() -> Vec<(&'static str, Option<Start>)> {
    vec![
        ("none", None),
        ("slow-service", Some(slow_service::start as Start)),
        ("sanitizer", Some(sanitizer::start as Start)),
        ("stale-line", Some(stale_line::start as Start)),
        ("rpc-held", Some(rpc_held::start as Start)),
    ]
}

#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) adversary: &'static str,
    pub(crate) protocol: Protocol,
    pub(crate) seconds: f64,
    pub(crate) packets: u64,
    pub(crate) block_ms: u64,
    pub(crate) reports: u64,
    pub(crate) stale_packets: u64,
    pub(crate) format_bytes: u64,
}

const USAGE: &str = "\
usage: interference [OPTIONS]

A victim buffer's one-lane calls on a listener, without and then with an adversary buffer on the
same listener; prints the victim's p50/p99/max and the listener threads' CPU time.

  --adversary A        none, slow-service, sanitizer, stale-line, rpc-held [slow-service]
  --protocol P         stack, phase, line [stack]
  --seconds S          how long the victim calls, each run, 0.1..=600 [2]
  --packets N          packets of each buffer, 2..=4096 [8]
  --block-ms MS        slow-service: how long the service blocks, 0..=600000 [10000]
  --reports R          sanitizer: reports over the first second, 0..=100000 [300]
  --stale-packets N    stale-line: packets of the stale line buffer, 2..=65536 [1024]
  --format-bytes N     rpc-held: each lane's printf format, 1..=65536 [8192]
  -h, --help           this text";

fn parse(mut parser: cli::Parser) -> Result<Command<Options>, String> {
    let mut o = Options {
        adversary: "slow-service",
        protocol: Protocol::Stack,
        seconds: 2.0,
        packets: 8,
        block_ms: 10_000,
        reports: 300,
        stale_packets: 1024,
        format_bytes: 8192,
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Arg::Long("adversary") => {
                let names: Vec<(&'static str, &'static str)> =
                    adversaries().into_iter().map(|(name, _)| (name, name)).collect();
                o.adversary = cli::choice(&mut parser, "--adversary", &names)?
            }
            Arg::Long("protocol") => {
                o.protocol = cli::choice(
                    &mut parser,
                    "--protocol",
                    &[("stack", Protocol::Stack), ("phase", Protocol::Phase), ("line", Protocol::Line)],
                )?
            }
            Arg::Long("seconds") => o.seconds = cli::number(&mut parser, "--seconds", 0.1..=600.0)?,
            Arg::Long("packets") => o.packets = cli::number(&mut parser, "--packets", 2..=4096)?,
            Arg::Long("block-ms") => o.block_ms = cli::number(&mut parser, "--block-ms", 0..=600_000)?,
            Arg::Long("reports") => o.reports = cli::number(&mut parser, "--reports", 0..=100_000)?,
            Arg::Long("stale-packets") => {
                o.stale_packets = cli::number(&mut parser, "--stale-packets", 2..=65_536)?
            }
            Arg::Long("format-bytes") => {
                o.format_bytes = cli::number(&mut parser, "--format-bytes", 1..=65_536)?
            }
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            other => return Err(cli::unexpected(other)),
        }
    }
    Ok(Command::Run(o))
}

/// One run's figures.
struct Figures {
    calls: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
    listener_cpu: Option<Duration>,
    shutdown: Duration,
    stats: hostcall::observe::Stats,
    note: String,
}

fn run(o: &Options, adversary: Option<Start>) -> Figures {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let config = ListenerConfig::default().with_thread_name(LISTENER_NAME.into());
    let listener = Listener::start(doorbell.clone(), config).expect("a listener");
    listener.services().register_lane(ECHO, "echo", |r| Ok([r[0], 0])).unwrap();
    let buffer = |what| {
        let buffer =
            HostcallBuffer::with_protocol(Arc::new(HostMemory), o.packets, doorbell.clone(), o.protocol);
        Arc::new(buffer.unwrap_or_else(|e| panic!("the {what} buffer: {e}")))
    };
    let (victim, theirs) = (buffer("victim"), buffer("adversary"));
    listener.add(victim.clone()).unwrap();
    listener.add(theirs.clone()).unwrap();
    let cpu_before = threads::cpu_time(LISTENER_NAME);
    let running = adversary.map(|start| start(&Arena { listener: &listener, buffer: theirs, options: o }));

    let wave = Wave::new(victim, 1);
    let mut latencies = Vec::new();
    let until = Instant::now() + Duration::from_secs_f64(o.seconds);
    while Instant::now() < until {
        let t = Instant::now();
        let reply = wave.call(ECHO, |_| [latencies.len() as u64, 0, 0, 0, 0, 0, 0, 0]).expect("a reply");
        latencies.push(t.elapsed());
        assert_eq!(reply.lane(0)[0], latencies.len() as u64 - 1, "the victim's reply");
    }
    let listener_cpu = cpu_before.zip(threads::cpu_time(LISTENER_NAME)).map(|(a, b)| b.saturating_sub(a));
    let t = Instant::now();
    let stats = listener.shutdown();
    let shutdown = t.elapsed();
    let note = running.as_ref().map(|r| (r.note)()).unwrap_or_default();
    if let Some(running) = running {
        for thread in running.threads {
            if thread.is_finished() {
                let _ = thread.join();
            } // else: a call still blocked, left to finish on its own
        }
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Figures {
        calls: latencies.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: at(1.0),
        listener_cpu,
        shutdown,
        stats,
        note,
    }
}

fn print(label: &str, f: &Figures) {
    let cpu = f.listener_cpu.map_or("unknown".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3));
    println!(
        "{label:<28} calls={:<8} p50={:>9.1?} p99={:>9.1?} max={:>9.1?} listener_cpu={cpu} shutdown={:.1?}",
        f.calls, f.p50, f.p99, f.max, f.shutdown
    );
    let refusals = f.stats.refusals.to_string();
    println!("{:<28} refusals: {refusals}; {}", "", f.note);
}

fn main() -> ExitCode {
    let o = cli::run_or_exit(parse(cli::Parser::from_env()), USAGE);
    let start = adversaries().into_iter().find(|(name, _)| *name == o.adversary).and_then(|(_, s)| s);
    println!(
        "interference: protocol={:?} packets={} seconds={} adversary={}",
        o.protocol, o.packets, o.seconds, o.adversary
    );
    print("without adversary", &run(&o, None));
    print(&format!("with {}", o.adversary), &run(&o, start));
    ExitCode::SUCCESS
}
