//! Benchmarks: hostcall round trips and throughput against a cache-line ping-pong floor and
//! crossbeam-channel request/response, measured side by side in one run.
//!
//! ```sh
//! cargo run --release --example bench                  # 5 rounds, about a minute
//! cargo run --release --example bench -- --quick       # CI smoke run, a few seconds
//! cargo run --release --example bench -- --rounds 9    # more rounds
//! ```
//!
//! Every row is measured once per round; rounds rotate the order of the rows, so slow phases of a
//! shared machine hit every row alike. Ratios are taken within a round (a row against the floor,
//! or against crossbeam at the same client count, measured seconds apart) and reported as the
//! median over rounds with min..max. The two threads of each latency row are pinned to two CPUs
//! (`--no-pin` to leave them to the scheduler), and latency percentiles skip windows in which the
//! pair was descheduled (see `round_trips`; the share kept is the `clean` column). Nothing here
//! asserts a timing.
//!
//! Rows:
//! - `floor_ping_pong`: two threads, one 128-byte-aligned line each way (A writes a counter to
//!   line 1, B spins on it and answers on line 2): the cost of a round trip between two cores.
//! - `core_1l_spinning`: the protocol alone, the core's producer path (`BufferView::claim`,
//!   `submit`, `wait`) against a thread spinning on `BufferView::drain`: no listener,
//!   registry, doorbell or `Wave`. The bound under the next row.
//! - `hostcall_1l_spinning` / `hostcall_1l_blocking`: one wave of one lane calling a trivial lane
//!   service through the real listener (poller, `Services` registry, doorbell), the listener
//!   spinning (`ListenerConfig::spinning()`) or blocking on its doorbell (the default config).
//!   The device side is the core producer path as a GPU wave runs it: claim, fill, submit, ring,
//!   spin on READY (`Submitted::wait`, one CPU pause per poll like the floor), read, release.
//! - `wave_1l_spinning`: the same with the emulated `Wave` (`with_spin_wait`) as the device side:
//!   what the emulation adds.
//! - `crossbeam_blocking` / `crossbeam_spinning`: the same payload (8 u64 request, 2 u64 reply)
//!   over two crossbeam-channel channels, `recv` or a `try_recv` spin on both sides.
//! - `throughput_<W>w_<L>l`: W waves of L lanes calling as fast as they can (default listener,
//!   default wave waiting); calls/s counts wave calls, lane_calls/s lanes. `crossbeam_tput_<C>c`:
//!   C client threads sending requests to one server thread over one channel, each waiting for
//!   its reply on its own channel (blocking).
//! - `listener_cost_64l`: producer and listener on one thread, no cross-core traffic: claim, fill
//!   64 lanes, submit, `Poller::poll_once` with the std `Services` registry through
//!   `Services::dispatcher` (what the listener thread runs per wake-up), read 64 replies, release.
//!   ns per 64-lane packet.
//!
//! Instructions per packet under callgrind (`--callgrind-listener N` runs only that loop):
//!
//! ```sh
//! cargo build --release --example bench
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*listener_loop*' \
//!     --callgrind-out-file=/tmp/cg.out target/release/examples/bench --callgrind-listener 10000
//! callgrind_annotate --inclusive=yes /tmp/cg.out | grep -E 'listener_loop|poll_once'
//! ```
//!
//! Divide the `listener_loop` total by N for the whole loop, and the inclusive `poll_once` count
//! by N for the listener's own share (drain + dispatch + service).

use crossbeam_channel as channel;
use hostcall::core::buffer::{BufferView, PacketRequest};
use hostcall::core::layout::{LANES, SLOT_WORDS};
use hostcall::core::poller::Poller;
use hostcall::prelude::*;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// The benchmark's lane service id.
const ECHO: u32 = 100;

/// The trivial lane service: two words back from eight.
fn echo(request: &[u64; SLOT_WORDS]) -> [u64; 2] {
    [request[0].wrapping_add(1), request[7]]
}

