//! The listener's own cost per packet, producer and listener on one thread (also the callgrind
//! mode). The cold variant, whose requests another core wrote, is in `listener_cold.rs`.

use crate::measure::{Sample, Timed};
use crate::options::Options;
use crate::{echo, request, ECHO};
use hostcall::{HostMemory, HostcallBuffer, ParkingDoorbell, Protocol, Services};
use hostcall_core::line::Incomplete;
use hostcall_core::rpc::Client;
use hostcall_core::sync::AtomicU32;
use hostcall_core::{AnyState, ClaimedPacket, CompletedPacket, Poller, Registration, SubmittedPacket, LANES};
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Producer and listener on one thread: the listener's own work per packet, no cross-core traffic.
pub(crate) struct CostLoop {
    pub(crate) poller: Poller<1>,
    pub(crate) buffer: HostcallBuffer,
    pub(crate) services: Services,
    /// A line buffer's memory of incomplete requests, as a listener gives its poller (raw: the
    /// poller reads and writes it; freed by `Drop` after the poller).
    incomplete: NonNull<[Incomplete]>,
}

// SAFETY: `incomplete` is touched only by the poller's polls (one at a time, its poll lock) and
// by `Drop`; everything else in it is `Send + Sync` already.
unsafe impl Send for CostLoop {}
// SAFETY: as for `Send`.
unsafe impl Sync for CostLoop {}

impl Drop for CostLoop {
    fn drop(&mut self) {
        self.poller.remove(self.buffer.as_ptr()).unwrap();
        // SAFETY: made by `Box::leak` in `with`; the buffer is removed, so no poll uses it.
        drop(unsafe { Box::from_raw(self.incomplete.as_ptr()) });
    }
}

impl CostLoop {
    /// A stack buffer of 2 packets (the `listener_cost_<L>l` rows and the callgrind mode).
    pub(crate) fn new() -> Self {
        Self::with(Protocol::Stack, 2)
    }

    /// A buffer of `protocol` with `packets` packets, registered with the poller, and the echo
    /// service.
    pub(crate) fn with(protocol: Protocol, packets: u64) -> Self {
        let doorbell = Arc::new(ParkingDoorbell::new());
        let buffer =
            HostcallBuffer::with_protocol(Arc::new(HostMemory), packets, doorbell, protocol).expect("buffer");
        let poller = Poller::new();
        let incomplete =
            NonNull::from(Box::leak(vec![Incomplete::default(); packets as usize].into_boxed_slice()));
        // SAFETY: `buffer` lives in the same struct as `poller` and is dropped after it (field
        // order), and is accessed only through views; `incomplete` is freed only after the
        // buffer's removal (`Drop`).
        let registration = unsafe {
            Registration::new(
                protocol,
                buffer.as_ptr(),
                buffer.len(),
                protocol.packet_count(packets).unwrap(),
            )
            .unwrap()
            .with_state(AnyState::Line(incomplete))
        };
        poller.add(registration).unwrap();
        let services = Services::new();
        services.register_lane(ECHO, "echo", |r| Ok(echo(r))).unwrap();
        Self { poller, buffer, services, incomplete }
    }
}

/// The activemask of the `lanes` low lanes.
pub(crate) fn low_lanes(lanes: usize) -> u64 {
    if lanes == LANES {
        u64::MAX
    } else {
        (1u64 << lanes) - 1
    }
}

/// `packets` times: claim (through `claim`), fill `lanes` lanes, submit, poll once (drain +
/// dispatch), read the replies, release. Returns a checksum of the replies and, when `TIMED`, the
/// time spent inside the session's `poll_once` (else zero). Not inlined: callgrind's
/// `--toggle-collect` names it.
#[inline(never)]
pub(crate) fn listener_loop<C: ClaimedPacket, const TIMED: bool>(
    cost: &CostLoop,
    claim: impl Fn() -> C,
    packets: u64,
    lanes: usize,
) -> (u64, Duration) {
    let activemask = low_lanes(lanes);
    let services = cost.services.dispatcher(); // what the listener thread dispatches through
                                               // A session across the loop, as the listener thread keeps one while it polls.
    let mut session = cost.poller.session().expect("only this loop polls");
    let mut checksum = 0u64;
    let mut polling = Duration::ZERO;
    for i in 0..packets {
        let mut claimed = claim();
        for lane in 0..lanes {
            claimed.write_lane(lane, &request(i, lane));
        }
        let submitted = claimed.submit(ECHO, activemask);
        let report = if TIMED {
            let t = Instant::now();
            let report = session.poll_once(&services);
            polling += t.elapsed();
            report
        } else {
            session.poll_once(&services)
        };
        debug_assert_eq!(report.packets, 1);
        let Ok(done) = submitted.wait_until(|_| false) else { panic!("not served by the poll") };
        for lane in 0..lanes {
            checksum = checksum.wrapping_add(done.reply(lane)[0]);
        }
        drop(done); // releases the packet
    }
    (checksum, polling)
}

