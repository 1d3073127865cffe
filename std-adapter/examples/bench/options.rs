//! Command-line options: the full run, `--quick`, and the callgrind mode.

use crate::cli::{self, Arg, Command};
use hostcall::Protocol;
use hostcall_core::LANES;
use std::ffi::OsString;
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
    /// Run only the rows whose name contains one of these (and the floor, the crossbeam rows the
    /// chosen throughput rows compare to, and the phase rows the chosen listener-cost rows
    /// compare to). Empty: every row.
    pub(crate) only: Vec<String>,
    /// A progress line on stderr every second even when it is not a terminal.
    pub(crate) progress: bool,
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
            progress: false,
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

#[derive(Debug)]
pub(crate) enum Mode {
    Bench(Options),
    /// The wait policies' rows (`gaps.rs`); `true`: the short run.
    Gaps(Options, bool),
    /// Packets, lanes per packet, the buffer's protocol, what serves them.
    Callgrind(u64, u32, Protocol, Through),
}

/// What serves the callgrind loop's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Through {
    /// `Poller::poll_once` on the producer's own thread, through `Services::dispatcher`.
    Poller,
    /// A real `Listener` thread (its watch, its RPC hosts), woken by a ring for every packet.
    Listener,
    /// The same listener rung as often with no packet: its empty polls, to subtract.
    ListenerRingsOnly,
    /// The same listener serving RPC `puts` calls (`WRITE_TO_STDOUT_NEWLINE`, 80 bytes a lane of
    /// `--lanes`), output to `/dev/null`.
    ListenerPuts,
}

pub(crate) const USAGE: &str = "\
usage: bench [--quick] [--rounds N] [--no-pin] [--only NAME]...
       bench --gaps [--quick] [--no-pin]
       bench --callgrind-listener N [--lanes L] [--protocol stack|phase|line|rpc]
             [--through poller|listener|listener-rings-only|listener-puts]

Hostcall round trips and throughput beside a ping-pong floor and crossbeam-channel.

  --quick                   short rounds and windows (the CI smoke run)
  --rounds N                rounds, 1..=1000 [5; 2 with --quick]
  --progress                a progress line on stderr every second (default: only on a terminal);
                            Ctrl-C stops after the row in progress, prints the table of the
                            rounds completed, and exits 130
  --no-pin                  leave the latency pairs to the scheduler
  --only NAME               only the rows whose name contains NAME (repeatable; the floor and the
                            rows compared to, crossbeam or phase, always run); NAME must match
                            some row
  --gaps                    only the wait policies' rows: one call after idle gaps of 0.1, 1,
                            20 and 1000 ms per policy, and the idle listener's CPU (about
                            100 s; a few seconds with --quick)
  --callgrind-listener N    only the listener-cost loop, N packets (1..=1000000000), for callgrind
  --lanes L                 lanes per packet of that loop, 1..=64 [64]
  --protocol P              that loop's buffer: stack, phase, line or rpc (one port of L
                            lanes, the core's RPC client as the producer) [stack]
  --through T               what serves that loop: `poller` (poll_once on the producer's
                            thread, through Services::dispatcher), `listener` (a Listener
                            thread, rung for every packet), or `listener-rings-only` (that
                            listener rung N times with no packet: its empty polls), or
                            `listener-puts` (that listener serving N RPC `puts` calls of L
                            lanes, 80 bytes a lane, to /dev/null; any --protocol) [poller]
  -h, --help                this text";

