//! Command-line options, and the wait policies the kernels poll with.

use crate::cli::{self, Arg, Command};
use std::ffi::OsString;
use std::path::PathBuf;

/// How waiting warps poll (the kernels' wait-policy arguments).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    pub(crate) name: &'static str,
    pub(crate) spin_ns: u32,
    pub(crate) min_sleep_ns: u32,
    pub(crate) max_sleep_ns: u32,
    pub(crate) poll_stagger_ns: u32,
}

/// Spin for up to 50 us before sleeping: a lone warp's reply comes within that.
pub(crate) const LATENCY: Policy =
    Policy { name: "latency", spin_ns: 50_000, min_sleep_ns: 256, max_sleep_ns: 4_096, poll_stagger_ns: 500 };
/// Poll rarely: with a thousand warps queued, a reply takes 100s of us, and every poll is a PCIe
/// read that competes with the requests and replies.
pub(crate) const THROUGHPUT: Policy = Policy {
    name: "throughput",
    spin_ns: 2_000,
    min_sleep_ns: 1_000,
    max_sleep_ns: 32_000,
    poll_stagger_ns: 500,
};

/// The wire protocols the benchmark measures (`--protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    /// PROTOCOL.md section 2.
    Phase,
    /// PROTOCOL.md section 9.
    Line,
    /// LLVM libc's GPU RPC (`include/hostcall_cuda_rpc.cuh`).
    Rpc,
}

impl Wire {
    /// Its name on the command line and in the output.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wire::Phase => "phase",
            Wire::Line => "line",
            Wire::Rpc => "rpc",
        }
    }
}

const WIRES: [(&str, Wire); 3] = [("phase", Wire::Phase), ("line", Wire::Line), ("rpc", Wire::Rpc)];

#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) module: PathBuf,
    pub(crate) bench: bool,
    /// The protocols `--bench` measures.
    pub(crate) protocols: Vec<Wire>,
    pub(crate) threads: Vec<usize>,
    pub(crate) warps: Vec<u32>,
    pub(crate) repeat: usize,
    /// How many GPUs (`None`: every visible one).
    pub(crate) gpus: Option<usize>,
    /// `--scaling`: the multi-GPU table (one GPU against all) and latency idle vs loaded.
    pub(crate) scaling: bool,
    /// Listener threads per GPU for `--scaling`.
    pub(crate) scaling_threads: Vec<usize>,
    /// Warps per GPU for `--scaling`.
    pub(crate) scaling_warps: Vec<u32>,
    /// `--puts`: only the `puts` rows (every lane of `--warps` warps, `--threads` listener
    /// threads), after the checks.
    pub(crate) puts: bool,
}

pub(crate) const USAGE: &str = "\
usage: cuda_waves [--module FILE] [--gpus N] [--bench] [--protocol LIST] [--threads LIST] [--warps LIST]
                  [--repeat N] [--scaling] [--scaling-threads LIST] [--scaling-warps LIST] [--puts]

Real GPU warps making hostcalls against this crate's listener (CUDA: the phase, line and LLVM
libc RPC protocols).

  --module FILE     the kernels' cubin [kernels.cubin]
  --bench           also the floor, latency variants and throughput table
  --protocol LIST   the protocols --bench measures, of phase, line, rpc [phase,line,rpc]
  --threads LIST    listener threads of the throughput table, each 1..=64 [1,2,4,8]
  --warps LIST      warp counts, each 1..=1048576 [1,32,1056,4224]
  --repeat N        runs per throughput cell, 1..=100 [3]
  --gpus N          serve (and check) the first N GPUs, 1..=64 [every visible one]
  --scaling         GPU 0 alone against all GPUs at once, and latency idle vs loaded
  --scaling-threads LIST  listener threads per GPU for --scaling, each 1..=64 [1,2,4,8,16]
  --scaling-warps LIST    warps per GPU for --scaling, each 1..=1048576 [1056,4224]
  --puts            LLVM libc's puts from every lane of --warps warps, --threads listener threads
  -h, --help        this text

Exits 0 when every check passed, 1 when one failed, 2 for a bad command line, 3 when no CUDA
device is found (nothing was checked).";

