//! Throughput rows: waves (or channel clients) calling as fast as they can.

use crate::latency::{start_listener, Line};
use crate::measure::Sample;
use crate::options::Options;
use crate::{echo, request, ECHO};
use crossbeam_channel as channel;
use hostcall::{ListenerConfig, Wave};
use hostcall_core::SLOT_WORDS;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Per-thread call counters, each alone in its line (a single writer each).
pub(crate) struct Counters(Vec<Line>);

impl Counters {
    pub(crate) fn new(n: usize) -> Arc<Self> {
        Arc::new(Self((0..n).map(|_| Line::default()).collect()))
    }
    pub(crate) fn sum(&self) -> u64 {
        // Relaxed: a statistic; the window's edges are fuzzy by a call anyway.
        self.0.iter().map(|l| l.0.load(Ordering::Relaxed)).sum()
    }
    pub(crate) fn set(&self, thread: usize, calls: u64) {
        self.0[thread].0.store(calls, Ordering::Relaxed);
    }
}

/// CPU time the process has used so far (all threads, user + system), where the OS tells.
pub(crate) fn cpu_time() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `rusage` is plain data, valid when zeroed; `getrusage` writes it.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            (libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0).then_some(usage)
        }?;
        let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        Some(time(usage.ru_utime) + time(usage.ru_stime))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Starts `clients` threads running `call` in a loop until told to stop, and counts the calls
/// completed in the measuring window. Returns calls per second and CPU ns per call (NaN where
/// the OS does not tell).
pub(crate) fn count_calls(
    o: &Options,
    clients: usize,
    call: impl Fn(usize, u64) + Send + Sync + 'static,
) -> (f64, f64) {
    let counters = Counters::new(clients);
    let stop = Arc::new(AtomicBool::new(false));
    let call = Arc::new(call);
    let start = Arc::new(Barrier::new(clients + 1));
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let (counters, stop, call, start) = (counters.clone(), stop.clone(), call.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut calls = 0u64;
                // Relaxed: the flag carries no data; a late look costs one extra call.
                while !stop.load(Ordering::Relaxed) {
                    call(t, calls);
                    calls += 1;
                    counters.set(t, calls);
                }
            })
        })
        .collect();
    start.wait();
    thread::sleep(o.window / 5);
    let (c0, t0, cpu0) = (counters.sum(), Instant::now(), cpu_time());
    thread::sleep(o.window);
    let (c1, t1, cpu1) = (counters.sum(), Instant::now(), cpu_time());
    // Relaxed: the flag carries no data.
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let calls = (c1 - c0) as f64;
    let cpu_ns = match (cpu0, cpu1) {
        (Some(a), Some(b)) => b.saturating_sub(a).as_nanos() as f64 / calls,
        _ => f64::NAN,
    };
    (calls / t1.duration_since(t0).as_secs_f64(), cpu_ns)
}

pub(crate) fn hostcall_throughput(o: &Options, waves: usize, lanes: u32) -> Sample {
    let (listener, buffer) = start_listener(ListenerConfig::default(), waves.max(2) as u64);
    let wave_list: Arc<Vec<Wave>> = Arc::new((0..waves).map(|_| Wave::new(buffer.clone(), lanes)).collect());
    let (calls, cpu_ns) = count_calls(o, waves, move |w, i| {
        let wave = &wave_list[w];
        let reply = wave.call(ECHO, |lane| request(i, lane)).expect("hostcall");
        assert_eq!(reply.lane(0), echo(&request(i, 0)));
    });
    listener.shutdown();
    Sample::Throughput { calls, lanes: calls * f64::from(lanes), cpu_ns }
}

pub(crate) fn crossbeam_throughput(o: &Options, clients: usize) -> Sample {
    let (request_tx, request_rx) = channel::bounded::<(usize, [u64; SLOT_WORDS])>(clients);
    let (reply_txs, reply_rxs): (Vec<_>, Vec<_>) =
        (0..clients).map(|_| channel::bounded::<[u64; 2]>(1)).unzip();
    let server = thread::spawn(move || {
        while let Ok((client, r)) = request_rx.recv() {
            reply_txs[client].send(echo(&r)).unwrap();
        }
    });
    let reply_rxs = Arc::new(reply_rxs);
    let tx = request_tx.clone();
    let (calls, cpu_ns) = count_calls(o, clients, move |c, i| {
        tx.send((c, request(i, 0))).unwrap();
        let reply = reply_rxs[c].recv().unwrap();
        assert_eq!(reply, echo(&request(i, 0)));
    });
    drop(request_tx);
    server.join().unwrap();
    Sample::Throughput { calls, lanes: calls, cpu_ns }
}