/// One lane's request for call `i`.
fn request(i: u64, lane: usize) -> [u64; SLOT_WORDS] {
    [i, lane as u64, 2, 3, 4, 5, 6, i ^ lane as u64]
}

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Clone, Debug)]
struct Options {
    rounds: usize,
    /// Most latency samples per row and round.
    samples: usize,
    /// Time budget of one latency row in one round.
    latency_budget: Duration,
    /// Measuring window of one throughput row in one round (after a warm-up of a fifth of it).
    window: Duration,
    /// Packets per `listener_cost` measurement.
    cost_packets: u64,
    /// Throughput rows: (waves, lanes).
    throughput: Vec<(usize, u32)>,
    /// Crossbeam throughput client counts.
    crossbeam_clients: Vec<usize>,
    /// Pin each latency pair to two CPUs (the peer on one, the caller on the other).
    pin: bool,
    /// Run only the rows whose name contains one of these (and the floor, and the crossbeam rows
    /// the chosen throughput rows compare to). Empty: every row.
    only: Vec<String>,
}

impl Options {
    fn full() -> Self {
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

    fn quick() -> Self {
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

enum Mode {
    Bench(Options),
    /// Packets, lanes per packet.
    Callgrind(u64, u32),
}

fn usage() -> ! {
    eprintln!(
        "usage: bench [--quick] [--rounds N] [--no-pin] [--only NAME]... | bench --callgrind-listener N [--lanes 1..=64]"
    );
    std::process::exit(2)
}

fn parse() -> Mode {
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

// ---------------------------------------------------------------------------------------------
// Measurements

/// What one row measured in one round.
#[derive(Clone, Copy, Debug)]
enum Sample {
    /// Round-trip percentiles in ns, over the share `clean` of the round trips (see
    /// [`round_trips`]).
    Latency { p50: f64, p99: f64, clean: f64 },
    /// Wave calls (or channel requests) per second, lane calls per second, and the process's CPU
    /// time (all threads, user + system) per wave call in ns.
    Throughput { calls: f64, lanes: f64, cpu_ns: f64 },
    /// ns per packet of `lanes` lanes, producer and listener on one thread.
    Cost { ns_per_packet: f64, lanes: u32 },
}

/// Round trips per window of a latency measurement, and the longest a window lasts.
const WINDOW_SAMPLES: usize = 200;
const WINDOW_TIME: Duration = Duration::from_millis(5);
/// A window is clean when its median is within this factor of the best window's median.
const CLEAN_FACTOR: f64 = 2.0;

/// Times `one()` round trips: a tenth of the samples as warm-up, then up to `samples` timed ones
/// within `budget`, in windows of [`WINDOW_SAMPLES`] (or [`WINDOW_TIME`]).
///
/// On a shared machine a spinning pair of threads sometimes shares one core, and a round trip
/// then takes a scheduler time slice (milliseconds) instead of a few hundred nanoseconds. Such
/// stretches say nothing about the code, so percentiles are taken over the clean windows only:
/// those whose median is within [`CLEAN_FACTOR`] of the best window's (a window of at least a
/// quarter of [`WINDOW_SAMPLES`]). Every row gets the same rule; the share of round trips kept is
/// reported as `clean`.
fn round_trips(o: &Options, mut one: impl FnMut()) -> Sample {
    let warmup = (o.samples / 10).max(100);
    let started = Instant::now();
    for _ in 0..warmup {
        one();
        if started.elapsed() > o.latency_budget / 4 {
            break;
        }
    }
    let mut windows: Vec<Vec<u64>> = Vec::new();
    let mut total = 0;
    let started = Instant::now();
    while total < o.samples && started.elapsed() < o.latency_budget {
        let mut window = Vec::with_capacity(WINDOW_SAMPLES);
        let window_started = Instant::now();
        while window.len() < WINDOW_SAMPLES && window_started.elapsed() < WINDOW_TIME {
            let t = Instant::now();
            one();
            window.push(t.elapsed().as_nanos() as u64);
        }
        total += window.len();
        window.sort_unstable();
        windows.push(window);
    }
    let median = |w: &Vec<u64>| w[w.len() / 2] as f64;
    let best = windows.iter().filter(|w| w.len() >= WINDOW_SAMPLES / 4).map(median).min_by(f64::total_cmp);
    let mut kept: Vec<u64> = windows
        .iter()
        .filter(|w| best.map_or(true, |best| median(w) <= best * CLEAN_FACTOR))
        .flatten()
        .copied()
        .collect();
    kept.sort_unstable();
    let pct = |p: f64| kept[((kept.len() - 1) as f64 * p).round() as usize] as f64;
    Sample::Latency { p50: pct(0.50), p99: pct(0.99), clean: kept.len() as f64 / total as f64 }
}

/// Where the two threads of a latency pair run.
///
/// Two spinning threads left to the scheduler of a busy machine sometimes share one CPU, and a
/// round trip then takes a time slice. So each pair is pinned: the peer (echo thread, listener,
/// channel server) to one CPU, the caller to another. Threads inherit the affinity of the thread
/// that starts them, so `start_peer` runs with the calling thread pinned to the peer's CPU.
/// Throughput rows run unpinned.
mod pin {
    /// The CPUs this process may run on (all of them where affinity is not supported).
    #[cfg(target_os = "linux")]
    pub fn allowed() -> Vec<usize> {
        // SAFETY: `cpu_set_t` is plain data, valid when zeroed; `sched_getaffinity` writes at
        // most `size_of::<cpu_set_t>()` bytes into it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect()
        }
    }

    /// Restricts the calling thread to `cpus` (best effort: a failure leaves it as it was).
    #[cfg(target_os = "linux")]
    pub fn set(cpus: &[usize]) {
        // SAFETY: as in `allowed`; `sched_setaffinity` only reads the set.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn allowed() -> Vec<usize> {
        Vec::new()
    }

    #[cfg(not(target_os = "linux"))]
    pub fn set(_cpus: &[usize]) {}

    /// [`allowed`] as it was at the first call (before any pinning).
    pub fn allowed_at_start() -> &'static [usize] {
        static AT_START: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
        AT_START.get_or_init(allowed)
    }
}

/// Starts a latency pair's peer pinned to one CPU and pins the caller to another (see [`pin`]);
/// returns what `start_peer` returned. The caller is unpinned by [`unpin`].
fn pinned_pair<T>(o: &Options, start_peer: impl FnOnce() -> T) -> T {
    let cpus = pin::allowed_at_start();
    if !o.pin || cpus.len() < 2 {
        return start_peer();
    }
    pin::set(&cpus[1..2]);
    let peer = start_peer();
    pin::set(&cpus[0..1]);
    peer
}

/// Lets the calling thread run anywhere again.
fn unpin(o: &Options) {
    let cpus = pin::allowed_at_start();
    if o.pin && cpus.len() >= 2 {
        pin::set(cpus);
    }
}

/// The backoff a spinning producer passes to `Submitted::wait`: none, as `wait` already pauses
/// the CPU once per poll (the floor's loop pauses once per poll too).
fn no_backoff() {}

/// One cache line, alone in its 128 bytes (the adjacent-line prefetcher pairs 64-byte lines).
#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicU64);

fn floor_ping_pong(o: &Options) -> Sample {
    const STOP: u64 = u64::MAX;
    let ping = Arc::new(Line::default());
    let pong = Arc::new(Line::default());
    let peer = pinned_pair(o, || {
        let (ping, pong) = (ping.clone(), pong.clone());
        thread::spawn(move || {
            let mut seen = 0;
            loop {
                // Acquire/Release: the pair each way is what a request/response protocol needs.
                let v = ping.0.load(Ordering::Acquire);
                if v == seen {
                    spin_loop();
                    continue;
                }
                if v == STOP {
                    return;
                }
                pong.0.store(v, Ordering::Release);
                seen = v;
            }
        })
    });
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            spin_loop();
        }
    });
    ping.0.store(STOP, Ordering::Release);
    peer.join().unwrap();
    sample
}

