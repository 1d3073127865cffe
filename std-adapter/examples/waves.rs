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
//! `--printf N`: every N-th call of each wave is instead a printf from every lane of the wave,
//! through the PRINTF message stream, printed to stdout; the reply (characters printed) is checked.

use hostcall::buffer::Protocol;
use hostcall::core::dispatch::{FUNCTION_CALL, PRINTF};
use hostcall::core::SLOT_WORDS;
use hostcall::prelude::*;
use hostcall::serve::registry::PacketService;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ADD: u32 = 100;
const LANE_SUM: u32 = 101;

struct Options {
    waves: u64,
    lanes: u32,
    calls: u64,
    packets: u64,
    spin: bool,
    host_only: bool,
    printf_every: u64,
    protocol: Protocol,
}

fn usage() -> ! {
    eprintln!("usage: waves [--waves W] [--lanes 1..=64] [--calls C] [--packets P (default W)] [--spin] [--host-memory] [--printf EVERY_NTH_CALL] [--protocol stack|phase|line]");
    std::process::exit(2)
}

fn parse() -> Options {
    let mut o = Options {
        waves: 16,
        lanes: 64,
        calls: 2000,
        packets: 0,
        spin: false,
        host_only: false,
        printf_every: 0,
        protocol: Protocol::Stack,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--waves" => o.waves = value(),
            "--lanes" => o.lanes = value() as u32,
            "--calls" => o.calls = value(),
            "--packets" => o.packets = value(),
            "--spin" => o.spin = true,
            "--host-memory" => o.host_only = true,
            "--printf" => o.printf_every = value(),
            "--protocol" => {
                o.protocol = match args.next().as_deref() {
                    Some("stack") => Protocol::Stack,
                    Some("phase") => Protocol::Phase,
                    Some("line") => Protocol::Line,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    if o.waves == 0 || !(1..=64).contains(&o.lanes) {
        usage();
    }
    if o.packets == 0 {
        o.packets = o.waves.max(2);
    }
    o
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
    let o = parse();
    // HSA fine-grained memory where ROCm and a GPU are present, else host memory (the reason is
    // printed); `--host-memory` skips the detection.
    let backend = if o.host_only {
        hostcall::backend::Backend::host("--host-memory given", None)
    } else {
        // The phase and line protocols need no platform atomics, so HSA memory is usable without them.
        let atomics = match o.protocol {
            Protocol::Stack => hostcall::backend::hsa::AtomicsRequirement::Required,
            Protocol::Phase | Protocol::Line => hostcall::backend::hsa::AtomicsRequirement::NotRequired,
        };
        hostcall::backend::detect_with(&hostcall::backend::DetectOptions { atomics, ..Default::default() })
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
    let buffer = Arc::new(backend.buffer(o.packets, o.protocol, doorbell).expect("buffer"));
    listener.add_buffer(buffer.clone()).unwrap();
    println!(
        "waves: backend={} ({}), protocol={}, listener={}, waves={} lanes={} calls={} packets={}",
        backend.kind,
        backend.reason,
        match o.protocol {
            Protocol::Stack => "stack",
            Protocol::Phase => "phase",
            Protocol::Line => "line",
        },
        if o.spin { "spinning" } else { "blocking" },
        o.waves,
        o.lanes,
        o.calls,
        o.packets
    );

    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let progress = show_progress(o.waves * o.calls, done.clone(), finished.clone());
    let started = Instant::now();
    let threads: Vec<_> = (0..o.waves)
        .map(|w| {
            let wave = Wave::new(buffer.clone(), o.lanes);
            let (done, errors, calls, printf_every) = (done.clone(), errors.clone(), o.calls, o.printf_every);
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(calls as usize);
                for c in 0..calls {
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
    finished.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    let stats = listener.shutdown();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
    let calls = o.waves * o.calls;
    let lane_calls = calls * u64::from(o.lanes);
    let errors = errors.load(Ordering::Relaxed) + stats.total().errors;
    let missing = (o.waves * o.calls).saturating_sub(stats.total().packets);
    println!(
        "summary: calls={calls} lane_calls={lane_calls} errors={} p50_ns={} p99_ns={} calls_per_s={:.0}",
        errors + missing,
        pct(0.5),
        pct(0.99),
        calls as f64 / elapsed.as_secs_f64()
    );
    if errors + missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Every lane of `wave` prints one line through PRINTF; returns the number of wrong replies.
fn print_from_lanes(wave: &Wave, w: u64, c: u64) -> u64 {
    let line = |lane: usize| format!("[wave {w} lane {lane}] call {c}: {:.3}\n", lane as f64 / 64.0);
    let reply = wave.send_messages(PRINTF, |lane| {
        hostcall::services::printf::PrintfMessage::new(b"[wave %llu lane %d] call %llu: %.3f\n")
            .uint(w)
            .int(lane as i64)
            .uint(c)
            .float(lane as f64 / 64.0)
            .into_words()
    });
    let lanes = (0..64usize).filter(|&l| wave.activemask() >> l & 1 == 1);
    match reply {
        Ok(reply) => lanes.filter(|&l| reply.lane(l) != [line(l).len() as u64, 0]).count() as u64,
        Err(e) => {
            eprintln!("wave {w} call {c}: printf: {e}");
            lanes.count() as u64
        }
    }
}

/// A progress line on a terminal, for runs longer than a second.
fn show_progress(
    total: u64,
    done: Arc<AtomicU64>,
    finished: Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(std::thread::spawn(move || {
        let started = Instant::now();
        let mut shown = false;
        while !finished.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            if started.elapsed() > Duration::from_secs(1) {
                let n = done.load(Ordering::Relaxed);
                eprint!("\r{n}/{total} calls ({:.0}%)", n as f64 * 100.0 / total as f64);
                shown = true;
            }
        }
        if shown {
            eprintln!();
        }
    }))
}
