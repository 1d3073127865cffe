//! The main job: emulated waves making real hostcalls through the listener.
//!
//! ```sh
//! cargo run --release --example waves -- --waves 16 --lanes 64 --calls 2000
//! ```
//!
//! Starts a listener on host memory, runs `--waves` threads each doing `--calls` hostcalls with
//! `--lanes` active lanes, cycling through a lane service (add), a packet service (sum over the
//! wave's lanes) and FUNCTION_CALL (a host function called by address), checks every reply, and
//! ends with one `summary:` line. Exits 1 if any reply was wrong or missing.
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
//! `--protocol rpc`: the buffer is LLVM libc's GPU RPC (ports as wide as the waves); each wave is
//! its client, claiming a port through the client's lock bits, and each call goes out as one
//! packet in this project's `'h'` opcodes (ROCm's `'r'` opcode for FUNCTION_CALL); `--printf`
//! calls are LLVM libc's GPU printf (`PRINTF_TO_STDOUT`), formatted by the listener's RPC host.

use hostcall::buffer::Protocol;
use hostcall::core::dispatch::{FUNCTION_CALL, PRINTF};
use hostcall::core::{LANES, MAX_PACKETS, SLOT_WORDS};
use hostcall::dispatch::registry::PacketService;
use hostcall::{Listener, ListenerConfig, Wave};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const ADD: u32 = 100;
const LANE_SUM: u32 = 101;

#[path = "cli/mod.rs"]
mod cli;

use cli::{Arg, Command};

#[derive(Debug, PartialEq)]
struct Options {
    waves: u64,
    lanes: u32,
    calls: u64,
    packets: u64,
    spin: bool,
    host_only: bool,
    printf_every: u64,
    protocol: Protocol,
    progress: bool,
}

const USAGE: &str = "\
usage: waves [OPTIONS]

Emulated waves making hostcalls through a listener; every reply is checked.

  --waves W            waves (threads), 1..=1024 [16]
  --lanes L            active lanes per wave, 1..=64 [64]
  --calls C            calls per wave, 0..=1000000000 [2000]
  --packets P          packets in the buffer, 2..=16777216 [W, at least 2]; fewer packets than
                       waves is allowed (waves wait for a free one); every protocol needs >= 2
  --protocol NAME      stack (ROCm's default ABI), phase, line (ours), or rpc (LLVM libc's
                       GPU RPC, ports as wide as --lanes, at most 4096 packets) [stack]
  --printf N           every N-th call of each wave is a printf from all its lanes (0: none) [0]
  --spin               a listener that never sleeps
  --host-memory        host memory, without looking for HSA
  --progress           a progress line on stderr every second even when it is not a terminal
  -h, --help           this text

Exits 0 when every reply was right, 1 otherwise, 130 when stopped by Ctrl-C (SIGINT) after
printing what was done.";

/// The most waves (threads) and calls per wave: a run of the largest is hours, not an overflow.
const MAX_WAVES: u64 = 1024;
const MAX_CALLS: u64 = 1_000_000_000;

fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Command<Options>, String> {
    let mut o = Options {
        waves: 16,
        lanes: 64,
        calls: 2000,
        packets: 0,
        spin: false,
        host_only: false,
        printf_every: 0,
        protocol: Protocol::Stack,
        progress: false,
    };
    let mut parser = cli::parser(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Arg::Long("waves") => o.waves = cli::number(&mut parser, "--waves", 1..=MAX_WAVES)?,
            Arg::Long("lanes") => o.lanes = cli::number(&mut parser, "--lanes", 1..=LANES as u32)?,
            Arg::Long("calls") => o.calls = cli::number(&mut parser, "--calls", 0..=MAX_CALLS)?,
            Arg::Long("packets") => {
                o.packets = cli::number(&mut parser, "--packets", 2..=u64::from(MAX_PACKETS))?
            }
            Arg::Long("spin") => o.spin = true,
            Arg::Long("host-memory") => o.host_only = true,
            Arg::Long("progress") => o.progress = true,
            Arg::Long("printf") => o.printf_every = cli::number(&mut parser, "--printf", 0..=u64::MAX)?,
            Arg::Long("protocol") => {
                o.protocol = cli::choice(
                    &mut parser,
                    "--protocol",
                    &[
                        ("stack", Protocol::Stack),
                        ("phase", Protocol::Phase),
                        ("line", Protocol::Line),
                        ("rpc", Protocol::Rpc { lanes: LANES as u32 }),
                    ],
                )?
            }
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            other => return Err(cli::unexpected(other)),
        }
    }
    if o.packets == 0 {
        o.packets = o.waves.max(2);
    }
    // An LLVM-RPC port is as wide as its client's warp: here, the wave.
    if let Protocol::Rpc { lanes } = &mut o.protocol {
        *lanes = o.lanes;
    }
    Ok(Command::Run(o))
}

