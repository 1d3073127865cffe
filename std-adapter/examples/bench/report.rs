//! The report: spreads over rounds, ratios, the summary lines, the table and the goals.

use crate::measure::{Sample, Timed};
use crate::rows::{phase_row, Compare, Row};

/// Median and range of some values.
#[derive(Clone, Copy)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Spread {
    pub(crate) fn of(mut v: Vec<f64>) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Self { median, min: v[0], max: v[n - 1] })
    }

    pub(crate) fn show(&self, digits: usize) -> String {
        format!("{:.d$} ({:.d$}..{:.d$})", self.median, self.min, self.max, d = digits)
    }

    pub(crate) fn show_si(&self) -> String {
        format!("{} ({}..{})", si(self.median), si(self.min), si(self.max))
    }
}

pub(crate) fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// What the report prints for a row: each value as a spread over rounds.
pub(crate) struct Summary {
    pub(crate) name: String,
    pub(crate) sample: Sample,
    pub(crate) first: Spread,
    pub(crate) second: Option<Spread>,
    pub(crate) ratio: Option<Spread>,
    /// p99 ratio to the floor's p99, for latency rows.
    pub(crate) ratio_p99: Option<Spread>,
    /// Share of round trips kept (latency rows).
    pub(crate) clean: Option<Spread>,
    /// CPU ns per call, and its ratio to crossbeam's at the same client count (throughput rows).
    pub(crate) cpu: Option<Spread>,
    pub(crate) cpu_ratio: Option<Spread>,
}

pub(crate) fn summarise(rows: &[Row]) -> Vec<Summary> {
    let floor = &rows[0].samples;
    let crossbeam = |clients: usize| rows.iter().find(|r| r.clients == Some(clients)).map(|r| &r.samples);
    rows.iter()
        .map(|row| {
            let per_round = |f: &dyn Fn(&Sample) -> f64| Spread::of(row.samples.iter().map(f).collect());
            let latency = |s: &Sample, which: usize| match *s {
                Sample::Latency { p50, p99, clean } => [p50, p99, clean][which],
                _ => f64::NAN,
            };
            let ratio_to = |other: &[Sample], f: &dyn Fn(&Sample) -> f64| {
                Spread::of(row.samples.iter().zip(other).map(|(s, o)| f(s) / f(o)).collect())
            };
            let clean = match row.samples[0] {
                Sample::Latency { .. } => per_round(&|s: &Sample| latency(s, 2)),
                _ => None,
            };
            let (mut cpu, mut cpu_ratio) = (None, None);
            let (first, second, ratio, ratio_p99) = match row.samples[0] {
                Sample::Latency { .. } => {
                    let p50 = |s: &Sample| latency(s, 0);
                    let p99 = |s: &Sample| latency(s, 1);
                    let (r50, r99) = match row.compare {
                        Compare::Floor => (ratio_to(floor, &p50), ratio_to(floor, &p99)),
                        _ => (None, None),
                    };
                    (per_round(&p50).unwrap(), per_round(&p99), r50, r99)
                }
                Sample::Throughput { .. } => {
                    let cpu_ns = |s: &Sample| match *s {
                        Sample::Throughput { cpu_ns, .. } => cpu_ns,
                        _ => f64::NAN,
                    };
                    cpu = per_round(&cpu_ns);
                    if let Compare::Crossbeam(c) = row.compare {
                        cpu_ratio = crossbeam(c).and_then(|cb| ratio_to(cb, &cpu_ns));
                    }
                    let calls = |s: &Sample| match *s {
                        Sample::Throughput { calls, .. } => calls,
                        _ => f64::NAN,
                    };
                    let lanes = |s: &Sample| match *s {
                        Sample::Throughput { lanes, .. } => lanes,
                        _ => f64::NAN,
                    };
                    let ratio = match row.compare {
                        Compare::Crossbeam(c) => crossbeam(c).and_then(|cb| ratio_to(cb, &calls)),
                        _ => None,
                    };
                    (per_round(&calls).unwrap(), per_round(&lanes), ratio, None)
                }
                Sample::Cost { timed, .. } => {
                    let ns = |s: &Sample| match *s {
                        Sample::Cost { ns_per_packet, .. } => ns_per_packet,
                        _ => f64::NAN,
                    };
                    let loop_ns = |s: &Sample| match *s {
                        Sample::Cost { timed: Timed::Poll { loop_ns }, .. } => loop_ns,
                        _ => f64::NAN,
                    };
                    let whole = matches!(timed, Timed::Poll { .. }).then(|| per_round(&loop_ns)).flatten();
                    let ratio = match row.compare {
                        Compare::Phase => {
                            let phase = phase_row(&row.name);
                            rows.iter().find(|r| r.name == phase).and_then(|r| ratio_to(&r.samples, &ns))
                        }
                        _ => None,
                    };
                    (per_round(&ns).unwrap(), whole, ratio, None)
                }
            };
            Summary {
                name: row.name.clone(),
                sample: row.samples[0],
                first,
                second,
                ratio,
                ratio_p99,
                clean,
                cpu,
                cpu_ratio,
            }
        })
        .collect()
}

