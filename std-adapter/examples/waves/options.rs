//! The command line: [`Options`], its usage text and its parser.

use crate::cli::{self, Arg, Command};
use crate::scaling::{run_args, Scaling};
use hostcall::Protocol;
use hostcall_core::{LANES, MAX_PACKETS};

/// What one run does, as the command line asked.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    /// Waves (threads), each calling on its own.
    pub(crate) waves: u64,
    /// Active lanes per wave.
    pub(crate) lanes: u32,
    /// Calls per wave.
    pub(crate) calls: u64,
    /// Packets in each buffer (the default: one per wave of the buffer, at least 2).
    pub(crate) packets: u64,
    /// `--packets` as given (`None`: the default, which depends on the buffers).
    pub(crate) packets_given: Option<u64>,
    /// Listener threads (one [`ListenerPool`](hostcall::ListenerPool)).
    pub(crate) threads: usize,
    /// How the buffers are laid out over the threads.
    pub(crate) layout: Layout,
    /// `--buffers` as given (`None`: the protocol's default, [`Layout::default_for`]).
    pub(crate) layout_given: Option<Layout>,
    /// A listener that never sleeps.
    pub(crate) spin: bool,
    /// Host memory without looking for HSA.
    pub(crate) host_only: bool,
    /// Every `printf_every`-th call of each wave is a printf (0: none).
    pub(crate) printf_every: u64,
    /// The buffer's protocol (for RPC, ports as wide as `lanes`).
    pub(crate) protocol: Protocol,
    /// `--protocol` was given (else `--scaling` runs every protocol).
    pub(crate) protocol_given: bool,
    /// A progress line on stderr every second even when it is not a terminal.
    pub(crate) progress: bool,
    /// `--scaling`: runs of this program to compare, instead of one run.
    pub(crate) scaling: Option<Scaling>,
}

/// How a run's buffers are laid out over its listener threads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Layout {
    /// One buffer for every wave, given to the pool: a phase, line or RPC buffer's packets (ports)
    /// striped over the threads, a stack buffer whole to one thread.
    One,
    /// One buffer per thread, each served whole by its thread; the waves split between the
    /// buffers in contiguous blocks.
    PerThread,
}

impl Layout {
    /// The layout that lets every thread serve with `protocol`: a stack buffer cannot be split,
    /// so one per thread; the other protocols' one buffer striped, as a GPU's is.
    pub(crate) fn default_for(protocol: Protocol) -> Self {
        if protocol.range_capable() {
            Self::One
        } else {
            Self::PerThread
        }
    }

    /// How many buffers a run of `threads` threads makes.
    pub(crate) fn buffers(self, threads: usize) -> usize {
        match self {
            Self::One => 1,
            Self::PerThread => threads,
        }
    }

    /// The name `--buffers` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::One => "one",
            Self::PerThread => "per-thread",
        }
    }
}

pub(crate) const USAGE: &str = "\
usage: waves [OPTIONS]

Emulated waves making hostcalls through a listener; every reply is checked.

  --waves W            waves (threads), 1..=1024 [16]
  --lanes L            active lanes per wave, 1..=64 [64]
  --calls C            calls per wave, 0..=1000000000 [2000]
  --packets P          packets in each buffer, 2..=16777216 [the buffer's waves, at least 2];
                       fewer packets than waves is allowed (waves wait for a free one); every
                       protocol needs >= 2
  --protocol NAME      stack (ROCm's default ABI), phase, line (ours), or rpc (LLVM libc's
                       GPU RPC, ports as wide as --lanes, at most 4096 packets) [stack]
  --threads N          listener threads (one ListenerPool, one service registry), 1..=64 [1]
  --buffers LAYOUT     how the buffers meet the threads [stack: per-thread; the others: one]:
                       one: one buffer for every wave. A phase, line or rpc buffer is split
                         between the threads in stripes of multiples of 16 packets, so at most
                         ceil(P/16) threads serve (wave w claims from packet w). A stack buffer
                         cannot be split: one thread serves it and more threads cannot help.
                       per-thread: one buffer per thread (P packets each), served whole by its
                         thread; the waves split between the buffers in contiguous blocks
  --scaling            instead of one run, runs this program with each --threads value (a list
                       here [1,2,4,8]), each protocol (the one --protocol names, else all four)
                       and each layout (the one --buffers names, else both for phase, line and
                       rpc, per-thread for stack), --rounds times, alternating; prints for each
                       the median wave-calls/s and the median of each round's ratio to the
                       first thread count's rate in the same round
  --rounds R           with --scaling: runs of each thread count and protocol, 1..=1000 [5]
  --printf N           every N-th call of each wave is a printf from all its lanes (0: none) [0]
  --spin               a listener that never sleeps
  --host-memory        host memory, without looking for HSA
  --progress           a progress line on stderr every second even when it is not a terminal
  -h, --help           this text

Exit codes: 0 every reply was right; 1 a reply was wrong or missing, or the buffer could not be
made (with --scaling: in any run); 2 a bad command line (a flag, a value or a buffer geometry
outside its limits); 130 stopped by Ctrl-C (SIGINT) after printing what was done. A closed stdout
(`waves | head -1`) ends the run quietly.";

/// The most waves (threads) and calls per wave: a run of the largest is hours, not an overflow.
const MAX_WAVES: u64 = 1024;
const MAX_CALLS: u64 = 1_000_000_000;
/// The most listener threads: more than any host this runs on has cores for.
const MAX_THREADS: usize = 64;
/// The most `--scaling` rounds.
const MAX_ROUNDS: u32 = 1000;
/// The thread counts `--scaling` compares unless `--threads` names others.
const SCALING_THREADS: [usize; 4] = [1, 2, 4, 8];

/// The layouts `--buffers` names.
const LAYOUTS: [(&str, Layout); 2] = [("one", Layout::One), ("per-thread", Layout::PerThread)];

/// The protocols `--protocol` names, as the usage spells them.
const PROTOCOLS: [(&str, Protocol); 4] = [
    ("stack", Protocol::Stack),
    ("phase", Protocol::Phase),
    ("line", Protocol::Line),
    ("rpc", Protocol::Rpc { lanes: LANES as u32 }),
];

/// `protocol`'s name on the command line.
pub(crate) fn protocol_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Stack => "stack",
        Protocol::Phase => "phase",
        Protocol::Line => "line",
        Protocol::Rpc { .. } => "rpc",
    }
}

