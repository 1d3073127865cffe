//! `--scaling`: this program run once for each protocol, buffer layout and listener thread count,
//! `--rounds` times, and a table of the wave-calls/s each reached.
//!
//! Each run is a process of its own (this program, with `--protocol`, `--buffers` and `--threads`
//! set), so every run starts from nothing (its waves numbered from 0, its pool fresh) and checks
//! every reply as a plain run does; its `summary:` line gives the rate. A round runs every setup
//! and thread count once, the thread counts of one setup one after the other, so the ratio of a
//! thread count to the first is taken between runs made side by side: the table gives the median
//! over the rounds of the rate and of that ratio.

use crate::cli;
use crate::options::{self, protocol_name, Layout, Options};
use hostcall::Protocol;
use std::process::{Command as Process, ExitCode, Stdio};

/// What `--scaling` compares: every protocol and layout of `setups` with every thread count of
/// `threads`, `rounds` times, alternating.
#[derive(Debug, PartialEq)]
pub(crate) struct Scaling {
    pub(crate) threads: Vec<usize>,
    pub(crate) setups: Vec<(Protocol, Layout)>,
    pub(crate) rounds: u32,
}

impl Scaling {
    /// The setups of `protocols`: the layout `given`, else every layout that lets threads help
    /// (both for a protocol whose buffer can be striped, one buffer per thread for the stack).
    pub(crate) fn setups(protocols: &[Protocol], given: Option<Layout>) -> Vec<(Protocol, Layout)> {
        let layouts = |protocol: Protocol| match given {
            Some(layout) => vec![layout],
            None if protocol.range_capable() => vec![Layout::One, Layout::PerThread],
            None => vec![Layout::PerThread],
        };
        protocols
            .iter()
            .flat_map(|&protocol| layouts(protocol).into_iter().map(move |l| (protocol, l)))
            .collect()
    }
}