fn start_listener(config: ListenerConfig, packets: u64) -> (Listener, Arc<HostcallBuffer>) {
    let doorbell: Arc<dyn Doorbell> = Arc::new(ParkingDoorbell::new());
    let listener = Listener::start(doorbell.clone(), config).expect("start a listener");
    listener.services().register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
    let buffer = Arc::new(HostcallBuffer::new(Arc::new(HostMemory), packets, doorbell).expect("buffer"));
    listener.add_buffer(buffer.clone()).unwrap();
    (listener, buffer)
}

/// One lane's round trip through the real listener (its poller, registry and doorbell). The
/// device side is the core's producer path, as a GPU wave runs it: claim, fill, submit, ring the
/// doorbell, spin on READY, read the reply, release.
fn hostcall_round_trip(o: &Options, config: ListenerConfig) -> Sample {
    let (listener, buffer) = pinned_pair(o, || start_listener(config, 2));
    let view = buffer.view().stack().expect("a stack-protocol buffer");
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let mut claimed = view.claim().expect("a sound buffer").expect("a free packet");
        claimed.write_lane(0, &request(i, 0));
        let submitted = claimed.submit(ECHO, 1);
        buffer.doorbell().ring();
        let done = submitted.wait(no_backoff);
        assert_eq!(done.reply(0), echo(&request(i, 0)));
    });
    listener.shutdown();
    sample
}