pub(crate) fn print_lines(summaries: &[Summary]) {
    for s in summaries {
        let mut line = format!("bench: {}", s.name);
        match s.sample {
            Sample::Latency { .. } => {
                line += &format!(" p50_ns={:.0}", s.first.median);
                if let Some(p99) = s.second {
                    line += &format!(" p99_ns={:.0}", p99.median);
                }
                let ratio = s.ratio.map_or(1.0, |r| r.median);
                line += &format!(" ratio_to_floor={ratio:.2}");
                if let Some(r) = s.ratio_p99 {
                    line += &format!(" p99_ratio_to_floor={:.2}", r.median);
                }
                if let Some(c) = s.clean {
                    line += &format!(" clean={:.2}", c.median);
                }
            }
            Sample::Throughput { .. } => {
                line += &format!(" calls_per_s={:.0}", s.first.median);
                if let Some(lanes) = s.second {
                    line += &format!(" lane_calls_per_s={:.0}", lanes.median);
                }
                if let Some(r) = s.ratio {
                    line += &format!(" ratio_to_crossbeam={:.2}", r.median);
                }
                if let Some(c) = s.cpu {
                    line += &format!(" cpu_ns_per_call={:.0}", c.median);
                }
                if let Some(r) = s.cpu_ratio {
                    line += &format!(" cpu_ratio_to_crossbeam={:.2}", r.median);
                }
            }
            Sample::Cost { lanes, timed, .. } => {
                line += &format!(
                    " ns_per_packet={:.0} ns_per_lane={:.1}",
                    s.first.median,
                    s.first.median / f64::from(lanes)
                );
                match timed {
                    Timed::Loop => {}
                    Timed::Poll { .. } => line += " timed=poll_once_hot",
                    Timed::Cold { packets } => {
                        line += &format!(" timed=poll_once_cold packets_per_poll={packets}")
                    }
                }
                if let Some(whole) = s.second {
                    line += &format!(" loop_ns_per_packet={:.0}", whole.median);
                }
                if let Some(r) = s.ratio {
                    line += &format!(" ratio_to_phase={:.2}", r.median);
                }
            }
        }
        println!("{line}");
    }
}

pub(crate) fn print_table(summaries: &[Summary], rounds: usize) {
    println!();
    println!("medians over {rounds} rounds, (min..max) over rounds; ratios taken within each round");
    println!();
    println!("| row | p50 ns | p99 ns | p50 / floor p50 | p99 / floor p99 | clean |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for s in summaries.iter().filter(|s| matches!(s.sample, Sample::Latency { .. })) {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            s.name,
            s.first.show(0),
            s.second.map_or("-".into(), |p| p.show(0)),
            s.ratio.map_or("1".into(), |r| r.show(2)),
            s.ratio_p99.map_or("1".into(), |r| r.show(2)),
            s.clean.map_or("-".into(), |c| c.show(2)),
        );
    }
    println!();
    println!(
        "| row | wave calls/s | lane calls/s | calls / crossbeam calls | CPU us per call | CPU / crossbeam CPU |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for s in summaries.iter().filter(|s| matches!(s.sample, Sample::Throughput { .. })) {
        let us = |c: Spread| format!("{:.1} ({:.1}..{:.1})", c.median / 1e3, c.min / 1e3, c.max / 1e3);
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            s.name,
            s.first.show_si(),
            s.second.map_or("-".into(), |l| l.show_si()),
            s.ratio.map_or("-".into(), |r| r.show(2)),
            s.cpu.map_or("-".into(), us),
            s.cpu_ratio.map_or("-".into(), |r| r.show(2)),
        );
    }
    println!("(crossbeam rows compare at the same client count: W waves against W clients)");
    println!();
    println!("| row | ns per packet | ns per lane | / phase row | timed |");
    println!("| --- | ---: | ---: | ---: | --- |");
    for s in summaries.iter().filter(|s| matches!(s.sample, Sample::Cost { .. })) {
        let (lanes, timed) = match s.sample {
            Sample::Cost { lanes, timed, .. } => (f64::from(lanes), timed),
            _ => (1.0, Timed::Loop),
        };
        let per_lane = |v: f64| v / lanes;
        let timed = match timed {
            Timed::Loop => "whole loop".to_string(),
            Timed::Poll { .. } => {
                format!("poll_once, hot; whole loop {}", s.second.map_or("-".into(), |w| w.show(0)))
            }
            Timed::Cold { packets } => format!("poll_once of {packets} packets, cold"),
        };
        println!(
            "| {} | {} | {:.1} ({:.1}..{:.1}) | {} | {timed} |",
            s.name,
            s.first.show(0),
            per_lane(s.first.median),
            per_lane(s.first.min),
            per_lane(s.first.max),
            s.ratio.map_or("-".into(), |r| r.show(2)),
        );
    }
}

pub(crate) fn print_goals(summaries: &[Summary]) {
    let find = |name: &str| summaries.iter().find(|s| s.name == name);
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    if let Some(r) = find("hostcall_1l_spinning").and_then(|s| s.ratio) {
        println!(
            "goal: spinning 1-lane p50 <= 1.3 x floor p50: {:.2} -> {}",
            r.median,
            verdict(r.median <= 1.3)
        );
    }
    if let Some(r) = find("hostcall_1l_spinning").and_then(|s| s.ratio_p99) {
        println!(
            "goal: spinning 1-lane p99 <= 5 x floor p99: {:.2} -> {}",
            r.median,
            verdict(r.median <= 5.0)
        );
    }
    if let Some(r) = find("throughput_64w_1l").and_then(|s| s.ratio) {
        println!(
            "goal: 64 waves >= 2 x crossbeam at 64 clients: {:.2} -> {}",
            r.median,
            verdict(r.median >= 2.0)
        );
    }
}