/// Parses the command line (without the program name).
pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command<Options>, String> {
    let mut o = Options {
        module: PathBuf::from("kernels.cubin"),
        bench: false,
        protocols: WIRES.iter().map(|&(_, wire)| wire).collect(),
        threads: vec![1, 2, 4, 8],
        warps: vec![1, 32, 1056, 4224],
        repeat: 3,
        gpus: None,
        scaling: false,
        scaling_threads: vec![1, 2, 4, 8, 16],
        scaling_warps: vec![1056, 4224],
        puts: false,
    };
    let mut parser = cli::parser(args);
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Arg::Long("module") => o.module = parser.value().map_err(|e| format!("--module: {e}"))?.into(),
            Arg::Long("bench") => o.bench = true,
            Arg::Long("protocol") => {
                let value = cli::string(&mut parser, "--protocol")?;
                o.protocols = value.split(',').map(wire).collect::<Result<_, _>>()?;
            }
            Arg::Long("threads") => o.threads = cli::list(&mut parser, "--threads", 1..=64)?,
            Arg::Long("warps") => o.warps = cli::list(&mut parser, "--warps", 1..=1 << 20)?,
            Arg::Long("repeat") => o.repeat = cli::number(&mut parser, "--repeat", 1..=100)?,
            Arg::Long("gpus") => o.gpus = Some(cli::number(&mut parser, "--gpus", 1..=64)?),
            Arg::Long("scaling") => o.scaling = true,
            Arg::Long("puts") => o.puts = true,
            Arg::Long("scaling-threads") => {
                o.scaling_threads = cli::list(&mut parser, "--scaling-threads", 1..=64)?
            }
            Arg::Long("scaling-warps") => {
                o.scaling_warps = cli::list(&mut parser, "--scaling-warps", 1..=1 << 20)?
            }
            Arg::Long("help") | Arg::Short('h') => return Ok(Command::Help),
            other => return Err(cli::unexpected(other)),
        }
    }
    Ok(Command::Run(o))
}

/// The protocol named `name`.
fn wire(name: &str) -> Result<Wire, String> {
    match WIRES.iter().find(|(n, _)| *n == name) {
        Some(&(_, wire)) => Ok(wire),
        None => Err(format!("--protocol: '{name}' is not one of phase, line, rpc")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Command<Options>, String> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn options_and_errors() {
        let Ok(Command::Run(o)) =
            parse_args(&["--module", "k.cubin", "--bench", "--threads", "1,3", "--warps=7"])
        else {
            panic!("not parsed")
        };
        assert_eq!(
            (o.module, o.bench, o.threads, o.warps, o.repeat),
            ("k.cubin".into(), true, vec![1, 3], vec![7], 3)
        );
        let Ok(Command::Run(o)) = parse_args(&["--gpus", "2", "--scaling", "--scaling-threads", "1,16"])
        else {
            panic!("not parsed")
        };
        assert_eq!(
            (o.gpus, o.scaling, o.scaling_threads, o.scaling_warps),
            (Some(2), true, vec![1, 16], vec![1056, 4224])
        );
        let Ok(Command::Run(o)) = parse_args(&["--protocol", "rpc,phase"]) else { panic!("not parsed") };
        assert_eq!(o.protocols, vec![Wire::Rpc, Wire::Phase]);
        assert!(matches!(parse_args(&["-h"]), Ok(Command::Help)));
        assert_eq!(
            parse_args(&["--protocol", "rpc,stack"]).map(|_| ()).unwrap_err(),
            "--protocol: 'stack' is not one of phase, line, rpc"
        );
        let error = |args: &[&str]| parse_args(args).map(|_| ()).unwrap_err();
        assert_eq!(error(&["--gpus", "0"]), "--gpus: '0' is not a number in 1..=64");
        assert_eq!(error(&["--warps", "1,0"]), "--warps: '0' is not a number in 1..=1048576");
        assert_eq!(error(&["--threads", "2,,4"]), "--threads: '' is not a number in 1..=64");
        assert_eq!(error(&["--repeat", "x"]), "--repeat: 'x' is not a number in 1..=100");
        assert_eq!(error(&["--bogus"]), "unknown flag '--bogus'");
    }
}