/// The checksum [`listener_loop`] returns for `packets` packets of `lanes` lanes.
fn expected_checksum(packets: u64, lanes: u32) -> u64 {
    (0..packets).map(|i| (i + 1) * u64::from(lanes)).sum()
}

/// Packets per measurement of a `lanes`-lane row: about as long for 1 lane as for 64.
fn cost_packets(o: &Options, lanes: u32) -> u64 {
    o.cost_packets * 64 / u64::from(lanes).max(8)
}

/// `listener_cost_<L>l`: the whole loop of a stack buffer, per packet.
pub(crate) fn listener_cost(o: &Options, lanes: u32) -> Sample {
    let cost = CostLoop::new();
    let view = cost.buffer.view().stack().expect("a stack-protocol buffer");
    let claim = || view.claim().expect("a sound buffer").expect("a free packet");
    let packets = cost_packets(o, lanes);
    black_box(listener_loop::<_, false>(&cost, claim, packets / 10, lanes as usize));
    let t = Instant::now();
    let (checksum, _) = listener_loop::<_, false>(&cost, claim, packets, lanes as usize);
    let elapsed = t.elapsed();
    assert_eq!(checksum, expected_checksum(packets, lanes), "every lane answered");
    Sample::Cost { ns_per_packet: elapsed.as_nanos() as f64 / packets as f64, lanes, timed: Timed::Loop }
}

/// `listener_cost_<L>l_<protocol>`: the same loop on a buffer of `protocol`, through the core's
/// protocol switch; the figure is the time inside the poll per packet, less what an
/// empty pair of clock reads costs, with the whole (untimed) loop per packet beside it.
pub(crate) fn listener_cost_hot(o: &Options, lanes: u32, protocol: Protocol) -> Sample {
    let cost = CostLoop::with(protocol, 2);
    let view = cost.buffer.view();
    let claim = || view.claim(0).expect("a sound buffer").expect("a free packet");
    let packets = cost_packets(o, lanes);
    black_box(listener_loop::<_, false>(&cost, claim, packets / 10, lanes as usize));
    let t = Instant::now();
    let (checksum, _) = listener_loop::<_, false>(&cost, claim, packets, lanes as usize);
    let whole = t.elapsed();
    let (timed_checksum, polling) = listener_loop::<_, true>(&cost, claim, packets, lanes as usize);
    let expected = expected_checksum(packets, lanes);
    assert_eq!((checksum, timed_checksum), (expected, expected), "every lane answered");
    let per_packet = |d: Duration| d.as_nanos() as f64 / packets as f64;
    let poll = per_packet(polling) - clock_pair_ns(packets);
    Sample::Cost { ns_per_packet: poll, lanes, timed: Timed::Poll { loop_ns: per_packet(whole) } }
}

/// What timing an empty stretch costs, ns (the mean over `n` stretches timed as the poll is).
fn clock_pair_ns(n: u64) -> f64 {
    let mut total = Duration::ZERO;
    for i in 0..n {
        let t = Instant::now();
        black_box(i);
        total += t.elapsed();
    }
    total.as_nanos() as f64 / n.max(1) as f64
}

pub(crate) fn run_callgrind(packets: u64, lanes: u32, protocol: Protocol) {
    let ports = if matches!(protocol, Protocol::Rpc { .. }) { 1 } else { 2 };
    let cost = CostLoop::with(protocol, ports);
    let view = cost.buffer.view();
    let t = Instant::now();
    let (checksum, _) = match view.rpc() {
        // An RPC buffer's producer is the core's client (its lock word is the device's own).
        Some(rpc) => {
            let locks = [AtomicU32::new(0)];
            let client = Client::new(rpc, &locks).expect("one lock word");
            let claim = || client.claim(0).expect("the port is free between calls");
            listener_loop::<_, false>(&cost, claim, packets, lanes as usize)
        }
        None => {
            let claim = || view.claim(0).expect("a sound buffer").expect("a free packet");
            listener_loop::<_, false>(&cost, claim, packets, lanes as usize)
        }
    };
    let ns = t.elapsed().as_nanos() as f64 / packets.max(1) as f64;
    println!("callgrind-listener: protocol={protocol:?} packets={packets} lanes={lanes} checksum={checksum} ns_per_packet={ns:.0}");
}