/// As [`hostcall_round_trip`] with a spinning listener, the device side being the emulated
/// [`Wave`] (`with_spin_wait`): what the emulation adds (it builds a 64-lane `Reply` per call).
fn wave_round_trip(o: &Options) -> Sample {
    let (listener, buffer) = pinned_pair(o, || start_listener(ListenerConfig::spinning(), 2));
    let wave = Wave::new(buffer, 1).with_spin_wait();
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let reply = wave.call(ECHO, |lane| request(i, lane)).expect("hostcall");
        assert_eq!(reply.lane(0), echo(&request(i, 0)));
    });
    listener.shutdown();
    sample
}

/// The protocol alone: the core producer path (claim, fill, submit, spin on READY, release)
/// against a thread that spins on `BufferView::drain` with an inline lane service. No listener,
/// poller, registry, doorbell or `Wave`: what the stack protocol's shared-memory traffic costs
/// by itself, the bound under the full `hostcall_1l_spinning` row.
fn core_round_trip(o: &Options) -> Sample {
    let buffer = Arc::new(
        HostcallBuffer::new(Arc::new(HostMemory), 2, Arc::new(ParkingDoorbell::new())).expect("buffer"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let host = pinned_pair(o, || {
        let (buffer, stop) = (buffer.clone(), stop.clone());
        thread::spawn(move || {
            let view = buffer.view().stack().expect("a stack-protocol buffer");
            // Relaxed: the flag carries no data.
            while !stop.load(Ordering::Relaxed) {
                view.drain(&mut |packet: &mut PacketRequest<'_>| {
                    let mut lanes = packet.activemask();
                    while lanes != 0 {
                        let lane = lanes.trailing_zeros() as usize;
                        lanes &= lanes - 1;
                        let reply = echo(&packet.request(lane));
                        packet.reply(lane, reply);
                    }
                });
                spin_loop();
            }
        })
    });
    let view = buffer.view().stack().expect("a stack-protocol buffer");
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        let mut claimed = view.claim().expect("a sound buffer").expect("a free packet");
        claimed.write_lane(0, &request(i, 0));
        let done = claimed.submit(ECHO, 1).wait(no_backoff);
        assert_eq!(done.reply(0), echo(&request(i, 0)));
    });
    stop.store(true, Ordering::Relaxed);
    host.join().unwrap();
    sample
}

