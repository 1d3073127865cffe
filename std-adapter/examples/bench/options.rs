//! Command-line options: the full run, `--quick`, and the callgrind mode.

use hostcall::core::LANES;
use std::time::Duration;

#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) rounds: usize,
    /// Most latency samples per row and round.
    pub(crate) samples: usize,
    /// Time budget of one latency row in one round.
    pub(crate) latency_budget: Duration,
    /// Measuring window of one throughput row in one round (after a warm-up of a fifth of it).
    pub(crate) window: Duration,
    /// Packets per `listener_cost` measurement.
    pub(crate) cost_packets: u64,
    /// Throughput rows: (waves, lanes).
    pub(crate) throughput: Vec<(usize, u32)>,
    /// Crossbeam throughput client counts.
    pub(crate) crossbeam_clients: Vec<usize>,
    /// Pin each latency pair to two CPUs (the peer on one, the caller on the other).
    pub(crate) pin: bool,
    /// Run only the rows whose name contains one of these (and the floor, and the crossbeam rows
    /// the chosen throughput rows compare to). Empty: every row.
    pub(crate) only: Vec<String>,
}

impl Options {
    pub(crate) fn full() -> Self {
        Self {
            rounds: 5,
            samples: 100_000,
            latency_budget: Duration::from_millis(400),
            window: Duration::from_millis(400),
            cost_packets: 20_000,
            throughput: [1, 2, 8, 64].iter().flat_map(|&w| [(w, 1), (w, 64)]).collect(),
            crossbeam_clients: vec![1, 2, 8, 64],
            pin: true,
            only: Vec::new(),
        }
    }

    pub(crate) fn quick() -> Self {
        Self {
            rounds: 2,
            samples: 2_000,
            latency_budget: Duration::from_millis(20),
            window: Duration::from_millis(25),
            cost_packets: 1_000,
            ..Self::full()
        }
    }
}

pub(crate) enum Mode {
    Bench(Options),
    /// Packets, lanes per packet.
    Callgrind(u64, u32),
}

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: bench [--quick] [--rounds N] [--no-pin] [--only NAME]... | bench --callgrind-listener N [--lanes 1..=64]"
    );
    std::process::exit(2)
}

pub(crate) fn parse() -> Mode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = if args.iter().any(|a| a == "--quick") { Options::quick() } else { Options::full() };
    let mut callgrind = None;
    let mut lanes = LANES as u32;
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| usage());
        match flag.as_str() {
            "--quick" => {}
            "--no-pin" => options.pin = false,
            "--rounds" => options.rounds = value().max(1) as usize,
            "--only" => options.only.push(args.next().unwrap_or_else(|| usage())),
            "--callgrind-listener" => callgrind = Some(value()),
            "--lanes" => lanes = value().clamp(1, LANES as u64) as u32,
            _ => usage(),
        }
    }
    match callgrind {
        Some(packets) => Mode::Callgrind(packets, lanes),
        None => Mode::Bench(options),
    }
}
