//! Command-line options, and the wait policies the kernels poll with.

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

pub(crate) struct Options {
    pub(crate) module: PathBuf,
    pub(crate) bench: bool,
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
}

pub(crate) fn usage() -> ! {
    eprintln!(
        "usage: cuda_waves [--module kernels.cubin] [--gpus N] [--bench] [--threads 1,2,4,8] [--warps 1,32,1056,4224]\n\
         \x20                 [--repeat 3] [--scaling] [--scaling-threads 1,2,4,8,16] [--scaling-warps 1056,4224]"
    );
    std::process::exit(2)
}

pub(crate) fn list<T: std::str::FromStr>(v: Option<String>) -> Vec<T> {
    v.unwrap_or_else(|| usage()).split(',').map(|x| x.parse().unwrap_or_else(|_| usage())).collect()
}

pub(crate) fn parse() -> Options {
    let mut o = Options {
        module: PathBuf::from("kernels.cubin"),
        bench: false,
        threads: vec![1, 2, 4, 8],
        warps: vec![1, 32, 1056, 4224],
        repeat: 3,
        gpus: None,
        scaling: false,
        scaling_threads: vec![1, 2, 4, 8, 16],
        scaling_warps: vec![1056, 4224],
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--module" => o.module = PathBuf::from(args.next().unwrap_or_else(|| usage())),
            "--bench" => o.bench = true,
            "--threads" => o.threads = list(args.next()),
            "--warps" => o.warps = list(args.next()),
            "--gpus" => {
                o.gpus = Some(
                    args.next().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or_else(|| usage()),
                )
            }
            "--scaling" => o.scaling = true,
            "--scaling-threads" => o.scaling_threads = list(args.next()),
            "--scaling-warps" => o.scaling_warps = list(args.next()),
            "--repeat" => {
                o.repeat =
                    args.next().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    o
}