pub(crate) fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Command<Options>, String> {
    let mut o = Options {
        waves: 16,
        lanes: 64,
        calls: 2000,
        packets: 0,
        packets_given: None,
        threads: 1,
        layout: Layout::PerThread,
        layout_given: None,
        spin: false,
        host_only: false,
        printf_every: 0,
        protocol: Protocol::Stack,
        protocol_given: false,
        progress: false,
        scaling: None,
    };
    let (mut threads, mut rounds, mut scaling) = (None, None, false);
    let mut parser = cli::parser(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Arg::Long("waves") => o.waves = cli::number(&mut parser, "--waves", 1..=MAX_WAVES)?,
            Arg::Long("lanes") => o.lanes = cli::number(&mut parser, "--lanes", 1..=LANES as u32)?,
            Arg::Long("calls") => o.calls = cli::number(&mut parser, "--calls", 0..=MAX_CALLS)?,
            Arg::Long("packets") => {
                o.packets_given = Some(cli::number(&mut parser, "--packets", 2..=u64::from(MAX_PACKETS))?)
            }
            Arg::Long("threads") => threads = Some(cli::list(&mut parser, "--threads", 1..=MAX_THREADS)?),
            Arg::Long("buffers") => o.layout_given = Some(cli::choice(&mut parser, "--buffers", &LAYOUTS)?),
            Arg::Long("scaling") => scaling = true,
            Arg::Long("rounds") => rounds = Some(cli::number(&mut parser, "--rounds", 1..=MAX_ROUNDS)?),
            Arg::Long("spin") => o.spin = true,
            Arg::Long("host-memory") => o.host_only = true,
            Arg::Long("progress") => o.progress = true,
            Arg::Long("printf") => o.printf_every = cli::number(&mut parser, "--printf", 0..=u64::MAX)?,
            Arg::Long("protocol") => {
                o.protocol = cli::choice(&mut parser, "--protocol", &PROTOCOLS)?;
                o.protocol_given = true;
            }
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            other => return Err(cli::unexpected(other)),
        }
    }
    if scaling {
        let threads = threads.unwrap_or_else(|| SCALING_THREADS.to_vec());
        o.threads = threads[0];
        let protocols: Vec<Protocol> =
            if o.protocol_given { vec![o.protocol] } else { PROTOCOLS.iter().map(|&(_, p)| p).collect() };
        let setups = Scaling::setups(&protocols, o.layout_given);
        o.scaling = Some(Scaling { threads, setups, rounds: rounds.unwrap_or(5) });
    } else {
        if rounds.is_some() {
            return Err("--rounds: only with --scaling".to_string());
        }
        match threads.as_deref() {
            None => {}
            Some(&[n]) => o.threads = n,
            Some(_) => return Err("--threads: one number, unless with --scaling".to_string()),
        }
    }
    resolve(&mut o);
    check_geometry(&o)?;
    if let Some(scaling) = &o.scaling {
        // Every run's command line is checked before the first run starts.
        for &(protocol, layout) in &scaling.setups {
            for &threads in &scaling.threads {
                parse(run_args(&o, protocol, layout, threads).into_iter().map(Into::into))?;
            }
        }
    }
    Ok(Command::Run(o))
}

