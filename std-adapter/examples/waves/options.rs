//! The command line: [`Options`], its usage text and its parser.

use crate::cli::{self, Arg, Command};
use hostcall::buffer::Protocol;
use hostcall::core::{LANES, MAX_PACKETS};

/// What one run does, as the command line asked.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    /// Waves (threads), each calling on its own.
    pub(crate) waves: u64,
    /// Active lanes per wave.
    pub(crate) lanes: u32,
    /// Calls per wave.
    pub(crate) calls: u64,
    /// Packets in the buffer (the default: one per wave, at least 2).
    pub(crate) packets: u64,
    /// A listener that never sleeps.
    pub(crate) spin: bool,
    /// Host memory without looking for HSA.
    pub(crate) host_only: bool,
    /// Every `printf_every`-th call of each wave is a printf (0: none).
    pub(crate) printf_every: u64,
    /// The buffer's protocol (for RPC, ports as wide as `lanes`).
    pub(crate) protocol: Protocol,
    /// A progress line on stderr every second even when it is not a terminal.
    pub(crate) progress: bool,
}

pub(crate) const USAGE: &str = "\
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

Exit codes: 0 every reply was right; 1 a reply was wrong or missing, or the buffer could not be
made; 2 a bad command line (a flag, a value or a buffer geometry outside its limits); 130 stopped
by Ctrl-C (SIGINT) after printing what was done. A closed stdout (`waves | head -1`) ends the run
quietly.";

/// The most waves (threads) and calls per wave: a run of the largest is hours, not an overflow.
const MAX_WAVES: u64 = 1024;
const MAX_CALLS: u64 = 1_000_000_000;

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
            Arg::Long("protocol") => o.protocol = cli::choice(&mut parser, "--protocol", &PROTOCOLS)?,
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
    check_geometry(&o)?;
    Ok(Command::Run(o))
}

/// The buffer's geometry against the limits of its protocol (a bad one is a usage error, exit
/// 2, naming the limit): every protocol takes 2 ..= `MAX_PACKETS` packets (checked as parsed),
/// an LLVM-RPC buffer at most `MAX_PORT_COUNT` ports of 1 ..= `LANES` lanes.
fn check_geometry(o: &Options) -> Result<(), String> {
    hostcall::core::packet_count(o.packets).map_err(|e| format!("--packets: {e}"))?;
    if let Protocol::Rpc { lanes } = o.protocol {
        hostcall::core::rpc::check_geometry(o.packets, u64::from(lanes))
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
        let rpc = error(&["--protocol", "rpc", "--packets", "5000"]);
        assert!(rpc.contains("5000") && rpc.contains("4096"), "the port limit named: {rpc}");
        assert!(options(&["--protocol", "rpc", "--packets", "4096"]).packets == 4096);
    }
}