/// Parses the command line (without the program name).
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command<Mode>, String> {
    let args: Vec<OsString> = args.into_iter().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut options = if quick { Options::quick() } else { Options::full() };
    let mut callgrind = None;
    let mut lanes = None;
    let mut protocol = None;
    let mut through = None;
    let mut gaps = false;
    let mut parser = cli::parser(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Arg::Long("quick") => {}
            Arg::Long("gaps") => gaps = true,
            Arg::Long("no-pin") => options.pin = false,
            Arg::Long("progress") => options.progress = true,
            Arg::Long("rounds") => options.rounds = cli::number(&mut parser, "--rounds", 1..=1000)?,
            Arg::Long("only") => options.only.push(cli::string(&mut parser, "--only")?),
            Arg::Long("callgrind-listener") => {
                callgrind = Some(cli::number(&mut parser, "--callgrind-listener", 1..=1_000_000_000)?)
            }
            Arg::Long("lanes") => lanes = Some(cli::number(&mut parser, "--lanes", 1..=LANES as u32)?),
            Arg::Long("protocol") => {
                protocol = Some(cli::choice(
                    &mut parser,
                    "--protocol",
                    &[
                        ("stack", Protocol::Stack),
                        ("phase", Protocol::Phase),
                        ("line", Protocol::Line),
                        // Its lanes per port are the packet's (`--lanes`), set below.
                        ("rpc", Protocol::Rpc { lanes: 0 }),
                    ],
                )?)
            }
            Arg::Long("through") => {
                through = Some(cli::choice(
                    &mut parser,
                    "--through",
                    &[
                        ("poller", Through::Poller),
                        ("listener", Through::Listener),
                        ("listener-rings-only", Through::ListenerRingsOnly),
                        ("listener-puts", Through::ListenerPuts),
                    ],
                )?)
            }
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            other => return Err(cli::unexpected(other)),
        }
    }
    let rows = row_names(&options);
    if let Some(only) = options.only.iter().find(|only| !rows.iter().any(|row| row.contains(only.as_str()))) {
        return Err(format!("--only: no row name contains '{only}'; the rows are: {}", rows.join(", ")));
    }
    if callgrind.is_none() && through.is_some() {
        return Err("--through: only with --callgrind-listener".into());
    }
    if gaps {
        if callgrind.is_some() || lanes.is_some() || protocol.is_some() || through.is_some() {
            return Err("--gaps: not with --callgrind-listener and its flags".into());
        }
        return Ok(Command::Run(Mode::Gaps(options, quick)));
    }
    Ok(Command::Run(match (callgrind, lanes, protocol) {
        (Some(packets), lanes, protocol) => {
            let lanes = lanes.unwrap_or(LANES as u32);
            let protocol = match protocol.unwrap_or(Protocol::Stack) {
                Protocol::Rpc { .. } => Protocol::Rpc { lanes },
                other => other,
            };
            Mode::Callgrind(packets, lanes, protocol, through.unwrap_or(Through::Poller))
        }
        (None, Some(_), _) => return Err("--lanes: only with --callgrind-listener".into()),
        (None, _, Some(_)) => return Err("--protocol: only with --callgrind-listener".into()),
        (None, None, None) => Mode::Bench(options),
    }))
}

/// The names of every row these options can run (`--only` left aside).
fn row_names(options: &Options) -> Vec<String> {
    let every = Options { only: Vec::new(), ..options.clone() };
    crate::rows::rows(&every).into_iter().map(|row| row.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Command<Mode>, String> {
        parse(args.iter().map(OsString::from))
    }

    fn bench(args: &[&str]) -> Options {
        match parse_args(args) {
            Ok(Command::Run(Mode::Bench(o))) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn options() {
        assert_eq!(bench(&[]).rounds, 5);
        let o =
            bench(&["--rounds", "3", "--quick", "--no-pin", "--only", "floor", "--only", "throughput_8w"]);
        assert_eq!((o.rounds, o.pin, o.only.len(), o.samples), (3, false, 2, Options::quick().samples));
        assert!(matches!(
            parse_args(&["--callgrind-listener", "10"]),
            Ok(Command::Run(Mode::Callgrind(10, 64, Protocol::Stack, Through::Poller)))
        ));
        assert!(matches!(
            parse_args(&["--callgrind-listener", "10", "--lanes", "1"]),
            Ok(Command::Run(Mode::Callgrind(10, 1, Protocol::Stack, Through::Poller)))
        ));
        assert!(matches!(
            parse_args(&["--callgrind-listener", "10", "--protocol", "line"]),
            Ok(Command::Run(Mode::Callgrind(10, 64, Protocol::Line, Through::Poller)))
        ));
        assert!(matches!(
            parse_args(&["--callgrind-listener", "10", "--lanes", "4", "--protocol", "rpc"]),
            Ok(Command::Run(Mode::Callgrind(10, 4, Protocol::Rpc { lanes: 4 }, Through::Poller)))
        ));
        assert!(matches!(
            parse_args(&["--callgrind-listener", "10", "--lanes", "1", "--through", "listener"]),
            Ok(Command::Run(Mode::Callgrind(10, 1, Protocol::Stack, Through::Listener)))
        ));
        assert!(matches!(parse_args(&["--gaps", "--quick"]), Ok(Command::Run(Mode::Gaps(_, true)))));
        assert!(matches!(parse_args(&["--help"]), Ok(Command::Help)));
    }

    #[test]
    fn errors() {
        let error = |args: &[&str]| match parse_args(args) {
            Err(e) => e,
            other => panic!("{args:?} parsed: {other:?}"),
        };
        let only = error(&["--only", "nosuchrow"]);
        assert!(
            only.starts_with("--only: no row name contains 'nosuchrow'; the rows are: floor_ping_pong, "),
            "{only}"
        );
        assert!(only.contains("listener_cost_64l"), "{only}");
        assert_eq!(error(&["--rounds", "0"]), "--rounds: '0' is not a number in 1..=1000");
        assert_eq!(error(&["--bogus"]), "unknown flag '--bogus'");
        assert!(error(&["--callgrind-listener", "1", "--lanes", "4294967297"]).starts_with("--lanes: "));
        assert!(error(&["--lanes", "3"]).contains("only with --callgrind-listener"));
        assert!(error(&["--protocol", "line"]).contains("only with --callgrind-listener"));
        assert!(error(&["--through", "listener"]).contains("only with --callgrind-listener"));
        assert!(error(&["--callgrind-listener", "1", "--protocol", "tcp"]).starts_with("--protocol: "));
    }
}