/// The values that follow from the others: the layout, the packets of each buffer (by default
/// one per wave of the buffer's block, at least 2), an LLVM-RPC port as wide as the wave.
fn resolve(o: &mut Options) {
    o.layout = o.layout_given.unwrap_or(Layout::default_for(o.protocol));
    let buffers = o.layout.buffers(o.threads) as u64;
    o.packets = o.packets_given.unwrap_or(o.waves.div_ceil(buffers).max(2));
    // An LLVM-RPC port is as wide as its client's warp: here, the wave.
    if let Protocol::Rpc { lanes } = &mut o.protocol {
        *lanes = o.lanes;
    }
}

/// The buffer's geometry against the limits of its protocol (a bad one is a usage error, exit
/// 2, naming the limit): every protocol takes 2 ..= `MAX_PACKETS` packets (checked as parsed),
/// an LLVM-RPC buffer at most `MAX_PORT_COUNT` ports of 1 ..= `LANES` lanes.
fn check_geometry(o: &Options) -> Result<(), String> {
    hostcall_core::packet_count(o.packets).map_err(|e| format!("--packets: {e}"))?;
    if let Protocol::Rpc { lanes } = o.protocol {
        hostcall_core::rpc::check_geometry(o.packets, u64::from(lanes))
            .map_err(|e| format!("--packets/--lanes with --protocol rpc: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn threads_and_the_buffers_they_serve() {
        let o = options(&[]);
        assert_eq!((o.threads, o.layout, o.scaling), (1, Layout::PerThread, None));
        // A stack buffer cannot be split: one per thread, each with one packet per wave of its block.
        let o = options(&["--waves", "64", "--threads", "8"]);
        assert_eq!((o.threads, o.layout, o.packets), (8, Layout::PerThread, 8));
        let o = options(&["--waves", "64", "--threads", "8", "--protocol", "phase"]);
        assert_eq!((o.layout, o.packets), (Layout::One, 64), "one buffer, striped");
        let o =
            options(&["--waves", "10", "--threads", "4", "--protocol", "line", "--buffers", "per-thread"]);
        assert_eq!((o.layout, o.packets), (Layout::PerThread, 3));
        let o = options(&["--waves", "3", "--threads", "4", "--buffers", "per-thread"]);
        assert_eq!(o.packets, 2, "at least 2 packets");
        let o = options(&["--threads", "2", "--packets", "5", "--buffers", "one"]);
        assert_eq!((o.layout, o.packets, o.packets_given), (Layout::One, 5, Some(5)));
    }

    #[test]
    fn scaling_runs_every_setup_and_thread_count() {
        let o = options(&["--scaling"]);
        let scaling = o.scaling.as_ref().unwrap();
        assert_eq!((scaling.threads.as_slice(), scaling.rounds), (&[1, 2, 4, 8][..], 5));
        assert_eq!(scaling.setups.len(), 7, "stack per thread; phase, line and rpc both ways");
        assert_eq!(scaling.setups[0], (Protocol::Stack, Layout::PerThread));
        assert!(scaling.setups.contains(&(Protocol::Rpc { lanes: 64 }, Layout::One)));
        let o = options(&[
            "--scaling",
            "--protocol",
            "line",
            "--buffers",
            "one",
            "--threads",
            "2,3",
            "--rounds",
            "9",
        ]);
        let scaling = o.scaling.as_ref().unwrap();
        assert_eq!(scaling.setups, vec![(Protocol::Line, Layout::One)]);
        assert_eq!((scaling.threads.as_slice(), scaling.rounds, o.threads), (&[2, 3][..], 9, 2));
    }

    #[test]
    fn protocol_names_are_the_ones_parsed() {
        for (name, protocol) in PROTOCOLS {
            assert_eq!(protocol_name(protocol), name);
        }
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
        assert_eq!(error(&["--threads", "0"]), "--threads: '0' is not a number in 1..=64");
        assert_eq!(error(&["--threads", "65"]), "--threads: '65' is not a number in 1..=64");
        assert_eq!(error(&["--threads", "2,x"]), "--threads: 'x' is not a number in 1..=64");
        assert_eq!(error(&["--threads", "1,2"]), "--threads: one number, unless with --scaling");
        assert_eq!(error(&["--rounds", "3"]), "--rounds: only with --scaling");
        assert!(error(&["--scaling", "--rounds", "0"]).starts_with("--rounds: '0'"));
        assert_eq!(error(&["--buffers", "two"]), "--buffers: 'two' is not one of one, per-thread");
        let rpc = error(&["--scaling", "--packets", "5000"]);
        assert!(rpc.contains("rpc") && rpc.contains("4096"), "every run checked before the first: {rpc}");
        let rpc = error(&["--protocol", "rpc", "--packets", "5000"]);
        assert!(rpc.contains("5000") && rpc.contains("4096"), "the port limit named: {rpc}");
        assert!(options(&["--protocol", "rpc", "--packets", "4096"]).packets == 4096);
    }
}