/// The host function FUNCTION_CALL jumps to: out = [a * b + c, a ^ b].
extern "C" fn mul_add(out: *mut [u64; 2], input: *const [u64; 7]) {
    // SAFETY: the listener passes valid pointers for the duration of the call.
    let (out, input) = unsafe { (&mut *out, &*input) };
    *out = [input[0].wrapping_mul(input[1]).wrapping_add(input[2]), input[0] ^ input[1]];
}

/// Per packet: each lane gets the sum of word 0 over all active lanes, and its lane number.
struct LaneSum;
impl PacketService for LaneSum {
    fn serve(&self, packet: &mut hostcall::core::PacketRequest<'_>) {
        let sum = packet.lanes().map(|lane| packet.request(lane)[0]).fold(0u64, u64::wrapping_add);
        for lane in packet.lanes() {
            packet.reply(lane, [sum, lane as u64]);
        }
    }
}

/// One call's request for `lane`, and the reply it must get.
fn request(service: u32, seed: u64, lane: usize) -> [u64; SLOT_WORDS] {
    let a = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lane as u64;
    match service {
        ADD => [a, lane as u64, seed, 0, 0, 0, 0, 0],
        FUNCTION_CALL => [mul_add as *const () as usize as u64, a, 3, lane as u64, 0, 0, 0, 0],
        _ => [a, 0, 0, 0, 0, 0, 0, 0],
    }
}

fn expected(service: u32, seed: u64, lane: usize, mask: u64) -> [u64; 2] {
    let r = request(service, seed, lane);
    match service {
        ADD => [r[0].wrapping_add(r[1]), r[2]],
        FUNCTION_CALL => [r[1].wrapping_mul(r[2]).wrapping_add(r[3]), r[1] ^ r[2]],
        _ => {
            let sum = (0..64).filter(|l| mask >> l & 1 == 1).map(|l| request(service, seed, l)[0]);
            [sum.fold(0u64, u64::wrapping_add), lane as u64]
        }
    }
}

