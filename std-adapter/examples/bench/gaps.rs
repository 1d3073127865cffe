//! `--gaps`: what the listener's wait policies cost and bound, through a real `Listener`.
//!
//! For each policy (the default `bounded_latency`, `spinning`, `power_saving`): one lane's call
//! after an idle gap of 0.1, 1, 20 and 1,000 ms, the device side never ringing (as LLVM libc's
//! RPC client): the time from the submit to the reply seen, p50, p99 and the largest over the
//! samples (2,000 / 1,000 / 200 / 20: the 1 s gap's p99 is the largest of its 20). Then the same
//! device ringing the listener's doorbell (gaps of 1 and 20 ms): what a ring changes. Then the
//! idle listener, no call for a few seconds: its thread's CPU time (`getrusage(RUSAGE_THREAD)`,
//! read by a service on that thread), the process's (every thread: the watchdog too), as % of
//! one core, its wake-ups a second (`timeout_polls`) and the CPU per wake-up; for the default
//! policy also with 64 more idle buffers (the poll of every buffer on each wake-up).
//!
//! ```sh
//! cargo run --release --example bench -- --gaps           # about 100 s
//! cargo run --release --example bench -- --gaps --quick   # a few seconds, a smoke run
//! ```

use crate::measure::{no_backoff, pinned_pair, unpin};
use crate::options::Options;
use crate::{echo, request, ECHO};
use hostcall::prelude::*;
use hostcall::{HostMemory, HostcallBuffer, Listener, ListenerConfig, ParkingDoorbell, WaitPolicy};
use hostcall_core::{AnyView, ClaimedPacket, CompletedPacket, SubmittedPacket};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The service that answers with the CPU time of the thread serving it, in µs.
const THREAD_CPU: u32 = 101;

/// Gaps in µs and samples of each (full run).
const GAPS: [(u64, usize); 4] = [(100, 2_000), (1_000, 1_000), (20_000, 200), (1_000_000, 20)];
/// The gaps of the ringing device's rows, in µs, and their samples.
const RUNG_GAPS: [(u64, usize); 2] = [(1_000, 200), (20_000, 100)];

pub(crate) fn run(o: &Options, quick: bool) {
    let started = Instant::now();
    let idle = if quick { Duration::from_millis(300) } else { Duration::from_secs(3) };
    let scale = |samples: usize| if quick { (samples / 100).max(2) } else { samples };
    println!("gaps: one call after an idle gap, the device never ringing unless `rung`; times in us");
    println!(
        "{:<16} {:>9} {:>5} {:>8} {:>9} {:>9} {:>9}",
        "policy", "gap_ms", "rung", "samples", "p50_us", "p99_us", "max_us"
    );
    for (name, policy) in policies() {
        let pair = pinned_pair(o, || Pair::start(policy, 0));
        pair.warm();
        for (gap, samples) in GAPS {
            pair.row(name, gap, scale(samples), false);
        }
        if !policy.spins() {
            for (gap, samples) in RUNG_GAPS {
                pair.row(name, gap, scale(samples), true);
            }
        }
        pair.idle(name, idle);
        unpin(o);
        if name == "bounded_latency" {
            let pair = pinned_pair(o, || Pair::start(policy, 64));
            pair.warm();
            pair.idle("bounded_64bufs", idle);
            unpin(o);
        }
    }
    println!("gaps: total_s={:.1}", started.elapsed().as_secs_f64());
}