/// The arguments of one `--scaling` run: `o`'s, with `protocol`, `layout` and `threads`.
pub(crate) fn run_args(o: &Options, protocol: Protocol, layout: Layout, threads: usize) -> Vec<String> {
    let mut args: Vec<String> = [
        ("--waves", o.waves.to_string()),
        ("--lanes", o.lanes.to_string()),
        ("--calls", o.calls.to_string()),
        ("--printf", o.printf_every.to_string()),
        ("--protocol", protocol_name(protocol).to_string()),
        ("--threads", threads.to_string()),
        ("--buffers", layout.name().to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect();
    if let Some(packets) = o.packets_given {
        args.extend(["--packets".to_string(), packets.to_string()]);
    }
    let switches = [(o.spin, "--spin"), (o.host_only, "--host-memory")];
    args.extend(switches.iter().filter(|(on, _)| *on).map(|(_, flag)| flag.to_string()));
    args
}

/// How one run ended, when it gave no rate.
enum Failure {
    /// Stopped by Ctrl-C.
    Interrupted,
    /// A wrong or missing reply, or no summary: what the run printed.
    Wrong(String),
}

/// Runs the comparison `scaling` asks for with `o`'s other options; prints each run's rate on
/// stderr as it ends and the table on stdout. Exit 0 when every run's replies were right, 1 when
/// one was not (the runs stop there), 130 on Ctrl-C (the table of the rounds done).
pub(crate) fn run(o: &Options, scaling: &Scaling) -> ExitCode {
    cli::progress::catch_interrupts();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("waves: --scaling runs this program again, but its path is unknown: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "waves: scaling waves={} lanes={} calls={} printf={} listener={} rounds={} threads={:?}",
        o.waves,
        o.lanes,
        o.calls,
        o.printf_every,
        if o.spin { "spinning" } else { "blocking" },
        scaling.rounds,
        scaling.threads
    );
    // rates[setup][thread count]: one rate per round done.
    let mut rates = vec![vec![Vec::new(); scaling.threads.len()]; scaling.setups.len()];
    let (mut interrupted, mut wrong) = (false, false);
    'rounds: for round in 1..=scaling.rounds {
        for (s, &(protocol, layout)) in scaling.setups.iter().enumerate() {
            for (t, &threads) in scaling.threads.iter().enumerate() {
                let args = run_args(o, protocol, layout, threads);
                match one_run(&exe, &args) {
                    Ok(rate) => {
                        eprintln!(
                            "scaling: round {round}/{} protocol={} buffers={} threads={threads} calls_per_s={rate:.0}",
                            scaling.rounds,
                            options::protocol_name(protocol),
                            layout.name()
                        );
                        rates[s][t].push(rate);
                    }
                    Err(Failure::Interrupted) => {
                        interrupted = true;
                        break 'rounds;
                    }
                    Err(Failure::Wrong(output)) => {
                        eprintln!("waves {}: a reply was wrong or missing:\n{output}", args.join(" "));
                        wrong = true;
                        break 'rounds;
                    }
                }
            }
        }
    }
    if interrupted {
        let done: usize = rates.iter().flatten().map(Vec::len).sum();
        let asked = scaling.setups.len() * scaling.threads.len() * scaling.rounds as usize;
        println!("scaling (interrupted): {done} of {asked} runs done");
    }
    print!("{}", table(scaling, &rates));
    if interrupted {
        ExitCode::from(cli::progress::INTERRUPTED_EXIT)
    } else if wrong {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs this program with `args`: the wave-calls/s of its `summary:` line.
fn one_run(exe: &std::path::Path, args: &[String]) -> Result<f64, Failure> {
    let out = Process::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Failure::Wrong(format!("could not start {}: {e}", exe.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let interrupted = out.status.code() == Some(i32::from(cli::progress::INTERRUPTED_EXIT));
    if interrupted || cli::progress::interrupted() {
        return Err(Failure::Interrupted);
    }
    let rate = stdout.lines().find_map(|line| line.strip_prefix("summary: ")).and_then(summary_rate);
    match rate {
        Some(rate) if out.status.success() => Ok(rate),
        _ => Err(Failure::Wrong(format!("{}\n{stdout}{}", out.status, String::from_utf8_lossy(&out.stderr)))),
    }
}

/// The `calls_per_s` of a summary line (what follows `summary: `).
fn summary_rate(summary: &str) -> Option<f64> {
    summary.split(' ').find_map(|field| field.strip_prefix("calls_per_s=")).and_then(|v| v.parse().ok())
}

/// The median of `values` (the mean of the middle two for an even count); `None` for none.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The table: per setup (protocol and layout) and thread count, the median rate, the median of the rounds' ratios to
/// the first thread count's rate of the same round, and every round's rate.
fn table(scaling: &Scaling, rates: &[Vec<Vec<f64>>]) -> String {
    let first = scaling.threads[0];
    let mut text = format!(
        "{:<9} {:<11} {:>7} {:>15} {:>14}  wave-calls/s of each round (M)\n",
        "protocol",
        "buffers",
        "threads",
        "wave-calls/s",
        format!("x threads={first}")
    );
    for (s, &(protocol, layout)) in scaling.setups.iter().enumerate() {
        for (t, &threads) in scaling.threads.iter().enumerate() {
            let runs = &rates[s][t];
            let ratios: Vec<f64> = runs.iter().zip(&rates[s][0]).map(|(rate, base)| rate / base).collect();
            let each: Vec<String> = runs.iter().map(|rate| format!("{:.3}", rate / 1e6)).collect();
            let row = format!(
                "{:<9} {:<11} {threads:>7} {:>15} {:>14}  {}",
                options::protocol_name(protocol),
                layout.name(),
                median(runs).map_or("-".to_string(), |m| format!("{m:.0}")),
                median(&ratios).map_or("-".to_string(), |m| format!("{m:.3}")),
                each.join(" ")
            );
            text += row.trim_end();
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Command;

    fn options(args: &[&str]) -> Options {
        match options::parse(args.iter().map(std::ffi::OsString::from)) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn medians_and_summary_rates() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let line = "calls=32000 lane_calls=2048000 errors=0 p50_ns=1 p99_ns=2 calls_per_s=28522";
        assert_eq!(summary_rate(line), Some(28522.0));
        assert_eq!(summary_rate("calls=0 errors=0"), None);
    }

    #[test]
    fn a_scaling_run_keeps_the_other_options() {
        let o = options(&["--scaling", "--waves", "7", "--lanes", "3", "--calls", "9", "--packets", "4"]);
        let o = Options { printf_every: 5, spin: true, host_only: true, ..o };
        let args = run_args(&o, Protocol::Rpc { lanes: 64 }, Layout::PerThread, 6);
        let run = options(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!((run.waves, run.lanes, run.calls, run.packets_given), (7, 3, 9, Some(4)));
        assert_eq!((run.printf_every, run.spin, run.host_only, run.progress), (5, true, true, false));
        assert_eq!(
            (run.protocol, run.layout, run.threads),
            (Protocol::Rpc { lanes: 3 }, Layout::PerThread, 6)
        );
        assert_eq!(run.scaling, None);
        let o = options(&["--scaling", "--waves", "7"]);
        let run = run_args(&o, Protocol::Stack, Layout::One, 2);
        assert!(!run.contains(&"--packets".to_string()), "the default packets follow the layout: {run:?}");
    }
}