fn crossbeam_round_trip(o: &Options, spin: bool) -> Sample {
    let (request_tx, request_rx) = channel::bounded::<[u64; SLOT_WORDS]>(1);
    let (reply_tx, reply_rx) = channel::bounded::<[u64; 2]>(1);
    let server = pinned_pair(o, || {
        thread::spawn(move || loop {
            let Some(r) = receive(&request_rx, spin) else { return };
            reply_tx.send(echo(&r)).unwrap();
        })
    });
    let mut i = 0u64;
    let sample = round_trips(o, || {
        i += 1;
        request_tx.send(request(i, 0)).unwrap();
        let reply = receive(&reply_rx, spin).expect("the server lives");
        assert_eq!(reply, echo(&request(i, 0)));
    });
    drop(request_tx);
    server.join().unwrap();
    sample
}

/// `recv`, or a `try_recv` spin. `None` once the sender is gone.
fn receive<T>(rx: &channel::Receiver<T>, spin: bool) -> Option<T> {
    if !spin {
        return rx.recv().ok();
    }
    loop {
        match rx.try_recv() {
            Ok(v) => return Some(v),
            Err(channel::TryRecvError::Empty) => spin_loop(),
            Err(channel::TryRecvError::Disconnected) => return None,
        }
    }
}

/// Per-thread call counters, each alone in its line (a single writer each).
struct Counters(Vec<Line>);

impl Counters {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Self((0..n).map(|_| Line::default()).collect()))
    }
    fn sum(&self) -> u64 {
        // Relaxed: a statistic; the window's edges are fuzzy by a call anyway.
        self.0.iter().map(|l| l.0.load(Ordering::Relaxed)).sum()
    }
    fn set(&self, thread: usize, calls: u64) {
        self.0[thread].0.store(calls, Ordering::Relaxed);
    }
}