fn policies() -> [(&'static str, WaitPolicy); 3] {
    [
        ("bounded_latency", WaitPolicy::bounded_latency()),
        ("spinning", WaitPolicy::spinning()),
        ("power_saving", WaitPolicy::power_saving()),
    ]
}

/// A listener with one 2-packet stack buffer (and `idle_buffers` more, never called).
struct Pair {
    listener: Listener,
    buffer: Arc<HostcallBuffer>,
    _idle: Vec<Arc<HostcallBuffer>>,
}

impl Pair {
    fn start(policy: WaitPolicy, idle_buffers: usize) -> Self {
        let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
        let config = ListenerConfig::default().with_wait(policy).with_thread_name("bench-gaps".into());
        let listener = Listener::start(doorbell.clone(), config).expect("start a listener");
        listener.services().register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
        listener.services().register_lane(THREAD_CPU, "thread_cpu", |_| Ok([thread_cpu_us(), 0])).unwrap();
        let new_buffer =
            || Arc::new(HostcallBuffer::new(Arc::new(HostMemory), 2, doorbell.clone()).expect("buffer"));
        let buffer = new_buffer();
        listener.add(buffer.clone()).unwrap();
        let idle: Vec<_> = (0..idle_buffers).map(|_| new_buffer()).collect();
        for b in &idle {
            listener.add(b.clone()).unwrap();
        }
        Self { listener, buffer, _idle: idle }
    }

    fn warm(&self) {
        let view = self.buffer.view();
        for i in 0..200 {
            call(&view, i, false, &self.buffer);
        }
    }

    /// `samples` calls, each after an idle `gap_us`; prints the row.
    fn row(&self, policy: &str, gap_us: u64, samples: usize, rung: bool) {
        let view = self.buffer.view();
        let mut times: Vec<u64> = (0..samples as u64)
            .map(|i| {
                thread::sleep(Duration::from_micros(gap_us));
                let t = Instant::now();
                call(&view, i, rung, &self.buffer);
                t.elapsed().as_nanos() as u64
            })
            .collect();
        times.sort_unstable();
        let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
        println!(
            "{policy:<16} {:>9} {:>5} {samples:>8} {:>9.1} {:>9.1} {:>9.1}",
            gap_us as f64 / 1e3,
            if rung { "yes" } else { "no" },
            pct(0.5),
            pct(0.99),
            pct(1.0)
        );
    }

    /// The idle listener over `idle`: its thread's and the process's CPU, its wake-ups.
    fn idle(&self, policy: &str, idle: Duration) {
        let view = self.buffer.view();
        let thread_cpu = || cpu_call(&view, &self.buffer);
        let (thread0, process0, wakes0) = (thread_cpu(), process_cpu_us(), self.wakes());
        let t = Instant::now();
        thread::sleep(idle);
        let (thread1, process1, wakes1) = (thread_cpu(), process_cpu_us(), self.wakes());
        let seconds = t.elapsed().as_secs_f64();
        let share = |us: u64| us as f64 / 1e4 / seconds; // % of one core
        let wakes = wakes1.saturating_sub(wakes0);
        let thread_us = thread1.saturating_sub(thread0);
        println!(
            "idle {policy:<16} over_s={seconds:.1} listener_cpu_pct={:.2} process_cpu_pct={:.2} wakeups_per_s={:.0} \
             cpu_us_per_wakeup={:.2}",
            share(thread_us),
            share(process1.saturating_sub(process0)),
            wakes as f64 / seconds,
            if wakes > 0 { thread_us as f64 / wakes as f64 } else { f64::NAN },
        );
    }

    fn wakes(&self) -> u64 {
        let events = self.listener.stats().events;
        events.timeout_polls + events.doorbell_wakes
    }
}

/// One lane's call on lane 0: claim, fill, submit, ring only if `rung`, spin on the reply.
fn call(view: &AnyView<'_>, i: u64, rung: bool, buffer: &HostcallBuffer) {
    let mut claimed = view.claim(0).expect("a sound buffer").expect("a free packet");
    claimed.write_lane(0, &request(i, 0));
    let submitted = claimed.submit(ECHO, 1);
    if rung {
        buffer.doorbell().ring();
    }
    let done = submitted.wait(no_backoff);
    assert_eq!(done.reply(0), echo(&request(i, 0)));
}

/// The listener thread's CPU time in µs, through [`THREAD_CPU`] (rung: no wait for a nap).
fn cpu_call(view: &AnyView<'_>, buffer: &HostcallBuffer) -> u64 {
    let mut claimed = view.claim(0).expect("a sound buffer").expect("a free packet");
    claimed.write_lane(0, &[0; 8]);
    let submitted = claimed.submit(THREAD_CPU, 1);
    buffer.doorbell().ring();
    submitted.wait(no_backoff).reply(0)[0]
}

#[cfg(target_os = "linux")]
fn rusage_us(who: libc::c_int) -> u64 {
    // SAFETY: an all-zero `rusage` is a valid value; getrusage only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage`.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

#[cfg(target_os = "linux")]
fn thread_cpu_us() -> u64 {
    rusage_us(libc::RUSAGE_THREAD)
}

#[cfg(target_os = "linux")]
fn process_cpu_us() -> u64 {
    rusage_us(libc::RUSAGE_SELF)
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_us() -> u64 {
    0
}

#[cfg(not(target_os = "linux"))]
fn process_cpu_us() -> u64 {
    0
}