fn main() -> ExitCode {
    let o = cli::run_or_exit(parse(std::env::args_os().skip(1)), USAGE);
    // The host's warnings (a refused BEGIN, a budget reached: each rate-limited) on stderr;
    // `RUST_LOG` chooses others.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // HSA fine-grained memory where ROCm and a GPU are present, else host memory (the reason is
    // printed); `--host-memory` skips the detection.
    let backend = if o.host_only {
        hostcall::backend::Backend::host("--host-memory given", None)
    } else {
        // The phase protocol needs no platform atomics, so HSA memory is usable without them.
        let atomics = match o.protocol {
            Protocol::Stack => hostcall::backend::hsa::AtomicsRequirement::Required,
            Protocol::Phase | Protocol::Line | Protocol::Rpc { .. } => {
                hostcall::backend::hsa::AtomicsRequirement::NotRequired
            }
        };
        hostcall::backend::detect_with(&hostcall::backend::DetectOptions::default().with_atomics(atomics))
    };
    let doorbell = backend.doorbell.clone();
    let config = if o.spin { ListenerConfig::spinning() } else { ListenerConfig::default() };
    let listener = Listener::start(doorbell.clone(), config).expect("start the listener");
    let services = listener.services();
    services.register_lane(ADD, "add", |r| Ok([r[0].wrapping_add(r[1]), r[2]])).unwrap();
    services.register_packet(LANE_SUM, "lane-sum", LaneSum).unwrap();
    // SAFETY: the only devices are this program's emulated waves, which send `mul_add`'s address.
    unsafe { services.enable_function_calls() }.unwrap();
    services.enable_printf(hostcall::services::printf::StdStreams, Default::default()).unwrap();
    // One doorbell for the listener and its buffer; the buffer where ROCm puts it.
    let buffer = match backend.buffer(o.packets, o.protocol, doorbell) {
        Ok(buffer) => Arc::new(buffer),
        Err(e) => {
            eprintln!("waves: a buffer of {} packets: {e}", o.packets);
            return ExitCode::FAILURE;
        }
    };
    listener.add_buffer(buffer.clone()).unwrap();
    println!(
        "waves: backend={} ({}), protocol={}, listener={}, waves={} lanes={} calls={} packets={}",
        backend.kind,
        backend.reason,
        match o.protocol {
            Protocol::Stack => "stack",
            Protocol::Phase => "phase",
            Protocol::Line => "line",
            Protocol::Rpc { .. } => "rpc",
        },
        if o.spin { "spinning" } else { "blocking" },
        o.waves,
        o.lanes,
        o.calls,
        o.packets
    );

    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    cli::progress::catch_interrupts();
    let progress = cli::progress::start(o.progress, "calls", o.waves * o.calls, done.clone(), errors.clone());
    let started = Instant::now();
    let threads: Vec<_> = (0..o.waves)
        .map(|w| {
            let wave = Wave::new(buffer.clone(), o.lanes);
            let (done, errors, calls, printf_every) = (done.clone(), errors.clone(), o.calls, o.printf_every);
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(calls.min(1 << 20) as usize);
                for c in 0..calls {
                    if cli::progress::interrupted() {
                        break;
                    }
                    let service = [ADD, LANE_SUM, FUNCTION_CALL][(c % 3) as usize];
                    let seed = w << 40 | c;
                    if printf_every > 0 && c % printf_every == 0 {
                        errors.fetch_add(print_from_lanes(&wave, w, c), Ordering::Relaxed);
                        done.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let t = Instant::now();
                    let reply = wave.call(service, |lane| request(service, seed, lane));
                    latencies.push(t.elapsed().as_nanos() as u64);
                    let wrong = match reply {
                        Ok(reply) => (0..64)
                            .filter(|&l| wave.activemask() >> l & 1 == 1)
                            .filter(|&l| reply.lane(l) != expected(service, seed, l, wave.activemask()))
                            .count() as u64,
                        Err(e) => {
                            eprintln!("wave {w} call {c}: {e}");
                            u64::from(wave.activemask().count_ones())
                        }
                    };
                    errors.fetch_add(wrong, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<u64> = threads.into_iter().flat_map(|t| t.join().expect("wave thread")).collect();
    let elapsed = started.elapsed();
    progress.finish();
    let interrupted = cli::progress::interrupted();
    // An RPC buffer's host counts every call it finished, the printf calls (LLVM libc's opcodes,
    // not hostcall packets) included.
    let rpc_calls_done = listener.rpc_counters(buffer.as_ptr()).map(|counters| counters.calls_done);
    let stats = listener.shutdown();
    latencies.sort_unstable();
    // Percentiles of the timed calls; "-" when there were none (`--calls 0`, or only printfs).
    let pct = |p: f64| match latencies.len() {
        0 => "-".to_string(),
        n => latencies[((n - 1) as f64 * p) as usize].to_string(),
    };
    // Interrupted: the calls done (each wave stopped after its call in flight), not those asked.
    let calls = if interrupted { done.load(Ordering::Relaxed) } else { o.waves * o.calls };
    let lane_calls = calls * u64::from(o.lanes);
    let errors = errors.load(Ordering::Relaxed) + stats.total().errors;
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

/// Every lane of `wave` prints one line: through the PRINTF message stream, or on an LLVM-RPC
/// buffer as LLVM libc's GPU printf does (`PRINTF_TO_STDOUT`: the format and the argument block
/// as streams, formatted on the host). Returns the number of wrong replies (each lane's reply is
/// the characters printed).
fn print_from_lanes(wave: &Wave, w: u64, c: u64) -> u64 {
    const FORMAT: &[u8] = b"[wave %llu lane %d] call %llu: %.3f\n";
    let line = |lane: usize| format!("[wave {w} lane {lane}] call {c}: {:.3}\n", lane as f64 / 64.0);
    let lanes = (0..64usize).filter(|&l| wave.activemask() >> l & 1 == 1);
    if let Some(view) = wave.buffer().view().rpc() {
        use hostcall::services::rpc::client::{printf, printf_opcode, CArg};
        let client =
            hostcall::core::rpc::Client::of(view).expect("a buffer's view has its client's lock bits");
        let args: Vec<[CArg<'_>; 4]> = (0..LANES)
            .map(|lane| {
                [
                    CArg::Long(w as i64),
                    CArg::Int(lane as i32),
                    CArg::Long(c as i64),
                    CArg::Double(lane as f64 / 64.0),
                ]
            })
            .collect();
        let started = Instant::now();
        let mut keep_waiting = |_| started.elapsed() < std::time::Duration::from_secs(10);
        let call = |lane: u32| (FORMAT, &args[lane as usize][..]);
        return match printf(
            &client,
            w as u32,
            printf_opcode(0, false),
            wave.activemask(),
            None,
            &call,
            &mut keep_waiting,
        ) {
            Ok(printed) => lanes.filter(|&l| printed[l] as usize != line(l).len()).count() as u64,
            Err(_) => {
                eprintln!("wave {w} call {c}: printf: no answer within 10 s");
                lanes.count() as u64
            }
        };
    }
    let reply = wave.send_messages(PRINTF, |lane| {
        hostcall::services::printf::PrintfMessage::new(FORMAT)
            .uint(w)
            .int(lane as i64)
            .uint(c)
            .float(lane as f64 / 64.0)
            .into_words()
    });
    match reply {
        Ok(reply) => lanes.filter(|&l| reply.lane(l) != [line(l).len() as u64, 0]).count() as u64,
        Err(e) => {
            eprintln!("wave {w} call {c}: printf: {e}");
            lanes.count() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command as Process;

    fn parse_args(args: &[&str]) -> Result<Command<Options>, String> {
        parse(args.iter().map(std::ffi::OsString::from))
    }

    fn options(args: &[&str]) -> Options {
        match parse_args(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse_args(args) {
            Err(e) => e,
            other => panic!("{args:?} parsed: {other:?}"),
        }
    }

    #[test]
    fn defaults_and_values() {
        let o = options(&[]);
        assert_eq!((o.waves, o.lanes, o.calls, o.packets, o.protocol), (16, 64, 2000, 16, Protocol::Stack));
        assert_eq!(options(&["--waves", "1"]).packets, 2, "at least 2 packets by default");
        let o = options(&["--waves=8", "--lanes", "3", "--packets", "2", "--protocol", "phase", "--spin"]);
        assert_eq!((o.waves, o.lanes, o.packets, o.protocol, o.spin), (8, 3, 2, Protocol::Phase, true));
        assert_eq!(options(&["--calls", "0"]).calls, 0);
        assert_eq!(options(&["--protocol", "line"]).protocol, Protocol::Line);
        assert_eq!(options(&["--protocol", "rpc", "--lanes", "32"]).protocol, Protocol::Rpc { lanes: 32 });
        assert_eq!(options(&["--protocol", "rpc"]).protocol, Protocol::Rpc { lanes: 64 });
        assert!(options(&["--progress"]).progress && !options(&[]).progress);
        assert!(matches!(parse_args(&["--waves", "3", "--help"]), Ok(Command::Help)));
        assert!(matches!(parse_args(&["-h"]), Ok(Command::Help)));
    }

    #[test]
    fn errors_name_the_flag_and_the_value() {
        assert_eq!(error(&["--waves", "abc"]), "--waves: 'abc' is not a number in 1..=1024");
        assert_eq!(error(&["--bogus"]), "unknown flag '--bogus'");
        assert_eq!(error(&["stray"]), "unexpected argument 'stray'");
        assert_eq!(error(&["--protocol", "tcp"]), "--protocol: 'tcp' is not one of stack, phase, line, rpc");
        assert!(error(&["--lanes", "4294967297"]).starts_with("--lanes: '4294967297'"));
        assert!(error(&["--lanes", "0"]).starts_with("--lanes: '0'"));
        assert!(error(&["--lanes", "65"]).starts_with("--lanes: '65'"));
        assert!(error(&["--packets", "1"]).contains("2..="));
        assert!(error(&["--waves"]).starts_with("--waves: "), "a missing value");
        assert!(error(&["--spin=yes"]).contains("--spin"), "a value for a switch");
    }

    /// The built example itself: `--help` on stdout with exit 0, a bad flag with exit 2, and the
    /// inputs that used to panic. `cargo test` builds examples only as test harnesses, so the
    /// program must be built first; `./run-tests` does, then runs this test with `--ignored`. A
    /// program missing or older than its sources fails the test.
    #[test]
    #[ignore = "needs the built program: cargo build -p hostcall --example waves, then cargo test -p hostcall --example waves -- --ignored (./run-tests does)"]
    fn the_binary_exits_as_documented() {
        let exe =
            std::env::current_exe().unwrap().with_file_name(format!("waves{}", std::env::consts::EXE_SUFFIX));
        let modified = |path: &std::path::Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
        let sources = ["examples/waves.rs", "examples/cli/mod.rs", "examples/cli/progress.rs"]
            .map(|source| modified(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(source)));
        let built = modified(&exe);
        assert!(
            built.is_some_and(|built| sources.iter().all(|&source| source.is_some_and(|s| s <= built))),
            "{} is missing or older than its sources: cargo build -p hostcall --example waves",
            exe.display()
        );
        let run = |args: &[&str]| Process::new(&exe).args(args).output().unwrap();
        let help = run(&["--help"]);
        assert_eq!(help.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&help.stdout).starts_with("usage: waves"));
        let bad = run(&["--bogus"]);
        assert_eq!(bad.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&bad.stderr).contains("'--bogus'"));
        for args in [
            &["--calls", "0"][..],
            &["--waves", "2", "--lanes", "2", "--calls", "3", "--printf", "1"],
            &["--waves", "6", "--lanes", "4", "--calls", "30", "--packets", "2", "--protocol", "phase"],
            &["--waves", "6", "--lanes", "4", "--calls", "30", "--packets", "2"],
            &[
                "--waves",
                "6",
                "--lanes",
                "4",
                "--calls",
                "30",
                "--packets",
                "2",
                "--protocol",
                "rpc",
                "--printf",
                "5",
            ],
        ] {
            let out = run(&[args, &["--host-memory"][..]].concat());
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{args:?}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
            assert!(stdout.contains("summary:") && stdout.contains("errors=0"), "{args:?}: {stdout}");
        }
        interrupted_runs_show_progress_and_a_partial_summary(&exe);
    }

    /// The issue's run, `--progress`, sent SIGINT after 2.5 s: progress lines on stderr, the
    /// partial summary and the counters on stdout, exit 130.
    #[cfg(unix)]
    fn interrupted_runs_show_progress_and_a_partial_summary(exe: &std::path::Path) {
        let args = ["--waves", "16", "--lanes", "64", "--calls", "20000", "--host-memory", "--progress"];
        let child = Process::new(exe)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2500));
        // SAFETY: signalling our own child process.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(i32::from(cli::progress::INTERRUPTED_EXIT)), "{stdout}\n{stderr}");
        assert!(stderr.contains("progress: ") && stderr.contains("calls/s"), "{stderr}");
        assert!(stdout.contains("summary (interrupted): calls="), "{stdout}");
        assert!(stdout.contains("refusals:") && stdout.contains("errors=0"), "{stdout}");
    }

    #[cfg(not(unix))]
    fn interrupted_runs_show_progress_and_a_partial_summary(_: &std::path::Path) {}
}