/// CPU time the process has used so far (all threads, user + system), where the OS tells.
fn cpu_time() -> Option<Duration> {
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
fn count_calls(o: &Options, clients: usize, call: impl Fn(usize, u64) + Send + Sync + 'static) -> (f64, f64) {
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

fn hostcall_throughput(o: &Options, waves: usize, lanes: u32) -> Sample {
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

fn crossbeam_throughput(o: &Options, clients: usize) -> Sample {
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

/// Producer and listener on one thread: the listener's own work per packet, no cross-core traffic.
struct CostLoop {
    buffer: HostcallBuffer,
    poller: Poller<1>,
    services: Services,
}

impl CostLoop {
    fn new() -> Self {
        let buffer =
            HostcallBuffer::new(Arc::new(HostMemory), 2, Arc::new(ParkingDoorbell::new())).expect("buffer");
        let poller = Poller::new();
        // SAFETY: `buffer` lives in the same struct as `poller` and is dropped after it (field
        // order), and is accessed only through views.
        unsafe { poller.add(buffer.as_ptr(), buffer.len(), buffer.num_packets()) }.unwrap();
        let services = Services::new();
        services.register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
        Self { buffer, poller, services }
    }
}

/// `packets` times: claim, fill `lanes` lanes, submit, poll once (drain + dispatch), read the
/// replies, release. Returns a checksum of the replies. Not inlined: callgrind's
/// `--toggle-collect` names it.
#[inline(never)]
fn listener_loop(cost: &CostLoop, view: BufferView<'_>, packets: u64, lanes: usize) -> u64 {
    let activemask = if lanes == LANES { u64::MAX } else { (1u64 << lanes) - 1 };
    let services = cost.services.dispatcher(); // what the listener thread dispatches through
    let mut checksum = 0u64;
    for i in 0..packets {
        let mut claimed = view.claim().expect("a sound buffer").expect("a free packet");
        for lane in 0..lanes {
            claimed.write_lane(lane, &request(i, lane));
        }
        let submitted = claimed.submit(ECHO, activemask);
        let report = cost.poller.poll_once(&services);
        debug_assert_eq!(report.packets, 1);
        let done = submitted.wait_until(|_| false).ok().expect("served by the poll");
        for lane in 0..lanes {
            checksum = checksum.wrapping_add(done.reply(lane)[0]);
        }
        done.release();
    }
    checksum
}

fn listener_cost(o: &Options, lanes: u32) -> Sample {
    let cost = CostLoop::new();
    let view = cost.buffer.view().stack().expect("a stack-protocol buffer");
    let packets = o.cost_packets * 64 / u64::from(lanes).max(8); // about as long for 1 lane
    std::hint::black_box(listener_loop(&cost, view, packets / 10, lanes as usize));
    let t = Instant::now();
    let checksum = listener_loop(&cost, view, packets, lanes as usize);
    let elapsed = t.elapsed();
    let expected: u64 = (0..packets).map(|i| (i + 1) * u64::from(lanes)).sum();
    assert_eq!(checksum, expected, "every lane answered");
    Sample::Cost { ns_per_packet: elapsed.as_nanos() as f64 / packets as f64, lanes }
}

// ---------------------------------------------------------------------------------------------
// Rows, rounds, report

#[derive(Clone, Copy, PartialEq)]
enum Compare {
    /// Latency row: ratio to the floor row.
    Floor,
    /// Throughput row: ratio to crossbeam at this many clients.
    Crossbeam(usize),
    None,
}

struct Row {
    name: String,
    compare: Compare,
    /// For crossbeam throughput rows: the client count others compare to.
    clients: Option<usize>,
    run: Box<dyn Fn(&Options) -> Sample>,
    samples: Vec<Sample>,
}

fn rows(o: &Options) -> Vec<Row> {
    let row = |name: String, compare, clients, run: Box<dyn Fn(&Options) -> Sample>| Row {
        name,
        compare,
        clients,
        run,
        samples: Vec::new(),
    };
    let mut rows = vec![
        row("floor_ping_pong".into(), Compare::None, None, Box::new(floor_ping_pong)),
        row("core_1l_spinning".into(), Compare::Floor, None, Box::new(core_round_trip)),
        row(
            "hostcall_1l_spinning".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::spinning())),
        ),
        row(
            "hostcall_1l_blocking".into(),
            Compare::Floor,
            None,
            Box::new(|o| hostcall_round_trip(o, ListenerConfig::default())),
        ),
        row("wave_1l_spinning".into(), Compare::Floor, None, Box::new(wave_round_trip)),
        row("crossbeam_spinning".into(), Compare::Floor, None, Box::new(|o| crossbeam_round_trip(o, true))),
        row("crossbeam_blocking".into(), Compare::Floor, None, Box::new(|o| crossbeam_round_trip(o, false))),
    ];
    for &(waves, lanes) in &o.throughput {
        let compare =
            if o.crossbeam_clients.contains(&waves) { Compare::Crossbeam(waves) } else { Compare::None };
        rows.push(row(
            format!("throughput_{waves}w_{lanes}l"),
            compare,
            None,
            Box::new(move |o| hostcall_throughput(o, waves, lanes)),
        ));
    }
    for &clients in &o.crossbeam_clients {
        rows.push(row(
            format!("crossbeam_tput_{clients}c"),
            Compare::None,
            Some(clients),
            Box::new(move |o| crossbeam_throughput(o, clients)),
        ));
    }
    rows.push(row("listener_cost_1l".into(), Compare::None, None, Box::new(|o| listener_cost(o, 1))));
    rows.push(row("listener_cost_64l".into(), Compare::None, None, Box::new(|o| listener_cost(o, 64))));
    if !o.only.is_empty() {
        let chosen = |name: &str| o.only.iter().any(|only| name.contains(only.as_str()));
        let compared: Vec<usize> = rows
            .iter()
            .filter(|r| chosen(&r.name))
            .filter_map(|r| match r.compare {
                Compare::Crossbeam(c) => Some(c),
                _ => None,
            })
            .collect();
        rows.retain(|r| {
            r.name == "floor_ping_pong" || chosen(&r.name) || r.clients.is_some_and(|c| compared.contains(&c))
        });
    }
    rows
}

/// Median and range of some values.
#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Self { median, min: v[0], max: v[n - 1] })
    }

    fn show(&self, digits: usize) -> String {
        format!("{:.d$} ({:.d$}..{:.d$})", self.median, self.min, self.max, d = digits)
    }

    fn show_si(&self) -> String {
        format!("{} ({}..{})", si(self.median), si(self.min), si(self.max))
    }
}

fn si(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// What the report prints for a row: each value as a spread over rounds.
struct Summary {
    name: String,
    sample: Sample,
    first: Spread,
    second: Option<Spread>,
    ratio: Option<Spread>,
    /// p99 ratio to the floor's p99, for latency rows.
    ratio_p99: Option<Spread>,
    /// Share of round trips kept (latency rows).
    clean: Option<Spread>,
    /// CPU ns per call, and its ratio to crossbeam's at the same client count (throughput rows).
    cpu: Option<Spread>,
    cpu_ratio: Option<Spread>,
}

fn summarise(rows: &[Row]) -> Vec<Summary> {
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
                Sample::Cost { .. } => {
                    let ns = |s: &Sample| match *s {
                        Sample::Cost { ns_per_packet, .. } => ns_per_packet,
                        _ => f64::NAN,
                    };
                    (per_round(&ns).unwrap(), None, None, None)
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

fn print_lines(summaries: &[Summary]) {
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
            Sample::Cost { lanes, .. } => {
                line += &format!(
                    " ns_per_packet={:.0} ns_per_lane={:.1}",
                    s.first.median,
                    s.first.median / f64::from(lanes)
                );
            }
        }
        println!("{line}");
    }
}

fn print_table(summaries: &[Summary], rounds: usize) {
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
    println!("| row | ns per packet | ns per lane |");
    println!("| --- | ---: | ---: |");
    for s in summaries.iter().filter(|s| matches!(s.sample, Sample::Cost { .. })) {
        let lanes = match s.sample {
            Sample::Cost { lanes, .. } => f64::from(lanes),
            _ => 1.0,
        };
        let per_lane = |v: f64| v / lanes;
        println!(
            "| {} | {} | {:.1} ({:.1}..{:.1}) |",
            s.name,
            s.first.show(0),
            per_lane(s.first.median),
            per_lane(s.first.min),
            per_lane(s.first.max)
        );
    }
}

fn print_goals(summaries: &[Summary]) {
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

fn run_callgrind(packets: u64, lanes: u32) {
    let cost = CostLoop::new();
    let t = Instant::now();
    let checksum = listener_loop(
        &cost,
        cost.buffer.view().stack().expect("a stack-protocol buffer"),
        packets,
        lanes as usize,
    );
    let ns = t.elapsed().as_nanos() as f64 / packets.max(1) as f64;
    println!("callgrind-listener: packets={packets} lanes={lanes} checksum={checksum} ns_per_packet={ns:.0}");
}

fn main() {
    let o = match parse() {
        Mode::Callgrind(n, lanes) => return run_callgrind(n, lanes),
        Mode::Bench(o) => o,
    };
    pin::allowed_at_start(); // before any pinning
    let mut rows = rows(&o);
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "bench: rounds={} cores={cores} pinned_pairs={} latency_budget_ms={} window_ms={} (medians over rounds)",
        o.rounds,
        o.pin && pin::allowed_at_start().len() >= 2,
        o.latency_budget.as_millis(),
        o.window.as_millis()
    );
    let started = Instant::now();
    for round in 0..o.rounds {
        // Rotate the order so that each row sees a different phase of a noisy machine.
        let n = rows.len();
        for k in 0..n {
            let row = &mut rows[(k + round * 3) % n];
            let sample = (row.run)(&o);
            unpin(&o);
            row.samples.push(sample);
        }
        eprintln!("round {}/{} done ({:.1} s)", round + 1, o.rounds, started.elapsed().as_secs_f64());
    }
    let summaries = summarise(&rows);
    print_lines(&summaries);
    print_table(&summaries, o.rounds);
    println!();
    print_goals(&summaries);
    println!("bench: total_s={:.1}", started.elapsed().as_secs_f64());
}
